"""Idempotent/transactional producer state of one partition (Kafka's ProducerStateManager).

Owns, per producer id: the current epoch, the metadata of the last 5 appended batches (for
duplicate detection), the coordinator epoch, the last timestamp and the first offset of an
ongoing transaction; the sequence/epoch rules applied before an append; and the
``<offset>.snapshot`` files (Kafka's format) from which the state reloads, the rest being
replayed from the log's batch headers.

Rules (ProducerAppendInfo): an epoch lower than the current one is INVALID_PRODUCER_EPOCH; a
new epoch must start at sequence 0 unless the producer has no epoch yet; within an epoch the
first sequence must follow the last one (Int.MAX wraps to 0); a producer with no state may
write any sequence (Kafka 4.0 does not answer UNKNOWN_PRODUCER_ID). A batch whose epoch and
sequence range match one of the 5 retained batches is a duplicate.
"""
from __future__ import annotations

import logging
import os
import re
import struct
from collections import deque
from enum import Enum
from typing import Iterable, NamedTuple

from kgroup.protocol.records import (
    CONTROL_ABORT,
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
    crc32c,
    decode_records,
    decrement_sequence,
    read_end_transaction_marker,
    read_end_txn_marker_fields,
)
from kgroup.storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 2**31 - 1
SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_NAME = re.compile(r"^(\d{20})\.snapshot$")
_SNAPSHOT_VERSION = 1
_SNAP_HEAD = struct.Struct(">hIi")  # version, crc, number of entries
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")  # pid, epoch, last seq, last offset, offset delta, ts, coord epoch, txn first


class AppendOrigin(Enum):
    """Who appends: clients get full validation, the coordinator writes without sequences,
    replication (and log recovery) trusts what is already in the log."""
    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


