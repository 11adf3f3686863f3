"""PartitionLog: the log of one topic partition (Kafka's UnifiedLog + LocalLog, single node).

Owns the ordered segments of a ``<topic>-<partition>`` directory and every operation on them:
validated appends with offset assignment (and LogAppendTime), idempotent-producer checks,
reads of whole batches, offset-by-timestamp lookups, rolling, retention, DeleteRecords,
truncation, flushing/recovery points, loading (with recovery after an unclean shutdown) and
compaction (delegated to ``kgroup.storage.cleaner``). Synchronous and single-threaded: the
caller serialises access.

On a single node the high watermark is the log end offset; a replicated partition's
(``kgroup.broker.replica_manager``) is set by its Partition (``set_high_watermark``), and its
followers append the leader's batches as they are (``append_as_follower``). The leader epoch cache
(``leader_epoch_cache.py``) records where each leader epoch starts. Differences from Kafka worth
knowing: reads return whole batches only (Kafka may end with a partial batch) and never span
two segments; truncating into the middle of a batch removes the batch and the log end offset
becomes that batch's base offset (restart-stable; Kafka keeps the requested offset in memory).
"""
from __future__ import annotations

import logging
import os
from bisect import bisect_right
from dataclasses import dataclass
from typing import Callable, Iterator, NamedTuple, Protocol, Sequence

from kgroup.protocol.primitives import INT32
from kgroup.protocol.records import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    Compression,
    InvalidRecordError,
    TimestampType,
    build_batch,
    check_batch_records,
    decode_records,
    iter_batches,
    patch_base_offset,
    read_batch_header,
    set_max_timestamp,
    set_partition_leader_epoch,
    validate_batch,
)
from kgroup.storage.config import LogConfig
from kgroup.storage.leader_epoch_cache import CHECKPOINT_FILE, LeaderEpochFileCache
from kgroup.storage.errors import (
    InvalidTimestampError,
    KafkaStorageError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from kgroup.storage.open_files import OpenFiles
from kgroup.storage.producer_state import AppendOrigin, ProducerAppendInfo, ProducerStateManager
from kgroup.storage.segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    fsync_dir,
    now_ms,
)
from kgroup.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

__all__ = ["AppendOrigin", "AppendResult", "LogConfig", "PartitionLog", "ReadResult", "TimestampAndOffset",
           "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP", "MAX_TIMESTAMP", "EARLIEST_LOCAL_TIMESTAMP",
           "LATEST_TIERED_TIMESTAMP"]

# ListOffsets special timestamps
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6


