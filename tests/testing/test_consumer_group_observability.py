"""Consumer groups (KIP-848, ``group.protocol=consumer``) in the broker's observability: the
metrics text (group-count{protocol=consumer}, consumer-group-count{state},
consumer-group-rebalance-count, lag), the web console's JSON and HTML, and the rebalance
timeline (kgroup/broker/timeline.py) of real confluent-kafka members joining and leaving, and of
raw members fenced at their rebalance timeout and expired at their session timeout."""
import json
import time
import urllib.request

import pytest

from kgroup.cli import main as kgroup_main
from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kgroup.testing.broker import KafkaBroker
from tests.harness import RawClient
from tests.testing.test_metrics import samples

pytestmark = pytest.mark.interop
COORDINATOR = "kafka_server_group_coordinator_metrics_"


def poll_until(consumers, done, timeout=30):
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        for c in consumers:
            c.poll(0.05)


def get(url) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def test_consumer_group_in_metrics_console_and_timeline(tmp_path, capsys):
    from confluent_kafka import Consumer, TopicPartition
    with KafkaBroker(tmp_path / "d", metrics=True) as b:
        b.create_topic("kt", partitions=4)
        b.produce("kt", [f"v{i}" for i in range(30)], partition=2)
        conf = {"bootstrap.servers": b.bootstrap_servers, "group.id": "kcg", "group.protocol": "consumer",
                "auto.offset.reset": "earliest", "enable.auto.commit": False}
        alpha = Consumer({**conf, "client.id": "alpha"})
        beta = Consumer({**conf, "client.id": "beta"})
        try:
            alpha.subscribe(["kt"])
            poll_until([alpha], lambda: len(alpha.assignment()) == 4)
            beta.subscribe(["kt"])
            poll_until([alpha, beta], lambda: len(alpha.assignment()) == 2 and len(beta.assignment()) == 2)
            b.wait_for_group("kcg", "Stable", members=2, type="consumer")
            alpha.commit(offsets=[TopicPartition("kt", p, 10 if p == 2 else 0) for p in range(4)],
                         asynchronous=False)

            # metrics: one consumer group, Stable; two rebalances (each join bumped the group epoch)
            s = samples(get(b.http_url + "/metrics"))
            assert s[(COORDINATOR + "group_count", frozenset({("protocol", "consumer")}))] == 1
            assert s[(COORDINATOR + "group_count", frozenset({("protocol", "classic")}))] == 0
            states = {dict(labels)["state"]: v for (name, labels), v in s.items()
                      if name == COORDINATOR + "consumer_group_count"}
            assert states == {"empty": 0, "assigning": 0, "reconciling": 0, "stable": 1, "dead": 0}
            assert s[(COORDINATOR + "consumer_group_rebalance_count", frozenset())] == 2
            assert s[(COORDINATOR + "offset_count", frozenset())] == 4
            assert s[("kgroup_consumer_group_epoch", frozenset({("group", "kcg")}))] == 2
            assert s[("kgroup_consumer_group_assignment_epoch", frozenset({("group", "kcg")}))] == 2
            assert s[("kafka_consumergroup_members", frozenset({("consumergroup", "kcg")}))] == 2
            assert s[("kafka_consumergroup_lag", frozenset({("consumergroup", "kcg"), ("topic", "kt"),
                                                            ("partition", "2")}))] == 20
            member_epochs = {dict(labels)["client_id"]: v for (name, labels), v in s.items()
                             if name == "kgroup_consumer_group_member_epoch"}
            assert member_epochs == {"alpha": 2, "beta": 2}

            # the console's JSON: epochs, members with their epochs, assigned and target partitions, offsets, lag
            listed = json.loads(get(b.http_url + "/api/groups"))
            assert [(g["group"], g["type"], g["state"], g["epoch"], g["members"], g["lag"]) for g in listed] == \
                [("kcg", "consumer", "Stable", 2, 2, 20)]
            group = json.loads(get(b.http_url + "/api/groups/kcg"))
            assert (group["type"], group["state"], group["group_epoch"], group["assignment_epoch"], group["lag"]) == \
                ("consumer", "Stable", 2, 2, 20)
            members = {m["client_id"]: m for m in group["members"]}
            assert sorted(members) == ["alpha", "beta"]
            for name, consumer in (("alpha", alpha), ("beta", beta)):
                m = members[name]
                assert m["member_epoch"] == 2 and m["member_state"] == "STABLE"
                held = sorted(tp.partition for tp in consumer.assignment())
                assert m["assignment"] == {"kt": held} == m["target_assignment"]
                assert m["pending_revocation"] == {} and m["subscribed_topics"] == ["kt"]
            assert [(o["partition"], o["committed"], o["lag"]) for o in group["offsets"]] == \
                [(0, 0, 0), (1, 0, 0), (2, 10, 20), (3, 0, 0)]
            assert group["last_rebalance"]["group_epoch"] == 2 and "beta" in group["last_rebalance"]["cause"]

            # the console's HTML
            page = get(b.http_url + "/groups/kcg")
            assert "<h1>Group kcg</h1>" in page and "id='group-epoch'>2<" in page
            assert "id='assignment-epoch'>2<" in page
            for m in members.values():
                assert m["member_id"] in page and f"kt {m['assignment']['kt']}" in page
            assert page.count("<tr class='member'>") == 2 and "<svg id='timeline-chart'" in page
            assert "group-epoch" in page and "target-assignment" in page and "member-reconciled" in page
            row = get(b.http_url + "/").split("kcg</a>", 1)[1].split("</tr>", 1)[0]
            assert ">consumer<" in row and "Stable" in row and ">20<" in row, row

            alpha_id, beta_id = members["alpha"]["member_id"], members["beta"]["member_id"]
            beta.close()
            poll_until([alpha], lambda: len(alpha.assignment()) == 4)
            b.wait_for_group("kcg", "Stable", members=1, type="consumer")
            events = b.timeline("kcg")
            # a leave bumps the group epoch too, but Kafka counts no rebalance for it
            s = samples(get(b.http_url + "/metrics"))
            assert s[(COORDINATOR + "consumer_group_rebalance_count", frozenset())] == 2
            assert s[("kgroup_consumer_group_epoch", frozenset({("group", "kcg")}))] == 3
            assert s[("kafka_consumergroup_members", frozenset({("consumergroup", "kcg")}))] == 1
        finally:
            alpha.close()

        kinds = [e["event"] for e in events]
        # alpha joins: epoch 0 -> 1, the target gives it everything, it reconciles at epoch 1, Stable
        joined = [e for e in events if e["event"] == "member-joined"]
        assert [(e["member_id"], e["client_id"]) for e in joined] == [(alpha_id, "alpha"), (beta_id, "beta")]
        bumps = [e for e in events if e["event"] == "group-epoch"]
        assert [(e["previous_epoch"], e["group_epoch"]) for e in bumps] == [(0, 1), (1, 2), (2, 3)], kinds
        assert "alpha" in bumps[0]["cause"] and "joined" in bumps[0]["cause"]
        assert "beta" in bumps[1]["cause"] and "joined" in bumps[1]["cause"]
        assert "beta" in bumps[2]["cause"] and "left" in bumps[2]["cause"]
        targets = [e for e in events if e["event"] == "target-assignment"]
        assert [e["assignment_epoch"] for e in targets] == [1, 2, 3]
        assert targets[0]["target"] == {alpha_id: {"kt": [0, 1, 2, 3]}}
        assert {m: len(a["kt"]) for m, a in targets[1]["target"].items()} == {alpha_id: 2, beta_id: 2}
        assert targets[2]["target"] == {alpha_id: {"kt": [0, 1, 2, 3]}}
        # the second join: alpha revokes what beta is due, then both reconcile to epoch 2
        second = kinds.index("member-joined", kinds.index("member-joined") + 1)
        after = events[second:kinds.index("member-left")]
        revoking = [e for e in after if e["event"] == "member-reconciling" and e["member_id"] == alpha_id]
        assert revoking and revoking[0]["member_state"] == "UNREVOKED_PARTITIONS" and revoking[0]["pending_revocation"]
        reconciled = {e["member_id"]: e["member_epoch"] for e in after if e["event"] == "member-reconciled"}
        assert reconciled == {alpha_id: 2, beta_id: 2}
        stables = [e for e in events if e["event"] == "stable"]
        assert [e["group_epoch"] for e in stables] == [1, 2, 3]
        assert stables[1]["assignment"] == {m: t for m, t in targets[1]["target"].items()}
        assert all(e["rebalance_ms"] >= 0 for e in stables)
        left = [e for e in events if e["event"] == "member-left"]
        assert [(e["member_id"], e["client_id"]) for e in left] == [(beta_id, "beta")]
        assert "member epoch -1" in left[0]["reason"]
        assert events[-1]["event"] == "stable" and events[-1]["assignment"] == {alpha_id: {"kt": [0, 1, 2, 3]}}

        # the same through the command line
        assert kgroup_main(["groups", "--bootstrap-server", b.bootstrap_servers, "--describe", "--group", "kcg",
                            "--timeline"]) == 0
        out = capsys.readouterr().out
        assert "group epoch 1 -> 2 because" in out and f"{beta_id} (client beta)" in out
        assert "member-left" in out and "kt[0, 1, 2, 3]" in out


