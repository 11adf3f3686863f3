"""The pytest plugin's fixtures, used as a user would: through the ``pytest11`` entry point (no
conftest imports them), with real Kafka clients."""
import importlib.metadata
import os
import socket
import time
import uuid

import pytest

import kgroup.testing
from kgroup.testing.broker import KafkaBroker

pytestmark = pytest.mark.interop


def _name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_the_plugin_is_installed_as_a_pytest11_entry_point(request):
    eps = [e for e in importlib.metadata.entry_points(group="pytest11") if e.name == "kgroup"]
    assert [e.value for e in eps] == ["kgroup.testing.pytest_plugin"]
    # ...and it is what provided this session's fixtures.
    import kgroup.testing.pytest_plugin as plugin
    assert request.config.pluginmanager.is_registered(plugin)


def test_kafka_broker_with_kafka_python(kafka_broker):
    from kafka import KafkaConsumer, KafkaProducer
    assert kafka_broker.bootstrap_servers == f"127.0.0.1:{kafka_broker.port}"
    kafka_broker.create_topic("orders", partitions=3)
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
    for i in range(30):
        producer.send("orders", key=str(i).encode(), value=f"order-{i}".encode())
    producer.flush()
    producer.close()
    consumer = KafkaConsumer("orders", bootstrap_servers=kafka_broker.bootstrap_servers, group_id="billing",
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=15000)
    got = []
    for record in consumer:
        got.append(record.value)
        if len(got) == 30:
            break
    consumer.commit()
    group = kafka_broker.describe_group("billing")
    assert group.state == "Stable" and len(group.members) == 1
    assert sorted(tp.partition for tp in group.members[0].assignment) == [0, 1, 2]
    consumer.close()
    assert sorted(got) == sorted(f"order-{i}".encode() for i in range(30))
    assert sum(kafka_broker.committed_offsets("billing").values()) == 30
    # The helpers read what the real client wrote.
    assert sorted(r.value for r in kafka_broker.consume("orders", 30)) == sorted(got)


def test_kafka_broker_with_confluent_kafka_and_restart(kafka_broker):
    from confluent_kafka import Consumer, Producer
    conf = {"bootstrap.servers": kafka_broker.bootstrap_servers}
    producer = Producer(conf)
    for i in range(10):
        producer.produce("events", value=f"e{i}".encode())   # auto-created, as in Kafka
    assert producer.flush(15) == 0
    port, data_dir = kafka_broker.port, kafka_broker.data_dir
    kafka_broker.restart()
    assert (kafka_broker.port, kafka_broker.data_dir) == (port, data_dir)
    consumer = Consumer({**conf, "group.id": "audit", "auto.offset.reset": "earliest"})
    consumer.subscribe(["events"])
    got = []
    while len(got) < 10:
        msg = consumer.poll(15)
        assert msg is not None, f"only {len(got)} of 10 records after the restart"
        assert msg.error() is None, msg.error()
        got.append(msg.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert got == [f"e{i}".encode() for i in range(10)]
    assert kafka_broker.committed_offsets("audit") == {("events", 0): 10}


@pytest.mark.kafka_broker_config(num_partitions=4, auto_create_topics_enable="true")
def test_marker_sets_broker_config(kafka_broker):
    md = kafka_broker.produce("auto", ["x"] * 8)
    assert {m.partition for m in md} <= {0, 1, 2, 3}
    with kafka_broker.admin() as admin:
        assert len(admin.describe_topics(["auto"])["auto"].partitions) == 4


_session_addresses = []


@pytest.mark.parametrize("round", [1, 2])
def test_session_broker_is_shared(kafka_broker_session, round):
    _session_addresses.append(kafka_broker_session.bootstrap_servers)
    topic = _name("shared")
    kafka_broker_session.create_topic(topic)
    kafka_broker_session.produce(topic, [b"v"])
    assert [r.value for r in kafka_broker_session.consume(topic, 1, group=_name("g"))] == [b"v"]
    if round == 2:
        assert len(set(_session_addresses)) == 1


def test_kill_9_and_restart_on_the_same_data(kafka_broker_process):
    b = kafka_broker_process
    b.create_topic("crash", partitions=1)
    b.produce("crash", [f"m{i}" for i in range(50)], acks=1)
    b.consume("crash", 20, group="survivor")
    assert b.kill() == -9
    # SIGKILL: no flush and no clean-shutdown marker, so the restart must recover the log.
    assert not os.path.exists(os.path.join(b.data_dir, ".kafka_cleanshutdown"))
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", b.port), timeout=1).close()
    port = b.port
    b.start()
    assert b.port == port
    assert [r.value for r in b.consume("crash", 50)] == [f"m{i}".encode() for i in range(50)]
    assert b.committed_offsets("survivor") == {("crash", 0): 20}


def test_in_process_broker_refuses_kill(kafka_broker):
    with pytest.raises(RuntimeError, match="kafka_broker_process"):
        kafka_broker.kill()


def test_broker_context_manager_for_scripts():
    with kgroup.testing.broker() as b:
        data_dir = b.data_dir
        b.create_topic("t")
        assert [m.offset for m in b.produce("t", ["a", "b"])] == [0, 1]
        assert os.path.isdir(data_dir)
    assert not os.path.exists(data_dir)        # its own temporary directory is removed
    assert not b.running


def test_unittest_style_start_stop(tmp_path):
    b = KafkaBroker(tmp_path / "d", {"num.partitions": 2}).start()
    try:
        b.produce("t", ["x"])
        with b.admin() as admin:
            assert len(admin.describe_topics(["t"])["t"].partitions) == 2
    finally:
        b.close()
    assert os.path.isdir(tmp_path / "d")        # a directory we were given is kept


def test_describe_group_shows_a_consumer_protocol_group_and_a_classic_one(kafka_broker):
    from confluent_kafka import Consumer, Producer
    b = kafka_broker
    b.create_topic("orders", partitions=2)
    p = Producer({"bootstrap.servers": b.bootstrap_servers})
    p.produce("orders", b"x")
    p.flush(10)
    consumers = []
    for gid, extra in (("new", {"group.protocol": "consumer"}), ("old", {})):
        c = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": gid, "auto.offset.reset": "earliest", **extra})
        c.subscribe(["orders"])
        consumers.append(c)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.1)
        if all(b.describe_group(g).state == "Stable" for g in ("new", "old")):
            break
    new, old = b.describe_group("new"), b.describe_group("old")
    assert (new.state, old.state) == ("Stable", "Stable")
    assert new.group_epoch >= 1 and len(new.members) == 1 and len(new.members[0].assignment) == 2
    assert old.protocol_type == "consumer" and len(old.members) == 1
    assert b.describe_group("missing").state == "Dead"
    for c in consumers:
        c.close()
