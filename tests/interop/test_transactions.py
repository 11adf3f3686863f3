"""Exactly-once with real transactional clients against the broker's transaction coordinator.

- confluent-kafka 2.16.1 consume-transform-produce with send_offsets_to_transaction, every third
  transaction aborted and retried: each input's output appears exactly once for read_committed
  consumers (confluent-kafka, kafka-python, aiokafka), and the group's committed offsets are the
  input's end;
- a transactional producer SIGKILLed mid-transaction: a new instance with the same
  transactional.id aborts its open transaction and fences it; a live zombie is fenced too;
- the broker SIGKILLed between EndTxn and the markers (the fault hook stops it right there):
  after a restart the transaction completes (records and group offsets) and nothing was
  half-visible before;
- aiokafka's transactional producer (send_offsets_to_transaction, commit and abort).
"""
import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from kgroup.protocol.messages.describe_transactions import DescribeTransactionsRequest
from tests.harness import ROOT, BrokerProcess, RawClient

pytestmark = pytest.mark.interop

N = 60


def create_topics(bs, *specs):
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": bs})
    for f in a.create_topics([NewTopic(t, n, 1) for t, n in specs]).values():
        f.result(10)


def produce_plain(bs, topic, values, partitions):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % partitions)
    assert p.flush(10) == 0


def until(fetch_some, want, settle=1.5, timeout=30.0):
    """Values fetched until ``want`` many arrived, then ``settle`` seconds more (nothing else may come)."""
    got, deadline, extra = [], time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        got += fetch_some()
        if len(got) >= want and extra is None:
            extra = time.monotonic() + settle
        if extra is not None and time.monotonic() > extra:
            break
    return got


# Readers of every record in partitions 0..partitions-1 of a topic, from the beginning.

def read_confluent(bs, topic, partitions, want, isolation="read_committed"):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": "reader", "enable.auto.commit": False,
                  "isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])

        def some():
            out = []
            for m in c.consume(100, 0.2):
                assert m.error() is None, m.error()
                out.append(m.value())
            return out
        return until(some, want)
    finally:
        c.close()


def read_kafka_python(bs, topic, partitions, want, isolation="read_committed"):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, group_id=None, isolation_level=isolation)
    try:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        c.seek_to_beginning()
        return until(lambda: [m.value for ms in c.poll(200).values() for m in ms], want)
    finally:
        c.close()


def read_aiokafka(bs, topic, partitions, want, isolation="read_committed"):
    async def run():
        from aiokafka import AIOKafkaConsumer, TopicPartition
        c = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, group_id=None,
                             isolation_level=isolation)
        await c.start()
        try:
            c.assign([TopicPartition(topic, p) for p in range(partitions)])
            await c.seek_to_beginning()
            got, deadline, extra = [], time.monotonic() + 30, None
            while time.monotonic() < deadline:
                for ms in (await c.getmany(timeout_ms=200)).values():
                    got += [m.value for m in ms]
                if len(got) >= want and extra is None:
                    extra = time.monotonic() + 1.5
                if extra is not None and time.monotonic() > extra:
                    break
            return got
        finally:
            await c.stop()
    return asyncio.run(run())


def read_kgroup(bs, topic, partitions, want, isolation="read_committed"):
    from kgroup.client import TopicPartition
    from kgroup.client.sync import KafkaConsumer
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, isolation_level=isolation)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        return until(lambda: [r.value for r in c.poll(200)], want)
    finally:
        c.close()


READERS = {"confluent-kafka": read_confluent, "kafka-python": read_kafka_python, "aiokafka": read_aiokafka}


def committed_offsets(bs, group, topic, partitions):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset for tp in c.committed(
            [TopicPartition(topic, p) for p in range(partitions)], 10)}
    finally:
        c.close()


def raw_committed(port, group, topic, require_stable):
    """OffsetFetch v7 of partition 0: (offset, error code)."""
    from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    c = RawClient(port)
    try:
        r = c.request(OffsetFetchRequest(group_id=group, require_stable=require_stable,
                                         topics=[T(name=topic, partition_indexes=[0])]), 7)
        part = r.topics[0].partitions[0]
        return part.committed_offset, part.error_code
    finally:
        c.close()


