"""Hypothesis properties of the four assignors."""
from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgroup.client.assignors import (Assignment, ClusterMetadata, CooperativeStickyAssignor,
                                     MemberData, RangeAssignor, RoundRobinAssignor,
                                     StickyAssignor, Subscription, TopicPartition)
from kgroup.client.assignors.sticky import (deserialize_topic_partition_assignment,
                                            serialize_topic_partition_assignment)
from tests.client.test_assignors_java import verify_validity_and_balance

# ASSIGNOR_EXAMPLES=5000 for a longer hunt
PROPS = settings(max_examples=int(os.environ.get("ASSIGNOR_EXAMPLES", "100")), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])

ALL = [RangeAssignor, RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor]
STICKY = [StickyAssignor, CooperativeStickyAssignor]

member_names = st.text(alphabet="abcXYZ019-_", min_size=1, max_size=6)


@st.composite
def groups(draw, equal: bool | None = None, min_members: int = 1):
    """(partition counts, subscriptions): 1-4 topics of 0-9 partitions, 1-7 members."""
    topics = draw(st.lists(st.sampled_from(["t0", "t1", "t2", "t3", "topic-a", "Zed"]),
                           min_size=1, max_size=4, unique=True))
    counts = {t: draw(st.integers(0, 9)) for t in topics}
    members = draw(st.lists(member_names, min_size=min_members, max_size=7, unique=True))
    if equal is None:
        equal = draw(st.booleans())
    shared = draw(st.lists(st.sampled_from(topics), min_size=1, unique=True))
    subs = {}
    for m in members:
        chosen = shared if equal else draw(st.lists(st.sampled_from(topics), unique=True))
        instance = draw(st.one_of(st.none(), member_names)) if not equal else None
        subs[m] = Subscription(list(chosen), group_instance_id=instance)
    return counts, subs


def run(assignor, counts, subs):
    result = assignor.assign(ClusterMetadata(counts), subs)
    assert set(result) == set(subs)
    return {m: a.partitions for m, a in result.items()}


def subscribed_partitions(counts, subs):
    topics = {t for s in subs.values() for t in s.topics}
    return {TopicPartition(t, p) for t in topics if t in counts for p in range(counts[t])}


def check_valid(counts, subs, assignment, complete=True):
    seen = [tp for parts in assignment.values() for tp in parts]
    assert len(seen) == len(set(seen)), "a partition was assigned twice"
    for member, parts in assignment.items():
        for tp in parts:
            assert tp.topic in subs[member].topics, f"{tp} given to unsubscribed {member}"
    if complete:
        assert set(seen) == subscribed_partitions(counts, subs)


def spread(assignment) -> int:
    sizes = [len(v) for v in assignment.values()]
    return max(sizes) - min(sizes)


@PROPS
@given(group=groups())
def test_every_subscribed_partition_assigned_once_to_a_subscriber(group):
    counts, subs = group
    for cls in ALL:
        check_valid(counts, subs, run(cls(), counts, subs))


@PROPS
@given(group=groups(equal=True))
def test_balanced_when_subscriptions_equal(group):
    counts, subs = group
    for cls in (RoundRobinAssignor, StickyAssignor, CooperativeStickyAssignor):
        assert spread(run(cls(), counts, subs)) <= 1, cls.name
    # range balances each topic, not the total
    assignment = run(RangeAssignor(), counts, subs)
    for topic in subs[next(iter(subs))].topics:
        per_member = [sum(tp.topic == topic for tp in parts) for parts in assignment.values()]
        assert max(per_member) - min(per_member) <= 1


@PROPS
@given(group=groups(equal=False))
def test_sticky_general_assignment_cannot_be_improved(group):
    counts, subs = group
    for cls in STICKY:
        assignment = run(cls(), counts, subs)
        verify_validity_and_balance(subs, assignment, counts)


def with_ownership(subs, assignment, cls, generation=1):
    """Subscriptions of the next rebalance, reporting ownership as each assignor does."""
    out = {}
    for member, sub in subs.items():
        owned = list(assignment.get(member, ()))
        if cls is StickyAssignor:
            assignor = StickyAssignor()
            assignor.on_assignment(Assignment(owned), generation)
            out[member] = Subscription(sub.topics, assignor.subscription_user_data(set(sub.topics)))
        else:
            out[member] = Subscription(sub.topics, None, owned, generation)
    return out


