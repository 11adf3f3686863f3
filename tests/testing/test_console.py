"""The web console rendered by a real headless browser (Debian's ``chromium``): the page of a live
confluent-kafka group shows its members, their assignment and its last rebalance, with the
timeline chart; the groups and topics pages and the JSON API agree."""
import json
import shutil
import subprocess
import time
import urllib.request

import pytest

from kgroup.testing.broker import KafkaBroker

pytestmark = pytest.mark.interop


def dump_dom(url, tmp_path) -> str:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is not installed (scripts/install-test-deps.sh installs Debian's package)"
    profile = tmp_path / f"chromium-{time.monotonic_ns()}"
    out = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          f"--user-data-dir={profile}", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_console_in_headless_chromium(tmp_path):
    from confluent_kafka import Consumer
    with KafkaBroker(tmp_path / "d", metrics=True) as b:
        b.create_topic("shown", partitions=4)
        b.produce("shown", [f"v{i}" for i in range(40)], partition=1)
        conf = {"bootstrap.servers": b.bootstrap_servers, "group.id": "watched", "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "range", "enable.auto.commit": False}
        alpha = Consumer({**conf, "client.id": "alpha-console"})
        beta = Consumer({**conf, "client.id": "beta-console"})
        try:
            alpha.subscribe(["shown"])
            deadline = time.monotonic() + 30
            while len(alpha.assignment()) < 4:
                assert time.monotonic() < deadline
                alpha.poll(0.1)
            beta.subscribe(["shown"])
            while not (len(alpha.assignment()) == 2 and len(beta.assignment()) == 2):
                assert time.monotonic() < deadline
                alpha.poll(0.1)
                beta.poll(0.1)
            for c in (alpha, beta):                     # commit what they hold: partition 1's lag is 40
                c.commit(offsets=[type(tp)(tp.topic, tp.partition, 0) for tp in c.assignment()],
                         asynchronous=False)
            group = json.loads(urllib.request.urlopen(b.http_url + "/api/groups/watched").read())
            assert group["state"] == "Stable" and group["generation"] == 2 and group["lag"] == 40
            members = {m["client_id"]: m for m in group["members"]}

            dom = dump_dom(b.http_url + "/groups/watched", tmp_path)
            assert "<h1>Group watched</h1>" in dom
            assert "alpha-console" in dom and "beta-console" in dom
            for m in members.values():                  # each member's id and assignment in the table
                assert m["member_id"] in dom
                assert f"shown {m['assignment']['shown']}" in dom
            last = dom.split("id=\"last-rebalance\">", 1)[1].split("</p>", 1)[0]
            assert "beta-console" in last and "joined" in last and "Generation 2 Stable" in last, last
            assert "<svg id=\"timeline-chart\"" in dom and dom.count("class=\"phase\"") >= 5
            assert "member-joined" in dom and "join-phase-done" in dom

            groups = dump_dom(b.http_url + "/", tmp_path)
            row = groups.split("watched</a>", 1)[1].split("</tr>", 1)[0]
            assert "Stable" in row and "range" in row and ">2<" in row and ">40<" in row, row
            topics = dump_dom(b.http_url + "/topics", tmp_path)
            assert "<h2>shown</h2>" in topics and ">40<" in topics
        finally:
            alpha.close()
            beta.close()
