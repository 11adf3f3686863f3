"""SharePartition's in-flight batches (Kafka's InFlightBatch): one state per batch until an operation
covers part of it or treats its records differently, then per offset. Checked on the fake clock:
whole-batch transitions, splits by acknowledgements, acquisitions and expiries, lock timers
cancelled once nothing they lock is held, delivery-count archiving of split batches, gaps and
aborted ranges, and - against a per-offset reference model driven by the same random operations -
every view, acquisition, error and start/end offset; the persisted state rebuilds the same
share-partition (live == replayed), and the share coordinator's combination of every write is the
last state written."""
import random

import pytest

from kgroup.coordinator.timer import CoordinatorTimer, TimerQueue
from kgroup.protocol.errors import KafkaError
from kgroup.share.share_partition import AcknowledgeType as A
from kgroup.share.share_partition import RecordState, SharePartition
from kgroup.share_coordinator.state_batches import combine

T = bytes(16)
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4


class Clock:
    def __init__(self):
        self.timer = CoordinatorTimer(TimerQueue())

    def advance(self, ms):
        self.timer.now += ms
        for _key, op in self.timer.pop_expired(self.timer.now):
            op(None)


def sp(**kw):
    c = Clock()
    p = SharePartition("g", T, 0, timer=c.timer, **kw)
    p.initialize(0, -1, [], reset_offset=0)
    return c, p


def test_whole_batches_move_as_one_and_their_lock_goes_with_them():
    c, p = sp()
    assert p.acquire("m1", [(0, 99), (100, 249)], 500, 0) == [(0, 249, 1)]
    assert len(p.batches) == 1 and p.batches[0].offsets is None        # one batch, not split
    assert p.locks() == {1: 250} and len(c.timer.scheduler) == 1
    p.acknowledge("m1", [(0, 249, [A.ACCEPT])])
    assert p.batches == [] and p.start_offset == p.end_offset == 250
    assert p.locks() == {} and len(c.timer.scheduler) == 0               # the lock timer is cancelled


def test_a_partial_acknowledgement_splits_the_batch():
    c, p = sp()
    p.acquire("m1", [(0, 9)], 500, 0)
    p.acknowledge("m1", [(2, 4, [A.ACCEPT])])
    b = p.batches[0]
    assert b.offsets is not None and b.offsets.state == [ACQUIRED] * 2 + [ACKNOWLEDGED] * 3 + [ACQUIRED] * 5
    assert p.locks() == {1: 7} and p.start_offset == 0
    p.acknowledge("m1", [(0, 1, [A.ACCEPT]), (5, 9, [A.REJECT])])
    assert p.batches == [] and p.start_offset == 10 and p.locks() == {}


def test_expiry_of_a_split_batch_releases_only_what_is_still_held():
    c, p = sp(lock_duration_ms=1000, delivery_count_limit=2)
    p.acquire("m1", [(0, 5)], 500, 0)
    p.acknowledge("m1", [(1, 1, [A.ACCEPT]), (3, 3, [A.RELEASE])])
    c.advance(500)
    assert p.acquire("m2", [(0, 5)], 500, 0) == [(3, 3, 2)]              # the released one, its 2nd delivery
    c.advance(500)                                                        # m1's lock: 0, 2, 4, 5
    assert p.view() == {0: ("AVAILABLE", 1, None), 1: ("ACKNOWLEDGED", 1, None), 2: ("AVAILABLE", 1, None),
                        3: ("ACQUIRED", 2, "m2"), 4: ("AVAILABLE", 1, None), 5: ("AVAILABLE", 1, None)}
    c.advance(500)                                                        # m2's: 3 reached the limit
    assert p.view()[3] == ("ARCHIVED", 2, None)
    assert p.acquire("m3", [(0, 5)], 500, 0) == [(0, 0, 2), (2, 2, 2), (4, 5, 2)]


def test_a_batch_acquired_in_part_is_split_and_the_rest_stays_available():
    c, p = sp()
    p.acquire("m1", [(0, 9)], 500, 0)
    p.acknowledge("m1", [(0, 9, [A.RELEASE])])
    assert p.batches[0].offsets is None and p.next_fetch_offset() == 0   # released whole: still one batch
    assert p.acquire("m2", [(0, 9)], 4, 0) == [(0, 3, 2)]
    assert p.batches[0].offsets is not None and p.next_fetch_offset() == 4
    assert p.acquire("m3", [(0, 9)], 100, 0) == [(4, 9, 2)]
    p.acknowledge("m3", [(4, 9, [A.ACCEPT])])
    p.acknowledge("m2", [(0, 3, [A.ACCEPT])])
    assert p.batches == [] and p.start_offset == 10


def test_renew_moves_records_to_a_new_lock():
    c, p = sp(lock_duration_ms=1000)
    p.acquire("m1", [(0, 3)], 500, 0)
    c.advance(600)
    p.acknowledge("m1", [(0, 1, [A.RENEW])])
    assert p.locks() == {1: 2, 2: 2}
    c.advance(400)                                                        # the first lock: 2 and 3 only
    assert [v[0] for v in p.view().values()] == ["ACQUIRED", "ACQUIRED", "AVAILABLE", "AVAILABLE"]
    c.advance(600)
    assert [v[0] for v in p.view().values()] == ["AVAILABLE"] * 4