class BatchMetadata(NamedTuple):
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerStateEntry:
    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp",
                 "current_txn_first_offset", "batch_metadata")

    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH,
                 coordinator_epoch: int = -1, last_timestamp: int = NO_TIMESTAMP,
                 current_txn_first_offset: int | None = None,
                 batches: Iterable[BatchMetadata] = ()):
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batch_metadata: deque[BatchMetadata] = deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        if self.producer_epoch != epoch:
            # A new epoch starts a new sequence space: old batches cannot be duplicates.
            self.batch_metadata.clear()
            self.producer_epoch = epoch
            return True
        return False

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.maybe_update_producer_epoch(epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, nxt: "ProducerStateEntry") -> None:
        self.maybe_update_producer_epoch(nxt.producer_epoch)
        self.batch_metadata.extend(nxt.batch_metadata)
        self.coordinator_epoch = nxt.coordinator_epoch
        self.current_txn_first_offset = nxt.current_txn_first_offset
        self.last_timestamp = nxt.last_timestamp

    def find_duplicate_batch(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        for meta in self.batch_metadata:
            if meta.first_seq == first and meta.last_seq == last:
                return meta
        return None

    def __repr__(self) -> str:
        return (f"ProducerStateEntry(producer_id={self.producer_id}, epoch={self.producer_epoch}, "
                f"txn_first_offset={self.current_txn_first_offset}, "
                f"coordinator_epoch={self.coordinator_epoch}, batches={list(self.batch_metadata)})")


_SHORT_MAX = 32767


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerAppendInfo:
    """Validates the batches one producer appends in one request, chaining them, and holds
    the resulting state until the append succeeds (then ``ProducerStateManager.update``)."""

    def __init__(self, producer_id: int, current: ProducerStateEntry, origin: AppendOrigin):
        self.producer_id = producer_id
        self.current = current
        self.origin = origin
        # Same epoch/txn state as now but no batches: they are added as the append proceeds.
        self.updated = ProducerStateEntry(producer_id, current.producer_epoch, current.coordinator_epoch,
                                          current.last_timestamp, current.current_txn_first_offset)
        self.started_transactions: list[int] = []
        self.completed_transactions: list[CompletedTxn] = []

    def _check_producer_epoch(self, epoch: int, offset: int, transaction_version: int = 0) -> None:
        """A marker of transaction version 2 carries the epoch the coordinator bumped when it ended
        the transaction, so it must be above the producer's (Kafka's checkProducerEpoch); the same
        epoch is a retry of a marker already written when no transaction is open (KAFKA-19999)."""
        current = self.updated.producer_epoch
        if transaction_version >= 2:
            if epoch > current or (epoch == current and (self.updated.current_txn_first_offset is None
                                                          or epoch == _SHORT_MAX)):
                return
        elif epoch >= current:
            return
        comparison = "<=" if transaction_version >= 2 else "<"
        message = (f"Epoch of producer {self.producer_id} at offset {offset} is {epoch}, which is "
                   f"{comparison} the last seen epoch {current}")
        if self.origin == AppendOrigin.REPLICATION:
            log.warning(message)
        else:
            raise InvalidProducerEpochError(message)

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        updated, current = self.updated, self.current
        if epoch != updated.producer_epoch:
            if first_seq != 0 and updated.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at offset "
                    f"{offset}: {epoch} (request epoch), {first_seq} (seq. number), "
                    f"{updated.producer_epoch} (current producer epoch)")
            return
        if not updated.is_empty:
            last_seq = updated.last_seq
        elif epoch == current.producer_epoch:
            last_seq = current.last_seq
        else:
            last_seq = NO_SEQUENCE
        # No current epoch (e.g. all the producer's records were removed): any sequence goes.
        if not (current.producer_epoch == NO_PRODUCER_EPOCH or _in_sequence(last_seq, first_seq)):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset {offset}: "
                f"{first_seq} (incoming seq. number), {last_seq} (current end sequence number)")

    def append(self, header: BatchHeader, batch=None, transaction_version: int = 0) -> CompletedTxn | None:
        """Validate and stage one batch (offsets already assigned). ``batch`` (the bytes) is
        needed for control batches, whose one record is the end-transaction marker;
        ``transaction_version`` is the one the coordinator wrote the marker with (WriteTxnMarkers
        v2), 0 for data and for markers replayed from the log."""
        if header.is_control:
            if header.records_count == 0 or batch is None:
                return None  # the cleaner removed the marker; nothing to apply
            fields = read_end_txn_marker_fields(batch, header)
            if fields is not None:      # the usual layout, read without decoding the record
                control_type, coordinator_epoch, timestamp = fields
                return self.append_end_txn_marker(control_type == CONTROL_ABORT, coordinator_epoch,
                                                  header.producer_epoch, header.base_offset, timestamp,
                                                  transaction_version)
            records = decode_records(batch, header)
            if not records:
                return None
            marker = read_end_transaction_marker(records[0])
            return self.append_end_txn_marker(marker.control_type == CONTROL_ABORT, marker.coordinator_epoch,
                                              header.producer_epoch, header.base_offset, records[0].timestamp,
                                              transaction_version)
        self.append_data_batch(header.producer_epoch, header.base_sequence, header.last_sequence,
                               header.max_timestamp, header.base_offset, header.last_offset,
                               header.is_transactional)
        return None

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, last_timestamp: int,
                          first_offset: int, last_offset: int, is_transactional: bool) -> None:
        self._check_producer_epoch(epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        self.updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        txn_first = self.updated.current_txn_first_offset
        if txn_first is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {self.producer_id} at offset {first_offset}")
        if txn_first is None and is_transactional:
            self.updated.current_txn_first_offset = first_offset
            self.started_transactions.append(first_offset)

    def append_end_txn_marker(self, is_abort: bool, coordinator_epoch: int, epoch: int, offset: int,
                              timestamp: int, transaction_version: int = 0) -> CompletedTxn | None:
        self._check_producer_epoch(epoch, offset, transaction_version)
        if self.updated.coordinator_epoch > coordinator_epoch:
            if self.origin != AppendOrigin.REPLICATION:
                raise TransactionCoordinatorFencedError(
                    f"Invalid coordinator epoch for producerId {self.producer_id} at offset {offset}: "
                    f"{coordinator_epoch} (zombie), {self.updated.coordinator_epoch} (current)")
        self.updated.maybe_update_producer_epoch(epoch)
        first = self.updated.current_txn_first_offset
        completed = CompletedTxn(self.producer_id, first, offset, is_abort) if first is not None else None
        self.updated.coordinator_epoch = coordinator_epoch
        self.updated.current_txn_first_offset = None
        self.updated.last_timestamp = timestamp
        if completed is not None:
            self.completed_transactions.append(completed)
        return completed


class ProducerStateManager:
    def __init__(self, directory: str, producer_id_expiration_ms: int = 24 * 3600 * 1000):
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing_txns: dict[int, int] = {}  # first offset -> producer id
        self.last_map_offset = 0
        self.last_snap_offset = 0
        self.snapshots: list[int] = self._list_snapshots()

    # --- lookups ---------------------------------------------------------------------------

    @property
    def map_end_offset(self) -> int:
        return self.last_map_offset

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        entry = self.producers.get(header.producer_id)
        return entry.find_duplicate_batch(header) if entry is not None else None

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing_txns) if self.ongoing_txns else None

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is done (call before ``update`` removes it): the first
        offset of another producer's open transaction, else the offset after the marker
        (ProducerStateManager.lastStableOffset; the aborted transaction index records it)."""
        others = [first for first, pid in self.ongoing_txns.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    # --- appends ---------------------------------------------------------------------------

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(producer_id, current, origin)

    def check(self, header: BatchHeader, origin: AppendOrigin = AppendOrigin.CLIENT,
              pending: dict[int, ProducerAppendInfo] | None = None, batch=None,
              transaction_version: int = 0) -> BatchMetadata | None:
        """Return the original batch metadata if ``header`` is a duplicate (clients only);
        otherwise validate it into ``pending`` (raising Kafka's errors) and return None."""
        if origin is AppendOrigin.CLIENT:
            dup = self.find_duplicate(header)
            if dup is not None:
                return dup
        if pending is None:
            pending = {}
        info = pending.get(header.producer_id)
        if info is None:
            info = pending[header.producer_id] = self.prepare_update(header.producer_id, origin)
        info.append(header, batch, transaction_version)
        return None

    def update(self, info: ProducerAppendInfo) -> None:
        current = self.producers.get(info.producer_id)
        if current is None:
            self.producers[info.producer_id] = info.updated
        else:
            current.update(info.updated)
        for first in info.started_transactions:
            self.ongoing_txns[first] = info.producer_id
        for txn in info.completed_transactions:
            self.ongoing_txns.pop(txn.first_offset, None)

    def replay(self, header: BatchHeader, batch=None) -> tuple[CompletedTxn, int] | None:
        """Apply a batch already in the log (load/recovery): no sequence validation. For a
        marker that ends a transaction, returns it with the LSO after it (for the txn index)."""
        done = None
        if header.has_producer_id:
            info = self.prepare_update(header.producer_id, AppendOrigin.REPLICATION)
            completed = info.append(header, batch)
            if completed is not None:
                done = completed, self.last_stable_offset(completed)
            self.update(info)
        self.last_map_offset = header.next_offset
        return done

    def update_map_end_offset(self, offset: int) -> None:
        self.last_map_offset = offset

    def remove_expired_producers(self, now_ms: int) -> int:
        """Kafka's ProducerStateManager.removeExpiredProducers: forget the producers idle for
        producer.id.expiration.ms with no transaction open; returns how many."""
        expired = [pid for pid, e in self.producers.items() if self._is_expired(now_ms, e)]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def _is_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return (entry.current_txn_first_offset is None
                and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms)

    # --- snapshots and reloads -------------------------------------------------------------

    def _snapshot_path(self, offset: int) -> str:
        return os.path.join(self.directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def _list_snapshots(self) -> list[int]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(_SNAPSHOT_NAME.match, names) if m)

    def take_snapshot(self, sync: bool = False) -> None:
        """Write the state at ``map_end_offset`` unless a snapshot there already exists."""
        if self.last_map_offset <= self.last_snap_offset:
            return
        offset = self.last_map_offset
        entries = b"".join(
            _SNAP_ENTRY.pack(pid, e.producer_epoch, e.last_seq, e.last_data_offset, e.last_offset_delta,
                             e.last_timestamp, e.coordinator_epoch,
                             -1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
            for pid, e in self.producers.items())
        body = struct.pack(">i", len(self.producers)) + entries
        data = struct.pack(">hI", _SNAPSHOT_VERSION, crc32c(body)) + body
        path = self._snapshot_path(offset)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
        if offset not in self.snapshots:
            self.snapshots.append(offset)
            self.snapshots.sort()
        self.last_snap_offset = offset

    @staticmethod
    def read_snapshot(path: str) -> list[ProducerStateEntry]:
        with open(path, "rb") as f:
            data = f.read()
        if len(data) < _SNAP_HEAD.size:
            raise ValueError("snapshot is truncated")
        version, crc, count = _SNAP_HEAD.unpack_from(data, 0)
        if version != _SNAPSHOT_VERSION:
            raise ValueError(f"snapshot contained an unknown file version {version}")
        if crc32c(memoryview(data)[6:]) != crc:
            raise ValueError("snapshot is corrupt (CRC is no longer valid)")
        if count < 0 or len(data) != _SNAP_HEAD.size + count * _SNAP_ENTRY.size:
            raise ValueError("snapshot failed schema validation")
        out = []
        for pid, epoch, seq, offset, delta, ts, coord, txn in _SNAP_ENTRY.iter_unpack(data[_SNAP_HEAD.size:]):
            batches = [BatchMetadata(seq, offset, delta, ts)] if offset >= 0 else []
            out.append(ProducerStateEntry(pid, epoch, coord, ts, txn if txn >= 0 else None, batches))
        return out

    def _load_latest_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while self.snapshots:
            offset = self.snapshots[-1]
            path = self._snapshot_path(offset)
            try:
                entries = self.read_snapshot(path)
            except (OSError, ValueError) as e:
                log.warning("Failed to load producer snapshot from '%s': %s", path, e)
                self.delete_snapshot(offset)
                continue
            for entry in entries:
                if not self._is_expired(now_ms, entry):
                    self.producers[entry.producer_id] = entry
                    if entry.current_txn_first_offset is not None:
                        self.ongoing_txns[entry.current_txn_first_offset] = entry.producer_id
            self.last_snap_offset = self.last_map_offset = offset
            return
        self.last_snap_offset = self.last_map_offset = log_start_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        """Drop snapshots outside (log start, log end] and reload the newest remaining one;
        the caller then replays the log from ``map_end_offset``."""
        for offset in list(self.snapshots):
            if offset > log_end_offset or offset <= log_start_offset:
                self.delete_snapshot(offset)
        if log_end_offset != self.last_map_offset or not self.producers:
            self.producers.clear()
            self.ongoing_txns.clear()
            self._load_latest_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        for snap in list(self.snapshots):
            self.delete_snapshot(snap)
        self.last_snap_offset = 0
        self.last_map_offset = offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        if self.last_map_offset < log_start_offset:
            self.last_map_offset = log_start_offset
        self.last_snap_offset = self.snapshots[-1] if self.snapshots else log_start_offset

    def delete_snapshot(self, offset: int) -> None:
        if offset in self.snapshots:
            self.snapshots.remove(offset)
        try:
            os.unlink(self._snapshot_path(offset))
        except FileNotFoundError:
            pass

