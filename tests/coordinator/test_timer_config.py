"""Timers as data (keyed, replace on reschedule, fired by poll_timers with a fake clock), the
broker config names, and the ListGroups merge across shards."""
from __future__ import annotations

from kgroup.coordinator import GroupCoordinatorConfig, TimerQueue, merge_list_groups
from kgroup.coordinator.timer import CoordinatorTimer
from kgroup.protocol.messages.list_groups import ListGroupsResponse
from tests.coordinator.support import E, Ctx


def test_timer_queue_replaces_cancels_and_orders():
    q = TimerQueue()
    q.schedule("a", 50)
    q.schedule("b", 10)
    q.schedule("a", 5)          # replaces
    q.schedule("c", 10)
    q.cancel("c")
    assert q.next_deadline() == 5
    assert q.poll_expired(9) == ["a"]
    assert q.poll_expired(100) == ["b"] and len(q) == 0 and q.next_deadline() is None


def test_coordinator_timer_runs_ops_once_and_defers_zero_delay_reschedules():
    t = CoordinatorTimer(TimerQueue())
    fired = []

    def again(res):
        fired.append(t.now)
        t.schedule("loop", 0, again)      # would spin forever if run in the same poll

    t.schedule("loop", 10, again)
    t.schedule("x", 10, lambda r: (fired.append("x"), t.cancel("y")))
    t.schedule("y", 10, lambda r: fired.append("y"))
    t.now = 10
    for _, op in t.pop_expired(10):
        op(None)
    assert fired.count(10) == 1 and "x" in fired and "y" not in fired
    for _, op in t.pop_expired(10):
        op(None)
    assert fired.count(10) == 2


def test_config_names_and_defaults():
    d = GroupCoordinatorConfig.from_props({})
    assert (d.min_session_timeout_ms, d.max_session_timeout_ms, d.max_size, d.initial_rebalance_delay_ms,
            d.offsets_retention_ms, d.offsets_retention_check_interval_ms, d.offset_metadata_max_bytes) == \
        (6000, 1800000, 2**31 - 1, 3000, 10080 * 60000, 600000, 4096)
    c = GroupCoordinatorConfig.from_props({"offsets.retention.minutes": "1", "group.max.size": 3,
                                           "unrelated.key": "x"})
    assert c.offsets_retention_ms == 60000 and c.max_size == 3


def test_initial_delay_config_is_honoured():
    c = Ctx(**{"group.initial.rebalance.delay.ms": 0})
    _, t = c.join_dynamic("g")
    assert c.answer(t) is None
    c.advance(0)
    assert c.answer(t).generation_id == 1


def test_merge_list_groups():
    L = ListGroupsResponse.ListedGroup
    a = ListGroupsResponse(groups=[L(group_id="a")])
    b = ListGroupsResponse(groups=[L(group_id="b")])
    assert [g.group_id for g in merge_list_groups([a, b]).groups] == ["a", "b"]
    bad = ListGroupsResponse(error_code=int(E.COORDINATOR_LOAD_IN_PROGRESS))
    merged = merge_list_groups([a, bad])
    assert merged.error_code == E.COORDINATOR_LOAD_IN_PROGRESS and merged.groups == []


# -- TimerQueue against a naive model -------------------------------------------------------------
# Moving a key later is a dict update (TimerQueue leaves its heap entry to be re-filed), so a
# heartbeating member piles up no stale entries; the order of expiry must be exactly the naive one.

from hypothesis import given, settings, strategies as st  # noqa: E402

_ops = st.lists(st.one_of(
    st.tuples(st.just("schedule"), st.sampled_from("abcdef"), st.integers(0, 60)),
    st.tuples(st.just("cancel"), st.sampled_from("abcdef"), st.just(0)),
    st.tuples(st.just("poll"), st.just(""), st.integers(0, 60)),
    st.tuples(st.just("next"), st.just(""), st.just(0))), max_size=80)


@settings(max_examples=300, deadline=None)
@given(_ops)
def test_timer_queue_matches_a_naive_model(ops):
    q, model, seq = TimerQueue(), {}, 0
    for op, key, t in ops:
        if op == "schedule":
            q.schedule(key, t)
            seq += 1
            model[key] = (t, seq)
        elif op == "cancel":
            q.cancel(key)
            model.pop(key, None)
        elif op == "poll":
            due = sorted((v, k) for k, v in model.items() if v[0] <= t)
            assert q.poll_expired(t) == [k for _, k in due]
            for _, k in due:
                del model[k]
        else:
            assert q.next_deadline() == min((v[0] for v in model.values()), default=None)
        assert len(q) == len(model) and all(q.deadline(k) == v[0] for k, v in model.items())


def test_timer_queue_heartbeats_do_not_grow_the_heap():
    q = TimerQueue()
    for i in range(100_000):
        q.schedule(f"heartbeat-g-m{i % 50}", 10_000 + i)    # every member, later each time
    assert len(q._heap) <= 2 * 50 + 1024 and len(q) == 50
    assert q.poll_expired(10_000 + 99_950) == ["heartbeat-g-m0"]
