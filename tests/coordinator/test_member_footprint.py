"""An idle Stable classic member costs at most 2 KB of the coordinator's memory (its member
record, session timer, subscription and assignment), measured with tracemalloc at 1,000 and
5,000 members of one group."""
import gc
import tracemalloc

import pytest

from tests.coordinator.support import Ctx


@pytest.mark.parametrize("members", [1000, 5000])
def test_an_idle_stable_member_costs_at_most_2_kb(members):
    ctx = Ctx(check=False)      # the replay check keeps a second shard: not what is measured
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        ctx.stable_group("g", members)
        ctx.sent.clear()
        ctx.log.clear()         # the test's own copies of answers and records
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    per_member = sum(s.size_diff for s in after.compare_to(before, "filename")) / members
    assert per_member <= 2048, f"{per_member:.0f} bytes per idle Stable member"
    assert ctx.state("g") == "Stable" and len(ctx.group("g").members) == members