def heartbeat(c, group, member_id, epoch, owned=None, rebalance_timeout_ms=-1, topics=None):
    deadline = time.monotonic() + 20
    while True:
        r = c.request(ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=epoch, rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=topics, topic_partitions=owned), 1)
        if r.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE) \
                or time.monotonic() > deadline:
            assert r.error_code == E.NONE, r
            return r
        time.sleep(0.05)


def owned(r):
    T = ConsumerGroupHeartbeatRequest.TopicPartitions
    return [T(topic_id=t.topic_id, partitions=list(t.partitions)) for t in r.assignment.topic_partitions]


def test_consumer_members_fenced_and_expired(kafka_broker):
    # a member that does not revoke within its rebalance timeout is fenced; one that stops
    # heartbeating expires at its session timeout (time travel fires both timers)
    kafka_broker.create_topic("ft", partitions=2)
    c = RawClient(kafka_broker.port, client_id="raw-cg")
    a = heartbeat(c, "fg", "member-a", 0, owned=[], rebalance_timeout_ms=2000, topics=["ft"])
    assert a.member_epoch == 1
    a_owned = owned(a) or owned(heartbeat(c, "fg", "member-a", 1, owned=[]))
    assert sum(len(t.partitions) for t in a_owned) == 2
    b = heartbeat(c, "fg", "member-b", 0, owned=[], rebalance_timeout_ms=60000, topics=["ft"])
    assert b.member_epoch == 2
    # a still owns both: told to revoke one, it keeps heartbeating without revoking
    heartbeat(c, "fg", "member-a", 1, owned=a_owned)
    kafka_broker.advance_time(3)
    heartbeat(c, "fg", "member-b", 2, owned=[])
    kafka_broker.advance_time(46)
    events = kafka_broker.timeline("fg")
    kinds = [e["event"] for e in events]
    fenced = [e for e in events if e["event"] == "member-fenced"]
    assert [(e["member_id"], e["client_id"]) for e in fenced] == [("member-a", "raw-cg")], kinds
    assert "rebalance timeout" in fenced[0]["reason"]
    expired = [e for e in events if e["event"] == "member-expired"]
    assert [e["member_id"] for e in expired] == ["member-b"] and "session timeout" in expired[0]["reason"]
    assert kinds.index("member-fenced") < kinds.index("member-expired")
    revoking = [e for e in events if e["event"] == "member-reconciling" and e["member_id"] == "member-a"]
    assert revoking and revoking[-1]["member_state"] == "UNREVOKED_PARTITIONS"
    assert events[-1]["event"] == "empty"