def describe(port, tid):
    c = RawClient(port)
    try:
        deadline = time.monotonic() + 10
        while True:
            st = c.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0).transaction_states[0]
            if st.error_code != 14 or time.monotonic() > deadline:       # COORDINATOR_LOAD_IN_PROGRESS
                return st
            time.sleep(0.05)
    finally:
        c.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_consume_transform_produce_exactly_once(broker, protocol):
    """confluent-kafka: commit and abort paths; every output exactly once, offsets committed. With
    ``group.protocol=consumer`` (KIP-848) the TxnOffsetCommit names a consumer group's member and
    epoch, validated by that group."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    bs = broker.bootstrap
    src, dst, group = f"in-{protocol}", f"out-{protocol}", f"ctp-group-{protocol}"
    create_topics(bs, (src, 2), (dst, 2))
    inputs = [b"%d" % i for i in range(N)]
    produce_plain(bs, src, inputs, 2)
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"ctp-{protocol}"})
    p.init_transactions(10)
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "group.protocol": protocol})
    c.subscribe([src])
    done, n, aborted = 0, 0, 0
    deadline = time.monotonic() + 60
    try:
        while done < N and time.monotonic() < deadline:
            msgs = c.consume(10, 0.5)
            if not msgs:
                continue
            assert all(m.error() is None for m in msgs)
            p.begin_transaction()
            for m in msgs:
                p.produce(dst, value=b"out-" + m.value(), partition=m.partition())
            p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 10)
            n += 1
            if n % 3 == 0:
                p.abort_transaction(10)
                aborted += len(msgs)
                # Back to the group's committed offsets: the aborted inputs are processed again.
                for tp in c.committed(c.assignment(), 10):
                    c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
            else:
                p.commit_transaction(10)
                done += len(msgs)
    finally:
        c.close()
    assert done == N and aborted > 0
    assert committed_offsets(bs, group, src, 2) == {0: N // 2, 1: N // 2}
    want = sorted(b"out-" + v for v in inputs)
    for name, read in READERS.items():
        got = read(bs, dst, 2, N)
        assert sorted(got) == want, name
    # one group, of the protocol the consumer used (no classic twin beside a consumer group)
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bs})
    listed = admin.list_consumer_groups().result(10).valid
    assert [(g.group_id, g.type.name.lower()) for g in listed if g.group_id == group] == [(group, protocol)]


KILLED_PRODUCER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "victim"})
    p.init_transactions(10)
    p.begin_transaction()
    for i in range(5):
        p.produce("fenced", value=b"doomed-%d" % i, partition=0)
    assert p.flush(10) == 0
    print("in-transaction", flush=True)
    time.sleep(120)
""")


