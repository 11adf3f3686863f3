"""Server-side assignors (KIP-848): Kafka's own test cases, ported with their inputs and
expected outputs (4.3's UniformHomogeneousAssignmentBuilderTest, UniformHeterogeneousAssignmentBuilderTest,
RangeAssignorTest in group-coordinator/src/test/.../assignor/), plus hypothesis properties."""
from __future__ import annotations

import base64
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgroup.coordinator.assignor import (ASSIGNORS, GroupSpec, MemberSpec, PartitionAssignorError,
                                         SubscriptionType)
from kgroup.coordinator.assignor import range as range_assignor
from kgroup.coordinator.assignor import uniform

HOMO, HETERO = SubscriptionType.HOMOGENEOUS, SubscriptionType.HETEROGENEOUS


def kafka_uuid(s: str) -> bytes:
    """Kafka's Uuid.fromString (URL-safe base64 of the 16 bytes)."""
    return base64.urlsafe_b64decode(s + "==")


T1 = kafka_uuid("T1-A4s3VTwiI5CTbEp6POw")
T2 = kafka_uuid("T2-B4s3VTwiI5YHbPp6YUe")
T3 = kafka_uuid("T3-CU8fVTLCz5YMkLoDQsa")
T4 = kafka_uuid("T4-Tw9fVTLCz5HbPp6YQsa")


def M(topics, assignment=None, instance_id=None):
    return MemberSpec(frozenset(topics), assignment or {}, instance_id)


def sets(result):
    return {m: {t: set(p) for t, p in a.items()} for m, a in result.items()}


def run(assign, members, topics, kind=None):
    spec = GroupSpec(members, kind) if kind else GroupSpec.of(members)
    return sets(assign(spec, topics))


# -- uniform, homogeneous (OptimizedUniformAssignmentBuilderTest) ---------------------------------

def test_uniform_one_member_no_topic_subscription():
    assert run(uniform.assign, {"A": M([])}, {T1: 3}, HOMO) == {}


def test_uniform_one_member_subscribed_to_nonexistent_topic():
    with pytest.raises(PartitionAssignorError):
        run(uniform.assign, {"A": M([T2])}, {T1: 3}, HOMO)


def test_uniform_first_assignment_two_members_two_topics():
    got = run(uniform.assign, {"A": M([T1, T3]), "B": M([T1, T3])}, {T1: 3, T3: 2}, HOMO)
    # Kafka's HashSet walks T3 before T1; A gives its extra partition up (KAFKA-18688), so B,
    # the last member, takes it
    assert got == {"A": {T3: {0, 1}}, "B": {T1: {0, 1, 2}}}


def test_uniform_first_assignment_more_members_than_partitions():
    got = run(uniform.assign, {"A": M([T3]), "B": M([T3]), "C": M([T3])}, {T3: 2}, HOMO)
    assert got == {"A": {}, "B": {T3: {0}}, "C": {T3: {1}}}


def test_uniform_validity_and_balance_for_large_sample_set():
    topics = {uuid.UUID(int=(i * 0x9E3779B97F4A7C15) % (1 << 128)).bytes: 3 for i in range(1, 100)}
    members = {f"member{i}": M(topics) for i in range(1, 50)}
    check_valid_and_balanced(members, uniform.assign(GroupSpec(dict(sorted(members.items())), HOMO), topics),
                             topics)


def test_uniform_reassignment_given_unbalanced_previous_assignment():
    members = {"A": M([T1, T2], {T1: [0, 1], T2: [0, 1]}), "B": M([T1, T2], {T1: [2], T2: [2]})}
    got = run(uniform.assign, members, {T1: 3, T2: 3}, HOMO)
    assert got == {"A": {T1: {0, 1}, T2: {0}}, "B": {T1: {2}, T2: {1, 2}}}


