"""PartitionLog: appends, reads, indexes, rolling, timestamps, retention, truncation, flushing
and recovery."""
from __future__ import annotations

import logging
import os
import struct

import pytest
from tests.storage.helpers import T0, batch

from kgroup.protocol import records as R
from kgroup.protocol.records import Record, TimestampType, build_batch, decode_records, read_batch_header
from kgroup.storage import AppendOrigin, LogConfig, PartitionLog, fs
from kgroup.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from kgroup.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP


def open_log(path, clock, **cfg) -> PartitionLog:
    return PartitionLog(str(path), LogConfig(**cfg), clock=clock)


def offsets(result) -> list[int]:
    return [read_batch_header(b).base_offset for b in result.batches()]


def all_records(plog: PartitionLog) -> list[tuple[int, bytes]]:
    out = []
    for header, b in plog.iter_batches():
        out += [(r.offset, r.value) for r in decode_records(b, header)]
    return out


def test_append_assigns_offsets_and_stores_bytes_as_received(tmp_path, clock):
    plog = open_log(tmp_path / "t-0", clock)
    first = batch(3)
    r1 = plog.append(first)
    assert (r1.base_offset, r1.last_offset, r1.log_append_time, r1.record_count) == (0, 2, -1, 3)
    two = batch(2) + batch(4)  # one request, two batches
    r2 = plog.append(two)
    assert (r2.base_offset, r2.last_offset, r2.valid_bytes) == (3, 8, len(two))
    assert plog.log_end_offset == plog.high_watermark == 9
    stored = bytes(plog.read(0, 1 << 20).records)
    expected = bytearray(first + two)
    R.patch_base_offset(expected, 0, 0)
    R.patch_base_offset(expected, 3, len(first))
    R.patch_base_offset(expected, 5, len(first) + len(batch(2)))
    for pos in (0, len(first), len(first) + len(batch(2))):
        R.set_partition_leader_epoch(expected, 0, pos)
    assert stored == bytes(expected)  # only fields outside the CRC changed
    assert [o for o, _ in all_records(plog)] == list(range(9))


def test_read_semantics(tmp_path, clock):
    plog = open_log(tmp_path / "t-0", clock)
    for _ in range(10):
        plog.append(batch(2, value=b"x" * 100))
    size = len(batch(2, value=b"x" * 100))
    assert offsets(plog.read(5, 1 << 20)) == [4, 6, 8, 10, 12, 14, 16, 18]  # from the batch holding 5
    assert offsets(plog.read(5, 2 * size + 10)) == [4, 6]  # whole batches only
    assert offsets(plog.read(5, 10)) == [4]  # min_one_batch
    assert len(plog.read(5, 10, min_one_batch=False).records) == 0
    assert offsets(plog.read(0, 1 << 20, max_offset=6)) == [0, 2, 4]
    assert offsets(plog.read(0, 1 << 20, max_offset=7)) == [0, 2, 4, 6]     # the batch holding 7 too
    assert offsets(plog.read(7, 1 << 20, max_offset=8)) == [6]
    empty = plog.read(20, 100)
    assert len(empty.records) == 0 and empty.high_watermark == 20 and empty.first_batch_offset == -1
    with pytest.raises(OffsetOutOfRangeError) as e:
        plog.read(21, 100)
    assert e.value.error_code == 1


def test_a_read_bounded_by_max_offset_reads_no_further_from_disk(tmp_path, clock, monkeypatch):
    plog = open_log(tmp_path / "t-0", clock)
    for _ in range(100):
        plog.append(batch(2, value=b"x" * 100))
    size = len(batch(2, value=b"x" * 100))
    sizes = []
    pread = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, pos: sizes.append(n) or pread(fd, n, pos))
    assert offsets(plog.read(10, 1 << 20, max_offset=15)) == [10, 12, 14]
    assert sizes[-1] == 3 * size             # the records: not the 97 batches to the end of the segment


