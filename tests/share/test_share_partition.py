"""SharePartition (KIP-932) on the fake clock: acquisition, acknowledgement (ACCEPT, RELEASE,
REJECT, GAP), delivery counts and share.delivery.count.limit, acquisition lock expiry as a named
timer, share.partition.max.record.locks, the start offset moving past terminal records, release
of a member's records, read_committed bounds, and the state persisted and rebuilt."""
import pytest

from kgroup.coordinator.timer import CoordinatorTimer, TimerQueue
from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.share.share_partition import AcknowledgeType as A
from kgroup.share.share_partition import SharePartition

T = bytes(16)


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


def test_acquire_acknowledge_and_start_offset():
    c, p = sp()
    assert p.acquire("m1", [(0, 9)], 500, 0) == [(0, 9, 1)]
    assert p.acquire("m2", [(0, 9)], 500, 0) == []             # all held by m1
    p.acknowledge("m1", [(0, 4, [A.ACCEPT])])
    assert p.start_offset == 5 and p.end_offset == 10
    with pytest.raises(KafkaError) as e:
        p.acknowledge("m2", [(5, 5, [A.ACCEPT])])
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE
    with pytest.raises(KafkaError):
        p.acknowledge("m1", [(0, 0, [A.ACCEPT])])              # already acknowledged
    # per-offset types: accept, release, reject, gap
    p.acknowledge("m1", [(5, 8, [A.ACCEPT, A.RELEASE, A.REJECT, A.GAP]), (9, 9, [A.ACCEPT])])
    assert p.start_offset == 6 and p.view()[6] == ("AVAILABLE", 1, None)
    assert p.next_fetch_offset() == 6
    assert p.acquire("m2", [(6, 6), (7, 12)], 500, 0) == [(6, 6, 2), (10, 12, 1)]


def test_release_redelivers_with_a_higher_count_and_the_limit_archives():
    c, p = sp(delivery_count_limit=2)
    p.acquire("m1", [(0, 0)], 10, 0)
    p.acknowledge("m1", [(0, 0, [A.RELEASE])])
    assert p.acquire("m2", [(0, 0)], 10, 0) == [(0, 0, 2)]
    p.acknowledge("m2", [(0, 0, [A.RELEASE])])              # the second delivery was the last
    assert p.view() == {} and p.start_offset == 1
    assert p.acquire("m1", [(0, 0)], 10, 0) == []


def test_reject_is_never_delivered_again():
    c, p = sp()
    p.acquire("m1", [(0, 1)], 10, 0)
    p.acknowledge("m1", [(0, 0, [A.REJECT])])
    p.acknowledge("m1", [(1, 1, [A.RELEASE])])
    assert p.acquire("m1", [(0, 1)], 10, 0) == [(1, 1, 2)]


def test_lock_expiry_makes_records_available_again():
    c, p = sp(lock_duration_ms=30000)
    released = []
    p.on_released = lambda: released.append(1)
    p.acquire("m1", [(0, 2)], 10, 0)
    p.acknowledge("m1", [(0, 0, [A.ACCEPT])])
    c.advance(29_999)
    assert p.view()[1][0] == "ACQUIRED"
    c.advance(1)
    assert p.view() == {1: ("AVAILABLE", 1, None), 2: ("AVAILABLE", 1, None)} and released == [1]
    assert p.acquire("m2", [(1, 2)], 10, 0) == [(1, 2, 2)]
    with pytest.raises(KafkaError):
        p.acknowledge("m1", [(1, 1, [A.ACCEPT])])            # its lock expired: not m1's any more


def test_max_record_locks_and_max_records():
    c, p = sp(max_record_locks=5)
    assert p.acquire("m1", [(0, 9)], 3, 0) == [(0, 2, 1)]
    assert p.acquire("m2", [(0, 9)], 10, 0) == [(3, 4, 1)]   # 5 in flight: no more new records
    assert not p.can_acquire()
    p.acknowledge("m1", [(0, 2, [A.ACCEPT])])
    assert p.acquire("m2", [(0, 9)], 10, 0) == [(5, 7, 1)]


def test_release_member_and_read_committed_bounds():
    c, p = sp()
    p.acquire("m1", [(0, 4)], 10, 0, last_offset_limit=3)
    assert p.end_offset == 3
    assert p.release_member("m1") == 3
    assert p.acquire("m2", [(0, 9)], 10, 0, archive={4, 5}) == [(0, 2, 2), (3, 3, 1), (6, 9, 1)]
    view = p.view()
    assert view[4][0] == "ARCHIVED" and view[5][0] == "ARCHIVED" and view[0] == ("ACQUIRED", 2, "m2")


def test_state_is_persisted_and_rebuilt():
    c, p = sp()
    p.acquire("m1", [(0, 9)], 10, 0)
    p.acknowledge("m1", [(0, 1, [A.ACCEPT]), (2, 2, [A.RELEASE]), (3, 3, [A.REJECT])])
    batches = p.state_batches()
    assert batches == [(2, 2, 0, 1), (3, 3, 4, 1), (4, 9, 0, 1)]
    # a crash: m1's records come back with their delivery count counted, the accepted ones never
    c2 = Clock()
    q = SharePartition("g", T, 0, timer=c2.timer)
    q.initialize(0, p.start_offset, batches, reset_offset=0)
    assert q.start_offset == 2 and q.acquire("m2", [(0, 12)], 20, 0) == [(2, 2, 2), (4, 9, 2), (10, 12, 1)]


def test_gaps_in_the_log_are_archived():
    c, p = sp()
    assert p.acquire("m1", [(0, 1), (5, 6)], 10, 0) == [(0, 1, 1), (5, 6, 1)]
    assert p.view()[3] == ("ARCHIVED", 0, None)
    p.acknowledge("m1", [(0, 1, [A.ACCEPT]), (5, 6, [A.ACCEPT])])
    assert p.start_offset == 7 and p.view() == {}