def test_uniform_reassignment_when_partitions_are_added():
    members = {"A": M([T1, T2], {T1: [0, 2], T2: [0]}), "B": M([T1, T2], {T1: [1], T2: [1, 2]})}
    got = run(uniform.assign, members, {T1: 6, T2: 5}, HOMO)
    assert got == {"A": {T1: {0, 2}, T2: {0, 3, 4}}, "B": {T1: {1, 3, 4, 5}, T2: {1, 2}}}


def test_uniform_reassignment_when_one_member_added():
    members = {"A": M([T1, T2], {T1: [0, 2], T2: [0]}), "B": M([T1, T2], {T1: [1], T2: [1, 2]}),
               "C": M([T1, T2])}
    got = run(uniform.assign, members, {T1: 3, T2: 3}, HOMO)
    assert got == {"A": {T1: {0, 2}}, "B": {T1: {1}, T2: {1}}, "C": {T2: {0, 2}}}


def test_uniform_reassignment_when_one_member_removed():
    members = {"A": M([T1, T2], {T1: [0], T2: [0]}), "B": M([T1, T2], {T1: [1], T2: [1]})}
    got = run(uniform.assign, members, {T1: 3, T2: 3}, HOMO)
    assert got == {"A": {T1: {0}, T2: {0, 2}}, "B": {T1: {1, 2}, T2: {1}}}


def test_uniform_reassignment_when_one_subscription_removed():
    members = {"A": M([T2], {T1: [0], T2: [0]}), "B": M([T2], {T1: [1], T2: [1]})}
    got = run(uniform.assign, members, {T1: 2, T2: 2}, HOMO)
    assert got == {"A": {T2: {0}}, "B": {T2: {1}}}


def test_uniform_homogeneous_reassignment_stickiness():
    """CommonAssignorTests.testReassignmentStickiness (Kafka 4.1+): a balanced assignment fed back in
    any member order comes out unchanged (each member keeps its extra partition)."""
    import itertools
    t1, t2, t3 = (uuid.UUID(int=i).bytes for i in (11, 22, 33))
    topics = {t1: 2, t2: 5, t3: 7}
    first = run(uniform.assign, {m: M(topics) for m in "ABC"}, topics, HOMO)
    for order in itertools.permutations("ABC"):
        members = {m: M(topics, {t: sorted(p) for t, p in first[m].items()}) for m in order}
        assert run(uniform.assign, members, topics, HOMO) == first, order


def test_java_orders_of_fromrecord_and_timeline_hash_map():
    from kgroup.java_compat import TimelineHashOrder, int_hash_set_copy_order, uuid_map_order
    # new HashSet<Integer>(11 items): 16 buckets, bucket = value & 15, ties in insertion order
    assert int_hash_set_copy_order([0, 1, 2, 3, 4, 5, 16, 17, 18, 19, 20]) == [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5]
    # 12 items: 12 / 0.75 + 1 = 17 -> 32 buckets
    assert int_hash_set_copy_order(list(range(6)) + list(range(16, 22))) == list(range(6)) + list(range(16, 22))
    # HashMap<Uuid>: Uuid(1, 0) hashes to 1, Uuid(0, 2) to 2
    a, b = bytes(15) + b"\x02", (1).to_bytes(8, "big") + bytes(8)
    assert uuid_map_order([a, b]) == [b, a]
    # TimelineHashMap: slot = top bits of hashCode * -7046029254386353131; 2 slots, doubled when
    # (size + 1) * 0.75 > slots (the third add: 4 slots, which then hold up to 5 keys); a removed
    # key leaves the others in place
    order = TimelineHashOrder()
    for k in ("m1", "m2", "m3", "m4", "m5"):
        order.add(k)
    slots = len(order.slots)
    assert slots == 4 and sorted(order) == ["m1", "m2", "m3", "m4", "m5"]

    def slot(k, n):
        from kgroup.java_compat import string_hash_code
        return ((string_hash_code(k) * -7046029254386353131) % (1 << 64)) >> (65 - n.bit_length())
    assert [slot(k, slots) for k in order] == sorted(slot(k, slots) for k in order)
    order.remove("m3")
    order.add("m1")
    assert "m3" not in list(order) and list(order).count("m1") == 1 and order.size == 4