def test_sparse_index_files_have_kafkas_layout(tmp_path, clock):
    plog = open_log(tmp_path / "t-0", clock, index_interval_bytes=200)
    positions = {}
    for i in range(30):
        positions[plog.log_end_offset] = plog.active_segment.size
        plog.append(batch(1, value=b"y" * 90, ts=T0 + i))
    plog.close()
    base = tmp_path / "t-0" / ("0" * 20)
    raw = (base.with_suffix(".index")).read_bytes()
    assert raw and len(raw) % 8 == 0
    entries = list(struct.iter_unpack(">ii", raw))
    for rel, pos in entries:
        assert positions[rel] == pos  # (relative last offset of the batch, its position)
    times = list(struct.iter_unpack(">qi", base.with_suffix(".timeindex").read_bytes()))
    assert times[-1] == (T0 + 29, 29)  # closing records the largest timestamp
    assert all(a[0] < b[0] for a, b in zip(times, times[1:]))
    reopened = PartitionLog(str(tmp_path / "t-0"), LogConfig(index_interval_bytes=200), clock=clock,
                            had_clean_shutdown=True)
    for fetch in (0, 7, 17, 29):
        assert offsets(reopened.read(fetch, 1))[0] == fetch


def test_roll_by_size_and_time(tmp_path, clock):
    plog = open_log(tmp_path / "t-0", clock, segment_bytes=1000, segment_ms=60_000)
    for _ in range(12):
        plog.append(batch(1, value=b"z" * 200))
    assert plog.num_segments >= 3
    names = sorted(n for n in os.listdir(tmp_path / "t-0") if n.endswith(".log"))
    assert names[0] == "0" * 20 + ".log" and all(len(n) == 24 for n in names)
    assert all(s.size <= 1000 for s in plog.segments)
    n = plog.num_segments
    plog.append(batch(1, ts=T0 + 61_000))  # timestamps drive segment.ms
    assert plog.num_segments == n + 1
    # Reads never span segments but continue from the next one.
    seen, fetch = [], 0
    while fetch < plog.log_end_offset:
        got = plog.read(fetch, 1 << 20)
        hdrs = [read_batch_header(b) for b in got.batches()]
        seen += [h.base_offset for h in hdrs]
        fetch = hdrs[-1].next_offset
    assert seen == list(range(13))


def test_log_append_time(tmp_path, clock):
    plog = open_log(tmp_path / "t-0", clock, message_timestamp_type="LogAppendTime")
    res = plog.append(batch(3, ts=5))
    assert res.log_append_time == clock.now and res.max_timestamp == clock.now
    stored = plog.read(0, 1000).batches()[0]
    h = read_batch_header(stored)
    R.validate_batch(h, stored)
    assert h.timestamp_type == TimestampType.LOG_APPEND_TIME and h.max_timestamp == clock.now
    assert {r.timestamp for r in decode_records(stored)} == {clock.now}


