"""Real read_committed consumers (confluent-kafka, kafka-python, aiokafka, ours) on a partition
holding committed, aborted and still-open transactions: each sees exactly the non-transactional
and committed records, stops at the last stable offset while a transaction is open, and goes on
once it commits. A read_uncommitted consumer sees the aborted records too (the test can tell).

The transactions are confluent-kafka transactional producers interleaved on one partition; their
COMMIT/ABORT markers come from the broker's transaction coordinator (EndTxn)."""
import asyncio
import time

import pytest

from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from tests.harness import RawClient

pytestmark = pytest.mark.interop

TOPIC = "rc"
CT = CreateTopicsRequest.CreatableTopic


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
    from confluent_kafka import Producer
    c = RawClient(broker.port)
    r = c.request(CreateTopicsRequest(topics=[CT(name=TOPIC, num_partitions=1, replication_factor=1)]), 7)
    assert r.topics[0].error_code == 0
    c.close()
    bs = broker.bootstrap
    plain = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    a, b, cc = (Producer({"bootstrap.servers": bs, "transactional.id": f"rc-{n}"}) for n in "abc")
    for p in (a, b, cc):
        p.init_transactions(10)
        p.begin_transaction()

    def send(p, *values):
        for v in values:
            p.produce(TOPIC, value=v, key=b"k", partition=0)
        p.flush(10)

    send(plain, b"p0", b"p1")
    send(a, b"a0", b"a1")
    send(b, b"b0")
    send(a, b"a2")
    send(plain, b"p2")
    a.abort_transaction(10)
    b.commit_transaction(10)
    send(cc, b"c0")              # open: the LSO stops here
    send(plain, b"p3")

    committed = [b"p0", b"p1", b"b0", b"p2"]
    everything = [b"p0", b"p1", b"a0", b"a1", b"b0", b"a2", b"p2", b"c0", b"p3"]
    assert consume_kafka_python(bs, len(everything), "read_uncommitted") == everything
    for name, consume in CLIENTS.items():
        assert consume(bs, len(committed), "read_committed") == committed, name

    cc.commit_transaction(10)
    committed += [b"c0", b"p3"]
    for name, consume in CLIENTS.items():
        assert consume(bs, len(committed), "read_committed") == committed, name