@dataclass(slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    max_timestamp: int
    record_count: int
    valid_bytes: int
    duplicate: bool = False


class ReadResult(NamedTuple):
    records: memoryview  # whole batches, contiguous, exactly as stored
    fetch_offset: int
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    first_batch_offset: int  # -1 when records is empty

    def batches(self) -> list[memoryview]:
        out, data, pos = [], self.records, 0
        while len(data) - pos >= LOG_OVERHEAD:
            size = INT32.unpack_from(data, pos + 8)[0] + LOG_OVERHEAD
            out.append(data[pos:pos + size])
            pos += size
        return out


class PlannedClean(Protocol):
    """What a clean was planned against (``cleaner.CleanPlan``): the planned segments, each one's
    size then, the log's truncation count then, and the offset the clean covers up to."""
    segments: list[LogSegment]
    sizes: list[int]
    truncations: int
    end_offset: int


class BuiltClean(Protocol):
    """A clean built off to the side (``cleaner.CleanedSegments``): per planned segment its
    cleaned copy, None when unchanged."""
    @property
    def cleaned(self) -> Sequence[LogSegment | None]: ...

    def discard(self) -> None: ...


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int | None


class PartitionLog:
    def __init__(self, directory: str, config: LogConfig | None = None, *, recovery_point: int = 0,
                 log_start_offset: int = 0, had_clean_shutdown: bool = False,
                 clock: Callable[[], int] | None = None, leader_epoch: int = 0,
                 files: OpenFiles | None = None):
        self.directory = os.path.abspath(directory)
        self._files = files         # the LogManager's descriptor budget (open_files.py), or None
        self.config = config or LogConfig()
        self.leader_epoch = leader_epoch
        self._clock = clock or now_ms
        self._closed = False
        os.makedirs(self.directory, exist_ok=True)
        self.producer_state = ProducerStateManager(self.directory, self.config.producer_id_expiration_ms)
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._truncations = 0       # a sync mark taken before a truncation moves no recovery point
        # None: the high watermark is the log end offset (one node); else set by replication
        self._hw: int | None = None
        # read below if the directory has a leader-epoch-checkpoint (a replicated log's)
        self.leader_epoch_cache = LeaderEpochFileCache(self.directory, read=False)
        self._load(recovery_point, log_start_offset, had_clean_shutdown)
        # LogCleaner's checkpoint for this log: offsets before it have been compacted
        self.cleaner_checkpoint = self.log_start_offset
        self._last_flush_ms = self._clock()

    def __repr__(self) -> str:
        return (f"PartitionLog({self.directory!r}, log_start_offset={self.log_start_offset}, "
                f"log_end_offset={self._leo}, segments={len(self._segments)})")

    # --- properties ------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        hw = self._hw
        return self._leo if hw is None else hw

    @property
    def replicated(self) -> bool:
        """The high watermark is set by replication rather than following the log end."""
        return self._hw is not None

    def set_high_watermark(self, offset: int) -> int:
        """UnifiedLog.updateHighWatermark: the high watermark, kept within [log start, log end];
        from the first call on it no longer follows the log end offset. Returns it."""
        hw = self._hw = min(max(offset, self.log_start_offset), self._leo)
        return hw

    def follow_log_end(self) -> None:
        """The high watermark is the log end offset again (one replica)."""
        self._hw = None

    @property
    def last_stable_offset(self) -> int:
        """READ_COMMITTED bound: the first offset of an ongoing transaction, never below the log
        start offset (DeleteRecords may pass it: UnifiedLog.maybeIncrementFirstUnstableOffset),
        else the HW."""
        first_unstable = self.producer_state.first_unstable_offset()
        hw = self._leo if self._hw is None else self._hw
        if first_unstable is None:
            return hw
        return min(max(first_unstable, self.log_start_offset), hw)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def unflushed_messages(self) -> int:
        return self._leo - self.recovery_point

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        self.producer_state.producer_id_expiration_ms = config.producer_id_expiration_ms
        for seg in self._segments:
            seg.index_interval_bytes = config.index_interval_bytes

    def _new_segment(self, base_offset: int, create: bool) -> LogSegment:
        return LogSegment(self.directory, base_offset, index_interval_bytes=self.config.index_interval_bytes,
                          max_index_size=self.config.segment_index_bytes, clock=self._clock, create=create,
                          files=self._files)

    # --- loading ---------------------------------------------------------------------------

    def _load(self, recovery_point: int, log_start_offset: int, clean: bool) -> None:
        bases = []
        names = os.listdir(self.directory)
        if CHECKPOINT_FILE in names:
            self.leader_epoch_cache.load()
        for name in names:
            path = os.path.join(self.directory, name)
            if name.endswith((CLEANED_SUFFIX, DELETED_SUFFIX, ".tmp")):
                os.unlink(path)  # an interrupted compaction, deletion or checkpoint
            elif name.endswith(SWAP_SUFFIX):
                os.replace(path, path[: -len(SWAP_SUFFIX)])
        for name in os.listdir(self.directory):
            stem, ext = os.path.splitext(name)
            if len(stem) == 20 and stem.isdigit():
                if ext == LOG_SUFFIX:
                    bases.append(int(stem))
                elif ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX) and not os.path.exists(
                        os.path.join(self.directory, stem + LOG_SUFFIX)):
                    os.unlink(os.path.join(self.directory, name))  # orphaned index
        bases.sort()
        segments = [self._new_segment(b, create=False) for b in bases]
        # Unclean: re-validate the segment holding the recovery point and all later ones.
        first_unflushed = 0
        for i in range(len(segments) - 1):
            if segments[i + 1].base_offset <= recovery_point:
                first_unflushed = i + 1
        # The aborted transaction index of every recovered segment is rebuilt from the log
        # (Kafka's LogSegment.recover resets it and replays the producer state through it).
        txn_rebuild_from = None
        for i, seg in enumerate(segments):
            if not clean and i >= first_unflushed:
                if txn_rebuild_from is None:
                    txn_rebuild_from = seg.base_offset
                seg.txn_index.reset()
                cut = seg.recover()
                if cut and i < len(segments) - 1:
                    for later in segments[i + 1:]:
                        log.warning("Deleting segment %s after the invalid data in %s", later.log_path, seg.log_path)
                        later.delete()
                    del segments[i + 1:]
                    break
            elif not seg.load():
                log.info("Rebuilding the indexes of %s", seg.log_path)
                seg.recover()
        if not segments:
            segments.append(self._new_segment(max(log_start_offset, 0), create=True))
        for seg in segments[:-1]:
            seg.release_index_handles()
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._leo = segments[-1].next_offset
        self.log_start_offset = max(log_start_offset, segments[0].base_offset)
        if self.log_start_offset > self._leo:
            # DeleteRecords advanced the start past data lost in a crash: start over there.
            start = self.log_start_offset
            self._truncate_fully_and_start_at(start)
        self.recovery_point = self._leo if clean else min(recovery_point, self._leo)
        if self.leader_epoch_cache:     # entries past the recovered end or before the start go (UnifiedLog's load)
            self.leader_epoch_cache.truncate_from_end(self._leo)
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        if txn_rebuild_from is not None and txn_rebuild_from < self._leo:
            # Replay from a snapshot at or before the first recovered segment, through it.
            for offset in [o for o in self.producer_state.snapshots if o > txn_rebuild_from]:
                self.producer_state.delete_snapshot(offset)
            self._rebuild_producer_state(txn_rebuild_from)
        else:
            self._rebuild_producer_state()

    def _rebuild_producer_state(self, txn_rebuild_from: int | None = None) -> None:
        """Reload the newest producer snapshot and replay the log after it; aborted
        transactions whose markers lie at or after ``txn_rebuild_from`` go to the txn index."""
        psm = self.producer_state
        psm.truncate_and_reload(self.log_start_offset, self._leo, self._clock())
        start = max(psm.map_end_offset, self.log_start_offset)
        if start < self._leo:
            i = max(0, bisect_right(self._bases, start) - 1)
            for seg in self._segments[i:]:
                for pos, header in seg.iter_headers(seg.index.lookup(start).position):
                    if header.last_offset < start:
                        continue
                    batch = seg.read_batch(pos, header.size) if header.is_control else None
                    done = psm.replay(header, batch)
                    if (done is not None and done[0].is_aborted and txn_rebuild_from is not None
                            and header.base_offset >= txn_rebuild_from):
                        txn, lso = done
                        seg.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
        psm.update_map_end_offset(self._leo)

    # --- appends ---------------------------------------------------------------------------

    def append(self, records, *, origin: AppendOrigin = AppendOrigin.CLIENT,
               leader_epoch: int | None = None, transaction_version: int = 0) -> AppendResult:
        """Validate, assign offsets and append one produce partition's records (one or more
        batches). A duplicate idempotent batch is answered with its original offsets and not
        written. ``transaction_version``: the one the coordinator wrote these markers with
        (UnifiedLog.appendAsLeader's). Raises the ``kgroup.storage.errors`` / ``records``
        exceptions."""
        self.check_open()
        view = memoryview(records)
        total = len(view)
        if total >= RECORD_BATCH_OVERHEAD:
            header = read_batch_header(view)
            if header.batch_length + LOG_OVERHEAD == total and header.magic == MAGIC_V2:
                # Exactly one batch (every append the broker makes itself, and most produce
                # partitions): what iter_batches would yield, without the walk.
                return self._append_one(view, header, origin, leader_epoch, transaction_version)
        cfg = self.config
        now = self._clock()
        found: list[tuple[int, BatchHeader]] = []
        valid = 0
        client = origin is _CLIENT     # (an Enum's == costs a Python call)
        for pos, header, batch in iter_batches(view):
            if client and header.base_offset != 0:
                raise InvalidRecordError(
                    f"The baseOffset of the record batch in the append should be 0, but it is {header.base_offset}")
            if header.size > cfg.max_message_bytes:
                raise RecordTooLargeError(
                    f"The record batch size in the append is {header.size} bytes which exceeds the maximum "
                    f"configured value of {cfg.max_message_bytes}.")
            validate_batch(header, batch)
            found.append((pos, header))
            valid = pos + header.size
        if not found:
            raise InvalidRecordError("Produce requests must have at least one record batch per partition")
        return self._append_found(view, found, valid, origin, leader_epoch, transaction_version, now)

    def _append_found(self, view: memoryview, found: list[tuple[int, BatchHeader]], valid: int,
                      origin: AppendOrigin, leader_epoch: int | None, transaction_version: int,
                      now: int) -> AppendResult:
        """``append`` of the batches ``found`` (their positions and headers) in ``view[:valid]``."""
        cfg = self.config
        client = origin is _CLIENT
        target = _TOPIC_CODECS.get(cfg.compression_type)
        if (target is not None and client
                and any(header.compression != target for _, header in found)):
            view, found, valid = _recompressed(view, found, target)

        # A writable request buffer (a large frame received into its own bytearray) is patched in
        # place; a read-only one is copied once.
        buf = view[:valid] if not view.readonly else bytearray(view[:valid])
        epoch = self.leader_epoch if leader_epoch is None else leader_epoch
        next_offset = first_offset = self._leo
        max_ts, record_count, headers = NO_TIMESTAMP, 0, []
        for pos, header in found:
            batch_max = self._validate_batch_records(buf, pos, header, origin, now)
            patch_base_offset(buf, next_offset, pos)
            set_partition_leader_epoch(buf, epoch, pos)
            if cfg.log_append_time:
                set_max_timestamp(buf, TimestampType.LOG_APPEND_TIME, now, pos)
                batch_max = now
            else:
                set_max_timestamp(buf, TimestampType.CREATE_TIME, batch_max, pos)
            next_offset += header.last_offset_delta + 1
            record_count += header.records_count
            max_ts = max(max_ts, batch_max)
            headers.append(read_batch_header(buf, pos))
        last_offset = next_offset - 1
        segment = self._segment_for_append(valid, max_ts, last_offset, now)

        pending: dict[int, ProducerAppendInfo] = {}
        psm = self.producer_state
        for (pos, _), header in zip(found, headers):
            if header.has_producer_id:
                control = memoryview(buf)[pos:pos + header.size] if header.is_control else None
                duplicate = psm.check(header, origin, pending, control, transaction_version)
                if duplicate is not None:
                    # Kafka answers with the original batch's offsets and its timestamp.
                    return AppendResult(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                                        self.log_start_offset, duplicate.timestamp,
                                        duplicate.offset_delta + 1, 0, duplicate=True)

        if self._hw is not None and epoch != self.leader_epoch_cache.latest_epoch and epoch >= 0:
            # UnifiedLog.maybeAssignEpochStartOffset (a replicated log; one node's log has one
            # epoch since its start and keeps no checkpoint: no fsync on its produce path)
            self.leader_epoch_cache.assign(epoch, first_offset)
        try:
            segment.append(buf, headers)
        except OSError as e:
            raise KafkaStorageError(f"Error while appending records to {self.directory}: {e}") from e
        self._leo = next_offset
        for info in pending.values():
            if info.completed_transactions:
                self._index_aborted(segment, info)
            psm.update(info)
        psm.update_map_end_offset(next_offset)
        if self.unflushed_messages >= cfg.flush_messages:
            self.flush()
        return AppendResult(first_offset, last_offset, now if cfg.log_append_time else -1,
                            self.log_start_offset, max_ts, record_count, valid)

    def _append_one(self, view: memoryview, header: BatchHeader, origin: AppendOrigin, leader_epoch: int | None,
                    transaction_version: int) -> AppendResult:
        """``append`` of exactly one batch: the same checks, patches and writes in the same order,
        with no per-batch lists (``append`` holds the general case, several batches or a batch
        to recompress)."""
        cfg = self.config
        now = self._clock()
        client = origin is _CLIENT
        size = len(view)
        if client and header.base_offset != 0:
            raise InvalidRecordError(
                f"The baseOffset of the record batch in the append should be 0, but it is {header.base_offset}")
        if size > cfg.max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch size in the append is {size} bytes which exceeds the maximum "
                f"configured value of {cfg.max_message_bytes}.")
        validate_batch(header, view)
        if client:
            target = _TOPIC_CODECS.get(cfg.compression_type)
            if target is not None and header.attributes & COMPRESSION_MASK != target:
                return self._append_found(view, [(0, header)], size, origin, leader_epoch, transaction_version,
                                          now)
        buf = view if not view.readonly else bytearray(view)
        epoch = self.leader_epoch if leader_epoch is None else leader_epoch
        first_offset = self._leo
        batch_max = self._validate_batch_records(buf, 0, header, origin, now)
        patch_base_offset(buf, first_offset)
        set_partition_leader_epoch(buf, epoch)
        log_append_time = cfg.log_append_time
        if log_append_time:
            set_max_timestamp(buf, TimestampType.LOG_APPEND_TIME, now)
            batch_max = now
        else:
            set_max_timestamp(buf, TimestampType.CREATE_TIME, batch_max)
        next_offset = first_offset + header.last_offset_delta + 1
        max_ts = batch_max if batch_max > NO_TIMESTAMP else NO_TIMESTAMP
        written = read_batch_header(buf)
        last_offset = next_offset - 1
        segment = self._segment_for_append(size, max_ts, last_offset, now)
        psm = self.producer_state
        info = None
        if written.producer_id > NO_PRODUCER_ID:
            pending: dict[int, ProducerAppendInfo] = {}
            control = buf if written.attributes & CONTROL_MASK else None
            duplicate = psm.check(written, origin, pending, control, transaction_version)
            if duplicate is not None:
                # Kafka answers with the original batch's offsets and its timestamp.
                return AppendResult(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                                    self.log_start_offset, duplicate.timestamp,
                                    duplicate.offset_delta + 1, 0, duplicate=True)
            info = pending[written.producer_id]
        if self._hw is not None and epoch != self.leader_epoch_cache.latest_epoch and epoch >= 0:
            self.leader_epoch_cache.assign(epoch, first_offset)     # as in append
        try:
            segment.append(buf, [written])
        except OSError as e:
            raise KafkaStorageError(f"Error while appending records to {self.directory}: {e}") from e
        self._leo = next_offset
        if info is not None:
            if info.completed_transactions:
                self._index_aborted(segment, info)
            psm.update(info)
        psm.update_map_end_offset(next_offset)
        if next_offset - self.recovery_point >= cfg.flush_messages:
            self.flush()
        return AppendResult(first_offset, last_offset, now if log_append_time else -1,
                            self.log_start_offset, max_ts, header.records_count, size)

    def append_as_follower(self, records) -> int:
        """UnifiedLog.appendAsFollower: the leader's batches as it stored them (offsets, leader
        epochs and timestamps kept), CRC-checked, starting at this log's end; the producer state
        (idempotent sequences, open and aborted transactions) follows them as at load. A
        trailing partial batch (a fetch cut by its size limit) is left for the next fetch.
        Returns the new log end offset."""
        self.check_open()
        view = memoryview(records)
        found: list[tuple[int, BatchHeader]] = []
        valid = 0
        expected = self._leo
        for pos, header, batch in iter_batches(view):
            if header.base_offset < expected:
                raise InvalidRecordError(
                    f"Out of order offsets: the follower's log ends at {expected}, a replicated batch starts "
                    f"at {header.base_offset} ({self.directory})")
            validate_batch(header, batch)
            found.append((pos, header))
            valid = pos + header.size
            expected = header.next_offset
        if not found:
            return self._leo
        buf = view[:valid]
        first_offset, last_offset = found[0][1].base_offset, found[-1][1].last_offset
        if first_offset > self._leo:
            # the leader's log starts past ours (retention, DeleteRecords): start over there
            self._truncate_fully_and_start_at(first_offset)
        max_ts = max(h.max_timestamp for _, h in found)
        try:
            segment = self._maybe_roll(valid, max_ts, last_offset, self._clock())
        except OSError as e:
            raise KafkaStorageError(f"Error while rolling log segment for {self.directory}: {e}") from e
        headers = [h for _, h in found]
        cache = self.leader_epoch_cache
        for header in headers:
            epoch = header.partition_leader_epoch
            if epoch > cache.latest_epoch:
                cache.assign(epoch, header.base_offset)
        pending: dict[int, ProducerAppendInfo] = {}
        psm = self.producer_state
        for pos, header in found:
            if header.has_producer_id:
                control = buf[pos:pos + header.size] if header.is_control else None
                psm.check(header, AppendOrigin.REPLICATION, pending, control)
        try:
            segment.append(buf, headers)
        except OSError as e:
            raise KafkaStorageError(f"Error while appending records to {self.directory}: {e}") from e
        self._leo = headers[-1].next_offset
        for info in pending.values():
            if info.completed_transactions:
                self._index_aborted(segment, info)
            psm.update(info)
        psm.update_map_end_offset(self._leo)
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()
        return self._leo

    def _index_aborted(self, segment: LogSegment, info: ProducerAppendInfo) -> None:
        """An ABORT marker was appended to ``segment``: record the transaction in its txn index
        with the LSO after it (before ``update`` forgets the transaction, as Kafka orders it)."""
        psm = self.producer_state
        for txn in info.completed_transactions:
            if txn.is_aborted:
                segment.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                                    psm.last_stable_offset(txn)))

    def _validate_batch_records(self, buf: bytearray | memoryview, pos: int, header: BatchHeader, origin: AppendOrigin,
                                now: int) -> int:
        """LogValidator's per-batch checks; returns the batch's max record timestamp."""
        cfg = self.config
        batch = memoryview(buf)[pos:pos + header.size]
        if origin is _CLIENT:
            if header.is_control:
                raise InvalidRecordError("Clients are not allowed to write control records")
            if header.has_producer_id and header.base_sequence < 0:
                raise InvalidRecordError(
                    f"Invalid sequence number {header.base_sequence} in record batch with producerId "
                    f"{header.producer_id}")
        summary = check_batch_records(header, batch)
        log_append_time_batch = header.attributes & TIMESTAMP_TYPE_MASK
        if summary is not None and not log_append_time_batch:
            lo, hi, null_key = summary.min_timestamp, summary.max_timestamp, summary.has_null_key
        elif summary is not None:  # records of a LogAppendTime batch all read as its maxTimestamp
            lo = hi = header.max_timestamp
            null_key = summary.has_null_key
        else:  # compressed: the header stands in for the records (no decompression here)
            lo, hi, null_key = header.base_timestamp, header.max_timestamp, cfg.compact
        suspicious = (null_key and cfg.compact) or log_append_time_batch
        if not cfg.log_append_time:
            suspicious = suspicious or now - lo > cfg.message_timestamp_before_max_ms \
                or hi - now > cfg.message_timestamp_after_max_ms
        if suspicious:
            self._check_records_one_by_one(header, batch, now)
        return hi

    def _check_records_one_by_one(self, header: BatchHeader, batch, now: int) -> None:
        """The exact per-record checks (with batch indexes for ProduceResponse.record_errors),
        run only when the cheap walk saw something to reject."""
        cfg = self.config
        errors, bad_timestamp = [], False
        before, after = cfg.message_timestamp_before_max_ms, cfg.message_timestamp_after_max_ms
        for i, record in enumerate(decode_records(batch, header)):
            if cfg.compact and record.key is None:
                errors.append((i, "Compacted topic cannot accept message without key in topic partition "
                                  f"{os.path.basename(self.directory)}"))
            elif not cfg.log_append_time and record.timestamp != NO_TIMESTAMP:
                if now - record.timestamp > before or record.timestamp - now > after:
                    bad_timestamp = True
                    errors.append((i, f"Timestamp {record.timestamp} of message with offset {record.offset} is "
                                      f"out of range. The timestamp should be within [{now - before}, {now + after}]"))
            elif header.timestamp_type == TimestampType.LOG_APPEND_TIME:
                bad_timestamp = True
                errors.append((i, "Invalid timestamp type in message. Producer should not set timestamp type "
                                  "to LogAppendTime."))
        if not errors:
            return
        if bad_timestamp:
            raise InvalidTimestampError("One or more records have been rejected due to invalid timestamp", errors)
        raise InvalidRecordError(
            f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
            f"showing the first three errors at most: {errors[:3]}", errors)

    # --- rolling ---------------------------------------------------------------------------

    def _segment_for_append(self, size: int, max_timestamp: int, last_offset: int, now: int) -> LogSegment:
        """The segment an append of ``size`` bytes goes to (UnifiedLog.append's size check, then
        maybeRoll)."""
        if size > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"Message batch size is {size} bytes in append, which exceeds the maximum configured "
                f"segment size of {self.config.segment_bytes}.")
        try:
            return self._maybe_roll(size, max_timestamp, last_offset, now)
        except OSError as e:
            raise KafkaStorageError(f"Error while rolling log segment for {self.directory}: {e}") from e

    def _maybe_roll(self, size: int, max_timestamp: int, last_offset: int, now: int) -> LogSegment:
        seg, cfg = self._segments[-1], self.config
        seg_size = seg.size
        if (seg_size > cfg.segment_bytes - size
                or (seg_size > 0 and seg.time_waited_for_roll(now, max_timestamp) > self._max_segment_ms)
                or seg.index.is_full() or seg.time_index.is_full()
                or not seg.index.can_append_offset(last_offset)):
            return self.roll()
        return seg

    @property
    def _max_segment_ms(self) -> int:
        """LogConfig.maxSegmentMs: a compacted log also rolls by max.compaction.lag.ms, so its
        records become cleanable in time."""
        cfg = self.config
        if cfg.compact and cfg.max_compaction_lag_ms > 0:
            return min(cfg.max_compaction_lag_ms, cfg.segment_ms)
        return cfg.segment_ms

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset (no-op on an empty active one)."""
        self.check_open()
        active = self._segments[-1]
        if active.base_offset == self._leo and active.size == 0:
            return active
        active.on_become_inactive()
        seg = self._new_segment(self._leo, create=True)
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        self.producer_state.update_map_end_offset(self._leo)
        self.producer_state.take_snapshot()
        return seg

    # --- reads -----------------------------------------------------------------------------

    def read(self, fetch_offset: int, max_bytes: int, min_one_batch: bool = True,
             max_offset: int | None = None) -> ReadResult:
        """Whole batches starting with the one that contains ``fetch_offset``, up to
        ``max_bytes`` (the first batch alone may exceed it when ``min_one_batch``), none at or
        beyond ``max_offset``. Raises OffsetOutOfRangeError outside [log start, log end]."""
        self.check_open()
        leo, start = self._leo, self.log_start_offset
        if fetch_offset < start or fetch_offset > leo:
            raise OffsetOutOfRangeError(
                f"Received request for offset {fetch_offset}, but we only have log segments in the range "
                f"{start} to {leo}.")
        upper = leo if max_offset is None else min(max_offset, leo)
        if fetch_offset < upper:
            i = max(0, bisect_right(self._bases, fetch_offset) - 1)
            limit = upper if upper < leo else None
            for seg in self._segments[i:]:
                got = seg.read(fetch_offset, max_bytes, limit, min_one_batch)
                if got is not None:
                    first = got.first_header.base_offset if len(got.records) else -1
                    return ReadResult(got.records, fetch_offset, leo, start, leo, first)
        return ReadResult(memoryview(b""), fetch_offset, leo, start, leo, -1)

    def read_committed(self, fetch_offset: int, max_bytes: int, min_one_batch: bool = True
                       ) -> tuple[ReadResult, list[AbortedTxn]]:
        """A read_committed (isolation_level=1) read: nothing at or beyond the last stable
        offset, plus the aborted transactions overlapping what is returned, which the client
        uses to drop their records (Kafka's UnifiedLog.read with FetchIsolation.TXN_COMMITTED)."""
        result = self.read(fetch_offset, max_bytes, min_one_batch, max_offset=self.last_stable_offset)
        if not len(result.records):
            return result, []
        # Searched up to the log end first: usually nothing is found and the exact bound (the
        # offset after the last returned batch, one walk over the batches) is never needed. The
        # wider search finds the same overlapping entries: an entry whose LSO reaches a bound
        # was written when no transaction starting before that bound was still open.
        aborted = self.collect_aborted_transactions(fetch_offset, result.log_end_offset)
        if aborted:
            upper = read_batch_header(result.records, self._last_batch_position(result.records)).next_offset
            aborted = [a for a in aborted if a.first_offset < upper]
        return result, aborted

    @staticmethod
    def _last_batch_position(records: memoryview) -> int:
        pos = last = 0
        while len(records) - pos >= LOG_OVERHEAD:
            last = pos
            pos += INT32.unpack_from(records, pos + 8)[0] + LOG_OVERHEAD
        return last

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset): the txn indexes
        of the segment holding ``fetch_offset`` and of later ones, until an entry's LSO shows
        that nothing later can overlap."""
        out: list[AbortedTxn] = []
        i = max(0, bisect_right(self._bases, fetch_offset) - 1)
        for seg in self._segments[i:]:
            found = seg.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)
            out += found.aborted_transactions
            if found.is_complete:
                break
        return out

    def iter_batches(self, start_offset: int | None = None) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Every stored batch from the one holding ``start_offset`` (default: log start)."""
        start = self.log_start_offset if start_offset is None else start_offset
        i = max(0, bisect_right(self._bases, start) - 1)
        for seg in self._segments[i:]:
            for _, header, batch in seg.iter_batches(seg.index.lookup(start).position):
                if header.last_offset >= start:
                    yield header, batch

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """First record with timestamp >= ``timestamp`` (ListOffsets with a real timestamp)."""
        for seg in self._segments:
            if seg.max_timestamp_so_far >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return TimestampAndOffset(*found)
        return None

    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        """The record with the largest timestamp (ListOffsets MAX_TIMESTAMP, -3)."""
        best = self._segments[0]
        for seg in self._segments[1:]:
            if seg.max_timestamp_so_far > best.max_timestamp_so_far:
                best = seg
        target = best.max_timestamp_so_far
        start = best.index.lookup(best.offset_of_max_timestamp).position
        for pos, header in best.iter_headers(start):
            if header.max_timestamp == target:
                offset = None
                if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
                    offset = header.base_offset
                else:
                    for record in decode_records(best.read_batch(pos, header.size), header):
                        if record.timestamp == target:
                            offset = record.offset
                            break
                if offset is None:
                    return None
                epoch = header.partition_leader_epoch
                return TimestampAndOffset(target, offset, epoch if epoch >= 0 else None)
        return None

    def fetch_offset_by_timestamp(self, target: int) -> TimestampAndOffset | None:
        """ListOffsets for any target, including the special negative ones."""
        if target in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return TimestampAndOffset(NO_TIMESTAMP, self.log_start_offset, None)
        if target == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, self._leo, self.latest_epoch())
        if target in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
            return TimestampAndOffset(NO_TIMESTAMP, -1, -1)  # no tiered storage
        if target == MAX_TIMESTAMP:
            return self.max_timestamp_and_offset()
        return self.offset_for_timestamp(target)

    def latest_epoch(self) -> int | None:
        for seg in reversed(self._segments):
            last = None
            for _, header in seg.iter_headers(seg.index.last_entry().position):
                last = header
            if last is not None:
                return last.partition_leader_epoch if last.partition_leader_epoch >= 0 else None
        return None

    # --- retention, DeleteRecords, truncation ----------------------------------------------

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Kafka's retention pass: whole segments past retention.ms / retention.bytes (delete
        policy) or entirely below the log start offset. When every segment is deletable, a new
        empty active segment is rolled first, so the active one is never deleted."""
        self.check_open()
        now = self._clock() if now_ms is None else now_ms
        cfg, deleted = self.config, 0
        if cfg.delete:
            if cfg.retention_ms >= 0:
                deleted += self._delete_segments(
                    lambda seg, nxt: now - seg.largest_timestamp > cfg.retention_ms, "retention time")
            size = self.size_in_bytes
            if cfg.retention_bytes >= 0 and size >= cfg.retention_bytes:
                diff = size - cfg.retention_bytes

                def over_size(seg: LogSegment, nxt) -> bool:
                    nonlocal diff
                    if diff - seg.size >= 0:
                        diff -= seg.size
                        return True
                    return False
                deleted += self._delete_segments(over_size, "retention size")
        deleted += self._delete_segments(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset, "log start offset")
        return deleted

    def _delete_segments(self, predicate, reason: str) -> int:
        segs, hw = self._segments, self.high_watermark
        deletable = []
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else self._leo
            if hw >= upper and predicate(seg, nxt) and not (nxt is None and seg.size == 0):
                deletable.append(seg)
            else:
                break
        if not deletable:
            return 0
        if len(deletable) == len(segs):
            self.roll()
        for seg in deletable:
            log.info("Deleting segment %s due to %s breach", seg.log_path, reason)
            self._segments.remove(seg)
            seg.delete()
            self.producer_state.delete_snapshot(seg.base_offset)
        self._bases = [s.base_offset for s in self._segments]
        self._increment_log_start_offset(self._segments[0].base_offset)
        return len(deletable)

    def _increment_log_start_offset(self, offset: int) -> None:
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.producer_state.on_log_start_offset_incremented(offset)
            self.leader_epoch_cache.truncate_from_start(offset)
            if self._hw is not None and self._hw < offset:
                self._hw = offset

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset (-1 means the high watermark), drop the
        segments entirely below it, and return the new low watermark."""
        self.check_open()
        if offset == -1:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {offset} since it is larger than the high "
                f"watermark {self.high_watermark}")
        self._increment_log_start_offset(offset)
        self._delete_segments(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset, "log start offset")
        return self.log_start_offset

    def truncate_to(self, offset: int) -> bool:
        """Remove everything from the batch holding ``offset`` on. Returns False when there was
        nothing at or beyond ``offset``."""
        self.check_open()
        if offset < 0:
            raise ValueError(f"Cannot truncate to a negative offset ({offset})")
        if offset >= self._leo:
            return False
        if offset < self.log_start_offset:
            self._truncate_fully_and_start_at(offset)
            return True
        self._truncations += 1
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            self._segments.pop().delete()
        self._bases = [s.base_offset for s in self._segments]
        self._segments[-1].truncate_to(offset)
        self._leo = self._segments[-1].next_offset
        if self._leo < self.log_start_offset:
            # The batch holding the log start went too: nothing readable is left.
            self._truncate_fully_and_start_at(offset)
            return True
        self.recovery_point = min(self.recovery_point, self._leo)
        self.leader_epoch_cache.truncate_from_end(self._leo)
        if self._hw is not None and self._hw > self._leo:
            self._hw = self._leo
        self._rebuild_producer_state()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.check_open()
        self._truncate_fully_and_start_at(offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        self._truncations += 1
        for seg in self._segments:
            seg.delete()
        seg = self._new_segment(offset, create=True)
        self._segments, self._bases = [seg], [offset]
        self._leo = self.log_start_offset = self.recovery_point = offset
        if self._hw is not None:
            self._hw = offset
        self.producer_state.truncate_fully_and_start_at(offset)
        self.leader_epoch_cache.clear()

    # --- compaction (kgroup.storage.cleaner plans and builds; the log swaps) ----------------------

    @property
    def truncations(self) -> int:
        """How many truncations the log has had: a clean planned before one is abandoned."""
        return self._truncations

    @property
    def closed(self) -> bool:
        return self._closed

    def time_ms(self) -> int:
        """The log's clock."""
        return self._clock()

    def segments_changed_since(self, plan: PlannedClean) -> bool:
        """The log changed in a way that touches the segments ``plan`` was made against: closed, a
        planned segment deleted (retention, DeleteRecords) or shortened (truncation), compaction
        turned off."""
        live = set(map(id, self._segments))
        return (self._closed or not self.config.compact or self._truncations != plan.truncations
                or any(id(seg) not in live or seg.size != size for seg, size in zip(plan.segments, plan.sizes)))

    def replace_segments(self, plan: PlannedClean, built: BuiltClean) -> bool:
        """Kafka's ``Log.replaceSegments``: the cleaned segments take the planned ones' place
        (renames, one directory fsync) and the cleaner checkpoint moves to the plan's end. When the
        planned segments changed meanwhile (``segments_changed_since``) the swap is abandoned, the
        cleaned files removed, and False returned."""
        if self.segments_changed_since(plan):
            built.discard()
            return False
        swapped = False
        for seg, cleaned in zip(plan.segments, built.cleaned):
            if cleaned is not None:
                seg.replace_with(cleaned)
                swapped = True
        if swapped:
            fsync_dir(self.directory)
        if plan.end_offset > self.cleaner_checkpoint:
            self.cleaner_checkpoint = plan.end_offset
        return True

    # --- flushing and closing --------------------------------------------------------------

    def flush(self) -> None:
        """fsync everything appended so far and move the recovery point to the log end. The
        broker calls this once for many acks=-1 appends (group commit)."""
        self.check_open()
        active = self._segments[-1]
        for seg in self._segments:
            # The active segment's indexes are rebuilt by recovery; skip their fsync.
            seg.flush(indexes=seg is not active)
        self.recovery_point = self._leo
        self._last_flush_ms = self._clock()

    def sync_mark(self) -> tuple:
        """What a filesystem-wide sync (``syncfs``) started now makes durable: pass it to
        ``synced`` once that sync has finished. Appends meanwhile are not covered by it."""
        self.check_open()
        return self._leo, self._truncations, [seg.sync_mark() for seg in self._segments]

    def synced(self, mark: tuple) -> None:
        """A filesystem-wide sync started at ``mark`` has finished: record what it made durable
        (what flush() records, up to the mark; later appends stay dirty)."""
        self.check_open()
        leo, truncations, segments = mark
        for seg, writes, index_writes, time_index_writes in segments:
            seg.synced(writes, index_writes, time_index_writes)
        if truncations == self._truncations and leo > self.recovery_point:
            self.recovery_point = leo
        self._last_flush_ms = self._clock()

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """flush.ms: flush if the last flush is older than the configured interval."""
        now = self._clock() if now_ms is None else now_ms
        if self.unflushed_messages > 0 and now - self._last_flush_ms >= self.config.flush_ms:
            self.flush()
            return True
        return False

    def close(self, clean: bool = True) -> None:
        """Clean: flush data and indexes and snapshot the producer state, so the next open can
        skip recovery. Unclean: just drop the file handles (what a crash leaves)."""
        if self._closed:
            return
        if clean:
            active = self._segments[-1]
            active.on_become_inactive()
            for seg in self._segments:
                seg.flush(indexes=True)
            self.recovery_point = self._leo
            self.producer_state.update_map_end_offset(self._leo)
            self.producer_state.take_snapshot(sync=True)
            for seg in self._segments:
                seg.close()
        else:
            for seg in self._segments:
                seg.close_handlers()
        self._closed = True

    def delete(self) -> None:
        """Close and remove every file of this log."""
        self.close(clean=False)
        for seg in self._segments:
            seg.delete()
        for offset in list(self.producer_state.snapshots):
            self.producer_state.delete_snapshot(offset)

    def check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"log {self.directory} is closed")



# A topic's compression.type other than "producer": the codec every client batch is stored with.
_CLIENT = AppendOrigin.CLIENT
_TOPIC_CODECS = {"uncompressed": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
                 "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


def _recompressed(view, found, target: int):
    """LogValidator.validateMessagesAndAssignOffsetsCompressed: batches in another codec than the
    topic's compression.type are rebuilt in it (records, timestamps and producer fields kept)."""
    parts, out, pos = [], [], 0
    for start, header in found:
        batch = view[start:start + header.size]
        if header.compression != target:
            batch = build_batch(decode_records(batch, header), producer_id=header.producer_id,
                                producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
                                compression=target, timestamp_type=header.timestamp_type,
                                is_transactional=header.is_transactional,
                                partition_leader_epoch=header.partition_leader_epoch)
        rebuilt = read_batch_header(batch)
        out.append((pos, rebuilt))
        parts.append(batch)
        pos += rebuilt.size
    return memoryview(bytearray(b"".join(parts))), out, pos