def test_validation_errors(tmp_path, clock):
    plog = open_log(tmp_path / "t-0", clock, max_message_bytes=500, segment_bytes=2000)
    bad_crc = bytearray(batch(1))
    bad_crc[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        plog.append(bad_crc)
    with pytest.raises(InvalidRecordError, match="baseOffset"):
        plog.append(batch(1, base_offset=5))
    with pytest.raises(RecordTooLargeError) as e:
        plog.append(batch(1, value=b"x" * 600))
    assert e.value.error_code == 10
    with pytest.raises(RecordBatchTooLargeError):
        plog.append(b"".join(batch(1, value=b"x" * 400) for _ in range(5)))
    with pytest.raises(InvalidRecordError, match="control"):
        plog.append(build_batch([R.end_transaction_marker_record(1, 0, T0)], is_control=True))
    with pytest.raises(InvalidRecordError, match="sequence"):
        plog.append(batch(1, producer_id=1, producer_epoch=0, base_sequence=-1))
    future = build_batch([Record(b"a", b"1", (), T0), Record(b"b", b"2", (), T0 + 2 * 3600_000)])
    with pytest.raises(InvalidTimestampError) as e:
        plog.append(future)
    assert e.value.record_errors[0][0] == 1 and e.value.error_code == 32
    with pytest.raises(InvalidRecordError):
        plog.append(b"")
    assert plog.log_end_offset == 0  # nothing was written by the failures
    ok = batch(2)
    res = plog.append(ok + ok[:20])  # a partial trailing batch is trimmed, as Kafka does
    assert res.valid_bytes == len(ok) and plog.log_end_offset == 2


def test_compacted_topic_needs_keys(tmp_path, clock):
    plog = open_log(tmp_path / "t-0", clock, cleanup_policy=("compact",))
    with pytest.raises(InvalidRecordError) as e:
        plog.append(build_batch([Record(b"k", b"v", (), T0), Record(None, b"v", (), T0)]))
    assert e.value.record_errors[0][0] == 1
    with pytest.raises(InvalidRecordError):
        plog.append(build_batch([Record(None, b"v", (), T0)], compression=R.Compression.GZIP))
    plog.append(build_batch([Record(b"k", b"v", (), T0)], compression=R.Compression.GZIP))


def test_offsets_by_timestamp(tmp_path, clock):
    plog = open_log(tmp_path / "t-0", clock, segment_bytes=400)
    for i in range(10):
        ts = [T0 + 100 * i, T0 + 100 * i + 50, T0 + 100 * i + 20]
        plog.append(build_batch([Record(b"k", b"v" * 40, (), t) for t in ts]))
    assert plog.num_segments > 1
    assert plog.offset_for_timestamp(0) == (T0, 0, 0)
    assert plog.offset_for_timestamp(T0 + 430) == (T0 + 450, 13, 0)
    assert plog.offset_for_timestamp(T0 + 451) == (T0 + 500, 15, 0)
    assert plog.offset_for_timestamp(T0 + 10_000) is None
    assert plog.max_timestamp_and_offset() == (T0 + 950, 28, 0)
    assert plog.fetch_offset_by_timestamp(MAX_TIMESTAMP).offset == 28
    assert plog.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == (-1, 30, 0)
    assert plog.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP).offset == 0


def test_retention_by_time_and_size(tmp_path, clock):
    plog = open_log(tmp_path / "t-0", clock, segment_bytes=600, retention_ms=10_000, retention_bytes=-1)
    for i in range(12):
        plog.append(batch(1, value=b"q" * 200, ts=T0 + 1000 * i))
    segs = plog.num_segments
    assert plog.delete_old_segments(T0 + 5_000) == 0
    deleted = plog.delete_old_segments(T0 + 10_000 + 3_500)  # batches up to ts T0+3000 expired
    assert deleted >= 1 and plog.num_segments == segs - deleted
    assert plog.log_start_offset == plog.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(0, 100)
    # everything expired: roll an empty active segment first, never delete the active one
    plog.delete_old_segments(T0 + 100_000)
    assert plog.num_segments == 1 and plog.active_segment.size == 0
    assert plog.log_start_offset == plog.log_end_offset == 12
    assert plog.append(batch(1)).base_offset == 12

    sized = open_log(tmp_path / "s-0", clock, segment_bytes=600, retention_bytes=1000)
    for _ in range(12):
        sized.append(batch(1, value=b"q" * 200))
    sized.delete_old_segments(T0)
    assert sized.size_in_bytes <= 1000 + 600


def test_delete_records_before(tmp_path, clock):
    plog = open_log(tmp_path / "t-0", clock, segment_bytes=600)
    for _ in range(10):
        plog.append(batch(2, value=b"w" * 100))
    assert plog.delete_records_before(7) == 7
    assert plog.log_start_offset == 7
    assert plog.segments[0].base_offset <= 7 < (plog.segments[1].base_offset if plog.num_segments > 1 else 99)
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(5, 100)
    assert offsets(plog.read(7, 1))[0] == 6  # the batch holding 7
    with pytest.raises(OffsetOutOfRangeError):
        plog.delete_records_before(21)
    assert plog.delete_records_before(-1) == 20


