"""Real clients on kgroup's data path: kafka-python (its default idempotent producer), aiokafka,
confluent-kafka (idempotent and not) and kcat each produce 100k keyed messages to a 4-partition
topic, with and without gzip, and consume them back with assign().

Every run checks: nothing missing, nothing duplicated, offsets 0..n-1 contiguous per partition,
the production order kept within each partition, one partition per key, and (where the client
reports it) each message found at exactly the partition and offset its produce response gave.
None of these may skip: kcat comes from scripts/install-test-deps.sh.
"""
import asyncio
import shutil
import subprocess
import time

import pytest

from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from tests.harness import RawClient

pytestmark = pytest.mark.interop

N = 100_000
PARTITIONS = 4
TIMEOUT = 90.0
CT = CreateTopicsRequest.CreatableTopic


def key(i: int) -> bytes:
    return b"k%d" % (i % 997)


def value(i: int) -> bytes:
    return b"%d" % i


def create_topic(broker, name, partitions=PARTITIONS):
    c = RawClient(broker.port)
    try:
        r = c.request(CreateTopicsRequest(topics=[CT(name=name, num_partitions=partitions, replication_factor=1,
                                                     configs=[])]), 7)
        assert r.topics[0].error_code == 0, r.topics[0]
    finally:
        c.close()


def check(consumed, produced=None, n=N):
    """consumed: [(partition, offset, key, value)] in consumption order; produced: value index ->
    (partition, offset) as the producer's delivery reports gave them, or None."""
    values = sorted(int(v) for _, _, _, v in consumed)
    assert len(values) == n, f"consumed {len(values)} of {n}"
    assert values == list(range(n)), "missing or duplicated messages"
    per_partition: dict[int, list] = {}
    key_partition: dict[bytes, int] = {}
    for p, o, k, v in consumed:
        per_partition.setdefault(p, []).append((o, int(v)))
        assert key_partition.setdefault(k, p) == p, f"key {k!r} in partitions {key_partition[k]} and {p}"
        assert k == key(int(v))
    assert len(per_partition) == PARTITIONS, sorted(per_partition)
    for p, rows in per_partition.items():
        offsets = [o for o, _ in rows]
        assert offsets == list(range(len(rows))), f"partition {p}: offsets not 0..n-1 in order"
        seq = [i for _, i in rows]
        assert seq == sorted(seq), f"partition {p}: production order not kept"
    if produced is not None:
        assert len(produced) == n
        for p, o, _, v in consumed:
            assert produced[int(v)] == (p, o), f"message {int(v)} acknowledged at {produced[int(v)]}, found at {(p, o)}"


# -- consumers (assign all partitions from the beginning) ---------------------------------------------

def consume_kafka_python(bootstrap, topic, n=N):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                      max_partition_fetch_bytes=4 * 1024 * 1024)
    try:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        c.seek_to_beginning()
        got, deadline = [], time.monotonic() + TIMEOUT
        while len(got) < n and time.monotonic() < deadline:
            for msgs in c.poll(500, max_records=50_000).values():
                got.extend((m.partition, m.offset, m.key, m.value) for m in msgs)
        return got
    finally:
        c.close()


async def _consume_aiokafka(bootstrap, topic, n):
    from aiokafka import AIOKafkaConsumer, TopicPartition
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    await c.start()
    try:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        await c.seek_to_beginning()
        got, deadline = [], time.monotonic() + TIMEOUT
        while len(got) < n and time.monotonic() < deadline:
            for msgs in (await c.getmany(timeout_ms=500, max_records=50_000)).values():
                got.extend((m.partition, m.offset, m.key, m.value) for m in msgs)
        return got
    finally:
        await c.stop()


def consume_confluent(bootstrap, topic, n=N):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dp-check", "enable.auto.commit": False,
                  "enable.partition.eof": False})
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        got, deadline = [], time.monotonic() + TIMEOUT
        while len(got) < n and time.monotonic() < deadline:
            for m in c.consume(10_000, 0.5):
                assert m.error() is None, m.error()
                got.append((m.partition(), m.offset(), m.key(), m.value()))
        return got
    finally:
        c.close()


