"""Produce, Fetch, ListOffsets and InitProducerId over raw sockets with our codec, against a real
broker process: acks, record validation errors, idempotence, long polling, size limits (KIP-74),
topic ids, LogAppendTime, offset lookups and retention."""
import os
import struct
import threading
import time
import zlib

import pytest

from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.fetch import FetchRequest
from kgroup.protocol.messages.init_producer_id import InitProducerIdRequest
from kgroup.protocol.messages.list_offsets import ListOffsetsRequest
from kgroup.protocol.messages.metadata import MetadataRequest
from kgroup.protocol.messages.produce import ProduceRequest
from kgroup.protocol.records import (Compression, Record, TimestampType, build_batch, crc32c, decode_records,
                                     iter_batches)
from tests.broker.support import response_of
from tests.harness import BrokerProcess, RawClient

CT = CreateTopicsRequest.CreatableTopic
TPD = ProduceRequest.TopicProduceData
PPD = TPD.PartitionProduceData
FT = FetchRequest.FetchTopic
FP = FT.FetchPartition
LT = ListOffsetsRequest.ListOffsetsTopic
LP = LT.ListOffsetsPartition


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("dp") / "data",
                      ["auto.create.topics.enable=false", "log.retention.check.interval.ms=200"]).start()
    yield b
    b.stop()


@pytest.fixture
def c(server):
    client = RawClient(server.port)
    yield client
    client.close()


_topics = iter(range(10**6))


def new_topic(c, partitions=1, **configs):
    name = f"t{next(_topics)}"
    cfg = [CT.CreatableTopicConfig(name=k.replace("_", "."), value=str(v)) for k, v in configs.items()]
    r = c.request(CreateTopicsRequest(topics=[CT(name=name, num_partitions=partitions, replication_factor=1,
                                                 configs=cfg)]), 7)
    assert r.topics[0].error_code == 0, r.topics[0]
    return name


def now_ms():
    return int(time.time() * 1000)


def batch(n=3, *, start=0, ts=None, **kw):
    ts = now_ms() if ts is None else ts
    return build_batch([Record(key=b"k%d" % i, value=b"v%d" % i, timestamp=ts + i) for i in range(start, start + n)],
                       **kw)


def produce_request(topic, records, acks=-1, partition=0):
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=5000,
                          topic_data=[TPD(name=topic, partition_data=[PPD(index=partition, records=records)])])


def produce(c, topic, records, acks=-1, partition=0, version=9):
    return c.request(produce_request(topic, records, acks, partition), version).responses[0].partition_responses[0]


def fetch_request(topic, offset=0, partition=0, max_wait_ms=0, min_bytes=1, max_bytes=50 * 2**20,
                  partition_max_bytes=2**20, topic_id=bytes(16), extra=()):
    parts = [FP(partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes)]
    parts += [FP(partition=p, fetch_offset=o, partition_max_bytes=partition_max_bytes) for p, o in extra]
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
                        topics=[FT(topic=topic, topic_id=topic_id, partitions=parts)])


def fetch(c, topic, offset=0, version=12, **kw):
    return c.request(fetch_request(topic, offset, **kw), version).responses[0].partitions[0]


def records_of(pd):
    return [(r.offset, r.key, r.value) for _, h, b in iter_batches(memoryview(pd.records or b""))
            for r in decode_records(b, h)]


def list_offset(c, topic, timestamp, version=7, partition=0):
    r = c.request(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        LT(name=topic, partitions=[LP(partition_index=partition, timestamp=timestamp)])]), version)
    return r.topics[0].partitions[0]


def topic_id(c, topic):
    return c.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12).topics[0].topic_id


def init_pid(c, version=4):
    r = c.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), version)
    assert r.error_code == 0
    return r.producer_id, r.producer_epoch


def end_offset(c, topic, partition=0):
    return list_offset(c, topic, -1, partition=partition).offset


# -- Produce: acks ----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [3, 5, 8, 9, 11])
def test_produce_acks_all_and_one(c, version):
    t = new_topic(c)
    r = produce(c, t, batch(3), acks=-1, version=version)
    assert (r.error_code, r.base_offset) == (0, 0)
    r = produce(c, t, batch(2), acks=1, version=version)
    assert (r.error_code, r.base_offset) == (0, 3)
    if version >= 5:
        assert r.log_start_offset == 0
    assert r.log_append_time_ms == -1  # CreateTime topic
    assert [(o, v) for o, _, v in records_of(fetch(c, t))] == [(0, b"v0"), (1, b"v1"), (2, b"v2"),
                                                               (3, b"v0"), (4, b"v1")]


