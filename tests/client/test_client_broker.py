"""Our client against a real kgroup broker process: admin operations (kafka-topics-like CLI and
the Admin API), then the data path and consumer groups (produce, consume, commit, rebalance,
kafka-consumer-groups-like CLI)."""
import asyncio
import io
import time

import pytest

from kgroup.client import TopicPartition as TP
from kgroup.client.admin import Admin, NewTopic
from kgroup.client.cli import main_consume, main_groups, main_produce, main_topics
from kgroup.client.consumer import Consumer
from kgroup.client.errors import KafkaError
from kgroup.client.partitioner import partition_for_key
from kgroup.client.producer import Producer
from kgroup.client.sync import KafkaAdmin, KafkaConsumer, KafkaProducer

FAST = dict(heartbeat_interval_ms=300, session_timeout_ms=6000, auto_offset_reset="earliest")


@pytest.fixture
def fast_broker(tmp_path):
    """A broker that rebalances at once (no group.initial.rebalance.delay.ms wait)."""
    from tests.harness import BrokerProcess
    b = BrokerProcess(tmp_path / "data", ["group.initial.rebalance.delay.ms=0"]).start()
    yield b
    b.stop()


def run(coro, timeout=60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


# --- admin: topics -----------------------------------------------------------------------------

def test_topics_cli_create_list_describe_delete(broker, capsys):
    bs = broker.bootstrap
    assert main_topics(["--bootstrap-server", bs, "--create", "--topic", "orders", "--partitions", "3",
                        "--replication-factor", "1", "--config", "cleanup.policy=compact"]) == 0
    assert capsys.readouterr().out == "Created topic orders.\n"
    assert main_topics(["--bootstrap-server", bs, "--create", "--topic", "logs"]) == 0
    capsys.readouterr()
    assert main_topics(["--bootstrap-server", bs, "--create", "--topic", "orders"]) == 1
    assert "already exists" in capsys.readouterr().err
    assert main_topics(["--bootstrap-server", bs, "--create", "--topic", "orders", "--if-not-exists"]) == 0
    assert main_topics(["--bootstrap-server", bs, "--list", "--exclude-internal"]) == 0
    assert capsys.readouterr().out == "logs\norders\n"
    assert main_topics(["--bootstrap-server", bs, "--describe", "--topic", "orders"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines[0].split("\t")
    assert head[0] == "Topic: orders" and head[1].startswith("TopicId: ") and len(head[1]) == len("TopicId: ") + 22
    assert head[2:4] == ["PartitionCount: 3", "ReplicationFactor: 1"]
    assert "cleanup.policy=compact" in head[4]
    assert lines[1:] == [f"\tTopic: orders\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1" for p in range(3)]
    assert main_topics(["--bootstrap-server", bs, "--delete", "--topic", "orders"]) == 0
    assert main_topics(["--bootstrap-server", bs, "--delete", "--topic", "orders"]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main_topics(["--bootstrap-server", bs, "--delete", "--topic", "orders", "--if-exists"]) == 0
    assert main_topics(["--bootstrap-server", bs, "--list", "--exclude-internal"]) == 0
    assert capsys.readouterr().out == "logs\n"


def test_admin_api_topics_cluster_configs(broker):
    async def go():
        async with Admin(bootstrap_servers=broker.bootstrap) as admin:
            result = await admin.create_topics([NewTopic("a", 2, 1, {"retention.ms": "1000"}), NewTopic("b", 1, 1)])
            assert result == {"a": None, "b": None}
            again = await admin.create_topics([NewTopic("a", 2, 1)])
            assert again["a"].code.name == "TOPIC_ALREADY_EXISTS"
            bad = await admin.create_topics([NewTopic("c", 1, 3)])
            assert bad["c"].code.name == "INVALID_REPLICATION_FACTOR"
            assert {"a", "b"} <= set(await admin.list_topics())
            described = await admin.describe_topics(["a", "missing"])
            assert len(described["a"].partitions) == 2
            assert isinstance(described["missing"], KafkaError)
            cluster = await admin.describe_cluster()
            assert cluster["brokers"][0].port == broker.port and cluster["cluster_id"]
            configs = await admin.describe_configs(2, "a")
            assert configs["retention.ms"]["value"] == "1000" and not configs["retention.ms"]["is_default"]
            assert (await admin.delete_topics(["a"])) == {"a": None}
            assert "a" not in await admin.list_topics()
    run(go())
    with KafkaAdmin(bootstrap_servers=broker.bootstrap) as admin:  # the blocking facade
        assert admin.list_topics() == ["b"]
        assert admin.describe_groups(["nobody"])["nobody"].state == "Dead"


# --- data path and groups ----------------------------------------------------------------------------

def _create(broker, topic, partitions):
    async def go():
        async with Admin(bootstrap_servers=broker.bootstrap) as admin:
            assert (await admin.create_topics([NewTopic(topic, partitions, 1)]))[topic] is None
    run(go())


def test_produce_consume_roundtrip(broker):
    _create(broker, "rt", 3)

    async def go():
        async with Producer(bootstrap_servers=broker.bootstrap, compression_type="gzip") as p:
            futs = [await p.send("rt", f"v{i}".encode(), key=f"k{i}".encode(), headers=[("h", b"1")])
                    for i in range(30)]
            metas = await asyncio.gather(*futs)
        assert [m.partition for m in metas] == [partition_for_key(f"k{i}".encode(), 3) for i in range(30)]
        async with Consumer(bootstrap_servers=broker.bootstrap) as c:
            c.assign([TP("rt", p) for p in range(3)])
            c.seek_to_beginning()
            got = []
            deadline = time.monotonic() + 15
            while len(got) < 30 and time.monotonic() < deadline:
                got += await c.poll(200)
            assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(30))
            assert all(r.headers == [("h", b"1")] for r in got)
            assert await c.end_offsets([TP("rt", p) for p in range(3)]) == \
                {TP("rt", p): sum(1 for m in metas if m.partition == p) for p in range(3)}
    run(go())


def test_consumer_group_rebalance_and_groups_cli(fast_broker, capsys):
    broker = fast_broker
    _create(broker, "events", 4)
    bs = broker.bootstrap
    with KafkaProducer(bootstrap_servers=bs) as p:
        for i in range(40):
            p.send("events", str(i).encode(), key=str(i).encode())
        p.flush()
    c1 = KafkaConsumer("events", bootstrap_servers=bs, group_id="cg", client_id="c-one", **FAST)
    c2 = KafkaConsumer("events", bootstrap_servers=bs, group_id="cg", client_id="c-two", **FAST)
    seen = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (len(seen) >= 40 and c1.assignment() and c2.assignment()):
        seen += c1.poll(100) + c2.poll(100)
    assert c1.assignment() | c2.assignment() == {TP("events", p) for p in range(4)}
    assert c1.assignment().isdisjoint(c2.assignment())
    c1.commit()
    c2.commit()
    assert main_groups(["--bootstrap-server", bs, "--list"]) == 0
    assert "cg" in capsys.readouterr().out.split()
    assert main_groups(["--bootstrap-server", bs, "--describe", "--group", "cg"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                              "CONSUMER-ID", "HOST", "CLIENT-ID"]
    rows = [line.split() for line in out[1:]]
    assert len(rows) == 4 and {r[-1] for r in rows} == {"c-one", "c-two"}
    assert all(r[3] == r[4] and r[5] == "0" for r in rows)  # everything consumed and committed
    assert main_groups(["--bootstrap-server", bs, "--describe", "--group", "cg", "--state"]) == 0
    state = capsys.readouterr().out.strip().splitlines()
    assert state[1].split()[-2:] == ["Stable", "2"] and "range" in state[1]
    assert main_groups(["--bootstrap-server", bs, "--describe", "--group", "cg", "--members"]) == 0
    members = capsys.readouterr().out.strip().splitlines()
    assert members[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    assert sorted(line.split()[-1] for line in members[1:]) == ["2", "2"]
    assert main_groups(["--bootstrap-server", bs, "--reset-offsets", "--group", "cg", "--topic", "events",
                        "--to-earliest", "--execute"]) == 1  # active group: refused
    assert "inactive" in capsys.readouterr().out
    c1.close()
    c2.close()
    assert main_groups(["--bootstrap-server", bs, "--reset-offsets", "--group", "cg", "--topic", "events",
                        "--to-earliest"]) == 0  # dry run
    capsys.readouterr()
    assert main_groups(["--bootstrap-server", bs, "--reset-offsets", "--group", "cg", "--topic", "events:0,1",
                        "--to-offset", "2", "--execute"]) == 0
    table = capsys.readouterr().out.strip().splitlines()
    assert table[0].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert [line.split() for line in table[1:]] == [["cg", "events", "0", "2"], ["cg", "events", "1", "2"]]
    assert main_groups(["--bootstrap-server", bs, "--describe", "--group", "cg"]) == 0
    captured = capsys.readouterr()
    assert "has no active members" in captured.err
    rows = {int(r.split()[2]): r.split() for r in captured.out.strip().splitlines()[1:]}
    assert rows[0][3] == "2" and rows[0][6:] == ["-", "-", "-"]
    assert main_groups(["--bootstrap-server", bs, "--delete", "--group", "cg"]) == 0
    assert "Deletion of requested consumer groups ('cg') was successful." in capsys.readouterr().out
    assert main_groups(["--bootstrap-server", bs, "--describe", "--group", "cg"]) == 0
    assert "Error: Consumer group 'cg' does not exist." in capsys.readouterr().out


def test_console_tools_against_broker(fast_broker, capsys):
    broker = fast_broker
    _create(broker, "console", 1)
    bs = broker.bootstrap
    assert main_produce(["--bootstrap-server", bs, "--topic", "console"], stdin=io.StringIO("a\nb\n")) == 0
    out = io.StringIO()
    assert main_consume(["--bootstrap-server", bs, "--topic", "console", "--group", "cc", "--from-beginning",
                         "--max-messages", "2"], stdout=out) == 0
    assert out.getvalue() == "a\nb\n"
    # --progress decodes in bulk (poll_batch) and prints the same lines
    assert main_produce(["--bootstrap-server", bs, "--topic", "console", "--property", "parse.key=true"],
                        stdin=io.StringIO("k1\tc\nk2\td\n")) == 0
    out = io.StringIO()
    assert main_consume(["--bootstrap-server", bs, "--topic", "console", "--from-beginning", "--progress",
                         "--property", "print.key=true", "--max-messages", "4"], stdout=out) == 0
    assert sorted(out.getvalue().splitlines()) == ["k1\tc", "k2\td", "null\ta", "null\tb"]


def test_static_member_close_keeps_membership_and_rejoins_with_same_assignment(fast_broker):
    broker = fast_broker
    _create(broker, "static", 2)
    cfg = dict(FAST, bootstrap_servers=broker.bootstrap, group_id="sg", group_instance_id="inst-1")

    def joined():
        c = KafkaConsumer("static", **cfg)
        deadline = time.monotonic() + 15
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(100)
        return c

    async def members():
        async with Admin(bootstrap_servers=broker.bootstrap) as admin:
            d = (await admin.describe_groups(["sg"]))["sg"]
            return d.state, [m.group_instance_id for m in d.members]

    c = joined()
    first = c.assignment()
    assert first == {TP("static", 0), TP("static", 1)}
    c.close()  # static: no LeaveGroup, the member stays until its session times out
    assert run(members()) == ("Stable", ["inst-1"])
    c = joined()
    assert c.assignment() == first
    assert run(members()) == ("Stable", ["inst-1"])
    c.close()


@pytest.mark.parametrize("codec", ["snappy", "lz4", "zstd"])
def test_our_client_reads_every_codec_from_confluent_producers(broker, codec):
    """Our consumer decodes what librdkafka writes with each codec (the codecs are dependencies)."""
    from confluent_kafka import Producer as CkProducer
    _create(broker, "cc-" + codec, 1)
    p = CkProducer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 20})
    for i in range(500):
        p.produce("cc-" + codec, key=b"k%d" % i, value=b"value-%d-" % i + b"z" * 100, partition=0)
    assert p.flush(10) == 0

    async def go():
        async with Consumer(bootstrap_servers=broker.bootstrap) as c:
            c.assign([TP("cc-" + codec, 0)])
            c.seek_to_beginning()
            got, deadline = [], time.monotonic() + 15
            while len(got) < 500 and time.monotonic() < deadline:
                got += await c.poll(200)
            assert [r.key for r in got] == [b"k%d" % i for i in range(500)]
    run(go())


def test_producer_refuses_a_negative_timestamp(broker):
    """ProducerRecord's check, before the record goes anywhere, in both producers and in bulk."""
    import pyarrow as pa
    message = "Invalid timestamp: -1. Timestamp should always be non-negative or null."

    async def go():
        async with Producer(bootstrap_servers=broker.bootstrap) as p:
            with pytest.raises(ValueError) as e:
                await p.send("neg-ts", b"v", timestamp_ms=-1)
            assert str(e.value) == message
            with pytest.raises(ValueError, match="Invalid timestamp: -5. "):
                await p.send_columns("neg-ts", pa.array([b"a", b"b"]), timestamps=[3, -5])
            assert not p._queues
            meta = await (await p.send("neg-ts", b"v", timestamp_ms=0))
            assert meta.timestamp == 0
    run(go())
    with KafkaProducer(bootstrap_servers=broker.bootstrap) as p:
        with pytest.raises(ValueError) as e:
            p.send("neg-ts", b"v", timestamp_ms=-1)
        assert str(e.value) == message