def test_batch_optimized_acquisition_takes_whole_log_batches():
    c, p = sp(max_record_locks=30)
    # max_records 5 ends inside the log batch 0-9: the rest of it comes too (its bytes go out once)
    assert p.acquire("m1", [(0, 9), (10, 19)], 5, 0, whole_batches=True) == [(0, 9, 1)]
    assert p.acquire("m2", [(10, 19), (20, 39)], 5, 0, whole_batches=True) == [(10, 19, 1)]
    # the in-flight limit (30) is reached inside 20-39: the batch is taken whole, then nothing new
    assert p.acquire("m3", [(20, 39)], 500, 0, whole_batches=True) == [(20, 39, 1)]
    assert p.in_flight() == 40 and not p.can_acquire()
    # RECORD_LIMIT: never past max_records
    c, q = sp()
    assert q.acquire("m1", [(0, 9)], 5, 0) == [(0, 4, 1)]


def test_gaps_and_aborted_ranges_are_archived_batches():
    c, p = sp()
    got = p.acquire("m1", [(0, 3), (6, 9), (10, 14)], 500, 0, archive_ranges=[(6, 9)])
    assert got == [(0, 3, 1), (10, 14, 1)]
    assert [(b.first, b.last, b.state) for b in p.batches] == [(0, 3, ACQUIRED), (4, 5, ARCHIVED), (6, 9, ARCHIVED),
                                                              (10, 14, ACQUIRED)]
    p.acknowledge("m1", [(0, 3, [A.ACCEPT])])
    assert p.start_offset == 10


def test_release_member_releases_whole_and_split_batches():
    c, p = sp()
    p.acquire("m1", [(0, 4)], 500, 0)
    p.acquire("m2", [(5, 9)], 500, 0)
    p.acknowledge("m1", [(0, 0, [A.ACCEPT])])
    assert p.release_member("m1") == 4 and p.release_member("m2") == 5
    assert p.locks() == {} and p.acquire("m3", [(0, 9)], 500, 0) == [(1, 9, 2)]


# -- against a per-offset reference ---------------------------------------------------------------------

class Model:
    """The share-partition rules per offset: offset -> [state, delivery count, member, lock]."""

    def __init__(self, limit, max_locks, lock_ms):
        self.r, self.start, self.end = {}, 0, 0
        self.limit, self.max_locks, self.lock_ms = limit, max_locks, lock_ms
        self.acquisitions = 0
        self.deadlines = []     # (deadline, acquisition)

    def _release(self, x):
        x[0] = ARCHIVED if x[1] >= self.limit else AVAILABLE
        x[2], x[3] = None, 0

    def _advance(self):
        while self.start < self.end and self.r[self.start][0] >= ACKNOWLEDGED:
            del self.r[self.start]
            self.start += 1

    def acquire(self, m, ranges, max_records, last_limit, aborted, now, whole_batches):
        a = self.acquisitions + 1
        got = []
        room = self.max_locks - (self.end - self.start)
        stop = False
        for first, last in ranges:
            last = min(last, last_limit - 1)
            whole = False           # new records of this log batch taken: the rest of it comes too
            for o in range(max(first, self.start), last + 1):
                if len(got) >= max_records and not whole:
                    stop = True
                    break
                if o < self.end:
                    x = self.r[o]
                    if x[0] == AVAILABLE:
                        x[0], x[2], x[3] = ACQUIRED, m, a
                        x[1] += 1
                        got.append(o)
                    continue
                if room <= 0 and not whole:
                    stop = True
                    break
                whole = whole_batches
                for g in range(self.end, o):
                    self.r[g] = [ARCHIVED, 0, None, 0]
                room -= 1
                self.end = o + 1
                if any(lo <= o <= hi for lo, hi in aborted):
                    self.r[o] = [ARCHIVED, 0, None, 0]
                else:
                    self.r[o] = [ACQUIRED, 1, m, a]
                    got.append(o)
            if stop:
                break
        out = []
        for o in got:
            c = self.r[o][1]
            if out and out[-1][1] == o - 1 and out[-1][2] == c:
                out[-1][1] = o
            else:
                out.append([o, o, c])
        if got:
            self.acquisitions = a
            self.deadlines.append((now + self.lock_ms, a))
        self._advance()
        return [tuple(x) for x in out]

    def acknowledge(self, m, batches, now):
        plan = []
        seen = set()
        for first, last, types in batches:
            if seen & set(range(first, last + 1)):
                raise KafkaError(0)
            seen |= set(range(first, last + 1))
            for i, o in enumerate(range(first, last + 1)):
                t = types[0] if len(types) == 1 else types[i]
                x = self.r.get(o)
                if x is None and o < self.start and t == A.GAP:
                    continue
                if x is None or x[0] != ACQUIRED or x[2] != m:
                    raise KafkaError(0)
                plan.append((x, t))
        renew = []
        for x, t in plan:
            if t == A.ACCEPT:
                x[0], x[2], x[3] = ACKNOWLEDGED, None, 0
            elif t in (A.REJECT, A.GAP):
                x[0], x[2], x[3] = ARCHIVED, None, 0
            elif t == A.RELEASE:
                self._release(x)
            else:
                renew.append(x)
        if renew:
            self.acquisitions += 1
            for x in renew:
                x[3] = self.acquisitions
            self.deadlines.append((now + self.lock_ms, self.acquisitions))
        self._advance()

    def expire(self, now):
        due = sorted(d for d in self.deadlines if d[0] <= now)
        self.deadlines = [d for d in self.deadlines if d[0] > now]
        for _, a in due:
            for x in self.r.values():
                if x[0] == ACQUIRED and x[3] == a:
                    self._release(x)
        self._advance()

    def release_member(self, m):
        n = 0
        for x in self.r.values():
            if x[0] == ACQUIRED and x[2] == m:
                self._release(x)
                n += 1
        self._advance()
        return n

    def view(self):
        return {o: (RecordState(x[0]).name, x[1], x[2]) for o, x in sorted(self.r.items())}

    def next_fetch_offset(self):
        return next((o for o in range(self.start, self.end) if self.r[o][0] == AVAILABLE), self.end)


