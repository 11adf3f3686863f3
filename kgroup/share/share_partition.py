"""A share-partition: one share group's view of one topic partition (Kafka's SharePartition). Pure:
``now_ms`` comes with every call; lock expiries are named timers on the injected scheduler.

The records between the start offset and the end offset are in flight, each in a state:

    AVAILABLE     may be acquired (never delivered, released, or its lock expired)
    ACQUIRED      delivered to one member, locked until acknowledged or the lock expires
    ACKNOWLEDGED  accepted by its member: never delivered again           (terminal)
    ARCHIVED      rejected, delivered share.delivery.count.limit times, or a gap (terminal)

They are kept as Kafka keeps them (its cachedState of InFlightBatch): a sorted run of batches
covering [start offset, end offset) with no hole, each batch the records acquired (or archived)
together, with one state, delivery count, member and acquisition lock for all of them - until an
operation covers only part of a batch or treats its records differently, which splits it: from
then on it keeps those per offset (Kafka's maybeInitializeOffsetStateUpdate; here lists indexed
by offset - first, changed by slices). A whole-batch acquisition, acknowledgement or expiry is
one update whatever the number of records.

A fetch acquires, from the fetch offset on, the AVAILABLE records and the records past the end
offset (new ones), at most ``max_records`` and no more than ``share.partition.max.record.locks`` in
flight - in the batch-optimized mode new records in whole log batches, so a limit reached inside
one takes the rest of it (its bytes go out once); each acquisition counts a delivery and starts a lock of share.record.lock.duration.ms
(one timer per acquisition, cancelled once nothing it locked is still held). An acknowledgement
(ACCEPT, RELEASE, REJECT, GAP for an offset with no record, RENEW to extend the lock) applies only
to records the member holds (else INVALID_RECORD_STATE), all or nothing; a released or expired
record whose delivery count reached the limit is ARCHIVED instead of AVAILABLE. The start offset
moves past the terminal records at its front, so the in-flight window only holds what still
matters.

Durability (through the share coordinator's WriteShareGroupState): ``state_batches()`` is the state
to persist - the in-flight records as runs of (state, delivery count), an ACQUIRED record written
as AVAILABLE with its count, so after a crash it is delivered again with its count incremented, and
an acknowledged record is never delivered again. ``initialize`` rebuilds a share-partition from the
persisted start offset and batches.
"""
from __future__ import annotations

import enum
from bisect import bisect_right
from collections import Counter
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


AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
TERMINAL_MIN = ACKNOWLEDGED             # a state >= this is terminal
PERSISTED_MASK = 6                      # state & mask: ACQUIRED is persisted as AVAILABLE
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
_ACK_TYPES = frozenset((GAP, ACCEPT, RELEASE, REJECT, RENEW))
_ACK_STATE = {ACCEPT: ACKNOWLEDGED, REJECT: ARCHIVED, GAP: ARCHIVED}


def delivery_complete_count(batches) -> int:
    """Kafka's SharePartition.deliveryCompleteCount over persisted state batches ``(first, last,
    state, count)``: the records in flight that are ACKNOWLEDGED or ARCHIVED (what the lag of
    DescribeShareGroupOffsets leaves out)."""
    return sum(b[1] - b[0] + 1 for b in batches if b[2] >= TERMINAL_MIN)


class OffsetStates:
    """A split batch's records, per offset (index = offset - first)."""

    __slots__ = ("state", "count", "member", "lock")

    def __init__(self, n: int, state: int, count: int, member, lock: int):
        self.state = [state] * n
        self.count = [count] * n
        self.member = [member] * n
        self.lock = [lock] * n


