"""The bulk decoder (record_columns) against the per-record reference (records.decode_records):
random batches of every codec and layout, nulls, headers, LogAppendTime, compacted offsets,
control batches, corrupt batches; and the fetcher's bulk path (CompletedFetch.take_columns)
against its per-record path, read_committed with aborted transactions included."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgroup.client.assignors import TopicPartition
from kgroup.client.fetcher import CompletedFetch
from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.record_columns import decode_batch, decode_batches
from kgroup.protocol.records import (Compression, InvalidRecordError, Record, TimestampType, build_batch,
                                     build_end_txn_marker_batch, decode_records, iter_batches)


blobs = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=100, max_size=300))
header_keys = st.text(max_size=8)
headers = st.lists(st.tuples(header_keys, st.one_of(st.none(), st.binary(max_size=20))), max_size=3)


@st.composite
def batches(draw):
    """(built batch, records given) with irregular or uniform (run-forming) records."""
    uniform = draw(st.booleans())
    n = draw(st.integers(1, 300 if uniform else 60))
    base_ts = draw(st.integers(0, 2**41))
    if uniform:  # one layout repeated: the column-wise fast path
        key = draw(st.one_of(st.none(), st.binary(min_size=0, max_size=30)))
        vlen = draw(st.integers(0, 200))
        with_headers = draw(st.booleans())
        recs = [Record(key, bytes([i % 256]) * vlen, [("h", b"x")] if with_headers else [],
                       base_ts + draw(st.integers(0, 60)) if i % 50 == 0 else base_ts + i % 60) for i in range(n)]
    else:
        recs = [Record(draw(blobs), draw(blobs), draw(headers), base_ts + draw(st.integers(-2**20, 2**35)))
                for _ in range(n)]
    gaps = draw(st.booleans())  # compacted: offsets with holes, the batch keeps its last offset delta
    base_offset = draw(st.integers(0, 2**40))
    offset = 0
    for r in recs:
        r.offset = base_offset + offset
        offset += draw(st.integers(1, 200)) if gaps else 1
    codec = draw(st.sampled_from(list(Compression)))
    log_append = draw(st.booleans())
    extra = draw(st.integers(0, 5)) if gaps else 0
    batch = build_batch(recs, base_offset=base_offset, compression=codec,
                        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
                        max_timestamp=base_ts + 999 if log_append else None,
                        last_offset_delta=recs[-1].offset - base_offset + extra,
                        is_transactional=draw(st.booleans()), producer_id=7, producer_epoch=1, base_sequence=0)
    return batch


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(batches(), min_size=1, max_size=4), st.booleans())
def test_bulk_equals_reference(built, with_headers):
    ref = [r for b in built for r in decode_records(b)]
    cols = decode_batches([(None, b) for b in built], headers=with_headers)
    got = cols.records()
    if not with_headers:
        ref = [Record(r.key, r.value, [], r.timestamp, r.offset) for r in ref]
    assert got == ref
    rb = cols.to_arrow()
    assert rb.column("key").to_pylist() == [r.key for r in ref]
    assert rb.column("value").to_pylist() == [r.value for r in ref]
    assert rb.column("offset").to_pylist() == [r.offset for r in ref]
    assert rb.column("timestamp").to_pylist() == [r.timestamp for r in ref]
    if with_headers:
        assert [[(h["key"], h["value"]) for h in hs] for hs in rb.column("headers").to_pylist()] == \
            [list(r.headers) for r in ref]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batches(), st.data())
def test_take_keeps_rows_and_headers(batch, data):
    cols = decode_batch(batch, headers=True)
    ref = decode_records(batch)
    mask = [data.draw(st.booleans()) for _ in ref]
    import numpy as np
    assert cols.take(np.array(mask, bool)).records() == [r for r, m in zip(ref, mask) if m]


def test_control_batch_decodes_like_reference():
    marker = build_end_txn_marker_batch(5, 0, True, 3, 1234, base_offset=42)
    assert decode_batch(marker).records() == decode_records(marker)


@pytest.mark.parametrize("cut", [1, 7, 30])
def test_corrupt_batch_raises_reference_error(cut):
    batch = bytearray(build_batch([Record(b"k", b"v" * 50, [], 1)] * 100))
    del batch[-cut:]  # records no longer tile the declared body
    from kgroup.protocol.records import BATCH_HEADER, read_batch_header
    h = read_batch_header(batch)
    fields = list(h)
    fields[1] = len(batch) - 12
    BATCH_HEADER.pack_into(batch, 0, *fields)
    with pytest.raises(InvalidRecordError) as ref:
        decode_records(bytes(batch))
    with pytest.raises(InvalidRecordError) as bulk:
        decode_batch(bytes(batch))
    assert str(bulk.value) == str(ref.value)


def _fetch_buffer():
    """Producer 1: committed transaction; producer 2: aborted one; plain records; markers."""
    parts = []
    off = 0

    def add(batch):
        nonlocal off
        parts.append(batch)
        off += next(iter_batches(batch))[1].last_offset_delta + 1

    add(build_batch([Record(b"a%d" % i, b"x" * i, [], 10 + i) for i in range(20)], base_offset=off))
    aborted_first = off + 20
    add(build_batch([Record(b"t1", b"c" * 30, [("h", b"1")], 50)] * 20, base_offset=off, producer_id=1,
                    producer_epoch=0, base_sequence=0, is_transactional=True, compression=Compression.LZ4))
    add(build_batch([Record(b"t2", b"d" * 30, [], 60)] * 20, base_offset=off, producer_id=2, producer_epoch=0,
                    base_sequence=0, is_transactional=True, compression=Compression.ZSTD))
    add(build_end_txn_marker_batch(1, 0, True, 0, 70, base_offset=off))
    add(build_end_txn_marker_batch(2, 0, False, 0, 71, base_offset=off))
    add(build_batch([Record(None, b"tail%d" % i, [], 80) for i in range(30)], base_offset=off,
                    compression=Compression.GZIP))
    return b"".join(parts), [SimpleNamespace(first_offset=aborted_first, producer_id=2)]


@pytest.mark.parametrize("read_committed", [False, True])
@pytest.mark.parametrize("start", [0, 5, 21, 62])
@pytest.mark.parametrize("max_records", [7, 1000])
def test_fetch_bulk_equals_per_record(read_committed, start, max_records):
    records, aborted = _fetch_buffer()
    tp = TopicPartition("t", 0)

    def fetch():
        return CompletedFetch(tp, start, ErrorCode.NONE, 1000, memoryview(records), aborted, read_committed)
    per = fetch()
    ref = []
    while True:
        got = per.take(7)
        if not got:
            break
        ref.extend(got)
    bulk = fetch()
    rows = []
    while (cols := bulk.take_columns(max_records, headers=True)) is not None:
        rows.extend(cols.records())
    assert [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in rows] == \
        [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in ref]
    assert bulk.next_offset >= per.next_offset
    if read_committed:
        assert not any(r.key == b"t2" for r in rows)
    else:
        assert sum(r.key == b"t2" for r in rows) == (20 if start <= 40 else 0)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.tuples(blobs, blobs, st.integers(0, 2**41)), min_size=1, max_size=200), st.booleans())
def test_bulk_encoding_equals_build_batch(rows, same_layout):
    """encode_records + frame_batch write the bytes build_batch writes (headers aside)."""
    import numpy as np
    import pyarrow as pa

    from kgroup.protocol.record_columns import encode_records
    from kgroup.protocol.records import frame_batch
    if same_layout:  # the packed-matrix path: one key and value length, one timestamp
        rows = [(rows[0][0], rows[0][1], rows[0][2])] * len(rows)
    keys = pa.array([k for k, _, _ in rows], pa.binary())
    values = pa.array([v for _, v, _ in rows], pa.binary())
    ts = np.array([t for _, _, t in rows], np.int64)
    body = encode_records(keys, values, ts, int(ts[0]))
    got = frame_batch(body, len(rows), base_offset=0, base_timestamp=int(ts[0]), max_timestamp=int(ts.max()),
                      last_offset_delta=len(rows) - 1)
    assert got == build_batch([Record(k, v, [], t) for k, v, t in rows])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=100), st.integers(1, 50))
def test_partitions_for_keys_equals_murmur2(keys, n):
    import pyarrow as pa

    from kgroup.client.partitioner import partition_for_key, partitions_for_keys
    assert list(partitions_for_keys(pa.array(keys, pa.binary()), n)) == [partition_for_key(k, n) for k in keys]


def test_encoding_many_records_crosses_offset_delta_widths():
    import numpy as np
    import pyarrow as pa

    from kgroup.protocol.record_columns import encode_records
    from kgroup.protocol.records import frame_batch
    n = 9000  # offset deltas of 1, 2 and 3 bytes
    keys = pa.array([b"%08d" % i for i in range(n)])
    values = pa.array([b"v" * 20] * n)
    ts = np.full(n, 5, np.int64)
    body = encode_records(keys, values, ts, 5)
    got = frame_batch(body, n, base_offset=0, base_timestamp=5, max_timestamp=5, last_offset_delta=n - 1)
    assert got == build_batch([Record(b"%08d" % i, b"v" * 20, [], 5) for i in range(n)])


@st.composite
def value_runs(draw):
    """(buffer, starts, lengths): values laid out in runs of one length and one spacing, as a
    producer's fixed-layout records are, with nulls, empty values, single values and jumps."""
    import numpy as np
    buf = np.frombuffer(draw(st.binary(min_size=400, max_size=400)) + bytes(24), np.uint8)  # padded as decoded
    starts, lengths = [], []
    for _ in range(draw(st.integers(1, 6))):
        k = draw(st.integers(1, 40))
        width = draw(st.integers(-1, 12))
        gap = draw(st.integers(0, 9))
        if (k - 1) * gap + max(width, 0) > 400:
            gap = 0
        first = draw(st.integers(0, 400 - max(width, 0) - (k - 1) * gap))
        starts += [first + i * gap for i in range(k)]
        lengths += [width] * k
    return buf, np.array(starts, np.int64), np.array(lengths, np.int64)


@settings(max_examples=300, deadline=None)
@given(value_runs())
def test_binary_runs_equal_views(case):
    """The run-wise copy of binary values (fixed-layout records) gives the same Arrow array as
    the general route (views cast to binary), and is taken for values in few runs."""
    import numpy as np
    import pyarrow as pa

    from kgroup.protocol.record_columns import _MAX_RUN_SHARE, _gather_runs, _view_array
    buf, starts, lengths = case
    want = _view_array(buf, pa.py_buffer(buf), starts, lengths).cast(pa.binary())
    got = _gather_runs(buf, starts, lengths)
    lens = np.maximum(lengths, 0)
    runs = 1 + sum(1 for i in range(1, len(starts)) if lens[i] != lens[i - 1] or
                   (i >= 2 and starts[i] - starts[i - 1] != starts[i - 1] - starts[i - 2]))
    if len(starts) >= 2 and (runs - 1) * _MAX_RUN_SHARE <= len(starts):
        assert got is not None
    if got is not None:
        got.validate(full=True)
        assert got.equals(want)
        assert got.to_pylist() == [None if n < 0 else bytes(buf[s:s + n]) for s, n in zip(starts, lengths)]
