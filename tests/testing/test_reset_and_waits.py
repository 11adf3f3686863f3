"""Instant reset and the wait helpers (kgroup/broker/test_control.py): reset with clients
connected and the same names used again, the session fixture reset between tests; each
wait_for_* succeeding on its event and failing on timeout with what it last saw; the same over
the wire (a broker process) and the CLI-free JSON HTTP API."""
import json
import threading
import time
import urllib.error
import urllib.request

import pytest

from kgroup.testing.broker import BrokerWaitTimeout, KafkaBroker

pytestmark = pytest.mark.interop


def consumer(b, group, topic, **conf):
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, **conf})
    c.subscribe([topic])
    return c


def poll_until(c, count, timeout=20):
    out, deadline = [], time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is not None and not m.error():
            out.append(m)
    return out


# -- reset -------------------------------------------------------------------------------------
def test_reset_with_clients_connected_then_the_same_names_again(kafka_broker):
    from confluent_kafka import Producer
    b = kafka_broker
    b.create_topic("orders", 2)
    b.produce("orders", [f"v{i}" for i in range(10)])
    c = consumer(b, "billing", "orders")
    assert len(poll_until(c, 10)) == 10
    c.commit(asynchronous=False)
    b.wait_for_lag("billing", 0, topics=["orders"])
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": "tx"})
    p.init_transactions(10)
    b.call(lambda broker: broker.metadata.set_group_configs("billing", {"consumer.session.timeout.ms": "50000"}))
    b.inject_delay("Metadata", 10, count=None)
    b.advance_time(10)
    started = time.perf_counter()
    out = b.reset()
    took = time.perf_counter() - started
    assert out["topics_deleted"] == ["orders"] and out["groups_deleted"] == 1
    assert took < 1.0
    assert b.topics() == [] and b.groups() == [] and b.transactions() == []
    # the coordinator topics are kept, emptied
    assert {t["name"] for t in b.topics(internal=True)} == {"__consumer_offsets", "__transaction_state"}
    assert all(p["high_watermark"] == 0 for t in b.topics(internal=True) for p in t["partitions"])
    assert b.clock()["offset_ms"] == 0
    assert b.inject("list")["rules"] == []
    assert b.call(lambda broker: broker.metadata.group_configs) == {}
    # the connected consumer sees what it would against a fresh broker: no topic, no member
    assert b.group("billing") is None
    # the same names again: a new topic, no committed offsets
    b.create_topic("orders", 3)
    b.produce("orders", ["w0", "w1"], partition=2)
    c2 = consumer(b, "billing", "orders")
    got = poll_until(c2, 2)
    assert sorted(m.value() for m in got) == [b"w0", b"w1"]       # from the start: no offsets kept
    c2.close()
    c.close()
    p2 = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": "tx"})
    p2.init_transactions(10)
    assert b.transactions()[0]["producer_epoch"] == 0          # a fresh transactional id
    p.flush(1)
    b.reset()
    b.restart()                                                 # what a reset left is what loads
    assert b.topics() == [] and b.groups() == [] and b.transactions() == []


def test_reset_answers_parked_waits(kafka_broker):
    b = kafka_broker
    errors = []

    def wait():
        try:
            b.wait_for_topic("never", timeout=10)
        except BrokerWaitTimeout as e:
            errors.append(str(e))
    t = threading.Thread(target=wait)
    t.start()
    time.sleep(0.2)
    b.reset()
    t.join(5)
    assert errors and "reset" in errors[0]


def test_session_broker_reset_between_tests_one(kafka_broker_clean):
    b = kafka_broker_clean
    assert b.topics() == []
    b.create_topic("same-name")
    b.produce("same-name", ["one"])
    b.consume("same-name", 1, group="same-group")


def test_session_broker_reset_between_tests_two(kafka_broker_clean):
    b = kafka_broker_clean
    assert b.topics() == [] and b.groups() == []
    b.create_topic("same-name")                 # no TOPIC_ALREADY_EXISTS
    b.produce("same-name", ["two"])
    assert [r.value for r in b.consume("same-name", 1, group="same-group")] == [b"two"]


# -- waits ---------------------------------------------------------------------------------------
def later(seconds, fn):
    t = threading.Timer(seconds, fn)
    t.start()
    return t