# -- uniform, heterogeneous (UniformHeterogeneousAssignmentBuilderTest; members in sorted order) ---

def test_heterogeneous_two_members_no_topic_subscription():
    assert run(uniform.assign, {"A": M([]), "B": M([])}, {T1: 3}, HETERO) == {}


def test_heterogeneous_two_members_subscribed_to_nonexistent_topics():
    with pytest.raises(PartitionAssignorError):
        run(uniform.assign, {"A": M([T3]), "B": M([T2])}, {T1: 3}, HETERO)


def test_heterogeneous_first_assignment_two_members_two_topics():
    got = run(uniform.assign, {"A": M([T1, T3]), "B": M([T3])}, {T1: 3, T3: 6}, HETERO)
    assert got == {"A": {T1: {0, 1, 2}, T3: {4}}, "B": {T3: {0, 1, 2, 3, 5}}}


def test_heterogeneous_first_assignment_more_members_than_partitions():
    got = run(uniform.assign, {"A": M([T3]), "B": M([T3]), "C": M([T1])}, {T3: 1, T1: 2}, HETERO)
    assert got == {"A": {T3: {0}}, "B": {}, "C": {T1: {0, 1}}}


def test_heterogeneous_reassignment_three_topics_given_unbalanced_previous_assignment():
    members = {"A": M([T1], {T1: [0, 1, 2]}),
               "B": M([T1, T2], {T1: [3], T2: [0]}),
               "C": M([T1, T2, T3], {T1: [4, 5], T2: [1, 2, 3], T3: [0, 1, 2, 3]})}
    got = run(uniform.assign, members, {T1: 6, T2: 4, T3: 4}, HETERO)
    assert got == {"A": {T1: {0, 1, 2, 5}}, "B": {T1: {3}, T2: {0, 1, 2, 3}},
                   "C": {T1: {4}, T3: {0, 1, 2, 3}}}


def test_heterogeneous_reassignment_when_partitions_are_added():
    members = {"A": M([T1, T3], {T1: [0, 1, 2, 3], T3: [0, 1]}),
               "B": M([T1, T2, T3, T4], {T2: [0, 1, 2], T4: [0, 1, 2]})}
    got = run(uniform.assign, members, {T1: 6, T2: 5, T3: 3, T4: 3}, HETERO)
    assert got == {"A": {T1: {0, 1, 2, 3, 4, 5}, T3: {0, 1, 2}}, "B": {T2: {0, 1, 2, 3, 4}, T4: {0, 1, 2}}}


def test_heterogeneous_reassignment_when_one_member_and_partitions_added():
    members = {"A": M([T1], {T1: [0, 2], T2: [0]}), "B": M([T1, T2], {T1: [1], T2: [1, 2]}),
               "C": M([T1, T2])}
    got = run(uniform.assign, members, {T1: 6, T2: 7}, HETERO)
    assert got == {"A": {T1: {0, 2, 3, 4, 5}}, "B": {T1: {1}, T2: {1, 2, 6}}, "C": {T2: {0, 3, 4, 5}}}


def test_heterogeneous_reassignment_when_one_member_removed():
    members = {"A": M([T1, T3], {T1: [0, 1, 2], T3: [0, 1]}), "B": M([T2], {T2: [3, 4, 5, 6]})}
    got = run(uniform.assign, members, {T1: 3, T2: 8, T3: 3}, HETERO)
    assert got == {"A": {T1: {0, 1, 2}, T3: {0, 1, 2}}, "B": {T2: set(range(8))}}


