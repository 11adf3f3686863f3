"""Log compaction (cleanup.policy=compact) for one PartitionLog, after Kafka's Cleaner.

Owns the offset map (key bytes -> latest offset) over the cleanable range and the rewrite of
closed segments. The cleanable range ends before the active segment, before any segment
younger than min.compaction.lag.ms and before the first ongoing transaction. A record is
kept when it is the latest for its key; a tombstone additionally only until its batch's
delete horizon (KIP-534): the first pass that keeps a tombstone stamps its batch with
``now + delete.retention.ms`` and a pass after that horizon drops it. Batches left intact
are copied byte for byte; only changed batches are re-encoded (same codec, base offset,
last offset delta and producer fields, as Kafka's ``MemoryRecords.filterTo``). A batch
emptied of records is dropped, unless it is the last batch of a live producer, whose
header is kept so the producer state survives a reload.

A clean is planned, built off to the side (on the broker's cleaner thread) and swapped in:
see CleanPlan. Transactions follow Kafka's CleanedTransactionMetadata: an aborted transaction's
batches are discarded once its ABORT marker is in the cleaned range; a transaction marker is kept
while a pass still meets its transaction's data, the first pass that meets none stamps the
marker's batch with a delete horizon (as a tombstone's, KIP-534) and a pass past that horizon
drops it. The aborted transaction index of a cleaned segment keeps only the transactions whose
data the pass met. A batch emptied of its records keeps an empty header when it is a live
producer's last (its last data batch, or its marker when it has no data since its epoch: the
marker carries that epoch) or the last batch of the cleaned range. Simplifications: segments
are rewritten one by one (Kafka also merges small ones); the offset map covers the whole
cleanable range, not only the dirty part.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from kgroup.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    RecordBatchError,
    TimestampType,
    build_batch,
    control_record_type,
    decode_records,
    read_batch_header,
)
from kgroup.storage.config import LONG_MAX
from kgroup.storage.log import PartitionLog
from kgroup.storage.segment import CLEANED_SUFFIX, LogSegment
from kgroup.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

_COPY_CHUNK = 8 * 1024 * 1024


@dataclass(slots=True)
class CleanerStats:
    segments_cleaned: int = 0
    segments_rewritten: int = 0
    records_removed: int = 0
    bytes_before: int = 0
    bytes_after: int = 0


def cleanable_segments(plog: PartitionLog, now_ms: int) -> list[LogSegment]:
    segs = plog.segments
    cfg = plog.config
    limit = segs[-1].base_offset  # the active segment is never cleaned
    first_unstable = plog.producer_state.first_unstable_offset()
    if first_unstable is not None:
        limit = min(limit, first_unstable)
    first_dirty = getattr(plog, "cleaner_checkpoint", 0)
    out = []
    for seg, nxt in zip(segs, segs[1:]):
        if nxt.base_offset > limit:
            break
        # min.compaction.lag.ms applies to dirty segments only (LogCleanerManager.cleanableOffsets);
        # an emptied clean segment's "largest timestamp" would be its file's mtime
        if (cfg.min_compaction_lag_ms > 0 and nxt.base_offset > first_dirty
                and seg.largest_timestamp > now_ms - cfg.min_compaction_lag_ms):
            break
        out.append(seg)
    return out


@dataclass(slots=True)
class CleanableInfo:
    """LogCleanerManager.cleanableOffsets and the dirty ratio of one compacted log."""
    first_dirty: int             # the cleaner checkpoint: everything before it was cleaned
    first_uncleanable: int       # the active segment, an open transaction or min.compaction.lag.ms
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool   # max.compaction.lag.ms passed for the earliest dirty record

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


def cleanable_info(plog: PartitionLog, now_ms: int) -> CleanableInfo:
    segs = plog.segments
    first_dirty = max(plog.cleaner_checkpoint, plog.log_start_offset)
    uncleanable = cleanable_segments(plog, now_ms)
    first_uncleanable = segs[len(uncleanable)].base_offset if len(uncleanable) < len(segs) else plog.log_end_offset
    clean_bytes = cleanable = 0
    for seg, nxt in zip(uncleanable, segs[1:]):
        if nxt.base_offset <= first_dirty:
            clean_bytes += seg.size
        else:
            cleanable += seg.size
    needs_now = max_compaction_delay(plog, first_dirty, now_ms) > 0
    return CleanableInfo(first_dirty, first_uncleanable, clean_bytes, cleanable, needs_now)


def max_compaction_delay(plog: PartitionLog, first_dirty: int, now_ms: int) -> int:
    """LogCleanerManager.maxCompactionDelay: how long past max.compaction.lag.ms the earliest
    dirty inactive segment is, 0 if none is. A segment's time is its first batch's timestamp
    (ignored when not > 0); every inactive segment from the one holding ``first_dirty`` counts,
    also those min.compaction.lag.ms or an open transaction keep from this clean."""
    segs = plog.segments
    earliest = LONG_MAX
    for seg, nxt in zip(segs, segs[1:]):        # never the active segment
        if nxt.base_offset <= first_dirty:      # wholly before the first dirty offset
            continue
        ts = seg.first_batch_timestamp
        if 0 < ts < earliest:
            earliest = ts
    clean_until = now_ms - max(plog.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


def _decode(seg: LogSegment, header, batch):
    try:
        return decode_records(batch, header)
    except RecordBatchError as e:
        log.warning("Cannot clean batch at offset %d of %s: %s", header.base_offset, seg.log_path, e)
        return None


def build_offset_map(segments: list[LogSegment], abort: threading.Event | None = None
                     ) -> tuple[dict[bytes, int], set[int]]:
    """(key -> offset of its latest record, base offsets of the aborted transactions' batches).
    A transactional record counts only once its COMMIT marker is seen: an aborted (or not yet
    ended) transaction's record must not make an older committed record of its key look
    superseded (Kafka's cleaner skips aborted batches too). The batches of a transaction whose
    ABORT marker is in the range are removed by the clean; those of a transaction still open are
    kept."""
    offset_map: dict[bytes, int] = {}
    aborted: set[int] = set()
    pending: dict[int, list] = {}           # producer id -> [(key, offset)] of its open transaction
    batches: dict[int, list[int]] = {}      # producer id -> base offsets of its open transaction's batches
    for seg in segments:
        for _, header, batch in seg.iter_batches():
            if abort is not None and abort.is_set():
                raise CleanAborted(seg.log_path)
            if header.is_control:
                if header.is_transactional:
                    _end_transaction(seg, header, batch, pending, batches, offset_map, aborted)
                continue
            records = _decode(seg, header, batch)
            if header.is_transactional:
                pending.setdefault(header.producer_id, []).extend(
                    (r.key, r.offset) for r in records or () if r.key is not None)
                batches.setdefault(header.producer_id, []).append(header.base_offset)
                continue
            for record in records or ():
                if record.key is not None:
                    offset_map[record.key] = record.offset
    return offset_map, aborted


def _end_transaction(seg, header, batch, pending, batches, offset_map, aborted) -> None:
    records = _decode(seg, header, batch)
    opened = pending.pop(header.producer_id, ())
    in_range = batches.pop(header.producer_id, ())
    if not records:
        return
    if control_record_type(records[0].key) != CONTROL_COMMIT:
        aborted.update(in_range)
        return
    for key, offset in opened:
        if offset > offset_map.get(key, -1):
            offset_map[key] = offset


def retain_empty(header, last_records: dict[int, tuple[int, int]], end_offset: int) -> bool:
    """Whether a batch left without records keeps an empty header (Kafka's
    ``BatchRetention.RETAIN_EMPTY`` in Cleaner.cleanInto): the last batch of a live producer keeps
    its sequence, or its epoch when its last entry is a marker (``isBatchLastRecordOfProducer``),
    and the last batch of the cleaned range keeps the range's last offset."""
    if header.has_producer_id:
        last = last_records.get(header.producer_id)
        if last is not None:
            last_data_offset, epoch = last
            if last_data_offset >= 0:
                if header.last_offset == last_data_offset:
                    return True
            elif header.is_control and header.producer_epoch == epoch:
                return True
    return header.last_offset + 1 == end_offset


def _empty_header(header) -> bytes:
    return build_batch(
        [], base_offset=header.base_offset, producer_id=header.producer_id,
        producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
        timestamp_type=header.timestamp_type, is_transactional=header.is_transactional,
        is_control=header.is_control, partition_leader_epoch=header.partition_leader_epoch,
        max_timestamp=header.max_timestamp, last_offset_delta=header.last_offset_delta)


def filter_batch(header, records, offset_map: dict[bytes, int], now_ms: int, delete_retention_ms: int,
                 last_records: dict[int, tuple[int, int]], aborted: bool = False, end_offset: int = -1):
    """``(None, 0)`` to keep the batch as it is, else ``(new bytes or b"" to drop it, records
    removed)``; an ``aborted`` transaction's batch loses every record."""
    horizon = header.delete_horizon_ms
    retained = []
    tombstones = False
    for record in () if aborted else records:
        if record.key is None:
            continue  # Kafka's cleaner drops keyless records as invalid
        if record.offset < offset_map.get(record.key, -1):
            continue
        if record.value is None:
            if horizon is not None and now_ms >= horizon:
                continue
            tombstones = True
        retained.append(record)
    set_horizon = tombstones and horizon is None
    removed = len(records) - len(retained)
    if not removed and not set_horizon:
        return None, 0
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    if not retained:
        if retain_empty(header, last_records, end_offset):
            return _empty_header(header), removed
        return b"", removed
    return build_batch(
        retained, base_offset=header.base_offset, producer_id=header.producer_id,
        producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
        compression=header.compression, timestamp_type=header.timestamp_type,
        is_transactional=header.is_transactional, partition_leader_epoch=header.partition_leader_epoch,
        max_timestamp=header.max_timestamp if log_append else None,
        last_offset_delta=header.last_offset_delta,
        delete_horizon_ms=now_ms + delete_retention_ms if set_horizon else horizon), removed


def filter_control_batch(header, records, can_discard: bool, now_ms: int, delete_retention_ms: int,
                         last_records: dict[int, tuple[int, int]], end_offset: int = -1):
    """The cleaner's rule for a transaction marker (Cleaner.cleanInto with MemoryRecords.filterTo),
    answered as ``filter_batch``: a marker whose transaction has no data left (``can_discard``)
    is stamped with a delete horizon the first time and dropped once a pass is past it (an empty
    header kept where ``retain_empty`` says); any other marker is kept as it is."""
    horizon = header.delete_horizon_ms
    if not records:
        # a header the cleaner emptied earlier: it goes unless it must still be kept
        return (None, 0) if retain_empty(header, last_records, end_offset) else (b"", 0)
    if can_discard and horizon is not None and horizon <= now_ms:
        if retain_empty(header, last_records, end_offset):
            return _empty_header(header), len(records)
        return b"", len(records)
    if not can_discard or horizon is not None:
        return None, 0
    return build_batch(
        records, base_offset=header.base_offset, producer_id=header.producer_id,
        producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
        compression=header.compression, timestamp_type=header.timestamp_type,
        is_transactional=header.is_transactional, is_control=True,
        partition_leader_epoch=header.partition_leader_epoch,
        max_timestamp=header.max_timestamp if header.timestamp_type == TimestampType.LOG_APPEND_TIME else None,
        last_offset_delta=header.last_offset_delta,
        delete_horizon_ms=now_ms + delete_retention_ms), 0


class CleanedTransactions:
    """Kafka's CleanedTransactionMetadata for one pass: which producers' transactions the pass
    has met data of since their last marker, so a marker is known to end a transaction with data
    left (kept) or without (removable once its delete horizon passed). ``aborted`` holds the base
    offsets of the batches of the aborted transactions whose ABORT marker is in the range."""
    __slots__ = ("aborted", "committed_seen", "aborted_seen", "kept_aborts")

    def __init__(self, aborted: set[int]):
        self.aborted = aborted
        self.committed_seen: set[int] = set()     # ongoingCommittedTxns
        self.aborted_seen: set[int] = set()       # ongoingAbortedTxns with a lastObservedBatchOffset
        self.kept_aborts: set[int] = set()        # ABORT marker offsets whose index entry stays

    def on_batch(self, header) -> bool:
        """A data batch was read; True when it belongs to an aborted transaction (discard it)."""
        if not header.is_transactional:
            return False
        if header.base_offset in self.aborted:
            self.aborted_seen.add(header.producer_id)
            return True
        self.committed_seen.add(header.producer_id)
        return False

    def on_control_batch(self, header, records) -> bool:
        """A marker was read; True when its transaction has no data left in the log."""
        if not records:
            return True     # emptied by an earlier clean
        kind = control_record_type(records[0].key)
        pid = header.producer_id
        if kind == CONTROL_ABORT:
            if pid in self.aborted_seen:
                self.aborted_seen.discard(pid)
                self.kept_aborts.add(header.base_offset)
                return False
            return True
        if kind == CONTROL_COMMIT:
            if pid in self.committed_seen:
                self.committed_seen.discard(pid)
                return False
            return True
        return False


class CleanAborted(Exception):
    """The clean was aborted (its log deleted or closed) while it was being built."""


@dataclass(slots=True, eq=False)
class CleanPlan:
    """One clean, as Kafka's LogCleaner runs it on its own thread: planned on the log's owner
    thread (plan_clean), built from this plan alone on the cleaner's thread (build_cleaned:
    reads the closed segments through its own descriptors, writes ``.cleaned`` segments beside
    them, never touches the PartitionLog), then swapped in on the owner thread
    (PartitionLog.replace_segments, Kafka's replaceSegments), only if none of the planned
    segments changed meanwhile. Until then the log keeps serving reads and taking appends (the
    active segment is never cleaned)."""
    log: PartitionLog
    directory: str
    segments: list[LogSegment]          # the segments to clean (read only through their paths)
    sizes: list[int]                    # their sizes when planned (closed: they only shrink by truncation)
    end_offset: int                     # the cleaner checkpoint once they are cleaned
    truncations: int
    now_ms: int
    delete_retention_ms: int
    producer_last_records: dict[int, tuple[int, int]]    # producer id -> (last data offset or -1, epoch)
    index_interval_bytes: int
    max_index_size: int
    abort: threading.Event = field(default_factory=threading.Event)
    tp: tuple[str, int] = ("", -1)       # (topic, partition), set by the LogManager that planned it


@dataclass(slots=True)
class CleanedSegments:
    """What build_cleaned made: for each planned segment, its cleaned copy (None: unchanged)."""
    cleaned: list[LogSegment | None]
    stats: CleanerStats

    def discard(self) -> None:
        for seg in self.cleaned:
            if seg is not None:
                seg.delete_files()


def plan_clean(plog: PartitionLog, now_ms: int) -> CleanPlan | None:
    if not plog.config.compact:
        return None
    segments = cleanable_segments(plog, now_ms)
    if not segments:
        return None
    segs = plog.segments
    end = segs[len(segments)].base_offset if len(segments) < len(segs) else plog.log_end_offset
    cfg = plog.config
    return CleanPlan(plog, plog.directory, segments, [s.size for s in segments], end, plog.truncations,
                     now_ms, cfg.delete_retention_ms,
                     {pid: (e.last_data_offset, e.producer_epoch)
                      for pid, e in plog.producer_state.producers.items()},
                     cfg.index_interval_bytes, cfg.segment_index_bytes)


def build_cleaned(plan: CleanPlan) -> CleanedSegments:
    """The heavy part of a clean (any thread): the offset map over the planned segments and
    their cleaned copies, written and fsynced as ``.cleaned`` files with their indexes.
    Raises CleanAborted once ``plan.abort`` is set (its files removed)."""
    stats = CleanerStats()
    readers: list[LogSegment] = []
    done = CleanedSegments([], stats)
    try:
        for seg, size in zip(plan.segments, plan.sizes):
            # a private reader: the log's own descriptors belong to its thread (open_files.py)
            reader = LogSegment(plan.directory, seg.base_offset, create=False)
            reader.size = min(reader.size, size)
            readers.append(reader)
        offset_map, aborted = build_offset_map(readers, plan.abort)
        txns = CleanedTransactions(aborted)
        for reader in readers:
            done.cleaned.append(_clean_segment(reader, plan, offset_map, txns, stats))
            stats.segments_cleaned += 1
        return done
    except BaseException:
        done.discard()
        raise
    finally:
        for reader in readers:
            reader.close_handlers()


def _clean_segment(reader: LogSegment, plan: CleanPlan, offset_map, txns: CleanedTransactions,
                   stats: CleanerStats) -> LogSegment | None:
    """The cleaned copy of one segment, or None when cleaning changes nothing in it."""
    out: LogSegment | None = None
    parts: list = []
    headers: list = []
    pending = 0

    def new_segment() -> LogSegment:
        return LogSegment(plan.directory, reader.base_offset, create=True, suffix=CLEANED_SUFFIX,
                          index_interval_bytes=plan.index_interval_bytes, max_index_size=plan.max_index_size)

    def add(data, header) -> None:
        # batches are appended to the cleaned segment a few MiB at a time (its indexes built
        # as appends build them)
        nonlocal pending
        parts.append(data)
        headers.append(header)
        pending += len(data)
        if pending >= _COPY_CHUNK:
            flush_parts()

    def flush_parts() -> None:
        nonlocal pending
        if headers:
            assert out is not None      # made before the first add()
            out.append(b"".join(parts), headers)
        parts.clear()
        headers.clear()
        pending = 0
    try:
        for pos, header, batch in reader.iter_batches():
            if plan.abort.is_set():
                raise CleanAborted(reader.log_path)
            result = None
            records = _decode(reader, header, batch)
            if records is not None:
                if header.is_control:
                    result, removed = filter_control_batch(
                        header, records, txns.on_control_batch(header, records), plan.now_ms,
                        plan.delete_retention_ms, plan.producer_last_records, plan.end_offset)
                else:
                    result, removed = filter_batch(header, records, offset_map, plan.now_ms,
                                                   plan.delete_retention_ms, plan.producer_last_records,
                                                   txns.on_batch(header), plan.end_offset)
                stats.records_removed += removed
            if result is None and out is None:
                continue  # nothing changed yet: no need to copy anything
            if out is None:
                # First change: start the cleaned segment with the unchanged prefix.
                out = new_segment()
                for _, kept_header, kept in reader.iter_batches(0, pos):
                    add(kept, kept_header)
            if result is None:
                add(batch, header)
            elif result:
                add(result, read_batch_header(result))
        # the aborted transactions whose data this pass met stay in the index (Kafka's cleaned
        # index gets those whose ABORT marker is retained with data behind it)
        index = reader.txn_index.entries()
        kept_index = [t for t in index if t.last_offset in txns.kept_aborts]
        if out is None:
            if len(kept_index) == len(index):
                return None
            out = new_segment()
            for _, kept_header, kept in reader.iter_batches():
                add(kept, kept_header)
        for txn in kept_index:
            out.txn_index.append(AbortedTxn(*txn))
        flush_parts()
        out.on_become_inactive()
        out.flush(indexes=True)
        out.close_handlers()
    except BaseException:
        if out is not None:
            out.delete_files()
        raise
    stats.segments_rewritten += 1
    stats.bytes_before += reader.size
    stats.bytes_after += out.size
    return out


def swap_cleaned(plan: CleanPlan, built: CleanedSegments) -> CleanerStats | None:
    """The cleaned segments replace the planned ones, on the log's owner thread
    (``PartitionLog.replace_segments``); None when the swap was abandoned because the log changed
    in a way that touches the planned segments meanwhile."""
    return built.stats if plan.log.replace_segments(plan, built) else None


def clean(plog: PartitionLog, now_ms: int | None = None) -> CleanerStats:
    """cleanup.policy=compact: a whole clean on the calling thread (tests, tools), keeping the last
    record per key; the broker builds it on its cleaner thread instead (LogManager.plan_clean /
    finish_clean)."""
    plog.check_open()
    plan = plan_clean(plog, plog.time_ms() if now_ms is None else now_ms)
    if plan is None:
        return CleanerStats()
    return swap_cleaned(plan, build_cleaned(plan)) or CleanerStats()