def test_wait_for_group_and_assignment(kafka_broker):
    b = kafka_broker
    b.create_topic("t", 4)
    c1 = consumer(b, "g", "t", **{"client.id": "one", "partition.assignment.strategy": "range"})
    stop = threading.Event()

    def poll_loop(c):
        while not stop.is_set():
            c.poll(0.05)
    threads = [threading.Thread(target=poll_loop, args=(c1,))]
    threads[0].start()
    try:
        g = b.wait_for_group("g", "Stable", members=1, timeout=20)
        assert g["type"] == "classic"
        b.wait_for_assignment("g", {"one": {"t": [0, 1, 2, 3]}}, timeout=10)
        with pytest.raises(BrokerWaitTimeout) as e:
            b.wait_for_group("g", "Stable", members=2, timeout=0.3)
        msg = str(e.value)
        assert "timed out after 300 ms waiting for group" in msg
        assert '"state": "Stable"' in msg and "rebalance timeline:" in msg and "stable generation=1" in msg
        c2 = consumer(b, "g", "t", **{"client.id": "two", "partition.assignment.strategy": "range"})
        threads.append(threading.Thread(target=poll_loop, args=(c2,)))
        threads[1].start()
        b.wait_for_assignment("g", {"one": [("t", 0), ("t", 1)], "two": {"t": [2, 3]}}, timeout=20)
        with pytest.raises(BrokerWaitTimeout, match="waiting for assignment"):
            b.wait_for_assignment("g", {"one": {"t": [0]}}, timeout=0.2)
    finally:
        stop.set()
        for t in threads:
            t.join()
        c1.close()
        if len(threads) > 1:
            c2.close()


def test_wait_for_committed_and_lag(kafka_broker):
    b = kafka_broker
    b.create_topic("t")
    b.produce("t", ["a", "b", "c"])
    with pytest.raises(BrokerWaitTimeout, match=r'"lag": 3'):
        b.wait_for_lag("g", 0, topics=["t"], timeout=0.2)
    with pytest.raises(BrokerWaitTimeout, match="waiting for committed"):
        b.wait_for_committed("g", {("t", 0): 3}, timeout=0.2)
    t = later(0.3, lambda: b.consume("t", 3, group="g"))
    started = time.monotonic()
    assert b.wait_for_committed("g", {"t": {0: 3}}, timeout=20) == {"offsets": {"t": {"0": 3}}}
    assert b.wait_for_lag("g", 0, timeout=5)["lag"] == 0
    assert time.monotonic() - started < 15
    t.join()


def test_wait_for_transaction_and_topic(kafka_broker):
    from confluent_kafka import Producer
    b = kafka_broker
    later(0.3, lambda: b.create_topic("t"))
    assert b.wait_for_topic("t", timeout=10) == {"name": "t", "partitions": 1}
    with pytest.raises(BrokerWaitTimeout, match="waiting for topic"):
        b.wait_for_topic("t", partitions=2, timeout=0.2)
    with pytest.raises(BrokerWaitTimeout, match="waiting for topic"):
        b.wait_for_topic("t", deleted=True, timeout=0.2)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": "tx"})
    p.init_transactions(10)
    p.begin_transaction()
    p.produce("t", b"v")
    p.flush(10)
    b.wait_for_transaction("tx", "Ongoing", timeout=5)
    with pytest.raises(BrokerWaitTimeout, match='"state": "Ongoing"'):
        b.wait_for_transaction("tx", "CompleteCommit", timeout=0.2)
    later(0.2, lambda: p.commit_transaction(10))
    assert b.wait_for_transaction("tx", "CompleteCommit", timeout=10)["state"] == "CompleteCommit"
    def delete():
        with b.admin() as admin:
            admin.delete_topics(["t"])
    later(0.2, delete)
    assert b.wait_for_topic("t", deleted=True, timeout=10) is None


def test_over_the_wire_with_a_broker_process(kafka_broker_process):
    b = kafka_broker_process
    b.create_topic("t")
    b.produce("t", ["a"])
    later(0.3, lambda: b.consume("t", 1, group="g"))
    assert b.wait_for_committed("g", {"t": {0: 1}}, timeout=20)["offsets"] == {"t": {"0": 1}}
    assert b.group("g")["offsets"] == {"t": {"0": 1}}
    assert b.advance_time(7 * 86400 + 600)["deadlines"] >= 1     # offsets retention
    assert b.group("g") is None
    with pytest.raises(BrokerWaitTimeout, match="waiting for group"):
        b.wait_for_group("g", timeout=0.2)
    assert b.reset()["topics_deleted"] == ["t"]
    assert b.topics() == []