class InFlightBatch:
    """Records [first, last] with one state (``offsets`` None), or per offset once split."""

    __slots__ = ("first", "last", "state", "count", "member", "lock", "offsets")

    def __init__(self, first: int, last: int, state: int, count: int, member=None, lock: int = 0):
        self.first, self.last = first, last
        self.state, self.count, self.member, self.lock = state, count, member, lock
        self.offsets: OffsetStates | None = None

    def split(self) -> OffsetStates:
        if self.offsets is None:
            self.offsets = OffsetStates(self.last - self.first + 1, self.state, self.count, self.member, self.lock)
        return self.offsets

    def __repr__(self) -> str:
        if self.offsets is None:
            return f"InFlightBatch({self.first}-{self.last} {self.state} x{self.count} {self.member} lock {self.lock})"
        return f"InFlightBatch({self.first}-{self.last} split {self.offsets.state})"


def _first(b: InFlightBatch) -> int:
    return b.first


def _first_of(states: list, i: int, values: tuple) -> int:
    """The first index >= i whose state is one of ``values``; -1 if none."""
    best = -1
    for v in values:
        try:
            k = states.index(v, i)
        except ValueError:
            continue
        if best < 0 or k < best:
            best = k
    return best


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
        self.batches: list[InFlightBatch] = []      # sorted, covering [first batch's first, end offset)
        self._acquisitions = 0
        # acquisition -> [member, records still held under it, [(batch, first, last), ...]]
        self._locks: dict[int, list] = {}
        # Kafka's findNextFetchOffset: False once no record in flight is AVAILABLE
        self._maybe_available = False
        self.dirty = False              # state changed since the last ``state_batches`` was taken
        self.on_released = None         # fn() when records became AVAILABLE (wakes parked fetches)

    # -- initialization (Kafka's maybeInitialize: ReadShareGroupState) ---------------------------
    def initialize(self, state_epoch: int, start_offset: int, batches: Iterable, reset_offset: int) -> None:
        """``start_offset`` -1: the share-partition starts at ``reset_offset`` (share.auto.offset.reset,
        resolved by the caller against the log). Persisted AVAILABLE records keep their count; an
        ACQUIRED one (not written by Kafka, by convention) counts as AVAILABLE; offsets between
        persisted batches are done (ARCHIVED)."""
        self.state_epoch = state_epoch
        self.start_offset = reset_offset if start_offset < 0 else start_offset
        self.end_offset = self.start_offset
        self._drop_all_locks()
        self.batches = []
        for first, last, state, count in sorted(batches):
            first = max(first, self.start_offset, self.end_offset)
            if last < first:
                continue
            if first > self.end_offset:
                self.batches.append(InFlightBatch(self.end_offset, first - 1, ARCHIVED, 0))
            state = AVAILABLE if state == ACQUIRED else int(state)
            self.batches.append(InFlightBatch(first, last, state, count))
            self._maybe_available = self._maybe_available or state == AVAILABLE
            self.end_offset = last + 1
        self._advance_start()

    # -- reads ----------------------------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """Where a fetch reads from: the first AVAILABLE in-flight record, else the end offset."""
        if self._maybe_available:
            start = self.start_offset
            for b in self.batches:
                if b.offsets is None:
                    if b.state == AVAILABLE:
                        return max(b.first, start)
                else:
                    k = _first_of(b.offsets.state, max(0, start - b.first), (AVAILABLE,))
                    if k >= 0:
                        return b.first + k
            self._maybe_available = False
        return self.end_offset

    def can_acquire(self) -> bool:
        """Whether a fetch could get anything (AVAILABLE records, or room for new ones)."""
        if self.end_offset - self.start_offset < self.max_record_locks:
            return True
        return self.next_fetch_offset() < self.end_offset

    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def _index(self, offset: int) -> int:
        """The index of the batch holding ``offset`` (start offset <= offset < end offset)."""
        return bisect_right(self.batches, offset, key=_first) - 1

    # -- acquire (Kafka's SharePartition.acquire) -------------------------------------------------
    def acquire(self, member_id: str, ranges: Iterable[tuple[int, int]], max_records: int, now_ms: int,
                last_offset_limit: int | None = None, archive: Iterable[int] = (),
                archive_ranges: Iterable[tuple[int, int]] = (), whole_batches: bool = False
                ) -> list[tuple[int, int, int]]:
        """Acquire for ``member_id`` the acquirable records among the offsets of ``ranges`` (the
        fetched batches' [first, last], ascending), up to ``max_records``; ``last_offset_limit``:
        nothing at or past it (read_committed's last stable offset); ``archive_ranges`` (or
        ``archive``, offsets): aborted transactions' records, ARCHIVED when they come in, never
        delivered. ``whole_batches`` (ShareAcquireMode BATCH_OPTIMIZED): new records in whole log
        batches, a limit reached inside one taking the rest of it, as Kafka's
        lastOffsetFromBatchWithRequestOffset (else RECORD_LIMIT: never past ``max_records``).
        Returns AcquiredRecords ranges ``(first, last, delivery count)``."""
        aborted = sorted(archive_ranges)
        if archive:
            aborted = sorted(aborted + [(o, o) for o in archive])
        a = self._acquisitions + 1
        out: list[list[int]] = []
        pieces: list[tuple] = []
        left = max_records
        room = self.max_record_locks - (self.end_offset - self.start_offset)
        held = 0
        new = None                      # the batch of new records made by this acquisition
        end_before = self.end_offset
        for first, last in ranges:
            if left <= 0:
                break
            if last_offset_limit is not None and last >= last_offset_limit:
                last = last_offset_limit - 1
            if first < self.start_offset:
                first = self.start_offset
            if last < first:
                continue
            # records in flight: the AVAILABLE ones
            if first < self.end_offset:
                hi = min(last, self.end_offset - 1)
                i = self._index(first)
                batches = self.batches
                while i < len(batches) and left > 0:
                    b = batches[i]
                    if b.first > hi:
                        break
                    lo_b, hi_b = max(first, b.first), min(hi, b.last)
                    if b.offsets is None and lo_b == b.first and hi_b == b.last and b.last - b.first < left:
                        if b.state == AVAILABLE:
                            b.state, b.member, b.lock = ACQUIRED, member_id, a
                            b.count += 1
                            n = b.last - b.first + 1
                            _append_run(out, b.first, b.last, b.count)
                            pieces.append((b, b.first, b.last))
                            left -= n
                            held += n
                    elif (b.offsets is not None or b.state == AVAILABLE):
                        got = self._acquire_offsets(b, lo_b, hi_b, member_id, a, left, out)
                        if got:
                            pieces.append((b, lo_b, hi_b))
                            left -= got
                            held += got
                    i += 1
                first = self.end_offset
                if last < first:
                    continue
            # new records
            if left <= 0 or room <= 0:
                break
            if first > self.end_offset:
                # offsets skipped in the log (compaction, batch boundaries): nothing to deliver
                self._append(InFlightBatch(self.end_offset, first - 1, ARCHIVED, 0))
                new = None
            stop = False
            for lo, hi, archived in _segments(first, last, aborted):
                if left <= 0 or room <= 0:
                    stop = True
                    break
                n = hi - lo + 1
                if not whole_batches:
                    n = min(n, room) if archived else min(n, room, left)
                    hi = lo + n - 1
                if archived:
                    self._append(InFlightBatch(lo, hi, ARCHIVED, 0))
                    new = None
                else:
                    if new is not None and new.last == lo - 1:
                        new.last = hi
                        self.end_offset = hi + 1
                        pieces[-1] = (new, new.first, hi)
                    else:
                        new = InFlightBatch(lo, hi, ACQUIRED, 1, member_id, a)
                        self._append(new)
                        pieces.append((new, lo, hi))
                    _append_run(out, lo, hi, 1)
                    left -= n
                    held += n
                room -= n
                if left <= 0 or room <= 0:
                    stop = True
                    break
            if stop:
                break
        if not out:
            if self.end_offset != end_before:
                self.dirty = True       # gaps or aborted records archived
            self._advance_start()
            return []
        self._acquisitions = a
        self._locks[a] = [member_id, held, pieces]
        if self.timer is not None:
            self.timer.schedule(self._lock_key(a), self.lock_duration_ms, self._lock_expired, (a,))
        self.dirty = True
        self._advance_start()
        return [tuple(x) for x in out]

    def _append(self, b: InFlightBatch) -> None:
        self.batches.append(b)
        self.end_offset = b.last + 1

    def _acquire_offsets(self, b: InFlightBatch, lo: int, hi: int, member_id: str, a: int, left: int,
                         out: list) -> int:
        """Acquire the AVAILABLE records of [lo, hi] in ``b`` (split), at most ``left``."""
        s = b.split()
        st, cnt, mem, lk = s.state, s.count, s.member, s.lock
        got = 0
        i, j = lo - b.first, hi - b.first + 1
        while got < left:
            k = _first_of(st, i, (AVAILABLE,))
            if k < 0 or k >= j:
                break
            st[k] = ACQUIRED
            cnt[k] += 1
            mem[k] = member_id
            lk[k] = a
            _append_run(out, b.first + k, b.first + k, cnt[k])
            got += 1
            i = k + 1
        return got

    def _lock_key(self, acquisition: int) -> tuple:
        return ("share-lock", self.group_id, self.topic_id, self.partition, acquisition)

    def _lock_expired(self, acquisition: int, _result=None) -> None:
        """The acquisition lock timed out: what the member still holds under it is released."""
        entry = self._locks.pop(acquisition, None)
        if entry is None:
            return
        released = False
        for b, lo, hi in entry[2]:
            if b.offsets is None:
                if b.state == ACQUIRED and b.lock == acquisition:
                    self._release_batch(b)
                    released = True
            else:
                s = b.offsets
                for k in range(lo - b.first, hi - b.first + 1):
                    if s.lock[k] == acquisition and s.state[k] == ACQUIRED:
                        self._release_offset(s, k)
                        released = True
        if released:
            self._released()

    def _release_batch(self, b: InFlightBatch) -> None:
        b.state = ARCHIVED if b.count >= self.delivery_count_limit else AVAILABLE
        b.member = None
        b.lock = 0

    def _release_offset(self, s: OffsetStates, k: int) -> None:
        s.state[k] = ARCHIVED if s.count[k] >= self.delivery_count_limit else AVAILABLE
        s.member[k] = None
        s.lock[k] = 0

    def _released(self) -> None:
        self._maybe_available = True
        self.dirty = True
        self._advance_start()
        if self.on_released is not None:
            self.on_released()

    def _unlock(self, acquisition: int, n: int) -> None:
        """``n`` records held under ``acquisition`` are held no more: once none is, its timer goes."""
        entry = self._locks.get(acquisition)
        if entry is not None:
            entry[1] -= n
            if entry[1] <= 0:
                self._drop_lock(acquisition)

    # -- acknowledge (Kafka's SharePartition.acknowledge) ---------------------------------------------
    def acknowledge(self, member_id: str, batches: Iterable[tuple[int, int, list[int]]]) -> None:
        """Apply ``(first, last, acknowledge types)`` batches: one type for the whole batch, or
        one per offset. All or nothing: INVALID_RECORD_STATE when an offset is not held by the
        member, INVALID_REQUEST for a malformed batch."""
        plan = []
        start, end = self.start_offset, self.end_offset
        batches = list(batches)
        spans = sorted((b[0], b[1]) for b in batches if b[1] >= b[0])
        if any(spans[i][0] <= spans[i - 1][1] for i in range(1, len(spans))):
            # an offset acknowledged twice: the second finds it no longer acquired (as Kafka's
            # acknowledge, batch after batch, would)
            raise KafkaError(ErrorCode.INVALID_RECORD_STATE)
        for first, last, types in batches:
            n = last - first + 1
            if last < first or not types or (len(types) != 1 and len(types) != n):
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid acknowledgement batch.")
            kinds = set(types)
            if not kinds <= _ACK_TYPES:
                bad = next(t for t in types if t not in _ACK_TYPES)
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid acknowledge type: {bad}")
            single = next(iter(kinds)) if len(kinds) == 1 else None
            if first < start:
                # below the start offset: done already; only a GAP may name them
                below = types[:min(start, last + 1) - first] if single is None else [single]
                if any(t != GAP for t in below):
                    raise KafkaError(ErrorCode.INVALID_RECORD_STATE)
                if last < start:
                    continue
            lo = max(first, start)
            if last >= end:
                raise KafkaError(ErrorCode.INVALID_RECORD_STATE)
            i = self._index(lo)
            while lo <= last:
                b = self.batches[i]
                hi = min(last, b.last)
                if single is None:
                    sub = types[lo - first:hi - first + 1]
                    t = sub[0] if sub.count(sub[0]) == len(sub) else None
                else:
                    sub, t = None, single
                if b.offsets is None:
                    if b.state != ACQUIRED or b.member != member_id:
                        raise KafkaError(ErrorCode.INVALID_RECORD_STATE)
                else:
                    s = b.offsets
                    k, m = lo - b.first, hi - b.first + 1
                    if s.state[k:m].count(ACQUIRED) != m - k or s.member[k:m].count(member_id) != m - k:
                        raise KafkaError(ErrorCode.INVALID_RECORD_STATE)
                plan.append((b, lo, hi, t, sub))
                lo = hi + 1
                i += 1
        released = False
        renewed: list[tuple] = []
        for b, lo, hi, t, sub in plan:
            if t is not None and b.offsets is None and lo == b.first and hi == b.last:
                n = hi - lo + 1
                if t == RENEW:
                    renewed.append((b, lo, hi))
                    self._unlock(b.lock, n)
                    continue
                self._unlock(b.lock, n)
                if t == RELEASE:
                    self._release_batch(b)
                    released = released or b.state == AVAILABLE
                else:
                    b.state, b.member, b.lock = _ACK_STATE[t], None, 0
                continue
            s = b.split()
            k, m = lo - b.first, hi - b.first + 1
            for acquisition, n in Counter(s.lock[k:m]).items():
                self._unlock(acquisition, n)
            if t == RENEW:
                renewed.append((b, lo, hi))
            elif t == RELEASE:
                limit = self.delivery_count_limit
                s.state[k:m] = [ARCHIVED if c >= limit else AVAILABLE for c in s.count[k:m]]
                s.member[k:m] = [None] * (m - k)
                s.lock[k:m] = [0] * (m - k)
                released = released or AVAILABLE in s.state[k:m]
            elif t is not None:
                s.state[k:m] = [_ACK_STATE[t]] * (m - k)
                s.member[k:m] = [None] * (m - k)
                s.lock[k:m] = [0] * (m - k)
            else:
                for x, kind in enumerate(sub):
                    j = k + x
                    if kind == RENEW:
                        renewed.append((b, b.first + j, b.first + j))
                    elif kind == RELEASE:
                        self._release_offset(s, j)
                        released = released or s.state[j] == AVAILABLE
                    else:
                        s.state[j], s.member[j], s.lock[j] = _ACK_STATE[kind], None, 0
        if renewed and self.timer is not None:
            self._acquisitions += 1
            a = self._acquisitions
            held = 0
            for b, lo, hi in renewed:
                if b.offsets is None:
                    b.lock = a
                else:
                    b.offsets.lock[lo - b.first:hi - b.first + 1] = [a] * (hi - lo + 1)
                held += hi - lo + 1
            self._locks[a] = [member_id, held, renewed]
            self.timer.schedule(self._lock_key(a), self.lock_duration_ms, self._lock_expired, (a,))
        if plan:
            self.dirty = True
        if released:
            self._released()
        else:
            self._advance_start()

    def release_member(self, member_id: str) -> int:
        """The member's share session closed or it left the group: what it holds is released
        (Kafka's releaseAcquiredRecords). Returns how many records."""
        n = 0
        for b in self.batches:
            if b.offsets is None:
                if b.state == ACQUIRED and b.member == member_id:
                    self._unlock(b.lock, b.last - b.first + 1)
                    self._release_batch(b)
                    n += b.last - b.first + 1
            else:
                s = b.offsets
                if member_id in s.member:
                    for k, m in enumerate(s.member):
                        if m == member_id and s.state[k] == ACQUIRED:
                            self._unlock(s.lock[k], 1)
                            self._release_offset(s, k)
                            n += 1
        if n:
            self._released()
        return n

    def clear(self) -> None:
        """Nothing in flight any more (the group was deleted): every lock goes."""
        self.batches = []
        self.start_offset = self.end_offset
        self._drop_all_locks()

    def _advance_start(self) -> None:
        batches = self.batches
        start = self.start_offset
        drop = 0
        for b in batches:
            if b.offsets is None:
                if b.state >= TERMINAL_MIN:
                    drop += 1
                    start = b.last + 1
                    continue
                start = max(start, b.first)
                break
            k = _first_of(b.offsets.state, max(0, start - b.first), (AVAILABLE, ACQUIRED))
            if k < 0:
                drop += 1
                start = b.last + 1
                continue
            start = b.first + k
            break
        if drop:
            del batches[:drop]
        self.start_offset = start
        if not batches:             # nothing held: no lock can matter
            self.start_offset = self.end_offset
            if self._locks:
                self._drop_all_locks()

    def _drop_lock(self, acquisition: int) -> None:
        self._locks.pop(acquisition, None)
        if self.timer is not None:
            self.timer.cancel(self._lock_key(acquisition))

    def _drop_all_locks(self) -> None:
        for a in list(self._locks):
            self._drop_lock(a)

    # -- durability ----------------------------------------------------------------------------------
    def state_batches(self) -> list[tuple[int, int, int, int]]:
        """The in-flight state to persist: runs of ``(first, last, state, delivery count)``, an
        ACQUIRED record as AVAILABLE (a crash delivers it again, its count already incremented)."""
        out: list[list[int]] = []
        start = self.start_offset
        for b in self.batches:
            if b.offsets is None:
                _append_run(out, max(b.first, start), b.last, b.state & PERSISTED_MASK, b.count)
                continue
            s = b.offsets
            st, cnt = s.state, s.count
            for k in range(max(0, start - b.first), len(st)):
                _append_run(out, b.first + k, b.first + k, st[k] & PERSISTED_MASK, cnt[k])
        self.dirty = False
        return [tuple(x) for x in out]

    def view(self) -> dict:
        """State for tests: offset -> (state name, delivery count, member)."""
        out = {}
        for b in self.batches:
            for o in range(max(b.first, self.start_offset), b.last + 1):
                if b.offsets is None:
                    out[o] = (RecordState(b.state).name, b.count, b.member)
                else:
                    k = o - b.first
                    out[o] = (RecordState(b.offsets.state[k]).name, b.offsets.count[k], b.offsets.member[k])
        return out

    def locks(self) -> dict:
        """For tests: acquisition -> records still held under it."""
        return {a: e[1] for a, e in self._locks.items()}


def _append_run(out: list, first: int, last: int, *values) -> None:
    """Append [first, last, *values] to ``out``, merged into the last run when adjacent and equal."""
    if out:
        prev = out[-1]
        if prev[1] == first - 1 and tuple(prev[2:]) == values:
            prev[1] = last
            return
    out.append([first, last, *values])


def _segments(first: int, last: int, aborted: list):
    """[first, last] cut by the ``aborted`` ranges (sorted): (lo, hi, archived) pieces in order."""
    lo = first
    for a, b in aborted:
        if b < lo or a > last:
            continue
        if a > lo:
            yield lo, a - 1, False
        lo2 = max(a, lo)
        hi2 = min(b, last)
        yield lo2, hi2, True
        lo = hi2 + 1
        if lo > last:
            return
    if lo <= last:
        yield lo, last, False