def settle(cls, assignor, counts, subs, assignment):
    """Cooperative follow-up rebalances until nothing is revoked (at most 4)."""
    for _ in range(4):
        revoked = any(set(s.owned_partitions) - set(assignment[m]) for m, s in subs.items())
        if not revoked:
            break
        subs = with_ownership(subs, assignment, cls)
        assignment = run(assignor, counts, subs)
    else:
        raise AssertionError("cooperative rebalances did not converge")
    return subs, assignment


def minimum_moves_on_join(sizes: list[int], total: int, members: int) -> int:
    """Fewest partitions that must change owner when a member joins a balanced group."""
    low, extra = divmod(total, members)
    retained = sum(min(s, low) for s in sizes)
    if extra:
        retained += min(extra, sum(1 for s in sizes if s >= low + 1))
    return total - retained


@PROPS
@given(group=groups(equal=True, min_members=2), data=st.data())
def test_sticky_member_leaving_moves_only_its_partitions(group, data):
    counts, subs = group
    for cls in STICKY:
        assignor = cls()
        first = run(assignor, counts, subs)
        leaver = data.draw(st.sampled_from(sorted(subs)))
        remaining = {m: s for m, s in subs.items() if m != leaver}
        second = run(assignor, counts, with_ownership(remaining, first, cls))
        for member in remaining:
            assert set(first[member]) <= set(second[member]), "a stayer lost a partition"
        gained = {tp for m in remaining for tp in set(second[m]) - set(first[m])}
        assert gained == set(first[leaver])
        assert spread(second) <= 1


@PROPS
@given(group=groups(equal=True), joiner=member_names)
def test_sticky_member_joining_moves_the_minimum(group, joiner):
    counts, subs = group
    if joiner in subs:
        return
    topics = subs[next(iter(subs))].topics
    for cls in STICKY:
        assignor = cls()
        first = run(assignor, counts, subs)
        grown = dict(subs)
        grown[joiner] = Subscription(list(topics))
        next_subs = with_ownership(grown, first, cls)
        second = run(assignor, counts, next_subs)
        if cls is CooperativeStickyAssignor:
            # revoked now, handed to the newcomer in the follow-up rebalance
            assert second[joiner] == []
            next_subs, second = settle(cls, assignor, counts, next_subs, second)
        moved = {tp for m in subs for tp in set(first[m]) - set(second[m])}
        total = sum(len(v) for v in first.values())
        assert moved == set(second[joiner]), "partitions moved between existing members"
        assert len(moved) == minimum_moves_on_join([len(v) for v in first.values()], total,
                                                   len(grown))
        assert spread(second) <= 1


@st.composite
def cooperative_rounds(draw):
    """A group, a previous assignment of it, and the changed group that re-joins."""
    counts, subs = draw(groups())
    previous = run(StickyAssignor(), counts, subs)
    members = list(subs)
    kept = [m for m in members if draw(st.booleans()) or m == members[0]]
    new = {}
    for m in kept:
        topics = subs[m].topics if draw(st.booleans()) else draw(
            st.lists(st.sampled_from(sorted(counts)), unique=True))
        new[m] = Subscription(list(topics), None, previous[m], 3)
    for name in draw(st.lists(member_names, max_size=3, unique=True)):
        if name not in new:
            new[name] = Subscription(list(draw(st.lists(st.sampled_from(sorted(counts)),
                                                        unique=True))), None, [], 3)
    return counts, new


@PROPS
@given(case=cooperative_rounds())
def test_cooperative_never_hands_over_a_partition_in_the_same_round(case):
    counts, subs = case
    assignor = CooperativeStickyAssignor()
    assignment = run(assignor, counts, subs)
    check_valid(counts, subs, assignment, complete=False)
    for member, parts in assignment.items():
        for other, sub in subs.items():
            if other != member:
                assert not set(parts) & set(sub.owned_partitions), \
                    f"{member} got a partition {other} still owns"
    subs, assignment = settle(CooperativeStickyAssignor, assignor, counts, subs, assignment)
    check_valid(counts, subs, assignment)
    verify_validity_and_balance(subs, assignment, counts)


@PROPS
@given(partitions=st.lists(st.builds(TopicPartition, st.sampled_from(["a", "bb", "t-1", "ü"]),
                                     st.integers(0, 2**31 - 1)), unique=True, max_size=12),
       generation=st.integers(-1, 2**31 - 1))
def test_sticky_user_data_round_trip(partitions, generation):
    data = deserialize_topic_partition_assignment(
        serialize_topic_partition_assignment(MemberData(partitions, generation)))
    assert sorted(data.partitions) == sorted(partitions)
    assert data.generation == generation
