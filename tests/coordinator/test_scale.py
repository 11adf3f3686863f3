"""Thousands of members reach Stable; per-join work does not grow with the group.
(The replay check runs at the end only: after every one of 6000 joins it would be quadratic.)"""
from __future__ import annotations

import gc
import time as _clock   # measuring the test itself; the core never reads a clock

from tests.coordinator.support import Ctx, assert_replay_consistent

N = 3000


def test_thousands_of_members_reach_stable():
    c = Ctx(check=False)
    tokens, durations = [], []
    # This process's CPU time, without the collector's full passes (they grow with the heap, not
    # with the group): what other processes on the machine do and the heap's size drop out.
    gc.disable()
    try:
        for _i in range(N):
            t0 = _clock.process_time()
            tokens.append(c.join_dynamic("big", rebalance=120000, session=60000))
            durations.append(_clock.process_time() - t0)
    finally:
        gc.enable()
    while c.answer(tokens[0][1]) is None:
        c.advance(3000)
    answers = [c.answer(t) for _, t in tokens]
    assert all(a is not None and a.error_code == 0 for a in answers)
    gen, leader = answers[0].generation_id, answers[0].leader
    assert sum(1 for a in answers if a.members) == 1 and len(answers[0].members) == N
    ids = [m for m, _ in tokens]
    syncs = [c.sync("big", m, gen, {x: b"a" for x in ids} if m == leader else None)
             for m in reversed(ids)]                 # followers first: they wait for the leader
    assert c.state("big") == "Stable"
    assert all(c.answer(t).error_code == 0 and c.answer(t).assignment == b"a" for t in syncs)
    first, last = sum(durations[:500]), sum(durations[-500:])
    assert last < 5 * first + 0.05, (first, last)     # O(1) per join, not O(members)
    assert_replay_consistent(c.shard, c.log, c.now)