def test_truncate_to(tmp_path, clock):
    plog = open_log(tmp_path / "t-0", clock, segment_bytes=600)
    for _ in range(10):
        plog.append(batch(2, value=b"w" * 100))
    assert plog.truncate_to(9) is True
    assert plog.log_end_offset == 8  # the batch holding 9 (8..9) is gone
    assert all(s.base_offset <= 8 for s in plog.segments)
    assert plog.truncate_to(50) is False
    assert plog.append(batch(1)).base_offset == 8
    assert [o for o, _ in all_records(plog)] == list(range(9))
    plog.delete_records_before(4)
    plog.truncate_to(2)  # below the log start: start over there
    assert (plog.log_start_offset, plog.log_end_offset, plog.num_segments) == (2, 2, 1)
    assert plog.append(batch(1)).base_offset == 2


def test_flush_policy(tmp_path, clock):
    plog = open_log(tmp_path / "t-0", clock, flush_messages=5)
    plog.append(batch(3))
    assert plog.unflushed_messages == 3 and plog.recovery_point == 0
    plog.append(batch(3))  # reaches flush.messages
    assert plog.unflushed_messages == 0 and plog.recovery_point == 6
    plog.append(batch(1))
    plog.flush()
    assert plog.recovery_point == 7
    timed = open_log(tmp_path / "u-0", clock, flush_ms=1000)
    timed.append(batch(1))
    assert timed.maybe_flush(clock.now + 10) is False
    assert timed.maybe_flush(clock.now + 1000) is True and timed.unflushed_messages == 0


def test_a_sync_mark_records_only_what_the_filesystem_sync_covered(tmp_path, clock, monkeypatch):
    plog = open_log(tmp_path / "t-0", clock, segment_bytes=200)
    for _ in range(3):
        plog.append(batch(2))     # rolls (two batches a segment): closed segments with indexes, and an active one
    assert len(plog._segments) > 1 and plog.unflushed_messages == 6
    mark = plog.sync_mark()       # a syncfs starts here ...
    active = plog.active_segment
    plog.append(batch(2))         # ... and this append lands while it runs
    assert plog.active_segment is active
    fsyncs = []
    monkeypatch.setattr(os, "fsync", fsyncs.append)
    clock.now += 5
    plog.synced(mark)             # ... it finished
    assert fsyncs == []           # recording a sync fsyncs nothing
    assert plog.recovery_point == 6 and plog.unflushed_messages == 2 and plog._last_flush_ms == clock.now
    assert not any(seg.dirty or seg.index.dirty or seg.time_index.dirty for seg in plog._segments[:-1])
    assert active.dirty           # written after the mark: still to be made durable
    plog.flush()
    assert len(fsyncs) == 1 and not active.dirty and plog.unflushed_messages == 0
    plog.synced(mark)             # an old mark never moves anything back
    assert plog.recovery_point == 8 and not active.dirty

    plog.append(batch(2))
    mark = plog.sync_mark()       # a truncation while a sync runs: the mark's end is not trusted
    plog.truncate_to(8)
    plog.append(batch(3))
    plog.synced(mark)
    assert plog.log_end_offset == 11 and plog.recovery_point == 8 and plog.active_segment.dirty
    monkeypatch.undo()
    plog.close()
    with pytest.raises(ValueError, match="is closed"):
        plog.synced(mark)         # a closed log refuses
    with pytest.raises(ValueError, match="is closed"):
        plog.sync_mark()