def test_produce_acks_zero_sends_no_response_but_appends(c):
    t = new_topic(c)
    for _ in range(3):
        c.send(produce_request(t, batch(2), acks=0), 9)
    # the next frame on the connection answers the ListOffsets, not the acks=0 produces
    assert end_offset(c, t) == 6
    assert len(records_of(fetch(c, t))) == 6


@pytest.mark.parametrize("acks", [2, -2, 5])
def test_invalid_required_acks(c, acks):
    t = new_topic(c)
    r = produce(c, t, batch(1), acks=acks)
    assert r.error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert end_offset(c, t) == 0


# -- Produce: validation errors -----------------------------------------------------------------------

def test_message_too_large(c):
    t = new_topic(c, max_message_bytes=1000)
    big = build_batch([Record(value=os.urandom(2000), timestamp=now_ms())])
    r = produce(c, t, big)
    assert r.error_code == ErrorCode.MESSAGE_TOO_LARGE and r.base_offset == -1
    small = build_batch([Record(value=b"x" * 500, timestamp=now_ms())])
    assert produce(c, t, small).error_code == 0
    # the broker default (message.max.bytes 1048588) on a topic without an override
    t2 = new_topic(c)
    assert produce(c, t2, build_batch([Record(value=os.urandom(1100000), timestamp=now_ms())])).error_code \
        == ErrorCode.MESSAGE_TOO_LARGE
    assert end_offset(c, t2) == 0


def test_corrupt_message_on_bad_crc(c):
    t = new_topic(c)
    b = bytearray(batch(3))
    b[-2] ^= 0xFF  # a byte of the last record's value, covered by the CRC
    r = produce(c, t, bytes(b))
    assert r.error_code == ErrorCode.CORRUPT_MESSAGE
    assert end_offset(c, t) == 0


def legacy_message_set(magic):
    """One Kafka 0.10 (magic 1) or 0.8 (magic 0) message."""
    body = struct.pack(">bb", magic, 0) + (struct.pack(">q", now_ms()) if magic == 1 else b"")
    body += struct.pack(">i", -1) + struct.pack(">i", 3) + b"abc"
    crc = zlib.crc32(body)
    msg = struct.pack(">I", crc) + body
    return struct.pack(">qi", 0, len(msg)) + msg


@pytest.mark.parametrize("magic", [0, 1])
def test_invalid_record_for_old_magic(c, magic):
    t = new_topic(c)
    r = produce(c, t, legacy_message_set(magic), version=3)
    assert r.error_code == ErrorCode.INVALID_RECORD
    assert end_offset(c, t) == 0


def test_invalid_record_for_two_batches_in_one_partition(c):
    t = new_topic(c)
    r = produce(c, t, batch(2) + batch(2), version=9)
    assert r.error_code == ErrorCode.INVALID_RECORD
    assert "exactly one record batch" in r.error_message
    assert end_offset(c, t) == 0


def test_unknown_topic_and_partition(c):
    t = new_topic(c, partitions=2)
    assert produce(c, t, batch(1), partition=2).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert produce(c, t, batch(1), partition=-1).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert produce(c, "no-such-topic", batch(1)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert fetch(c, "no-such-topic").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert fetch(c, t, partition=7).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert list_offset(c, "no-such-topic", -1).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert list_offset(c, t, -1, partition=9).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# -- idempotent producers ---------------------------------------------------------------------------

def test_duplicate_idempotent_batch_gets_original_offset(c):
    t = new_topic(c)
    pid, epoch = init_pid(c)
    produce(c, t, batch(2))  # something before, so the original offset is not 0
    first = batch(3, producer_id=pid, producer_epoch=epoch, base_sequence=0)
    r = produce(c, t, first)
    assert (r.error_code, r.base_offset) == (0, 2)
    r = produce(c, t, batch(4, producer_id=pid, producer_epoch=epoch, base_sequence=3))
    assert (r.error_code, r.base_offset) == (0, 5)
    for _ in range(2):  # a retry of the first batch: acknowledged with its offset, not appended
        r = produce(c, t, first)
        assert (r.error_code, r.base_offset) == (0, 2)
    assert end_offset(c, t) == 9
    assert len(records_of(fetch(c, t))) == 9


def test_out_of_order_sequence_on_gap(c):
    t = new_topic(c)
    pid, epoch = init_pid(c)
    assert produce(c, t, batch(3, producer_id=pid, producer_epoch=epoch, base_sequence=0)).error_code == 0
    r = produce(c, t, batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=5))
    assert r.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert end_offset(c, t) == 3
    assert produce(c, t, batch(1, producer_id=pid, producer_epoch=epoch, base_sequence=3)).error_code == 0


