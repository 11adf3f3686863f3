"""A share-partition: one share group's view of one topic partition (Kafka's SharePartition). Pure:
``now_ms`` comes with every call; lock expiries are named timers on the injected scheduler.

The records between the start offset and the end offset are in flight, each in a state:

    AVAILABLE     may be acquired (never delivered, released, or its lock expired)
    ACQUIRED      delivered to one member, locked until acknowledged or the lock expires
    ACKNOWLEDGED  accepted by its member: never delivered again           (terminal)
    ARCHIVED      rejected, delivered share.delivery.count.limit times, or a gap (terminal)

A fetch acquires, from the fetch offset on, the AVAILABLE records and the records past the end
offset (new ones), at most ``max_records`` and never more than ``share.partition.max.record.locks``
in flight; each acquisition counts a delivery and starts a lock of share.record.lock.duration.ms.
An acknowledgement (ACCEPT, RELEASE, REJECT, or GAP for an offset with no record) applies only to
records the member holds (else INVALID_RECORD_STATE); a released or expired record whose delivery
count reached the limit is ARCHIVED instead of AVAILABLE. The start offset moves past the terminal
records at its front, so the in-flight window only holds what still matters.

Durability (through the share coordinator's WriteShareGroupState): ``state_batches()`` is the state
to persist - the in-flight records as runs of (state, delivery count), an ACQUIRED record written
as AVAILABLE with its count, so after a crash it is delivered again with its count incremented, and
an acknowledged record is never delivered again. ``initialize`` rebuilds a share-partition from the
persisted start offset and batches.
"""
from __future__ import annotations

import enum
from typing import Iterable

from ..protocol.errors import ErrorCode, KafkaError


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


_TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


def delivery_complete_count(batches) -> int:
    """Kafka's SharePartition.deliveryCompleteCount over persisted state batches ``(first, last,
    state, count)``: the records in flight that are ACKNOWLEDGED or ARCHIVED (what the lag of
    DescribeShareGroupOffsets leaves out)."""
    return sum(b[1] - b[0] + 1 for b in batches if b[2] in _TERMINAL)


class InFlightRecord:
    __slots__ = ("state", "delivery_count", "member_id", "acquisition")

    def __init__(self, state: RecordState, delivery_count: int):
        self.state = state
        self.delivery_count = delivery_count
        self.member_id: str | None = None
        self.acquisition = 0          # the acquisition (lock) holding it