def test_timeline_across_online_migration(kafka_broker):
    # a classic group upgraded by a consumer-protocol member's join (KIP-848 online migration),
    # then downgraded when it leaves: one timeline, both protocols' events
    from confluent_kafka import Consumer
    kafka_broker.create_topic("mt", partitions=2)
    base = {"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "mig", "auto.offset.reset": "earliest"}
    classic = Consumer({**base, "client.id": "classic-a", "partition.assignment.strategy": "cooperative-sticky"})
    modern = Consumer({**base, "client.id": "kip848-c", "group.protocol": "consumer"})
    try:
        classic.subscribe(["mt"])
        poll_until([classic], lambda: len(classic.assignment()) == 2)
        modern.subscribe(["mt"])
        poll_until([classic, modern], lambda: len(classic.assignment()) == 1 and len(modern.assignment()) == 1)
        kafka_broker.wait_for_group("mig", "Stable", members=2, type="consumer")
        modern.close()
        poll_until([classic], lambda: len(classic.assignment()) == 2)
        kafka_broker.wait_for_group("mig", "Stable", members=1, type="classic")
        events = kafka_broker.timeline("mig")
    finally:
        classic.close()
    kinds = [e["event"] for e in events]
    converted = [e for e in events if e["event"] == "group-converted"]
    assert [(e["previous_type"], e["type"]) for e in converted] == [("classic", "consumer"), ("consumer", "classic")]
    up, down = kinds.index("group-converted"), len(kinds) - 1 - kinds[::-1].index("group-converted")
    during = events[up:down]
    joined = [e for e in during if e["event"] == "member-joined"]
    assert [e["client_id"] for e in joined] == ["kip848-c"]
    modern_id = joined[0]["member_id"]
    bumps = [e for e in during if e["event"] == "group-epoch"]
    assert [(e["previous_epoch"], e["group_epoch"]) for e in bumps] == [(1, 2)] and "kip848-c" in bumps[0]["cause"]
    assert [e["group_epoch"] for e in during if e["event"] == "stable"] == [2]
    left = [e for e in events[down:] if e["event"] == "member-left"]
    assert [e["member_id"] for e in left] == [modern_id]
    assert events[-1]["event"] == "stable" and events[-1]["generation"] == 3


def test_a_failing_test_report_carries_a_consumer_groups_timeline(tmp_path):
    import os
    import subprocess
    import sys
    (tmp_path / "test_fails.py").write_text(
        "import time\n"
        "from confluent_kafka import Consumer\n"
        "def test_it(kafka_broker):\n"
        "    kafka_broker.create_topic('t', partitions=2)\n"
        "    c = Consumer({'bootstrap.servers': kafka_broker.bootstrap_servers, 'group.id': 'kcons',\n"
        "                  'group.protocol': 'consumer', 'client.id': 'reported'})\n"
        "    c.subscribe(['t'])\n"
        "    deadline = time.monotonic() + 30\n"
        "    while len(c.assignment()) < 2 and time.monotonic() < deadline:\n"
        "        c.poll(0.05)\n"
        "    kafka_broker.wait_for_group('kcons', 'Stable', members=1, type='consumer')\n"
        "    assert False, 'fails on purpose'\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_fails.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    text = out.stdout
    assert "fails on purpose" in text
    assert "group kcons (consumer): Stable" in text, text
    section = text.split("groups and rebalance timelines", 1)[1]
    assert "member-joined" in section and "client_id=reported" in section
    assert "group-epoch group_epoch=1 previous_epoch=0" in section and "target-assignment" in section
    assert "member-reconciled" in section and "stable group_epoch=1" in section


def test_a_static_members_temporary_leave_and_replacement(kafka_broker):
    # member epoch -2 keeps the member (and its partitions); its instance's next member replaces it
    kafka_broker.create_topic("st", partitions=2)
    c = RawClient(kafka_broker.port, client_id="static-client")

    def hb(member_id, epoch, **more):
        r = c.request(ConsumerGroupHeartbeatRequest(group_id="sg", member_id=member_id, member_epoch=epoch,
                                                    instance_id="instance-1", **more), 1)
        assert r.error_code == E.NONE, r
        return r
    deadline = time.monotonic() + 20
    while True:
        r = c.request(ConsumerGroupHeartbeatRequest(group_id="sg", member_id="static-1", member_epoch=0,
                                                    instance_id="instance-1", rebalance_timeout_ms=30000,
                                                    subscribed_topic_names=["st"], topic_partitions=[]), 1)
        if r.error_code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE) \
                or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert r.error_code == E.NONE and r.member_epoch == 1, r
    hb("static-1", -2)                      # a temporary leave: it keeps its partitions
    hb("static-2", 0, rebalance_timeout_ms=30000, subscribed_topic_names=["st"], topic_partitions=[])
    events = kafka_broker.timeline("sg")
    left = [e for e in events if e["event"] == "member-left"]
    assert [(e["member_id"], e["group_instance_id"]) for e in left] == [("static-1", "instance-1")] * 2, events
    assert "member epoch -2" in left[0]["reason"] and "replaced by static member static-2" in left[1]["reason"]
    joined = [e["member_id"] for e in events if e["event"] == "member-joined"]
    assert joined == ["static-1", "static-2"]