# -- the JSON HTTP API ---------------------------------------------------------------------------
def http(b, method, path, body=None):
    req = urllib.request.Request(b.http_url + path, method=method,
                                 data=None if body is None else json.dumps(body).encode())
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_http_api(tmp_path):
    with KafkaBroker(tmp_path / "d", metrics=True) as b:
        b.create_topic("t")
        b.produce("t", ["a", "b"])
        later(0.3, lambda: b.consume("t", 2, group="g"))
        status, answer = http(b, "GET", "/admin/wait?for=committed&group=g&offsets=%7B%22t%22:%7B%220%22:2%7D%7D"
                                        "&timeout_ms=20000")
        assert status == 200 and answer == {"ok": True, "state": {"offsets": {"t": {"0": 2}}}}
        assert http(b, "GET", "/admin/groups")[1]["groups"][0]["group_id"] == "g"
        assert http(b, "GET", "/admin/groups/g")[1]["group"]["offsets"] == {"t": {"0": 2}}
        assert http(b, "GET", "/admin/groups/nope")[0] == 404
        assert http(b, "GET", "/admin/groups/g/lag")[1]["lag"] == 0
        topics = {t["name"]: t for t in http(b, "GET", "/admin/topics?internal=true")[1]["topics"]}
        assert topics["t"]["partitions"][0]["high_watermark"] == 2 and topics["__consumer_offsets"]["internal"]
        assert [t["name"] for t in http(b, "GET", "/admin/topics")[1]["topics"]] == ["t"]
        status, answer = http(b, "POST", "/admin/wait", {"for": "group", "group": "g", "state": "Stable",
                                                         "timeout_ms": 200})
        assert status == 408 and answer["ok"] is False and answer["last_seen"]["state"] == "Empty"
        assert answer["timeline"]
        assert http(b, "POST", "/admin/wait", {"for": "nothing"})[0] == 400
        before = http(b, "GET", "/admin/clock")[1]
        status, answer = http(b, "POST", "/admin/clock", {"advance_ms": 8 * 86400_000})
        assert status == 200 and answer["now_ms"] >= before["now_ms"] + 8 * 86400_000
        assert http(b, "GET", "/admin/groups/g")[0] == 404          # offsets retention ran
        assert http(b, "POST", "/admin/reset")[1]["topics_deleted"] == ["t"]
        assert http(b, "GET", "/admin/transactions")[1] == {"transactions": []}
    with KafkaBroker(tmp_path / "e", {"kgroup.fault.injection.enable": "false"}, metrics=True) as b:
        assert http(b, "POST", "/admin/reset")[0] == 403


def test_the_cli(kafka_broker, capsys):
    from kgroup.cli import main
    b = kafka_broker
    bs = ["inject", "--bootstrap-server", b.bootstrap_servers]
    b.create_topic("t")
    assert main(bs + ["advance-time", "--ms", "5000"]) == 0
    assert json.loads(capsys.readouterr().out)["offset_ms"] >= 4000
    assert main(bs + ["wait", "--for", "topic", "--topic", "t"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ok": True, "state": {"name": "t", "partitions": 1}}
    assert main(bs + ["wait", "--for", "group", "--group", "g", "--timeout-ms", "100"]) == 1
    assert "timed out after 100 ms" in capsys.readouterr().out
    assert main(bs + ["reset"]) == 0
    assert json.loads(capsys.readouterr().out)["topics_deleted"] == ["t"]
    assert main(bs + ["topics"]) == 0
    assert json.loads(capsys.readouterr().out) == {"topics": []}


def test_a_failing_test_report_carries_the_broker_log_and_timelines(tmp_path):
    import os
    import subprocess
    import sys
    (tmp_path / "test_fails.py").write_text(
        "def test_it(kafka_broker):\n"
        "    kafka_broker.create_topic('t')\n"
        "    kafka_broker.produce('t', ['a'])\n"
        "    kafka_broker.consume('t', 1, group='billing')\n"
        "    assert kafka_broker.group('billing')['state'] == 'Stable'\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_fails.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    text = out.stdout
    assert "kgroup broker (kafka_broker): log tail" in text
    assert "created topic t with 1 partition(s)" in text
    assert "kgroup broker (kafka_broker): groups and rebalance timelines" in text
    assert "group billing (classic): Empty" in text and "member-joined" in text and "stable generation=1" in text


@pytest.mark.kafka_broker_config(group_share_heartbeat_interval_ms=500, group_share_min_heartbeat_interval_ms=500)
def test_reset_forgets_share_groups_and_their_state(kafka_broker):
    """A share group with acquired records, its share-partitions, share sessions and
    ``__share_group_state``: a reset leaves none of them."""
    from confluent_kafka import Producer, ShareConsumer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    b = kafka_broker
    b.create_topic("sq", 1)
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    r = ConfigResource(ResourceType.GROUP, "sg", incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([r]).values():
        f.result(10)
    p = Producer({"bootstrap.servers": b.bootstrap_servers})
    for i in range(3):
        p.produce("sq", value=b"v%d" % i)
    assert p.flush(10) == 0
    c = ShareConsumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "sg",
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe(["sq"])
    try:
        got, deadline = [], time.time() + 30
        while len(got) < 3 and time.time() < deadline:
            got += [m for m in c.poll(0.5) if m.error() is None]
        assert len(got) == 3
        assert b.call(lambda broker: len(broker.share_partitions.partitions)) == 1
        b.reset()
        state = b.call(lambda broker: (broker.share_partitions.partitions, broker.share_partitions.sessions.sessions,
                                       broker.share_partitions.scheduler.next_deadline()))
        assert state == ({}, {}, None)
        assert b.groups() == []
        internal = {t["name"]: t for t in b.topics(internal=True)}
        if "__share_group_state" in internal:
            assert all(p["high_watermark"] == 0 for p in internal["__share_group_state"]["partitions"])
    finally:
        c.close()