@pytest.mark.skipif(not fs.syncfs_available(), reason="syncfs(2) is Linux-only")
def test_syncfs(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        fs.syncfs(fd)
    finally:
        os.close(fd)
    with pytest.raises(OSError):
        fs.syncfs(fd)             # closed descriptor: EBADF


def _corrupt_last_batch(plog: PartitionLog) -> tuple[str, int]:
    seg = plog.active_segment
    pos, header = list(seg.iter_headers())[-1]
    with open(seg.log_path, "r+b") as f:
        f.seek(pos + header.size - 3)
        byte = f.read(1)
        f.seek(pos + header.size - 3)
        f.write(bytes([byte[0] ^ 0x55]))
    return seg.log_path, pos


def test_corrupt_tail_is_truncated_on_unclean_restart(tmp_path, clock, caplog):
    plog = open_log(tmp_path / "t-0", clock, index_interval_bytes=100)
    for _ in range(6):
        plog.append(batch(2))
    path, pos = _corrupt_last_batch(plog)
    plog.close(clean=False)
    size = os.path.getsize(path)
    with caplog.at_level(logging.WARNING):
        again = PartitionLog(str(tmp_path / "t-0"), LogConfig(index_interval_bytes=100), clock=clock)
    assert again.log_end_offset == 10
    warning = [r for r in caplog.records if r.levelno == logging.WARNING and "truncating" in r.getMessage()]
    assert warning and path in warning[0].getMessage()
    assert f"byte offset {pos}" in warning[0].getMessage() and f"truncating {size - pos} bytes" in warning[0].getMessage()
    assert os.path.getsize(path) == pos
    assert again.append(batch(1)).base_offset == 10


def test_garbage_tail_and_later_segments_dropped(tmp_path, clock, caplog):
    plog = open_log(tmp_path / "t-0", clock, segment_bytes=400)
    for _ in range(8):
        plog.append(batch(1, value=b"p" * 100))
    first = plog.segments[0]
    assert plog.num_segments > 2
    plog.close(clean=False)
    with open(first.log_path, "r+b") as f:
        f.seek(first.size - 2)
        f.write(b"\xff\xff")
    with caplog.at_level(logging.WARNING):
        again = PartitionLog(str(tmp_path / "t-0"), LogConfig(segment_bytes=400), clock=clock, recovery_point=0)
    assert again.num_segments == 1
    survivors = len(list(again.segments[0].iter_headers()))
    assert again.log_end_offset == survivors < 8  # one record per batch; the cut batch is gone
    assert any("Deleting segment" in r.getMessage() for r in caplog.records)
    assert [o for o, _ in all_records(again)] == list(range(again.log_end_offset))
    # appending garbage bytes after the last batch: cut without losing the batches
    with open(again.active_segment.log_path, "ab") as f:
        f.write(b"\x00" * 7)
    again.close(clean=False)
    third = PartitionLog(str(tmp_path / "t-0"), LogConfig(segment_bytes=400), clock=clock)
    assert third.log_end_offset == again.log_end_offset


def test_clean_restart_trusts_files_and_rebuilds_missing_index(tmp_path, clock, caplog):
    plog = open_log(tmp_path / "t-0", clock, segment_bytes=500, index_interval_bytes=50)
    for i in range(10):
        plog.append(batch(1, value=b"m" * 100, ts=T0 + i))
    before = [bytes(b) for _, b in plog.iter_batches()]
    plog.close()
    os.unlink(plog.segments[0].index.path)
    with caplog.at_level(logging.WARNING):
        again = PartitionLog(str(tmp_path / "t-0"), LogConfig(segment_bytes=500, index_interval_bytes=50),
                             clock=clock, had_clean_shutdown=True, recovery_point=10)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert os.path.exists(again.segments[0].index.path)
    assert [bytes(b) for _, b in again.iter_batches()] == before
    assert again.log_end_offset == 10 and again.recovery_point == 10
    assert again.offset_for_timestamp(T0 + 4).offset == 4
    assert offsets(again.read(3, 1)) == [3]


def test_origin_coordinator_may_write_markers(tmp_path, clock):
    plog = open_log(tmp_path / "t-0", clock)
    plog.append(batch(1, producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True))
    marker = build_batch([R.end_transaction_marker_record(R.CONTROL_COMMIT, 0, T0)], is_control=True,
                         is_transactional=True, producer_id=9, producer_epoch=0)
    res = plog.append(marker, origin=AppendOrigin.COORDINATOR)
    assert res.base_offset == 1
    assert plog.producer_state.first_unstable_offset() is None