@pytest.mark.parametrize("seed", range(12))
def test_batches_behave_as_the_per_offset_rules(seed):
    rnd = random.Random(seed)
    limit, max_locks, lock_ms = rnd.choice([2, 3, 5]), rnd.choice([20, 60, 2000]), 1000
    c, p = sp(delivery_count_limit=limit, max_record_locks=max_locks, lock_duration_ms=lock_ms)
    model = Model(limit, max_locks, lock_ms)
    log, hw = [], 0
    held = {m: [] for m in ("a", "b", "c")}
    written, write_start = [], 0        # every state written, as the share coordinator combines them
    for step in range(400):
        op = rnd.random()
        if op < 0.25:
            n = rnd.randint(1, 15)
            if rnd.random() < 0.15:
                hw += rnd.randint(1, 4)          # a hole in the log (compaction)
            log.append((hw, hw + n - 1))
            hw += n
        elif op < 0.55:
            m = rnd.choice("abc")
            off = p.next_fetch_offset()
            assert off == model.next_fetch_offset()
            ranges = [r for r in log if r[1] >= off][:6]
            aborted = [r for r in ranges if rnd.random() < 0.1]
            max_records = rnd.choice([1, 3, 7, 50])
            whole = rnd.random() < 0.5
            got = p.acquire(m, ranges, max_records, c.timer.now, hw, archive_ranges=aborted, whole_batches=whole)
            assert got == model.acquire(m, ranges, max_records, hw, aborted, c.timer.now, whole), step
            held[m] += [(a, b) for a, b, _ in got]
        elif op < 0.85:
            m = rnd.choice("abc")
            if not held[m] and rnd.random() < 0.8:
                continue
            batches = []
            for a, b in held[m] if rnd.random() < 0.9 else [(max(0, p.start_offset - 2), p.start_offset + 2)]:
                lo = rnd.randint(a, b)
                hi = rnd.randint(lo, b)
                if rnd.random() < 0.5:
                    types = [rnd.choice([A.ACCEPT, A.ACCEPT, A.RELEASE, A.REJECT, A.RENEW])]
                else:
                    types = [rnd.choice(list(A)) for _ in range(hi - lo + 1)]
                batches.append((lo, hi, types))
            error = None
            try:
                p.acknowledge(m, batches)
            except KafkaError as e:
                error = e
            try:
                model.acknowledge(m, batches, c.timer.now)
                assert error is None, (step, batches, error)
            except KafkaError:
                assert error is not None, (step, batches)
            held[m] = [(a, b) for a, b in held[m] if rnd.random() < 0.5]
        elif op < 0.95:
            c.advance(rnd.choice([100, 400, 1000]))
            model.expire(c.timer.now)
        else:
            m = rnd.choice("abc")
            assert p.release_member(m) == model.release_member(m)
        assert (p.start_offset, p.end_offset) == (model.start, model.end), step
        assert p.view() == model.view(), step
        assert sum(p.locks().values()) == sum(1 for x in model.r.values() if x[0] == ACQUIRED), step
        if p.dirty or rnd.random() < 0.1:
            state = p.state_batches()
            written.append(state)
            write_start = p.start_offset
            # live == replayed: the persisted state rebuilds the same records, none held
            q = SharePartition("g", T, 0, timer=Clock().timer, delivery_count_limit=limit, max_record_locks=max_locks)
            q.initialize(0, p.start_offset, state, reset_offset=0)
            assert q.view() == {o: ("AVAILABLE" if s == "ACQUIRED" else s, n, None) for o, (s, n, _) in p.view().items()}
            assert q.state_batches() == state and (q.start_offset, q.end_offset) == (p.start_offset, p.end_offset)
    combined = []
    for state in written:
        combined = combine(combined, state, -1)
    assert [tuple(b) for b in combine(combined, [], write_start)] == p.state_batches() or not written