class SharePartition:
    def __init__(self, group_id: str, topic_id: bytes, partition: int, *, delivery_count_limit: int = 5,
                 max_record_locks: int = 2000, lock_duration_ms: int = 30000, timer=None):
        self.group_id, self.topic_id, self.partition = group_id, topic_id, partition
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self.lock_duration_ms = lock_duration_ms
        self.timer = timer              # coordinator.timer.CoordinatorTimer (named timers)
        self.state_epoch = 0
        self.start_offset = 0
        self.end_offset = 0             # the first offset never acquired
        self.records: dict[int, InFlightRecord] = {}
        self._acquisitions = 0
        self._locks: dict[int, tuple[str, list[int]]] = {}     # acquisition -> (member, offsets)
        self.dirty = False              # state changed since the last ``state_batches`` was taken
        self.on_released = None         # fn() when records became AVAILABLE (wakes parked fetches)

    # -- initialization (Kafka's maybeInitialize: ReadShareGroupState) ---------------------------
    def initialize(self, state_epoch: int, start_offset: int, batches: Iterable, reset_offset: int) -> None:
        """``start_offset`` -1: the share-partition starts at ``reset_offset`` (share.auto.offset.reset,
        resolved by the caller against the log). Persisted AVAILABLE records keep their count; an
        ACQUIRED one (not written by Kafka, by convention) counts as AVAILABLE."""
        self.state_epoch = state_epoch
        self.start_offset = reset_offset if start_offset < 0 else start_offset
        self.end_offset = self.start_offset
        self.records.clear()
        for first, last, state, count in sorted(batches):
            state = RecordState(state if state != RecordState.ACQUIRED else RecordState.AVAILABLE)
            for o in range(max(first, self.start_offset), last + 1):
                self.records[o] = InFlightRecord(state, count)
            self.end_offset = max(self.end_offset, last + 1)
        self._advance_start()

    # -- reads ----------------------------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """Where a fetch reads from: the first AVAILABLE in-flight record, else the end offset."""
        for o in range(self.start_offset, self.end_offset):
            r = self.records.get(o)
            if r is None or r.state is RecordState.AVAILABLE:
                return o
        return self.end_offset

    def can_acquire(self) -> bool:
        """Whether a fetch could get anything (AVAILABLE records, or room for new ones)."""
        if self.end_offset - self.start_offset < self.max_record_locks:
            return True
        return any(r.state is RecordState.AVAILABLE for r in self.records.values())

    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    # -- acquire (Kafka's SharePartition.acquire) -------------------------------------------------
    def acquire(self, member_id: str, ranges: Iterable[tuple[int, int]], max_records: int, now_ms: int,
                last_offset_limit: int | None = None, archive: Iterable[int] = ()) -> list[tuple[int, int, int]]:
        """Acquire for ``member_id`` the acquirable records among the offsets of ``ranges`` (the
        fetched batches' [first, last]), up to ``max_records``; ``last_offset_limit``: nothing at or
        past it (read_committed's last stable offset); ``archive``: offsets of aborted
        transactions' records (ARCHIVED, never delivered). Returns AcquiredRecords ranges
        ``(first, last, delivery count)``."""
        archive = set(archive)
        acquired: list[int] = []
        room = self.max_record_locks - (self.end_offset - self.start_offset)
        for first, last in ranges:
            if last_offset_limit is not None:
                last = min(last, last_offset_limit - 1)
            for o in range(max(first, self.start_offset), last + 1):
                if len(acquired) >= max_records:
                    break
                r = self.records.get(o)
                if r is None:
                    if o < self.end_offset:
                        continue            # below the end offset and not in flight: terminal, gone
                    if o > self.end_offset:
                        # offsets skipped in the log (compaction, batch boundaries): nothing to deliver
                        for gap in range(self.end_offset, o):
                            self.records[gap] = InFlightRecord(RecordState.ARCHIVED, 0)
                        self.end_offset = o
                    if room <= 0:
                        break
                    r = self.records[o] = InFlightRecord(RecordState.AVAILABLE, 0)
                    self.end_offset = o + 1
                    room -= 1
                    if o in archive:
                        r.state = RecordState.ARCHIVED
                        continue
                elif r.state is not RecordState.AVAILABLE:
                    continue
                acquired.append(o)
        if not acquired:
            self._advance_start()
            return []
        self._acquisitions += 1
        a = self._acquisitions
        out: list[list[int]] = []
        for o in acquired:
            r = self.records[o]
            r.state = RecordState.ACQUIRED
            r.delivery_count += 1
            r.member_id = member_id
            r.acquisition = a
            if out and out[-1][1] == o - 1 and out[-1][2] == r.delivery_count:
                out[-1][1] = o
            else:
                out.append([o, o, r.delivery_count])
        self._locks[a] = (member_id, acquired)
        if self.timer is not None:
            self.timer.schedule(self._lock_key(a), self.lock_duration_ms, lambda res, a=a: self._lock_expired(a))
        self.dirty = True
        self._advance_start()
        return [tuple(x) for x in out]

    def _lock_key(self, acquisition: int) -> str:
        return f"share-lock-{self.group_id}-{self.topic_id.hex()}-{self.partition}-{acquisition}"

    def _lock_expired(self, acquisition: int) -> None:
        """The acquisition lock timed out: what the member still holds is released."""
        entry = self._locks.pop(acquisition, None)
        if entry is None:
            return
        _member, offsets = entry
        released = False
        for o in offsets:
            r = self.records.get(o)
            if r is not None and r.state is RecordState.ACQUIRED and r.acquisition == acquisition:
                self._release(r)
                released = True
        if released:
            self.dirty = True
            self._advance_start()
            if self.on_released is not None:
                self.on_released()

    def _release(self, r: InFlightRecord) -> None:
        r.state = RecordState.ARCHIVED if r.delivery_count >= self.delivery_count_limit else RecordState.AVAILABLE
        r.member_id = None
        r.acquisition = 0

    # -- acknowledge (Kafka's SharePartition.acknowledge) ---------------------------------------------
    def acknowledge(self, member_id: str, batches: Iterable[tuple[int, int, list[int]]]) -> None:
        """Apply ``(first, last, acknowledge types)`` batches: one type for the whole batch, or
        one per offset. All or nothing: INVALID_RECORD_STATE when an offset is not held by the
        member, INVALID_REQUEST for a malformed batch."""
        plan = []
        for first, last, types in batches:
            if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid acknowledgement batch.")
            for i, o in enumerate(range(first, last + 1)):
                t = types[0] if len(types) == 1 else types[i]
                try:
                    t = AcknowledgeType(t)
                except ValueError:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid acknowledge type: {t}") from None
                r = self.records.get(o)
                if r is None or r.state is not RecordState.ACQUIRED or r.member_id != member_id:
                    if r is None and o < self.start_offset and t in (AcknowledgeType.GAP,):
                        continue
                    raise KafkaError(ErrorCode.INVALID_RECORD_STATE)
                plan.append((r, t))
        released = False
        now_renew = []
        for r, t in plan:
            if t is AcknowledgeType.ACCEPT:
                r.state = RecordState.ACKNOWLEDGED
            elif t is AcknowledgeType.RELEASE:
                self._release(r)
                released = released or r.state is RecordState.AVAILABLE
                continue
            elif t is AcknowledgeType.RENEW:
                now_renew.append(r)
                continue
            else:                       # REJECT, GAP
                r.state = RecordState.ARCHIVED
            r.member_id = None
            r.acquisition = 0
        if now_renew and self.timer is not None:
            self._acquisitions += 1
            a = self._acquisitions
            offsets = []
            for r in now_renew:
                r.acquisition = a
            for o, r in self.records.items():
                if r.acquisition == a:
                    offsets.append(o)
            self._locks[a] = (member_id, offsets)
            self.timer.schedule(self._lock_key(a), self.lock_duration_ms, lambda res, a=a: self._lock_expired(a))
        if plan:
            self.dirty = True
        self._advance_start()
        if released and self.on_released is not None:
            self.on_released()

    def release_member(self, member_id: str) -> int:
        """The member's share session closed or it left the group: what it holds is released
        (Kafka's releaseAcquiredRecords). Returns how many records."""
        n = 0
        for r in self.records.values():
            if r.state is RecordState.ACQUIRED and r.member_id == member_id:
                self._release(r)
                n += 1
        if n:
            self.dirty = True
            self._advance_start()
            if self.on_released is not None:
                self.on_released()
        return n

    def _advance_start(self) -> None:
        o, records = self.start_offset, self.records
        while o < self.end_offset:
            r = records.get(o)
            if r is not None and r.state not in _TERMINAL:
                break
            records.pop(o, None)
            o += 1
        self.start_offset = o
        if not records:             # nothing held: no lock can matter (others fire and find nothing)
            for a in list(self._locks):
                self._drop_lock(a)

    def _drop_lock(self, acquisition: int) -> None:
        self._locks.pop(acquisition, None)
        if self.timer is not None:
            self.timer.cancel(self._lock_key(acquisition))

    # -- durability ----------------------------------------------------------------------------------
    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """The in-flight state to persist: runs of ``(first, last, state, delivery count)``, an
        ACQUIRED record as AVAILABLE (a crash delivers it again, its count already incremented)."""
        out: list[list[int]] = []
        for o in range(self.start_offset, self.end_offset):
            r = self.records.get(o)
            if r is None:
                continue
            state = RecordState.AVAILABLE if r.state is RecordState.ACQUIRED else r.state
            if out and out[-1][1] == o - 1 and out[-1][2] == state and out[-1][3] == r.delivery_count:
                out[-1][1] = o
            else:
                out.append([o, o, int(state), r.delivery_count])
        self.dirty = False
        return [tuple(x) for x in out]

    def view(self) -> dict:
        """State for tests: offset -> (state name, delivery count, member)."""
        return {o: (r.state.name, r.delivery_count, r.member_id) for o, r in sorted(self.records.items())}