def test_heterogeneous_reassignment_when_one_subscription_removed():
    members = {"A": M([T1], {T1: [0, 2], T2: [1, 3]}), "B": M([T1, T2], {T1: [1], T2: [0, 2, 4]})}
    got = run(uniform.assign, members, {T1: 3, T2: 5}, HETERO)
    assert got == {"A": {T1: {0, 1, 2}}, "B": {T2: {0, 1, 2, 3, 4}}}


def test_heterogeneous_topic_partitions_run_out_and_members_have_no_partitions():
    members = {"A": M([T1, T2, T3], {T1: [0, 1], T2: [0, 1], T3: [0, 1]}), "B": M([T1, T2, T3])}
    got = run(uniform.assign, members, {T1: 2, T2: 2, T3: 2}, HETERO)
    assert got == {"A": {T2: {0}, T3: {0, 1}}, "B": {T1: {0, 1}, T2: {1}}}


def test_heterogeneous_first_assignment_one_member_without_subscriptions():
    got = run(uniform.assign, {"A": M([T1]), "B": M([])}, {T1: 3}, HETERO)
    assert got == {"A": {T1: {0, 1, 2}}, "B": {}}


# -- range (RangeAssignorTest) --------------------------------------------------------------------

def test_range_one_member_no_topic():
    assert run(range_assignor.assign, {"A": M([])}, {T1: 3}, HOMO) == {"A": {}}


def test_range_one_member_subscribed_to_nonexistent_topic():
    with pytest.raises(PartitionAssignorError):
        run(range_assignor.assign, {"A": M([T2])}, {T1: 3}, HOMO)


def test_range_first_assignment_two_members_same_subscriptions():
    got = run(range_assignor.assign, {"A": M([T1, T3]), "B": M([T1, T3])}, {T1: 3, T3: 2}, HOMO)
    assert got == {"A": {T1: {0, 1}, T3: {0}}, "B": {T1: {2}, T3: {1}}}


def test_range_first_assignment_three_members_different_subscriptions():
    members = {"A": M([T1, T2]), "B": M([T3]), "C": M([T2, T3])}
    got = run(range_assignor.assign, members, {T1: 3, T2: 3, T3: 2}, HETERO)
    assert got == {"A": {T1: {0, 1, 2}, T2: {0, 1}}, "B": {T3: {0}}, "C": {T2: {2}, T3: {1}}}


def test_range_first_assignment_more_members_than_partitions():
    members = {m: M([T1, T3]) for m in "ABC"}
    got = run(range_assignor.assign, members, {T1: 3, T3: 2}, HOMO)
    assert got == {"A": {T1: {0}, T3: {0}}, "B": {T1: {1}, T3: {1}}, "C": {T1: {2}}}


def test_range_static_membership():
    members = {"A": M([T1], instance_id="instanceA"), "B": M([T1], instance_id="instanceB")}
    first = run(range_assignor.assign, members, {T1: 3}, HOMO)
    del members["A"]
    members["memberA1"] = M([T1], instance_id="instanceA")
    again = run(range_assignor.assign, members, {T1: 3}, HOMO)
    assert again["memberA1"] == first["A"] and again["B"] == first["B"]


def test_range_mixed_static_membership():
    members = {"A": M([T1], instance_id="instanceA"), "C": M([T1], instance_id="instanceC"), "B": M([T1])}
    first = run(range_assignor.assign, members, {T1: 5}, HOMO)
    del members["A"]
    members["memberA1"] = M([T1], instance_id="instanceA")
    again = run(range_assignor.assign, members, {T1: 5}, HOMO)
    assert again["memberA1"] == first["A"] and again["B"] == first["B"] and again["C"] == first["C"]
    # static members first (by instance id), then the dynamic one
    assert first == {"A": {T1: {0, 1}}, "C": {T1: {2, 3}}, "B": {T1: {4}}}