# -- producers -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("compression", [None, "gzip"])
def test_kafka_python_idempotent(broker, compression):
    from kafka import KafkaProducer
    create_topic(broker, "kp")
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=compression, linger_ms=5,
                      batch_size=64 * 1024)
    assert p.config["enable_idempotence"] and p.config["acks"] == -1  # the default producer
    try:
        futures = [p.send("kp", key=key(i), value=value(i)) for i in range(N)]
        p.flush(TIMEOUT)
        produced = [(md.partition, md.offset) for md in (f.get(0) for f in futures)]
    finally:
        p.close()
    check(consume_kafka_python(broker.bootstrap, "kp"), produced)
    assert "ERROR" not in broker.log_text()


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_aiokafka(broker, compression):
    from aiokafka import AIOKafkaProducer
    create_topic(broker, "aio")

    async def run():
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=compression, linger_ms=5,
                             max_batch_size=64 * 1024)
        await p.start()
        try:
            futures = [await p.send("aio", key=key(i), value=value(i)) for i in range(N)]
            mds = await asyncio.gather(*futures)
        finally:
            await p.stop()
        return [(md.partition, md.offset) for md in mds], await _consume_aiokafka(broker.bootstrap, "aio", N)

    produced, consumed = asyncio.run(run())
    check(consumed, produced)
    assert "ERROR" not in broker.log_text()


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_confluent_kafka(broker, compression, idempotent):
    from confluent_kafka import Producer
    create_topic(broker, "ck")
    produced, errors = [None] * N, []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            produced[int(msg.value())] = (msg.partition(), msg.offset())

    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": compression,
                  "enable.idempotence": idempotent, "acks": "all", "linger.ms": 5})
    for i in range(N):
        while True:
            try:
                p.produce("ck", value(i), key(i), on_delivery=report)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(TIMEOUT) == 0
    assert errors == []
    check(consume_confluent(broker.bootstrap, "ck"), produced)
    assert "ERROR" not in broker.log_text()


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_kcat(broker, compression):
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed (scripts/install-test-deps.sh installs it)"
    create_topic(broker, "kc")
    lines = b"".join(key(i) + b"\t" + value(i) + b"\n" for i in range(N))
    subprocess.run([kcat, "-P", "-b", broker.bootstrap, "-t", "kc", "-K", "\t", "-z", compression,
                    "-X", "linger.ms=5"], input=lines, check=True, timeout=TIMEOUT)
    out = subprocess.run([kcat, "-C", "-b", broker.bootstrap, "-t", "kc", "-o", "beginning", "-e", "-q",
                          "-f", "%p %o %k %s\n"], capture_output=True, check=True, timeout=TIMEOUT).stdout
    consumed = [(int(p), int(o), k, v) for p, o, k, v in (line.split(b" ") for line in out.splitlines())]
    check(consumed)
    # and the same messages through another client's consumer
    check(consume_confluent(broker.bootstrap, "kc"))


# -- regressions: incompatibilities these clients found ---------------------------------------------

def _produce_ten(bootstrap, topic):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        p.produce(topic, value=value(i), partition=0)
    assert p.flush(10) == 0


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "aiokafka"])
def test_consumer_resets_an_out_of_range_offset(broker, client):
    """OFFSET_OUT_OF_RANGE came with a null record set, which librdkafka rejects as a protocol parse
    failure ("invalid MessageSetSize -1") for the whole response: confluent-kafka never reset its
    offset and consumed nothing. Every client must reset (auto.offset.reset=earliest) and read all."""
    create_topic(broker, "oor", 1)
    _produce_ten(broker.bootstrap, "oor")
    got = []
    deadline = time.monotonic() + 20
    if client == "confluent-kafka":
        from confluent_kafka import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "oor", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.assign([TopicPartition("oor", 0, 1000)])
        while len(got) < 10 and time.monotonic() < deadline:
            got += [m.value() for m in c.consume(10, 0.2) if m.error() is None]
        c.close()
    elif client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition
        c = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
        tp = TopicPartition("oor", 0)
        c.assign([tp])
        c.seek(tp, 1000)
        while len(got) < 10 and time.monotonic() < deadline:
            got += [m.value for msgs in c.poll(200).values() for m in msgs]
        c.close()
    else:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def run():
            c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                 enable_auto_commit=False)
            await c.start()
            tp = TopicPartition("oor", 0)
            c.assign([tp])
            c.seek(tp, 1000)
            while len(got) < 10 and time.monotonic() < deadline:
                got.extend(m.value for msgs in (await c.getmany(timeout_ms=200)).values() for m in msgs)
            await c.stop()
        asyncio.run(run())
    assert got == [value(i) for i in range(10)]


@pytest.mark.parametrize("codec", ["lz4", "zstd", "snappy"])
def test_confluent_kafka_offsets_for_times_on_compressed_topics(broker, codec):
    """confluent-kafka's offsets_for_times on an lz4/zstd/snappy topic: the lookup decompresses the
    batch it lands in (every codec is a dependency) and answers, as Kafka does."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    create_topic(broker, "cmp", 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 20})
    t0 = int(time.time() * 1000) - 60_000
    for i in range(300):
        p.produce("cmp", value=value(i), partition=0, timestamp=t0 + i)
        if i in (99, 199):
            p.flush(10)  # three batches
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "oft"})
    try:
        (r,) = c.offsets_for_times([TopicPartition("cmp", 0, t0 + 150)], timeout=10)
        assert r.error is None and r.offset == 150
        (r,) = c.offsets_for_times([TopicPartition("cmp", 0, t0 + 10_000)], timeout=10)
        assert r.error is None and r.offset == -1  # later than every record: no offset
        c.assign([TopicPartition("cmp", 0, 0)])
        got, deadline = [], time.monotonic() + 20
        while len(got) < 300 and time.monotonic() < deadline:
            got += [int(m.value()) for m in c.consume(1000, 0.2) if m.error() is None]
        assert got == list(range(300))
    finally:
        c.close()
