"""Our client end to end against librdkafka's mock cluster (the copy inside confluent-kafka),
which speaks Produce/Fetch/ListOffsets/FindCoordinator/JoinGroup/SyncGroup/Heartbeat/LeaveGroup/
OffsetCommit/OffsetFetch/InitProducerId. Both are always installed: nothing here may skip."""
import asyncio
import io
import threading
import time
import uuid

import pytest

from kgroup.client import ConsumerRebalanceListener, TopicPartition as TP
from kgroup.client.cli import main_consume, main_produce
from kgroup.client.consumer import Consumer
from kgroup.client.partitioner import partition_for_key
from kgroup.client.producer import Producer
from kgroup.client.sync import KafkaConsumer, KafkaProducer
from kgroup.testing import rdkafka_mock

FAST = dict(heartbeat_interval_ms=200, session_timeout_ms=2000, auto_offset_reset="earliest")


def start_mock(*topics, brokers=1):
    return rdkafka_mock.spawn(brokers, {n: int(p) for n, p in (t.split(":") for t in topics)},
                              initial_rebalance_delay_ms=0)


@pytest.fixture(scope="module")
def mock():
    proc, bootstrap = start_mock("t:3", "four:4")
    yield bootstrap
    proc.kill()
    proc.wait()


def name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def run(coro, timeout=60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def consume_n(consumer, n, timeout=20):
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += await consumer.poll(200)
    return got


def test_produce_and_consume_with_manual_assignment(mock):
    topic = name("rt")

    async def go():
        async with Producer(bootstrap_servers=mock, compression_type="gzip", linger_ms=2) as p:
            keyed = [await p.send(topic, f"v{i}".encode(), key=f"k{i}".encode(), headers=[("h", b"x"), ("n", None)],
                                  timestamp_ms=1_700_000_000_000 + i) for i in range(60)]
            keyless = [await p.send(topic, b"sticky") for _ in range(20)]
            metas = await asyncio.gather(*keyed, *keyless)
            assert p._producer_id >= 0  # idempotent by default: InitProducerId happened
        for i, m in enumerate(metas[:60]):
            assert m.partition == partition_for_key(f"k{i}".encode(), 4)  # auto-created: 4 partitions
        assert len({m.partition for m in metas[60:]}) == 1  # sticky: one batch, one partition
        async with Consumer(bootstrap_servers=mock) as c:
            c.assign([TP(topic, p) for p in range(4)])
            c.seek_to_beginning()
            records = await consume_n(c, 80)
            assert len(records) == 80
            by_value = {r.value: r for r in records if r.value != b"sticky"}
            r7 = by_value[b"v7"]
            assert (r7.key, r7.timestamp, r7.timestamp_type, r7.headers) == \
                (b"k7", 1_700_000_000_007, 0, [("h", b"x"), ("n", None)])
            assert r7.partition == metas[7].partition and r7.offset == metas[7].offset
            for p in range(4):
                offsets = [r.offset for r in records if r.partition == p]
                assert offsets == list(range(len(offsets)))
                assert await c.position(TP(topic, p)) == len(offsets)
            ends = await c.end_offsets([TP(topic, p) for p in range(4)])
            assert sum(ends.values()) == 80
    run(go())


def test_group_members_share_partitions_and_rebalance(mock):
    topic, group = name("grp"), name("g")

    async def go():
        async with Producer(bootstrap_servers=mock, linger_ms=0) as p:
            for i in range(40):
                await p.send(topic, str(i).encode(), key=str(i).encode())
            await p.flush()
        c1 = Consumer(bootstrap_servers=mock, group_id=group, **FAST)
        c1.subscribe([topic])
        first = await consume_n(c1, 1)
        assert c1.assignment() == {TP(topic, p) for p in range(4)}
        c2 = Consumer(bootstrap_servers=mock, group_id=group, **FAST)
        c2.subscribe([topic])
        got = list(first)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (c1.assignment() and c2.assignment()
                                                   and len(c1.assignment() | c2.assignment()) == 4):
            got += await c1.poll(100) + await c2.poll(100)
        assert c1.assignment().isdisjoint(c2.assignment())
        assert len(c1.assignment()) == 2 and len(c2.assignment()) == 2  # range over 4 partitions
        await c2.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(c1.assignment()) < 4:
            got += await c1.poll(100)
        assert len(c1.assignment()) == 4  # c2 left with LeaveGroup: c1 takes everything
        # c2 committed its consumed positions on close (auto-commit); c1 now commits everything
        await c1.commit()
        committed = await c1.committed([TP(topic, p) for p in range(4)])
        assert {tp: om.offset for tp, om in committed.items()} == \
            {tp: await c1.position(tp) for tp in c1.assignment()}
        await c1.close()
        assert {r.value for r in got} <= {str(i).encode() for i in range(40)}
    run(go(), 90)


class Recorder(ConsumerRebalanceListener):
    def __init__(self):
        self.events = []

    def on_partitions_revoked(self, revoked):
        self.events.append(("revoked", sorted(revoked)))

    def on_partitions_assigned(self, assigned):
        self.events.append(("assigned", sorted(assigned)))

    def on_partitions_lost(self, lost):
        self.events.append(("lost", sorted(lost)))


def test_cooperative_sticky_revokes_only_moved_partitions(mock):
    topic, group = name("coop"), name("g")

    async def go():
        async with Producer(bootstrap_servers=mock) as p:
            await (await p.send(topic, b"x"))
        cfg = dict(FAST, group_id=group, partition_assignment_strategy=["cooperative-sticky"], bootstrap_servers=mock)
        l1, l2 = Recorder(), Recorder()
        c1, c2 = Consumer(**cfg), Consumer(**cfg)
        c1.subscribe([topic], listener=l1)
        await consume_n(c1, 1)
        assert l1.events == [("assigned", [TP(topic, p) for p in range(4)])]
        c2.subscribe([topic], listener=l2)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (len(c1.assignment()) == 2 and len(c2.assignment()) == 2):
            await c1.poll(100)
            await c2.poll(100)
        assert len(c1.assignment()) == 2 and len(c2.assignment()) == 2
        revoked = [e for e in l1.events if e[0] == "revoked"]
        assert len(revoked) == 1 and len(revoked[0][1]) == 2  # only the two moved partitions
        assert l2.events[-1][0] == "assigned" and ("revoked", []) not in l2.events
        await c1.close()
        await c2.close()
    run(go(), 90)


def test_sync_facade_listener_commits_on_caller_thread_and_group_resumes(mock):
    topic, group = name("sync"), name("g")
    with KafkaProducer(bootstrap_servers=mock) as p:
        futures = [p.send(topic, f"a{i}".encode(), key=str(i).encode()) for i in range(20)]
        p.flush()
        assert all(f.get(5).offset >= 0 for f in futures)

    class CommitOnRevoke(Recorder):
        consumer = None

        def on_partitions_revoked(self, revoked):
            super().on_partitions_revoked(revoked)
            self.thread = threading.current_thread()
            self.consumer.commit()  # blocking call from inside the callback

    listener = CommitOnRevoke()
    c = KafkaConsumer(bootstrap_servers=mock, group_id=group, enable_auto_commit=False, **FAST)
    listener.consumer = c
    c.subscribe([topic], listener=listener)
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 20 and time.monotonic() < deadline:
        got += c.poll(200)
    assert len(got) == 20
    c.close()
    assert listener.thread is threading.current_thread()
    assert listener.events[-1] == ("revoked", [TP(topic, p) for p in range(4)])
    with KafkaProducer(bootstrap_servers=mock) as p:
        p.send(topic, b"b-new", key=b"0").get(10)
    with KafkaConsumer(topic, bootstrap_servers=mock, group_id=group, **FAST) as c2:
        got = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            got += c2.poll(200)
        assert [r.value for r in got] == [b"b-new"]  # resumed from the offsets committed in the callback


def test_seek_pause_resume_and_commit_async(mock):
    topic, group = name("seek"), name("g")

    async def go():
        async with Producer(bootstrap_servers=mock) as p:
            for i in range(10):
                await p.send(topic, str(i).encode(), partition=0)
            await p.flush()
        async with Consumer(bootstrap_servers=mock, group_id=group, enable_auto_commit=False) as c:
            tp0, tp1 = TP(topic, 0), TP(topic, 1)
            c.assign([tp0, tp1])
            c.seek(tp0, 7)
            records = await consume_n(c, 3)
            assert [r.offset for r in records] == [7, 8, 9]
            c.seek_to_beginning(tp0)
            c.pause(tp0)
            assert await c.poll(300) == [] and c.paused() == {tp0}
            c.resume(tp0)
            records = await consume_n(c, 10)
            assert [r.offset for r in records] == list(range(10))
            assert await c.position(tp1) == 0
            done = await c.commit_async({tp0: 4})
            assert done[tp0].offset == 4
            committed = await c.committed([tp0, tp1])
            assert committed[tp0].offset == 4 and committed[tp1] is None
            await c.commit()  # positions: tp0 at 10, tp1 at 0
            assert (await c.committed([tp0]))[tp0].offset == 10
    run(go())


def test_pattern_subscription(mock):
    prefix = name("pat")

    async def go():
        async with Producer(bootstrap_servers=mock) as p:
            for t in ("a", "b"):
                await (await p.send(f"{prefix}-{t}", t.encode()))
            await (await p.send(name("other"), b"no"))
        async with Consumer(bootstrap_servers=mock, group_id=name("g"), **FAST) as c:
            c.subscribe(pattern=f"{prefix}-.*")
            records = await consume_n(c, 2)
            assert sorted(r.value for r in records) == [b"a", b"b"]
            assert {tp.topic for tp in c.assignment()} == {f"{prefix}-a", f"{prefix}-b"}
    run(go())


def test_confluent_kafka_interop(mock):
    from confluent_kafka import Consumer as CKConsumer, Producer as CKProducer
    topic = name("ck")
    ck = CKProducer({"bootstrap.servers": mock, "partitioner": "murmur2_random"})
    for i in range(20):
        ck.produce(topic, key=f"key-{i}".encode(), value=f"ck{i}".encode())
    ck.flush(10)

    async def ours():
        async with Consumer(bootstrap_servers=mock) as c:
            c.assign([TP(topic, p) for p in range(4)])
            c.seek_to_beginning()
            records = await consume_n(c, 20)
            for r in records:  # librdkafka's murmur2 partitioner agrees with ours (and Java's)
                assert r.partition == partition_for_key(r.key, 4)
        async with Producer(bootstrap_servers=mock) as p:
            await (await p.send(topic, b"from-kgroup", key=b"key-3", headers=[("k", b"v")]))
    run(ours())
    cc = CKConsumer({"bootstrap.servers": mock, "group.id": name("ckg"), "auto.offset.reset": "earliest"})
    cc.subscribe([topic])
    seen = []
    deadline = time.monotonic() + 20
    while len(seen) < 21 and time.monotonic() < deadline:
        m = cc.poll(0.5)
        if m is not None and not m.error():
            seen.append(m)
    cc.close()
    ours_msg = [m for m in seen if m.value() == b"from-kgroup"]
    assert len(seen) == 21 and ours_msg[0].headers() == [("k", b"v")]
    assert ours_msg[0].partition() == partition_for_key(b"key-3", 4)


def test_acks_variants(mock):
    topic = name("acks")

    async def go():
        for acks in ("0", "1", "all"):
            async with Producer(bootstrap_servers=mock, acks=acks) as p:
                metas = await asyncio.gather(*[await p.send(topic, acks.encode(), partition=0) for _ in range(5)])
                assert all(m.offset == -1 for m in metas) if acks == "0" else \
                    [m.offset for m in metas] == list(range(metas[0].offset, metas[0].offset + 5))
                assert (p._producer_id >= 0) == (acks == "all")  # idempotence needs acks=all
        async with Consumer(bootstrap_servers=mock) as c:
            c.assign([TP(topic, 0)])
            c.seek_to_beginning()
            assert len(await consume_n(c, 15)) == 15
    run(go())


def test_close_returns_within_timeout_when_broker_is_gone():
    proc, bootstrap = start_mock("gone:2")
    topic, group = "gone", name("g")

    async def go():
        async with Producer(bootstrap_servers=bootstrap) as p:
            await (await p.send(topic, b"x", partition=0))
        c = Consumer(bootstrap_servers=bootstrap, group_id=group, **FAST)
        c.subscribe([topic])
        assert await consume_n(c, 1)
        proc.kill()
        proc.wait()
        start = time.monotonic()
        await c.close(timeout_ms=2000)
        return time.monotonic() - start
    try:
        assert run(go()) < 3.5
    finally:
        proc.kill()


def test_console_produce_and_consume(mock, capsys):
    topic, group = name("cli"), name("g")
    assert main_produce(["--bootstrap-server", mock, "--topic", topic, "--property", "parse.key=true",
                         "--property", "key.separator=:"], stdin=io.StringIO("k1:one\nk2:two\nk3:three\n")) == 0
    out = io.StringIO()
    assert main_consume(["--bootstrap-server", mock, "--topic", topic, "--group", group, "--from-beginning",
                         "--max-messages", "3", "--property", "print.key=true", "--property", "key.separator=="],
                        stdout=out) == 0
    assert sorted(out.getvalue().splitlines()) == ["k1=one", "k2=two", "k3=three"]
    assert "Processed a total of 3 messages" in capsys.readouterr().err
    out = io.StringIO()
    assert main_consume(["--bootstrap-server", mock, "--topic", topic, "--partition",
                         str(partition_for_key(b"k2", 4)), "--offset", "earliest", "--timeout-ms", "1500"],
                        stdout=out) == 0
    assert "two" in out.getvalue().splitlines()
