"""LogSegment: one ``<20-digit base offset>.log`` file with its ``.index`` and ``.timeindex``.

The ``.log`` is the plain concatenation of RecordBatch v2 bytes as Kafka stores them. Reads use
``os.pread`` on a file descriptor (never loading whole files); batch boundaries are found from
the sparse offset index plus a walk over batch headers. This module also owns segment recovery:
re-validating every batch (length, magic, CRC-32C), truncating at the first bad one and
rebuilding both indexes.
"""
from __future__ import annotations

import errno
import logging
import os
from typing import Callable, Iterator, NamedTuple

from kgroup.clock import now_ms  # noqa: F401  (the default clock of logs)
from kgroup.protocol.primitives import INT32, INT64
from kgroup.protocol.records import (
    BATCH_HEADER,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    compute_batch_crc,
    decode_records,
)
from kgroup.storage.config import LONG_MAX
from kgroup.storage.index import OffsetIndex, TimeIndex
from kgroup.storage.open_files import OpenFiles
from kgroup.storage.txn_index import TransactionIndex

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"

_HEADER_CHUNK = 16 * 1024  # header walks: a few KiB covers many small batches
_SCAN_CHUNK = 1024 * 1024  # full-batch scans (recovery, cleaning)
_EMPTY = memoryview(b"")


def segment_prefix(directory: str, base_offset: int) -> str:
    return os.path.join(directory, f"{base_offset:020d}")


def pwrite_all(fd: int, data, position: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, position)
        view = view[n:]
        position += n


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class SegmentRead(NamedTuple):
    position: int
    records: memoryview  # whole batches, exactly as stored
    first_header: BatchHeader