def test_range_reassignment_more_members_than_partitions_when_one_member_added():
    members = {"A": M([T1, T2], {T1: [0], T2: [0]}), "B": M([T1, T2], {T1: [1], T2: [1]}), "C": M([T1, T2])}
    got = run(range_assignor.assign, members, {T1: 2, T2: 2}, HOMO)
    assert got == {"A": {T1: {0}, T2: {0}}, "B": {T1: {1}, T2: {1}}, "C": {}}


def test_range_reassignment_when_one_partition_added():
    members = {"A": M([T1, T2], {T1: [0, 1], T2: [0, 1]}), "B": M([T1, T2], {T1: [2], T2: [2]})}
    got = run(range_assignor.assign, members, {T1: 4, T2: 4}, HOMO)
    assert got == {"A": {T1: {0, 1}, T2: {0, 1}}, "B": {T1: {2, 3}, T2: {2, 3}}}


def test_range_reassignment_when_one_member_added():
    members = {"A": M([T1, T2], {T1: [0, 1], T2: [0, 1]}), "B": M([T1, T2], {T1: [2], T2: [2]}),
               "C": M([T1, T2])}
    got = run(range_assignor.assign, members, {T1: 3, T2: 3}, HOMO)
    assert got == {"A": {T1: {0}, T2: {0}}, "B": {T1: {1}, T2: {1}}, "C": {T1: {2}, T2: {2}}}


def test_range_reassignment_when_one_member_and_one_partition_added():
    members = {"A": M([T1, T2], {T1: [0, 1], T2: [0, 1]}), "B": M([T1, T2], {T1: [2], T2: [2]}),
               "C": M([T1])}
    got = run(range_assignor.assign, members, {T1: 4, T2: 3}, HETERO)
    assert got == {"A": {T1: {0, 1}, T2: {0, 1}}, "B": {T1: {2}, T2: {2}}, "C": {T1: {3}}}


def test_range_reassignment_when_one_member_removed():
    got = run(range_assignor.assign, {"B": M([T1, T2], {T1: [2], T2: [2]})}, {T1: 3, T2: 3}, HOMO)
    assert got == {"B": {T1: {0, 1, 2}, T2: {0, 1, 2}}}


def test_range_reassignment_when_multiple_subscriptions_removed():
    members = {"A": M([T1], {T1: [0, 1, 2], T2: [0]}), "B": M([T1, T2, T3], {T2: [1]}),
               "C": M([T2], {T2: [2], T3: [0, 1]})}
    got = run(range_assignor.assign, members, {T1: 3, T2: 3, T3: 2}, HETERO)
    assert got == {"A": {T1: {0, 1}}, "B": {T1: {2}, T2: {0, 1}, T3: {0, 1}}, "C": {T2: {2}}}


def test_registry():
    assert list(ASSIGNORS) == ["uniform", "range"]


# -- properties -----------------------------------------------------------------------------------

def check_valid_and_balanced(members, result, topics, balanced=True):
    """Every subscribed partition assigned exactly once, only to a subscriber; sizes within 1."""
    owner = {}
    for mid, assignment in result.items():
        for t, parts in assignment.items():
            assert t in members[mid].subscribed_topic_ids
            for p in parts:
                assert 0 <= p < topics[t] and (t, p) not in owner, (t, p)
                owner[t, p] = mid
    subscribed = set().union(*(m.subscribed_topic_ids for m in members.values())) if members else set()
    assert set(owner) == {(t, p) for t in subscribed for p in range(topics[t])}
    if balanced and result:
        sizes = [sum(map(len, result.get(m, {}).values())) for m in members]
        assert max(sizes) - min(sizes) <= 1, sizes


topic_ids = st.lists(st.binary(min_size=16, max_size=16), min_size=1, max_size=6, unique=True)


@st.composite
def homogeneous_groups(draw):
    ids = draw(topic_ids)
    topics = {t: draw(st.integers(0, 40)) for t in ids}
    n = draw(st.integers(1, 12))
    member_ids = draw(st.lists(st.text("abcdefghijklmnop", min_size=1, max_size=4), min_size=n, max_size=n,
                               unique=True))
    return topics, {m: M(ids) for m in member_ids}


