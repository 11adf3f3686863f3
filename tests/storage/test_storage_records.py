"""RecordBatch v2 codec: layout, CRC, validation errors, patches, building and decoding."""
from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgroup.protocol import records as R
from kgroup.protocol.records import (
    BatchHeader,
    Compression,
    CorruptRecordError,
    InvalidRecordError,
    Record,
    TimestampType,
    build_batch,
    decode_records,
    iter_batches,
    read_batch_header,
    validate_batch,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python's imports


def test_header_layout_is_kafkas():
    assert R.BATCH_HEADER.size == 61
    b = build_batch([Record(b"k", b"v", (), 5)], base_offset=0x0102030405060708, producer_id=9,
                    producer_epoch=3, base_sequence=7, partition_leader_epoch=4)
    assert struct.unpack_from(">q", b, 0)[0] == 0x0102030405060708
    assert struct.unpack_from(">i", b, 8)[0] == len(b) - 12
    assert struct.unpack_from(">i", b, 12)[0] == 4
    assert b[16] == 2
    assert struct.unpack_from(">I", b, 17)[0] == R.crc32c(b[21:])
    assert struct.unpack_from(">q", b, 43)[0] == 9
    assert struct.unpack_from(">i", b, 57)[0] == 1


def test_crc32c_check_value_and_c_extension():
    for crc in (R.crc32c, R.crc32c_crcmod):
        assert crc(b"123456789") == 0xE3069283
        assert crc(memoryview(bytearray(b"xx123456789"))[2:]) == 0xE3069283
    assert R.crcmod_uses_c_extension() is True


def test_the_accelerated_crc32c_is_in_use():
    # A fresh install has the crc32c package (pyproject), so the hot path must not be on crcmod.
    assert R.CRC32C_IMPLEMENTATION.startswith("crc32c"), R.CRC32C_IMPLEMENTATION
    assert R.crc32c is not R.crc32c_crcmod


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=5000), st.integers(0, 64), st.sampled_from([bytes, bytearray, memoryview]))
def test_accelerated_crc32c_equals_crcmod(data, skip, kind):
    view = kind(data)[min(skip, len(data)):]
    assert R.crc32c(view) == R.crc32c_crcmod(view)


def test_kgroup_crc32c_crcmod_forces_the_reference():
    out = subprocess.run([sys.executable, "-c", "from kgroup.protocol import records as R; "
                          "print(R.CRC32C_IMPLEMENTATION, R.crc32c is R.crc32c_crcmod)"],
                         env={**os.environ, "KGROUP_CRC32C": "crcmod"},
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["crcmod", "True"]


def test_round_trip_with_headers_nulls_and_absolute_offsets():
    recs = [Record(b"a", b"1", [("h1", b"x"), ("h2", None)], 1000),
            Record(None, None, (), 990),
            Record(b"c", b"", (), 1200)]
    b = build_batch(recs, base_offset=40, producer_id=1, producer_epoch=0, base_sequence=5)
    h = read_batch_header(b)
    assert (h.base_offset, h.last_offset, h.records_count) == (40, 42, 3)
    assert (h.base_timestamp, h.max_timestamp) == (1000, 1200)
    assert h.last_sequence == 7 and h.has_producer_id and not h.is_transactional
    out = decode_records(b)
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in out] == [
        (40, 1000, b"a", b"1", [("h1", b"x"), ("h2", None)]),
        (41, 990, None, None, []),
        (42, 1200, b"c", b"", []),
    ]
    summary = validate_batch(h, b, check_records=True)
    assert summary == R.RecordsSummary(3, 990, 1200, True)


def test_interop_with_kafka_python_both_ways():
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

    for codec in (Compression.NONE, Compression.GZIP):
        builder = DefaultRecordBatchBuilder(2, int(codec), False, 77, 2, 10, 1 << 20)
        for i in range(20):
            builder.append(i, 5000 + i, b"key%d" % i, b"value" * 30, [("h", b"%d" % i)])
        raw = bytes(builder.build())
        h = read_batch_header(raw)
        validate_batch(h, raw, check_records=True)
        got = decode_records(raw)
        assert [(r.offset, r.timestamp, r.key) for r in got] == [(i, 5000 + i, b"key%d" % i) for i in range(20)]
        assert got[3].headers == [("h", b"3")]

        ours = build_batch([Record(b"k%d" % i, b"v" * 100, [("x", b"y")], 7000 + i) for i in range(10)],
                           base_offset=3, compression=codec, producer_id=5, producer_epoch=1, base_sequence=0)
        theirs = DefaultRecordBatch(ours)
        assert theirs.validate_crc()
        assert [(r.offset, r.timestamp, r.key, r.headers) for r in theirs] == [
            (3 + i, 7000 + i, b"k%d" % i, [("x", b"y")]) for i in range(10)]


