"""Real read_committed consumers (confluent-kafka, kafka-python, aiokafka, ours) on a partition
holding committed, aborted and still-open transactions: each sees exactly the non-transactional
and committed records, stops at the last stable offset while a transaction is open, and goes on
once it commits. A read_uncommitted consumer sees the aborted records too (the test can tell).

The transactional batches are produced over a raw socket; the COMMIT/ABORT markers are appended
by the storage layer while the broker is stopped (the transaction coordinator's marker path is
not wired yet)."""
import asyncio
import os
import time

import pytest

from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.produce import ProduceRequest
from kgroup.protocol.records import Record, build_batch, build_end_txn_marker_batch
from kgroup.storage.log import PartitionLog
from kgroup.storage.producer_state import AppendOrigin
from tests.harness import RawClient

pytestmark = pytest.mark.interop

TOPIC = "rc"
CT = CreateTopicsRequest.CreatableTopic
TPD = ProduceRequest.TopicProduceData
A, B, C = 5001, 5002, 5003          # producer ids: A aborts, B commits, C stays open (then commits)


class Writer:
    def __init__(self, port):
        self.c = RawClient(port)
        self.seq = {}

    def send(self, *values, pid=-1):
        ts = int(time.time() * 1000)
        kw = {}
        if pid >= 0:
            seq = self.seq.get(pid, 0)
            self.seq[pid] = seq + len(values)
            kw = dict(producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)
        records = build_batch([Record(key=b"k", value=v, timestamp=ts) for v in values], **kw)
        req = ProduceRequest(transactional_id="tx-%d" % pid if pid >= 0 else None, acks=-1, timeout_ms=5000,
                             topic_data=[TPD(name=TOPIC, partition_data=[TPD.PartitionProduceData(index=0,
                                                                                                 records=records)])])
        r = self.c.request(req, 9).responses[0].partition_responses[0]
        assert r.error_code == 0, r

    def close(self):
        self.c.close()


def end_offline(broker, *markers):
    """Stop the broker, append (producer id, committed) markers to the partition, restart."""
    broker.stop()
    plog = PartitionLog(os.path.join(broker.data_dir, f"{TOPIC}-0"), had_clean_shutdown=True)
    for pid, committed in markers:
        plog.append(build_end_txn_marker_batch(pid, 0, committed, 0, int(time.time() * 1000)),
                    origin=AppendOrigin.COORDINATOR)
    plog.close()
    broker.start()


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


def consume_confluent(bs, want, isolation):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": "rc", "enable.auto.commit": False,
                  "isolation.level": isolation})
    try:
        c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])

        def some():
            out = []
            for m in c.consume(100, 0.2):
                assert m.error() is None, m.error()
                out.append(m.value())
            return out
        return until(some, want)
    finally:
        c.close()


def consume_kafka_python(bs, want, isolation):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, group_id=None, isolation_level=isolation)
    try:
        c.assign([TopicPartition(TOPIC, 0)])
        c.seek_to_beginning()
        return until(lambda: [m.value for ms in c.poll(200).values() for m in ms], want)
    finally:
        c.close()


def consume_aiokafka(bs, want, isolation):
    async def run():
        from aiokafka import AIOKafkaConsumer, TopicPartition
        c = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, group_id=None,
                             isolation_level=isolation)
        await c.start()
        try:
            c.assign([TopicPartition(TOPIC, 0)])
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


def consume_kgroup(bs, want, isolation):
    from kgroup.client import TopicPartition
    from kgroup.client.sync import KafkaConsumer
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, isolation_level=isolation)
    try:
        c.assign([TopicPartition(TOPIC, 0)])
        c.seek_to_beginning(TopicPartition(TOPIC, 0))
        return until(lambda: [r.value for r in c.poll(200)], want)
    finally:
        c.close()


CLIENTS = {"confluent-kafka": consume_confluent, "kafka-python": consume_kafka_python,
           "aiokafka": consume_aiokafka, "kgroup": consume_kgroup}


def test_read_committed_consumers_see_exactly_the_committed_records(broker):
    c = RawClient(broker.port)
    r = c.request(CreateTopicsRequest(topics=[CT(name=TOPIC, num_partitions=1, replication_factor=1)]), 7)
    assert r.topics[0].error_code == 0
    c.close()
    w = Writer(broker.port)
    w.send(b"p0", b"p1")
    w.send(b"a0", b"a1", pid=A)
    w.send(b"b0", pid=B)
    w.send(b"a2", pid=A)
    w.send(b"p2")
    w.close()
    end_offline(broker, (A, False), (B, True))
    w = Writer(broker.port)
    w.send(b"c0", pid=C)              # open: the LSO stops here
    w.send(b"p3")
    w.close()

    committed = [b"p0", b"p1", b"b0", b"p2"]
    everything = [b"p0", b"p1", b"a0", b"a1", b"b0", b"a2", b"p2", b"c0", b"p3"]
    assert consume_kafka_python(broker.bootstrap, len(everything), "read_uncommitted") == everything
    for name, consume in CLIENTS.items():
        assert consume(broker.bootstrap, len(committed), "read_committed") == committed, name

    end_offline(broker, (C, True))
    committed += [b"c0", b"p3"]
    for name, consume in CLIENTS.items():
        assert consume(broker.bootstrap, len(committed), "read_committed") == committed, name
