"""The group coordinator counters of /metrics (offset-commit-count, offset-expiration-count,
offset-deletion-count, group-completed-rebalance-count), counted from the records a real
coordinator shard writes, on a fake clock: ``CoordinatorCounters.on_written`` sees each Result
whose records were appended, as the runtime's ``write_observer`` does."""
from kgroup.broker.metrics import CoordinatorCounters
from tests.coordinator.support import Ctx, assignment

DAY = 24 * 3600 * 1000
RETENTION = 7 * DAY          # offsets.retention.minutes = 10080
CHECK = 600000               # offsets.retention.check.interval.ms


class CountedCtx(Ctx):
    """A shard whose successfully written Results go to the counters (the live == replayed check
    still runs after every operation: the counters are no part of the shard's state)."""

    def __init__(self, **kw):
        self.counters = CoordinatorCounters()
        super().__init__(**kw)

    def run(self, result):
        if result.records and self.fail_writes is None:
            self.counters.on_written([result])
        return super().run(result)

    def counts(self):
        c = self.counters
        return (c.offset_commits, c.offset_expirations, c.offset_deletions, c.completed_rebalances)


def test_commits_and_completed_rebalances():
    c = CountedCtx()
    gen, (a, b), leader = c.stable_group("g", 2)
    # the join phase writes a group metadata record without assignments: not a completed rebalance
    assert c.counts() == (0, 0, 0, 1)
    c.commit("g", {("t", 0): 5, ("t", 1): 7}, member_id=a, generation=gen)
    c.commit("g", {("t", 0): 6}, member_id=a, generation=gen)
    assert c.counts() == (3, 0, 0, 1)
    c.commit("g", {("t", 0): 8}, member_id=a, generation=gen + 5)    # ILLEGAL_GENERATION: nothing written
    assert c.counts() == (3, 0, 0, 1)
    ta, tb = c.join("g", a), c.join("g", b)          # both rejoin: a new rebalance
    ja, jb = c.answer(ta), c.answer(tb)
    assert ja.error_code == jb.error_code == 0 and ja.generation_id == gen + 1
    assert c.counts() == (3, 0, 0, 1)               # the join phase completed, not the rebalance
    syncs = [c.sync("g", m, ja.generation_id, {a: assignment(t=[1]), b: assignment(t=[0])} if m == ja.leader else None)
             for m in (a, b)]
    assert all(c.answer(s).error_code == 0 for s in syncs) and c.state("g") == "Stable"
    assert c.counts() == (3, 0, 0, 2)
    c2 = CountedCtx()
    c2.stable_group("h", 1)
    c2.stable_group("i", 3)
    assert c2.counts() == (0, 0, 0, 2)


def test_failed_write_counts_nothing():
    c = CountedCtx()
    gen, (a,), _ = c.stable_group("g", 1)
    c.fail_writes = 6       # NOT_LEADER_OR_FOLLOWER
    c.commit("g", {("t", 0): 5}, member_id=a, generation=gen)
    assert c.counts() == (0, 0, 0, 1)


def test_expirations_and_deletions_are_told_apart():
    c = CountedCtx()
    c.commit("s", {("t", 0): 1, ("t", 1): 2, ("t", 2): 3})        # a simple (Empty) group's offsets
    c.commit("d", {("t", 0): 1, ("t", 1): 2})
    assert c.counts() == (5, 0, 0, 0)
    # OffsetDelete: its tombstones are deletions (BrokerMetrics sets ``deleting`` around it)
    c.counters.deleting = True
    assert c.delete_offsets("s", {"t": [0]}).error_code == 0
    c.counters.deleting = False
    assert c.counts() == (5, 0, 1, 0)
    c.counters.deleting = True
    assert c.delete_groups("d") == {"d": 0}          # both offsets, then the group's tombstone
    c.counters.deleting = False
    assert c.counts() == (5, 0, 3, 0)
    # retention: the remaining two offsets of "s" expire, on a timer
    c.advance(RETENTION + CHECK)
    assert c.counts() == (5, 2, 3, 0)
    assert c.fetched("s", {"t": [1, 2]}) == {("t", 1): (-1, 0), ("t", 2): (-1, 0)}