def test_corrupt_crc_is_corrupt_message():
    b = bytearray(build_batch([Record(b"k", b"v", (), 1)]))
    b[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError) as e:
        validate_batch(read_batch_header(b), b)
    assert e.value.error_code == 2 and e.value.error_name == "CORRUPT_MESSAGE"


def _recrc(b: bytearray) -> bytearray:
    struct.pack_into(">I", b, 17, R.crc32c(bytes(b[21:])))
    return b


def test_count_mismatches_are_invalid_record():
    b = bytearray(build_batch([Record(b"k", b"v", (), 1)] * 3))
    struct.pack_into(">i", b, 57, 2)  # recordsCount != lastOffsetDelta + 1
    _recrc(b)
    with pytest.raises(InvalidRecordError) as e:
        validate_batch(read_batch_header(b), b, check_records=True)
    assert e.value.error_code == 87
    # Header consistent (count 2, delta 1) but three records present.
    struct.pack_into(">i", b, 23, 1)
    _recrc(b)
    with pytest.raises(InvalidRecordError, match="2 records but 3"):
        validate_batch(read_batch_header(b), b, check_records=True)
    validate_batch(read_batch_header(b), b)  # the CRC alone is fine


def test_iter_batches_stops_at_partial_tail_and_checks_magic():
    one, two = build_batch([Record(b"a", b"1", (), 1)]), build_batch([Record(b"b", b"2", (), 2)], base_offset=1)
    buf = one + two + two[:30]
    got = [(pos, h.base_offset) for pos, h, _ in iter_batches(buf)]
    assert got == [(0, 0), (len(one), 1)]
    v1 = bytearray(one)
    v1[16] = 1
    with pytest.raises(InvalidRecordError):
        list(iter_batches(v1))
    v1[16] = 7
    with pytest.raises(CorruptRecordError):
        list(iter_batches(v1))
    short = bytearray(one)
    struct.pack_into(">i", short, 8, 5)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(short))


def test_patches_keep_the_batch_valid():
    b = bytearray(build_batch([Record(b"k", b"v", (), 100), Record(b"k", b"w", (), 150)]))
    R.patch_base_offset(b, 1234)
    R.set_partition_leader_epoch(b, 9)
    h = read_batch_header(b)
    validate_batch(h, b)
    assert h.base_offset == 1234 and h.partition_leader_epoch == 9
    assert R.set_max_timestamp(b, TimestampType.CREATE_TIME, 150) is False  # already so
    assert R.set_max_timestamp(b, TimestampType.LOG_APPEND_TIME, 99999) is True   # a LogAppendTime topic
    h = read_batch_header(b)
    validate_batch(h, b)
    assert h.timestamp_type == TimestampType.LOG_APPEND_TIME and h.max_timestamp == 99999
    assert [r.timestamp for r in decode_records(b)] == [99999, 99999]


def test_sequence_wrap_around():
    assert R.increment_sequence(R.INT32_MAX, 1) == 0
    assert R.increment_sequence(R.INT32_MAX - 1, 3) == 1
    assert R.decrement_sequence(1, 3) == R.INT32_MAX - 1
    h = read_batch_header(build_batch([Record(b"k", b"v", (), 1)] * 3, producer_id=1, producer_epoch=0,
                                      base_sequence=R.INT32_MAX - 1))
    assert h.last_sequence == 0


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD])
def test_every_codec_round_trips_from_a_plain_install(codec):
    """The codec packages are dependencies, not optional imports: every batch Kafka can write
    decodes (gzip, xerial-framed snappy, lz4 frames, zstd)."""
    records = [Record(b"k%d" % i, b"v%d" % i * 50, (), 1000 + i) for i in range(200)]
    b = build_batch(records, compression=codec)
    assert read_batch_header(b).compression == codec
    assert [(r.key, r.value) for r in decode_records(b)] == [(r.key, r.value) for r in records]
    assert len(b) < sum(len(r.value) for r in records)    # it really compressed


def test_codec_packages_are_declared_dependencies():
    import tomllib
    from tests.conftest import ROOT
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {d.split(">")[0].split("=")[0].split("<")[0].strip().lower() for d in deps}
    assert {"cramjam", "lz4", "zstandard"} <= names


