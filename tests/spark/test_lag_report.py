"""The lag report job (spark_jobs/lag_report.py) against ``kgroup groups --describe --all-groups``."""
from __future__ import annotations

import io
from contextlib import redirect_stdout

from kgroup.client.assignors import TopicPartition
from kgroup.client.cli import main_groups
from kgroup.client.sync import KafkaAdmin, KafkaConsumer
from kgroup.spark.lag import collect_lag, lag_dataframe, lag_per_group

from .helpers import create_topic, produce
from .test_streaming import wait_for


def describe_all(bootstrap: str) -> dict:
    """{(group, topic, partition): (current, log end, lag, consumer id)} from the CLI's table."""
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main_groups(["--bootstrap-server", bootstrap, "--describe", "--all-groups"]) == 0
    rows = {}
    for line in buf.getvalue().splitlines():
        f = line.split()
        if len(f) == 9 and f[0] != "GROUP":
            num = [None if x == "-" else int(x) for x in f[3:6]]
            rows[(f[0], f[1], int(f[2]))] = (*num, f[6])
    return rows


def test_lag_report_matches_kgroup_groups_describe(spark, spark_broker, tmp_path, capsys):
    bootstrap = spark_broker.bootstrap
    create_topic(bootstrap, "lag-a", 3)
    create_topic(bootstrap, "lag-b", 2)
    produce(bootstrap, "lag-a", 0, 900)
    produce(bootstrap, "lag-b", 0, 200)
    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:  # an empty group with commits on two topics
        assert not any(admin.alter_group_offsets("lag-idle", {
            TopicPartition("lag-a", 0): 10, TopicPartition("lag-a", 2): 0, TopicPartition("lag-b", 1): 50}).values())
    with KafkaConsumer("lag-a", bootstrap_servers=bootstrap, group_id="lag-active", auto_offset_reset="earliest",
                       enable_auto_commit=False, max_poll_records=100) as consumer:  # an active member
        seen = 0
        while seen < 250:
            seen += len(consumer.poll(1000))
        consumer.commit()
        with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
            wait_for(lambda: admin.describe_groups(["lag-active"])["lag-active"].state == "Stable", 30,
                     "the group to be stable")

        expected = describe_all(bootstrap)
        rows = collect_lag(bootstrap)
        df = lag_dataframe(spark, rows)
        got = {(r.group, r.topic, r.partition): (r.current_offset, r.log_end_offset, r.lag, r.consumer_id)
               for r in df.collect()}
        assert got == expected
        assert {k for k in got if k[0] == "lag-idle"} == {("lag-idle", "lag-a", 0), ("lag-idle", "lag-a", 2),
                                                          ("lag-idle", "lag-b", 1)}
        active = {k: v for k, v in got.items() if k[0] == "lag-active"}
        assert len(active) == 3 and all(v[3] != "-" for v in active.values())
        assert sum(v[0] for v in active.values()) == seen and sum(v[2] for v in active.values()) == 900 - seen
        totals = lag_per_group(rows)
        end = {(t, p): got[("lag-idle", t, p)][1] for _, t, p in got if _ == "lag-idle"}
        assert totals["lag-idle"] == end[("lag-a", 0)] - 10 + end[("lag-a", 2)] + end[("lag-b", 1)] - 50
        assert totals["lag-active"] == 900 - seen

        from spark_jobs.lag_report import main
        png = tmp_path / "lag.png"
        assert main(["--bootstrap-server", bootstrap, "--png", str(png)]) == 0
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        out = capsys.readouterr().out
        assert "lag-idle" in out and "lag-active" in out and "bar chart" in out