def test_invalid_producer_epoch_for_old_epoch(c):
    t = new_topic(c)
    pid, _ = init_pid(c)
    assert produce(c, t, batch(2, producer_id=pid, producer_epoch=3, base_sequence=0)).error_code == 0
    r = produce(c, t, batch(2, producer_id=pid, producer_epoch=2, base_sequence=2))
    assert r.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert end_offset(c, t) == 2


def test_init_producer_id_transactional_served_by_the_transaction_coordinator(c):
    r = c.request(InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4)
    assert r.error_code == 0 and r.producer_epoch == 0
    again = c.request(InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (0, r.producer_id, 1)


def test_producer_ids_never_repeat_across_restarts(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    seen = []
    try:
        for restart in ("clean", "kill", "clean"):
            c = RawClient(b.port)
            for v in (0, 2, 4, 5):
                pid, epoch = init_pid(c, v)
                assert epoch == 0
                seen.append(pid)
            c.close()
            b.stop() if restart == "clean" else b.kill()
            b.start()
        c = RawClient(b.port)
        seen.append(init_pid(c)[0])
        c.close()
    finally:
        b.stop()
    assert len(set(seen)) == len(seen) and seen == sorted(seen)


# -- Fetch --------------------------------------------------------------------------------------------

def fetch_in_thread(port, request, version=12):
    out = {}

    def run():
        cl = RawClient(port)
        t0 = time.monotonic()
        out["resp"] = cl.request(request, version)
        out["elapsed"] = time.monotonic() - t0
        cl.close()
    th = threading.Thread(target=run)
    th.start()
    return th, out


def test_long_poll_answered_by_append(server, c):
    t = new_topic(c)
    th, out = fetch_in_thread(server.port, fetch_request(t, 0, max_wait_ms=10000))
    time.sleep(0.3)
    assert "resp" not in out  # parked
    produce(c, t, batch(2), acks=1)
    th.join(5)
    assert not th.is_alive()
    assert out["elapsed"] < 3  # well before max_wait
    pd = out["resp"].responses[0].partitions[0]
    assert pd.error_code == 0 and pd.high_watermark == 2
    assert [v for _, _, v in records_of(pd)] == [b"v0", b"v1"]


def test_long_poll_answered_at_max_wait(c):
    t = new_topic(c)
    produce(c, t, batch(1))
    t0 = time.monotonic()
    pd = fetch(c, t, 1, max_wait_ms=600)
    elapsed = time.monotonic() - t0
    assert 0.55 <= elapsed < 2.5
    assert pd.error_code == 0 and pd.high_watermark == 1 and not pd.records


def test_long_poll_other_partition_does_not_answer(server, c):
    t = new_topic(c, partitions=2)
    th, out = fetch_in_thread(server.port, fetch_request(t, 0, partition=0, max_wait_ms=700))
    time.sleep(0.2)
    produce(c, t, batch(1), partition=1)
    th.join(5)
    assert out["elapsed"] >= 0.6 and not out["resp"].responses[0].partitions[0].records


def test_min_bytes(server, c):
    t = new_topic(c)
    b1 = batch(1)
    produce(c, t, b1)
    # enough data at once
    t0 = time.monotonic()
    assert fetch(c, t, 0, min_bytes=len(b1), max_wait_ms=5000).records
    assert time.monotonic() - t0 < 1
    # not enough: parks through appends too small, answered by the one that crosses min_bytes
    th, out = fetch_in_thread(server.port, fetch_request(t, 0, min_bytes=3 * len(b1) + 1, max_wait_ms=10000))
    time.sleep(0.2)
    produce(c, t, batch(1))
    time.sleep(0.3)
    assert "resp" not in out
    produce(c, t, batch(1))
    produce(c, t, batch(1))
    th.join(5)
    assert out["elapsed"] < 3
    assert len(records_of(out["resp"].responses[0].partitions[0])) == 4


def test_partition_max_bytes_returns_at_least_one_batch(c):
    t = new_topic(c)
    big = build_batch([Record(value=os.urandom(5000), timestamp=now_ms())])
    produce(c, t, big)
    produce(c, t, batch(2))
    pd = fetch(c, t, 0, partition_max_bytes=100)  # KIP-74: the first batch whole, alone
    assert len(pd.records) == len(big) and bytes(pd.records)[16:] == big[16:]  # as produced
    pd = fetch(c, t, 0, partition_max_bytes=len(big) + 10)  # room for the first only
    assert len(records_of(pd)) == 1
    pd = fetch(c, t, 0, max_bytes=100, partition_max_bytes=10**6)
    assert len(records_of(pd)) == 1
    assert len(records_of(fetch(c, t, 0))) == 3


def test_max_bytes_spans_partitions(c):
    t = new_topic(c, partitions=2)
    big = build_batch([Record(value=os.urandom(5000), timestamp=now_ms())])
    produce(c, t, big, partition=0)
    produce(c, t, big, partition=1)
    r = c.request(fetch_request(t, 0, partition=0, max_bytes=6000, extra=[(1, 0)]), 12)
    p0, p1 = r.responses[0].partitions
    assert len(p0.records) == len(big)
    assert p1.error_code == 0 and not p1.records and p1.high_watermark == 1  # the budget was spent
    r = c.request(fetch_request(t, 0, partition=0, max_bytes=100, extra=[(1, 0)]), 12)
    p0, p1 = r.responses[0].partitions
    assert len(p0.records) == len(big) and not p1.records  # only the first partition may exceed


def test_offset_out_of_range(c):
    t = new_topic(c)
    produce(c, t, batch(3))
    assert fetch(c, t, 3).error_code == 0  # the log end is a valid position
    for offset in (4, 100, -1):
        pd = fetch(c, t, offset)
        assert pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and pd.high_watermark == 3
        assert not pd.records


def test_fetch_mid_batch_offset_returns_whole_batch(c):
    t = new_topic(c)
    produce(c, t, batch(5))
    assert [o for o, _, _ in records_of(fetch(c, t, 3))] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_fetch_old_versions(c, version):
    t = new_topic(c)
    produce(c, t, batch(3))
    pd = fetch(c, t, 0, version=version)
    assert pd.error_code == 0 and len(records_of(pd)) == 3


@pytest.mark.parametrize("version", [13, 15, 16, 17])
def test_fetch_topic_ids(c, version):
    t = new_topic(c)
    produce(c, t, batch(3))
    tid = topic_id(c, t)
    r = c.request(fetch_request("", 0, topic_id=tid), version)
    assert r.responses[0].topic_id == tid
    pd = r.responses[0].partitions[0]
    assert pd.error_code == 0 and len(records_of(pd)) == 3
    r = c.request(fetch_request("", 0, topic_id=b"\x07" * 16), version)
    assert r.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


# -- timestamps and ListOffsets ------------------------------------------------------------------------

def test_log_append_time_topic(c):
    t = new_topic(c, message_timestamp_type="LogAppendTime")
    old = now_ms() - 3_600_000
    before = now_ms()
    r = produce(c, t, batch(3, ts=old), version=9)
    after = now_ms()
    assert r.error_code == 0 and before <= r.log_append_time_ms <= after
    (pos, header, b), = iter_batches(memoryview(fetch(c, t).records))
    assert header.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert header.max_timestamp == r.log_append_time_ms
    assert [rec.timestamp for rec in decode_records(b, header)] == [r.log_append_time_ms] * 3
    assert crc32c(b[21:]) == header.crc  # the broker rewrote the header and its CRC
    # compressed batches too
    r2 = produce(c, t, batch(2, ts=old, compression=Compression.GZIP))
    assert r2.error_code == 0 and r2.log_append_time_ms >= r.log_append_time_ms
    hs = [h for _, h, _ in iter_batches(memoryview(fetch(c, t, 3).records))]
    assert hs[0].timestamp_type == TimestampType.LOG_APPEND_TIME and hs[0].max_timestamp == r2.log_append_time_ms


def test_list_offsets(c):
    t = new_topic(c)
    base = now_ms() - 10_000
    produce(c, t, build_batch([Record(value=b"a", timestamp=base), Record(value=b"b", timestamp=base + 50),
                               Record(value=b"c", timestamp=base + 20)]))
    produce(c, t, build_batch([Record(value=b"d", timestamp=base + 100), Record(value=b"e", timestamp=base + 30)]))
    assert (list_offset(c, t, -2).offset, list_offset(c, t, -1).offset) == (0, 5)
    m = list_offset(c, t, -3, version=7)
    assert (m.offset, m.timestamp) == (3, base + 100)
    f = list_offset(c, t, base + 40)
    assert (f.offset, f.timestamp) == (1, base + 50)
    f = list_offset(c, t, base + 60)
    assert (f.offset, f.timestamp) == (3, base + 100)
    f = list_offset(c, t, base + 101)
    assert (f.error_code, f.offset, f.timestamp) == (0, -1, -1)
    for v in (1, 4, 8, 10, 11):
        assert list_offset(c, t, -1, version=v).offset == 5
    assert list_offset(c, t, -4, version=8).offset == 0


def test_retention_deletes_old_segments(server, c):
    t = new_topic(c, segment_bytes=2000, retention_bytes=4000)
    payload = os.urandom(700)
    for _i in range(20):
        produce(c, t, build_batch([Record(value=payload, timestamp=now_ms())]))
    seg_dir = os.path.join(server.data_dir, f"{t}-0")

    def retained():
        """A retention pass ran after the last produce: a pass deletes the oldest segments while
        what is left without the oldest still holds retention.bytes, so it ends when it doesn't
        (an earlier pass, run while the produces were going on, leaves more behind)."""
        try:
            sizes = [os.path.getsize(os.path.join(seg_dir, f))
                     for f in sorted(os.listdir(seg_dir)) if f.endswith(".log")]
        except FileNotFoundError:       # a segment deleted while listing
            return False
        return len(sizes) > 1 and sum(sizes) - sizes[0] < 4000
    deadline = time.monotonic() + 10
    while not retained() and time.monotonic() < deadline:
        time.sleep(0.05)
    start = list_offset(c, t, -2).offset
    assert 0 < start < 20
    assert end_offset(c, t) == 20
    pd = fetch(c, t, 0)
    assert pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and pd.log_start_offset == start
    got = []
    while len(got) < 20 - start:  # one segment per fetch, as in Kafka
        pd = fetch(c, t, start + len(got))
        assert pd.error_code == 0 and pd.log_start_offset == start and pd.records
        got += [o for o, _, _ in records_of(pd)]
    assert got == list(range(start, 20))
    logs = sorted(f for f in os.listdir(seg_dir) if f.endswith(".log"))
    assert int(logs[0][:-4]) == start
    assert sum(os.path.getsize(os.path.join(seg_dir, f)) for f in logs) <= 4000 + 2000
    assert "due to retention size breach" in server.log_text()


# -- regressions: incompatibilities found with real clients and Kafka ----------------------------------

def with_codec(batch_bytes, codec):
    """The same batch marked as compressed with ``codec`` (its bytes left as they are), CRC fixed."""
    b = bytearray(batch_bytes)
    attrs = (struct.unpack_from(">h", b, 21)[0] & ~7) | codec
    struct.pack_into(">h", b, 21, attrs)
    struct.pack_into(">I", b, 17, crc32c(memoryview(b)[21:]))
    return bytes(b)


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_fetch_error_partitions_carry_empty_not_null_records(c, version):
    """librdkafka (confluent-kafka, kcat) rejects a whole Fetch response holding a null record set
    ("invalid MessageSetSize -1"), so an OFFSET_OUT_OF_RANGE never reached its offset reset.
    Kafka sends MemoryRecords.EMPTY with every error."""
    t = new_topic(c)
    produce(c, t, batch(1))
    tid = topic_id(c, t) if version >= 13 else bytes(16)
    pd = fetch(c, t, 99, version=version, topic_id=tid)
    assert pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert pd.records is not None and len(pd.records) == 0
    pd = fetch(c, "no-such-topic", 0, version=version, topic_id=b"\x05" * 16)
    assert pd.error_code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID)
    assert pd.records is not None and len(pd.records) == 0


def test_produce_never_creates_topics(broker):
    """Kafka creates topics from Metadata only; a Produce to an unknown topic is refused even with
    auto.create.topics.enable=true (the default, as in this broker fixture)."""
    c = RawClient(broker.port)
    assert produce(c, "not-created", batch(1)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    md = c.request(MetadataRequest(topics=None), 12)
    assert "not-created" not in [t.name for t in md.topics]
    c.close()


def test_produce_acks_zero_error_closes_connection(c, server):
    """Kafka closes the connection when an acks=0 produce fails (the producer has no other way to
    learn it), and keeps it open when it succeeds."""
    t = new_topic(c)
    c.send(produce_request(t, batch(1), acks=0), 9)
    assert end_offset(c, t) == 1  # still open and answering
    c.send(produce_request(t, batch(1), acks=0, partition=5), 9)
    assert c.is_closed_by_peer()
    c2 = RawClient(server.port)
    c2.send(produce_request(t, batch(2) + batch(2), acks=0), 9)
    assert c2.is_closed_by_peer()
    c2.close()


@pytest.mark.parametrize("version", [3, 6, 7, 9])
def test_zstd_batches_need_produce_v7(c, version):
    """ProduceRequest.validateRecords: ZStandard needs Produce v7+ (UNSUPPORTED_COMPRESSION_TYPE)."""
    t = new_topic(c)
    r = produce(c, t, with_codec(batch(2), Compression.ZSTD), version=version)
    assert r.error_code == (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE if version < 7 else 0)


def test_list_offsets_inside_compressed_batches(c, server):
    """A timestamp lookup landing inside an lz4/zstd/snappy batch decompresses it (the codecs are
    dependencies) and answers the exact record, as Kafka does."""
    t = new_topic(c)
    base = now_ms() - 10_000
    produce(c, t, build_batch([Record(value=b"a", timestamp=base)]))
    produce(c, t, build_batch([Record(value=b"%d" % i, timestamp=base + 10 * i) for i in range(1, 6)],
                              compression=Compression.LZ4))
    produce(c, t, build_batch([Record(value=b"z%d" % i, timestamp=base + 100 + i) for i in range(3)],
                              compression=Compression.SNAPPY))
    produce(c, t, build_batch([Record(value=b"y", timestamp=base + 200)], compression=Compression.ZSTD))
    r = list_offset(c, t, base + 25)
    assert (r.error_code, r.offset, r.timestamp) == (0, 3, base + 30)
    r = list_offset(c, t, base + 101)
    assert (r.error_code, r.offset, r.timestamp) == (0, 7, base + 101)
    r = list_offset(c, t, base + 150)
    assert (r.error_code, r.offset, r.timestamp) == (0, 9, base + 200)
    assert end_offset(c, t) == 10


def test_duplicate_at_acks_all_waits_for_the_original_to_be_flushed(tmp_path):
    """A retried idempotent batch answered at acks=-1 is on disk: when the original was written
    with acks=1 (or still awaits its group commit), the duplicate's answer waits for the fsync."""
    import asyncio
    from kgroup.broker.broker import Broker
    from kgroup.broker.config import BrokerConfig
    from kgroup.broker.handlers import produce as produce_handler
    from kgroup.protocol.messages.produce import ProduceResponse
    broker = Broker(BrokerConfig.load(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"]))
    try:
        broker.create_topic("d", 1, 1, {})
        plog = broker.data_path.log("d", 0)
        b = batch(2, producer_id=7, producer_epoch=0, base_sequence=0)

        async def run():
            r = produce_handler.handle(broker, None, produce_request("d", b, acks=1), 9)
            assert r.responses[0].partition_responses[0].error_code == 0
            assert (plog.log_end_offset, plog.recovery_point) == (2, 0)  # written, not fsynced
            pending = produce_handler.handle(broker, None, produce_request("d", b, acks=-1), 9)
            assert not isinstance(pending, ProduceResponse)
            r = await response_of(pending)
            pr = r.responses[0].partition_responses[0]
            assert (pr.error_code, pr.base_offset) == (0, 0)
            assert (plog.log_end_offset, plog.recovery_point) == (2, 2)
        asyncio.run(run())
    finally:
        broker.data_path.close()