def test_snappy_reads_raw_and_xerial_framed_blocks():
    import cramjam
    data = b"snappy " * 10_000
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert R.decompress(Compression.SNAPPY, raw) == data               # librdkafka writes raw snappy
    framed = R.compress(Compression.SNAPPY, data)                      # the Java client xerial frames
    assert framed[:8] == R._XERIAL_MAGIC and R.decompress(Compression.SNAPPY, framed) == data


def test_control_marker_and_empty_batch_and_delete_horizon():
    marker = R.end_transaction_marker_record(R.CONTROL_COMMIT, 7, 55)
    b = build_batch([marker], is_control=True, producer_id=3, producer_epoch=1, is_transactional=True)
    h = read_batch_header(b)
    assert h.is_control and h.is_transactional
    assert R.read_end_transaction_marker(decode_records(b)[0]) == (R.CONTROL_COMMIT, 7)

    empty = build_batch([], base_offset=10, last_offset_delta=4, max_timestamp=77, producer_id=2,
                        producer_epoch=0, base_sequence=0)
    h = read_batch_header(empty)
    assert (h.records_count, h.last_offset, h.max_timestamp, h.last_sequence) == (0, 14, 77, 4)
    validate_batch(h, empty)
    assert decode_records(empty) == []

    tomb = build_batch([Record(b"k", None, (), 500)], delete_horizon_ms=9000)
    h = read_batch_header(tomb)
    assert h.has_delete_horizon and h.delete_horizon_ms == 9000
    assert decode_records(tomb)[0].timestamp == 500


def test_malformed_records_are_invalid_record():
    b = bytearray(build_batch([Record(b"key", b"value", (), 1)]))
    b[61] = 0x7E  # record length varint: 63 bytes, more than the batch holds
    _recrc(b)
    with pytest.raises(InvalidRecordError):
        decode_records(b)
    with pytest.raises(InvalidRecordError):
        validate_batch(read_batch_header(b), b, check_records=True)


_headers = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=3)
_record = st.builds(Record, key=st.none() | st.binary(max_size=40), value=st.none() | st.binary(max_size=300),
                    headers=_headers, timestamp=st.integers(-1, 2**50))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=st.lists(_record, min_size=1, max_size=12), base=st.integers(0, 2**40),
       codec=st.sampled_from([Compression.NONE, Compression.GZIP]), pid=st.integers(-1, 2**40),
       seq=st.integers(0, R.INT32_MAX), txn=st.booleans(), lat=st.booleans())
def test_build_decode_round_trip(recs, base, codec, pid, seq, txn, lat):
    b = build_batch(recs, base_offset=base, compression=codec, producer_id=pid, producer_epoch=0,
                    base_sequence=seq, is_transactional=txn,
                    timestamp_type=TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
                    max_timestamp=123 if lat else None)
    h = read_batch_header(b)
    assert isinstance(h, BatchHeader) and h.size == len(b) and h.compression == codec
    validate_batch(h, b, check_records=True)
    out = decode_records(b)
    assert [r.offset for r in out] == list(range(base, base + len(recs)))
    assert [(r.key, r.value, [tuple(x) for x in r.headers]) for r in out] == \
        [(r.key, r.value, [tuple(x) for x in r.headers]) for r in recs]
    if lat:
        assert all(r.timestamp == 123 for r in out)
    else:
        assert [r.timestamp for r in out] == [r.timestamp for r in recs]
        assert h.max_timestamp == max(r.timestamp for r in recs)


_sizes = st.sampled_from([0, 1, 63, 64, 127, 128, 1023, 1024, 3000])
_plain_record = st.builds(Record, key=st.none() | _sizes.map(lambda n: b"k" * n),
                          value=st.none() | _sizes.map(lambda n: b"v" * n),
                          timestamp=st.integers(1_700_000_000_000 - 70, 1_700_000_000_000 + 1100))


@settings(max_examples=80, deadline=None)
@given(recs=st.lists(_plain_record, min_size=1, max_size=30), many=st.booleans())
def test_header_less_records_round_trip_across_the_varint_table_bounds(recs, many):
    """Header-less records take the inline-varint path when deltas and lengths fit the table;
    lengths, timestamp deltas and offset deltas on both sides of its bounds decode the same."""
    if many:    # offset deltas past the table (1024)
        recs = recs + [Record(key=b"k", value=b"v", timestamp=recs[0].timestamp)] * 1100
    out = decode_records(build_batch(recs))
    assert [(r.key, r.value, r.timestamp, r.offset, list(r.headers)) for r in out] == \
        [(r.key, r.value, r.timestamp, i, []) for i, r in enumerate(recs)]