def test_killed_producer_is_fenced_by_its_successor(broker):
    from confluent_kafka import KafkaException, Producer
    bs = broker.bootstrap
    create_topics(bs, ("fenced", 1))
    proc = subprocess.Popen([sys.executable, "-c", KILLED_PRODUCER, bs], stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == b"in-transaction"
        assert describe(broker.port, "victim").transaction_state == "Ongoing"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = describe(broker.port, "victim")
    # The successor: InitProducerId aborts the open transaction with a bumped epoch.
    p = Producer({"bootstrap.servers": bs, "transactional.id": "victim"})
    p.init_transactions(30)
    after = describe(broker.port, "victim")
    assert after.producer_id == before.producer_id and after.producer_epoch >= before.producer_epoch + 2
    assert after.transaction_state == "Empty"          # aborted, then the new epoch initialized
    p.begin_transaction()
    p.produce("fenced", value=b"kept", partition=0)
    p.commit_transaction(10)
    # A live zombie: a third instance fences the successor, whose commit then fails fatally.
    p.begin_transaction()
    p.produce("fenced", value=b"zombie", partition=0)
    assert p.flush(10) == 0
    p3 = Producer({"bootstrap.servers": bs, "transactional.id": "victim"})
    p3.init_transactions(30)
    with pytest.raises(KafkaException) as raised:
        p.commit_transaction(10)
    assert raised.value.args[0].fatal() or "fenced" in str(raised.value).lower()
    p3.begin_transaction()
    p3.produce("fenced", value=b"kept-2", partition=0)
    p3.commit_transaction(10)
    for name, read in READERS.items():
        assert read(bs, "fenced", 1, 2) == [b"kept", b"kept-2"], name


def test_broker_killed_between_end_txn_and_markers(tmp_path, monkeypatch):
    """The broker stops right after the PrepareCommit record is fsynced and EndTxn answered,
    before any marker: nothing is visible to read_committed readers; SIGKILL; after the restart
    the coordinator writes the markers (records and group offsets) and completes."""
    from confluent_kafka import Producer
    monkeypatch.setenv("KGROUP_TEST_HOLD_MARKERS", "1")
    broker = BrokerProcess(tmp_path / "data").start()
    monkeypatch.delenv("KGROUP_TEST_HOLD_MARKERS")
    try:
        bs = broker.bootstrap
        create_topics(bs, ("in", 1), ("crash", 2))
        produce_plain(bs, "in", [b"x"] * 4, 1)
        p = Producer({"bootstrap.servers": bs, "transactional.id": "crash-tx"})
        p.init_transactions(10)
        p.begin_transaction()
        for i in range(10):
            p.produce("crash", value=b"v%d" % i, partition=i % 2)
        from confluent_kafka import Consumer, TopicPartition
        meta_consumer = Consumer({"bootstrap.servers": bs, "group.id": "crash-group"})
        p.send_offsets_to_transaction([TopicPartition("in", 0, 4)], meta_consumer.consumer_group_metadata(), 10)
        meta_consumer.close()
        p.commit_transaction(10)                 # answered after the PrepareCommit record is on disk
        assert describe(broker.port, "crash-tx").transaction_state == "PrepareCommit"
        assert read_confluent(bs, "crash", 2, 0) == []           # the LSO holds: nothing half-visible
        # The offsets are pending: unstable for require_stable (librdkafka's committed() would
        # retry until the transaction completes), not yet committed otherwise.
        assert raw_committed(broker.port, "crash-group", "in", require_stable=True) == (-1, 88)
        assert raw_committed(broker.port, "crash-group", "in", require_stable=False) == (-1, 0)
        del p
        broker.kill()
        broker.start()
        bs = broker.bootstrap
        deadline = time.monotonic() + 20
        while describe(broker.port, "crash-tx").transaction_state != "CompleteCommit":
            assert time.monotonic() < deadline, describe(broker.port, "crash-tx")
            time.sleep(0.1)
        want = sorted(b"v%d" % i for i in range(10))
        for name, read in READERS.items():
            assert sorted(read(bs, "crash", 2, 10)) == want, name
        assert committed_offsets(bs, "crash-group", "in", 1) == {0: 4}
    finally:
        broker.stop()


def test_aiokafka_transactional_producer(broker):
    bs = broker.bootstrap
    create_topics(bs, ("aio-in", 1), ("aio-out", 1))

    async def run():
        from aiokafka import AIOKafkaProducer, TopicPartition
        p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="aio-tx", enable_idempotence=True)
        await p.start()
        try:
            async with p.transaction():
                for i in range(5):
                    await p.send_and_wait("aio-out", b"c%d" % i, partition=0)
                await p.send_offsets_to_transaction({TopicPartition("aio-in", 0): 5}, "aio-group")
            await p.begin_transaction()
            await p.send_and_wait("aio-out", b"aborted", partition=0)
            await p.send_offsets_to_transaction({TopicPartition("aio-in", 0): 9}, "aio-group")
            await p.abort_transaction()
        finally:
            await p.stop()
    asyncio.run(run())
    want = [b"c%d" % i for i in range(5)]
    for name, read in READERS.items():
        assert read(bs, "aio-out", 1, 5) == want, name
    assert committed_offsets(bs, "aio-group", "aio-in", 1) == {0: 5}