class FoundTimestamp(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int | None


class LogSegment:
    def __init__(self, directory: str, base_offset: int, *, index_interval_bytes: int = 4096,
                 max_index_size: int = 10 * 1024 * 1024, clock: Callable[[], int] = now_ms,
                 create: bool = False, files: OpenFiles | None = None, suffix: str = ""):
        # ``suffix``: CLEANED_SUFFIX for a segment the cleaner builds off to the side
        # (``<base>.log.cleaned``, ``<base>.index.cleaned``...), swapped in by replace_with
        self.directory = directory
        self.base_offset = base_offset
        prefix = segment_prefix(directory, base_offset)
        self.log_path = prefix + LOG_SUFFIX + suffix
        self.index = OffsetIndex(prefix + INDEX_SUFFIX + suffix, base_offset, max_index_size)
        self.time_index = TimeIndex(prefix + TIME_INDEX_SUFFIX + suffix, base_offset, max_index_size)
        self.txn_index = TransactionIndex(prefix + TXN_INDEX_SUFFIX + suffix, base_offset)
        self.index.files = self.time_index.files = files
        self.index_interval_bytes = index_interval_bytes
        self._clock = clock
        # The .log descriptor is opened on first use and may be closed by ``files`` when too
        # many are open (open_files.py); always read it through _file().
        self._files: OpenFiles | None = files
        self._closed = False
        if create:
            self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            if files is not None:
                files.opened(self)
            self.size = 0
        else:
            self._fd = -1
            self.size = os.stat(self.log_path).st_size
        self.created_ms = clock()
        self.next_offset = base_offset
        # Writes so far and how many are known durable (as in Index): a counter, so a filesystem
        # sync that ran while more was appended marks only what it covered.
        self.writes = 1 if create else 0
        self.synced_writes = 0
        self._bytes_since_last_index_entry = 0
        self._max_ts: int | None = None  # None: not yet read from the time index
        self._max_ts_offset = base_offset
        self._rolling_ts: int | None = None
        if create:
            # Kafka creates both index files with the segment; a missing one means "rebuild".
            self.index.reset()
            self.time_index.reset()
            self.txn_index.reset()      # only a leftover file costs more than a stat

    def _file(self) -> int:
        """The .log descriptor, opened again if it was closed to save descriptors."""
        fd = self._fd
        if fd < 0:
            if self._closed:
                raise OSError(errno.EBADF, f"segment {self.log_path} is closed")
            fd = self._fd = os.open(self.log_path, os.O_RDWR)
            if self._files is not None:
                self._files.opened(self)
        elif self._files is not None:
            self._files.used(self)
        return fd

    def evict(self) -> None:
        """Close the descriptor to save one (OpenFiles); the segment stays usable."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset})"

    # --- state -----------------------------------------------------------------------------

    def _max_ts_entry(self) -> tuple[int, int]:
        """(largest timestamp so far, its offset), read from the time index on first use."""
        max_ts = self._max_ts
        if max_ts is None:
            entry = self.time_index.last_entry()
            max_ts = self._max_ts = entry.timestamp
            self._max_ts_offset = entry.offset
        return max_ts, self._max_ts_offset

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_ts_entry()[0]

    @property
    def offset_of_max_timestamp(self) -> int:
        return self._max_ts_entry()[1]

    @property
    def largest_timestamp(self) -> int:
        """For retention: the max record timestamp, or the file's mtime without one."""
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else os.stat(self.log_path).st_mtime_ns // 1_000_000

    def _load_first_batch_timestamp(self) -> None:
        if self._rolling_ts is None:
            for _, header in self.iter_headers(0):
                self._rolling_ts = header.max_timestamp
                break

    @property
    def first_batch_timestamp(self) -> int:
        """The first batch's max timestamp, LONG_MAX without one (LogSegment.getFirstBatchTimestamp:
        the cleaner's max.compaction.lag.ms is measured from it)."""
        self._load_first_batch_timestamp()
        ts = self._rolling_ts
        return ts if ts is not None and ts >= 0 else LONG_MAX

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        ts = self._rolling_ts
        if ts is None:
            self._load_first_batch_timestamp()
            ts = self._rolling_ts
        if ts is not None and ts >= 0:
            return message_timestamp - ts
        return now - self.created_ms

    def load(self) -> bool:
        """Open after a clean shutdown: trust the files if the indexes pass a sanity check
        (else return False so the caller recovers), and find the next offset."""
        if not (os.path.exists(self.index.path) and os.path.exists(self.time_index.path)):
            return False
        if not (self.index.file_size_ok() and self.time_index.file_size_ok()
                and self.index.positions_ok(self.size)):
            return False
        self._read_tail_state()
        return True

    def _read_tail_state(self) -> None:
        """Next offset and max timestamp from the last index entries plus a short header walk."""
        last_time = self.time_index.last_entry()
        start = min(self.index.lookup(last_time.offset).position, self.index.last_entry().position)
        max_ts, max_off = last_time.timestamp, last_time.offset
        last = None
        for _, header in self.iter_headers(start):
            if header.max_timestamp > max_ts:
                max_ts, max_off = header.max_timestamp, header.last_offset
            last = header
        self.next_offset = last.next_offset if last is not None else self.base_offset
        self._max_ts, self._max_ts_offset = max_ts, max_off

    # --- scanning --------------------------------------------------------------------------

    def iter_headers(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of each batch from ``start`` (a batch boundary)."""
        end = self.size if end is None else min(end, self.size)
        unpack, make, file = BATCH_HEADER.unpack_from, BatchHeader._make, self._file
        pos, buf, buf_start = start, b"", start
        while end - pos >= RECORD_BATCH_OVERHEAD:
            off = pos - buf_start
            if off + RECORD_BATCH_OVERHEAD > len(buf):
                buf = os.pread(file(), min(_HEADER_CHUNK, end - pos), pos)
                buf_start, off = pos, 0
                if len(buf) < RECORD_BATCH_OVERHEAD:
                    return
            header = make(unpack(buf, off))
            size = header.batch_length + LOG_OVERHEAD
            if size < RECORD_BATCH_OVERHEAD or pos + size > end:
                return
            yield pos, header
            pos += size

    def iter_batches(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """``(position, header, batch bytes)``, reading the file in large chunks."""
        end = self.size if end is None else min(end, self.size)
        file = self._file
        pos, buf, buf_start = start, _EMPTY, start
        while end - pos >= RECORD_BATCH_OVERHEAD:
            off = pos - buf_start
            if off + RECORD_BATCH_OVERHEAD > len(buf):
                buf = memoryview(os.pread(file(), min(_SCAN_CHUNK, end - pos), pos))
                buf_start, off = pos, 0
            size = INT32.unpack_from(buf, off + 8)[0] + LOG_OVERHEAD
            if size < RECORD_BATCH_OVERHEAD or pos + size > end:
                return
            if off + size > len(buf):
                buf = memoryview(os.pread(file(), max(size, min(_SCAN_CHUNK, end - pos)), pos))
                buf_start, off = pos, 0
            view = buf[off:off + size]
            yield pos, BatchHeader._make(BATCH_HEADER.unpack_from(view, 0)), view
            pos += size

    def translate_offset(self, offset: int, starting_position: int = 0) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``."""
        start = max(self.index.lookup(offset).position, starting_position)
        for pos, header in self.iter_headers(start):
            if header.base_offset + header.last_offset_delta >= offset:
                return pos, header
        return None

    # --- writes ----------------------------------------------------------------------------

    def append(self, data, headers: list[BatchHeader]) -> None:
        """Append validated batches (``data`` is their concatenation, ``headers`` in order)."""
        pos = self.size
        try:
            pwrite_all(self._file(), data, pos)
        except OSError:
            try:  # leave no partial batch behind (disk full, I/O error)
                os.ftruncate(self._file(), pos)
            except OSError:
                pass
            raise
        if pos == 0 and headers:
            self._rolling_ts = headers[0].max_timestamp
        max_ts, max_off = self._max_ts_entry()
        interval = self.index_interval_bytes
        since = self._bytes_since_last_index_entry
        for header in headers:
            if header.max_timestamp > max_ts:
                max_ts, max_off = header.max_timestamp, header.last_offset
            if since > interval:
                self.index.append(header.last_offset, pos)
                self.time_index.maybe_append(max_ts, max_off, skip_full_check=True)
                since = 0
            size = header.batch_length + LOG_OVERHEAD
            pos += size
            since += size
        self._bytes_since_last_index_entry = since
        self._max_ts, self._max_ts_offset = max_ts, max_off
        self.size = pos
        self.next_offset = headers[-1].next_offset
        self.writes += 1

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; return the bytes removed."""
        found = self.translate_offset(offset)
        self.index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        if found is None:
            return 0
        position = found[0]
        removed = self.size - position
        os.ftruncate(self._file(), position)
        self.size = position
        self.writes += 1
        if position == 0:
            self.created_ms = self._clock()
            self._rolling_ts = None
        self._bytes_since_last_index_entry = 0
        self._read_tail_state()
        return removed

    def recover(self, on_batch: Callable[[BatchHeader, memoryview], None] | None = None) -> int:
        """Re-validate every batch, rebuild the indexes and cut the file at the first invalid
        batch (logged at WARNING). Returns the number of bytes cut."""
        self.index.reset()
        self.time_index.reset()
        file, interval = self._file, self.index_interval_bytes
        file_size = os.fstat(file()).st_size
        max_ts, max_off = -1, self.base_offset
        valid = last_index_entry = 0
        last: BatchHeader | None = None
        reason = None
        buf, buf_start = _EMPTY, 0
        while valid < file_size:
            remaining = file_size - valid
            if remaining < RECORD_BATCH_OVERHEAD:
                reason = f"{remaining} trailing bytes are shorter than a batch header"
                break
            off = valid - buf_start
            if off + RECORD_BATCH_OVERHEAD > len(buf):
                buf = memoryview(os.pread(file(), min(_SCAN_CHUNK, remaining), valid))
                buf_start, off = valid, 0
            size = INT32.unpack_from(buf, off + 8)[0] + LOG_OVERHEAD
            if size < RECORD_BATCH_OVERHEAD:
                reason = f"invalid batch length {size - LOG_OVERHEAD}"
                break
            if size > remaining:
                reason = f"batch of {size} bytes extends past the end of the file"
                break
            magic = buf[off + MAGIC_OFFSET]
            if magic != MAGIC_V2:
                reason = f"invalid magic {magic}"
                break
            if off + size > len(buf):
                buf = memoryview(os.pread(file(), max(size, min(_SCAN_CHUNK, remaining)), valid))
                buf_start, off = valid, 0
            view = buf[off:off + size]
            header = BatchHeader._make(BATCH_HEADER.unpack_from(view, 0))
            computed = compute_batch_crc(view)
            if computed != header.crc:
                reason = f"CRC mismatch (stored {header.crc}, computed {computed})"
                break
            if not self.index.can_append_offset(header.last_offset) or (
                    last is not None and header.base_offset <= last.last_offset):
                reason = f"offset {header.base_offset} out of order or out of range for this segment"
                break
            if header.max_timestamp > max_ts:
                max_ts, max_off = header.max_timestamp, header.last_offset
            if valid - last_index_entry > interval:
                self.index.append(header.last_offset, valid)
                self.time_index.maybe_append(max_ts, max_off)
                last_index_entry = valid
            valid += size
            last = header
            if on_batch is not None:
                on_batch(header, view)
        cut = file_size - valid
        if cut:
            log.warning("Found invalid batch in log segment %s at byte offset %d (%s): truncating %d bytes",
                        self.log_path, valid, reason, cut)
            os.ftruncate(file(), valid)
        self.size = valid
        self.next_offset = last.next_offset if last is not None else self.base_offset
        self._max_ts, self._max_ts_offset = max_ts, max_off
        self._bytes_since_last_index_entry = valid - last_index_entry
        self._rolling_ts = None
        # A normally closed segment ends with its largest timestamp in the time index.
        self.time_index.maybe_append(max_ts, max_off, skip_full_check=True)
        self.writes += 1
        return cut

    # --- reads -----------------------------------------------------------------------------

    def read(self, start_offset: int, max_size: int, max_offset: int | None = None,
             min_one_batch: bool = False) -> SegmentRead | None:
        """Whole batches from the one containing ``start_offset``, at most ``max_size`` bytes
        (or the first batch alone when larger and ``min_one_batch``), stopping before a batch
        whose base offset is >= ``max_offset``. None when no batch holds ``start_offset`` or
        later; empty records when nothing fits."""
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, first = found
        first_size = first.batch_length + LOG_OVERHEAD
        if max_offset is not None and first.base_offset >= max_offset:
            return SegmentRead(position, _EMPTY, first)
        budget = max(max_size, first_size) if min_one_batch else max_size
        if budget < first_size:
            return SegmentRead(position, _EMPTY, first)
        if max_offset is not None and max_offset < self.next_offset and self.size - position > first_size:
            # nothing from the batch starting at or past max_offset is returned: read no further
            bound = self.translate_offset(max_offset, position)
            if bound is not None:
                stop = bound[0] if bound[1].base_offset >= max_offset else \
                    bound[0] + bound[1].batch_length + LOG_OVERHEAD
                budget = min(budget, stop - position)
        data = os.pread(self._file(), min(self.size - position, budget), position)
        n, off = len(data), 0
        while n - off >= RECORD_BATCH_OVERHEAD:
            size = INT32.unpack_from(data, off + 8)[0] + LOG_OVERHEAD
            if off + size > n or (max_offset is not None and INT64.unpack_from(data, off)[0] >= max_offset):
                break
            off += size
        view = memoryview(data)
        return SegmentRead(position, view if off == n else view[:off], first)

    def read_batch(self, position: int, size: int) -> bytes:
        return os.pread(self._file(), size, position)

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> FoundTimestamp | None:
        """First record with timestamp >= ``timestamp`` and offset >= ``starting_offset``."""
        entry = self.time_index.lookup(timestamp)
        start = self.index.lookup(max(entry.offset, starting_offset)).position
        for pos, header in self.iter_headers(start):
            if header.max_timestamp >= timestamp and header.last_offset >= starting_offset:
                batch = self.read_batch(pos, header.size)
                for record in decode_records(batch, header):
                    if record.timestamp >= timestamp and record.offset >= starting_offset:
                        epoch = header.partition_leader_epoch
                        return FoundTimestamp(record.timestamp, record.offset, epoch if epoch >= 0 else None)
        return None

    # --- lifecycle -------------------------------------------------------------------------

    def on_become_inactive(self) -> None:
        """When rolled: record the largest timestamp so retention can use the time index."""
        self.time_index.maybe_append(*self._max_ts_entry(), skip_full_check=True)
        self.release_index_handles()

    def release_index_handles(self) -> None:
        """Closed segments keep only their log descriptor open (indexes are read on demand)."""
        self.index.close()
        self.time_index.close()
        self.txn_index.close()

    @property
    def dirty(self) -> bool:
        """Bytes written that are not known durable yet."""
        return self.writes != self.synced_writes

    def flush(self, indexes: bool = True) -> None:
        """fsync what is dirty."""
        writes = self.writes
        if writes != self.synced_writes:
            os.fsync(self._file())
            self.synced_writes = writes
        if indexes:
            self.index.flush()
            self.time_index.flush()
            self.txn_index.flush()

    def sync_mark(self) -> tuple:
        """The write counters of this segment's files, for ``synced``."""
        return self, self.writes, self.index.writes, self.time_index.writes

    def synced(self, writes: int, index_writes: int, time_index_writes: int) -> None:
        """A filesystem-wide sync that started at ``sync_mark`` has finished: what was written
        before it is durable (later writes stay dirty)."""
        if writes > self.synced_writes:
            self.synced_writes = writes
        self.index.synced(index_writes)
        self.time_index.synced(time_index_writes)

    def close(self) -> None:
        if self._closed:
            return
        if self._max_ts is not None and self._max_ts >= 0:
            self.time_index.maybe_append(self._max_ts, self._max_ts_offset, skip_full_check=True)
        self.close_handlers()

    def close_handlers(self) -> None:
        """Close the files without writing anything (a crash, as far as the files know)."""
        self._closed = True
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._files is not None:
            self._files.closed(self)
        self.index.close()
        self.time_index.close()
        self.txn_index.close()

    def delete(self) -> None:
        self.close_handlers()
        prefix = segment_prefix(self.directory, self.base_offset)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            try:
                os.unlink(prefix + suffix)
            except FileNotFoundError:
                pass

    def delete_files(self) -> None:
        """Remove a side segment's files (a cleaned segment that is not swapped in)."""
        self.close_handlers()
        for path in (self.log_path, self.index.path, self.time_index.path, self.txn_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def replace_with(self, cleaned: "LogSegment") -> None:
        """Swap in the files of ``cleaned`` (built and fsynced off to the side by the cleaner,
        same base offset) and take its state: renames only. The old indexes go first, so a crash
        at any point leaves either the old files or a log whose indexes are rebuilt on load; the
        caller fsyncs the directory. The aborted transaction index follows the log: the cleaned
        one only lacks transactions whose data an earlier pass already removed, so either index
        reads right beside either log."""
        self.index.delete()
        self.time_index.delete()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            if self._files is not None:
                self._files.closed(self)
        os.replace(cleaned.log_path, self.log_path)
        os.replace(cleaned.index.path, self.index.path)
        os.replace(cleaned.time_index.path, self.time_index.path)
        self.txn_index.close()
        if os.path.exists(cleaned.txn_index.path):
            os.replace(cleaned.txn_index.path, self.txn_index.path)
        else:
            self.txn_index.delete()
        self.txn_index.unload()
        self.index.unload()
        self.time_index.unload()
        self.size = cleaned.size
        self.next_offset = cleaned.next_offset
        self._max_ts, self._max_ts_offset = cleaned._max_ts, cleaned._max_ts_offset
        self._bytes_since_last_index_entry = cleaned._bytes_since_last_index_entry
        self._rolling_ts = None
        self.writes += 1
        self.synced_writes = self.writes    # fsynced by the cleaner before the rename