def _with_previous(members, result):
    return {m: spec._replace(assignment=result.get(m, {})) for m, spec in members.items()}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(group=homogeneous_groups(), data=st.data())
def test_uniform_homogeneous_properties(group, data):
    topics, members = group
    first = uniform.assign(GroupSpec(members, HOMO), topics)
    check_valid_and_balanced(members, first, topics)
    # stable: the same group again gives the same assignment
    again = uniform.assign(GroupSpec(_with_previous(members, first), HOMO), topics)
    assert sets(again) == sets(first)
    # sticky on churn: a member joins or leaves; every other member either keeps all it had and
    # gains, or keeps a subset (it only gives up partitions to rebalance)
    churned = _with_previous(members, first)
    if len(churned) > 1 and data.draw(st.booleans()):
        del churned[data.draw(st.sampled_from(sorted(churned)))]
    else:
        churned["joiner~"] = M(list(topics))
    after = uniform.assign(GroupSpec(churned, HOMO), topics)
    check_valid_and_balanced(churned, after, topics)
    for mid, spec in churned.items():
        old = {(t, p) for t, ps in spec.assignment.items() for p in ps}
        new = {(t, p) for t, ps in after.get(mid, {}).items() for p in ps}
        assert old <= new or new <= old, mid


@st.composite
def class_groups(draw):
    """Members in classes; each class subscribes to its own disjoint topics (heterogeneous)."""
    ids = draw(st.lists(st.binary(min_size=16, max_size=16), min_size=2, max_size=8, unique=True))
    topics = {t: draw(st.integers(0, 30)) for t in ids}
    cut = draw(st.integers(1, len(ids) - 1))
    classes = [ids[:cut], ids[cut:]]
    members = {}
    for i in range(draw(st.integers(2, 10))):
        members[f"m{i:02d}"] = M(classes[i % 2])
    return topics, members, classes


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(group=class_groups())
def test_uniform_heterogeneous_properties(group):
    topics, members, classes = group
    result = uniform.assign(GroupSpec.of(members), topics)
    check_valid_and_balanced(members, result, topics, balanced=False)
    for cls in classes:     # balanced within each class of identical subscriptions
        sizes = [sum(map(len, result[m].values())) for m, s in members.items() if s.subscribed_topic_ids == set(cls)]
        assert max(sizes) - min(sizes) <= 1
    again = uniform.assign(GroupSpec.of(_with_previous(members, result)), topics)
    assert sets(again) == sets(result)


@st.composite
def any_groups(draw):
    ids = draw(topic_ids)
    topics = {t: draw(st.integers(0, 20)) for t in ids}
    members = {f"m{i}": M(draw(st.lists(st.sampled_from(ids), max_size=len(ids), unique=True)))
               for i in range(draw(st.integers(1, 8)))}
    return topics, members


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(group=any_groups())
def test_every_subscribed_partition_assigned_exactly_once(group):
    topics, members = group
    for _name, assign in ASSIGNORS.items():
        check_valid_and_balanced(members, assign(GroupSpec.of(members), topics), topics, balanced=False)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(group=homogeneous_groups())
def test_range_co_partitions(group):
    """Homogeneous, equal partition counts: member i gets the same partition numbers of each topic."""
    topics, members = group
    n = next(iter(topics.values()))
    topics = {t: n for t in topics}
    result = range_assignor.assign(GroupSpec(members, HOMO), topics)
    check_valid_and_balanced(members, result, topics, balanced=False)
    for t in topics:        # balanced per topic (range does not balance across topics)
        sizes = [len(a.get(t, ())) for a in result.values()]
        assert max(sizes) - min(sizes) <= 1
    for assignment in result.values():
        assert len({tuple(sorted(p)) for p in assignment.values()}) <= 1
        if assignment:
            assert len(assignment) == len(topics)
