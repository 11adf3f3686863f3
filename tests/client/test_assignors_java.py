"""Test cases ported from Apache Kafka's Java client tests (AbstractStickyAssignorTest,
StickyAssignorTest, CooperativeStickyAssignorTest, RangeAssignorTest, RoundRobinAssignorTest),
with the expected outputs the Java tests assert.

The Java tests build their subscriptions in a ``HashMap``; ``string_hash_map`` gives the same
iteration order.  Rack-aware variants are ported in their no-rack configuration only.
"""
from __future__ import annotations

import random

import pytest

from kgroup.client.assignors import (ClusterMetadata, CooperativeStickyAssignor, MemberData,
                                     RangeAssignor, RoundRobinAssignor, StickyAssignor,
                                     Subscription, TopicPartition)
from kgroup.java_compat import hash_order, string_hash_map, string_hash_u32
from kgroup.client.assignors.sticky import serialize_topic_partition_assignment

TP = TopicPartition
GENERATION = 1


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def parse(text: str) -> list[TopicPartition]:
    out = []
    for item in filter(None, text.split(", ")):
        topic, p = item.rsplit("-", 1)
        out.append(TP(topic, int(p)))
    return out


def sorted_str(partitions) -> str:
    return ", ".join(sorted(str(p) for p in partitions))


def canonical(prefix: str, i: int, max_num: int) -> str:
    return prefix + str(i).zfill(len(str(max_num)))


# --------------------------------------------------------------------------------------
# helpers shared with the other assignor test modules
# --------------------------------------------------------------------------------------

class Flavor:
    """How AbstractStickyAssignorTest's subclasses build subscriptions."""

    def __init__(self, cls):
        self.cls = cls
        self.assignor = cls()

    @property
    def cooperative(self) -> bool:
        return self.cls is CooperativeStickyAssignor

    def new(self):
        self.assignor = self.cls()
        return self.assignor

    def v2(self, topics, partitions, generation=GENERATION) -> Subscription:
        partitions = list(partitions)
        if self.cooperative:
            user_data = self.assignor.subscription_user_data(set(topics))
        else:
            user_data = serialize_topic_partition_assignment(MemberData(partitions, generation))
        return Subscription(list(topics), user_data, partitions, generation)

    def assign(self, partitions_per_topic, subscriptions):
        return self.assignor.assign_partitions(partitions_per_topic, string_hash_map(subscriptions))


def subscription(topics) -> Subscription:
    return Subscription(list(topics))


def verify_validity_and_balance(subscriptions, assignment, partitions_per_topic):
    """AbstractStickyAssignorTest.verifyValidityAndBalance."""
    assert set(subscriptions) == set(assignment)
    consumers = sorted(assignment)
    for i, consumer in enumerate(consumers):
        partitions = assignment[consumer]
        for p in partitions:
            assert p.topic in subscriptions[consumer].topics, (consumer, p)
        for other in consumers[i + 1:]:
            other_partitions = assignment[other]
            assert not set(partitions) & set(other_partitions), (consumer, other)
            if abs(len(partitions) - len(other_partitions)) <= 1:
                continue
            topics = {p.topic for p in partitions}
            other_topics = {p.topic for p in other_partitions}
            assert not topics & other_topics, (
                f"{consumer} ({len(partitions)}) and {other} ({len(other_partitions)}) share "
                f"topics {topics & other_topics}: could be balanced better")


def cooperative_revokes(subscriptions, assignment) -> bool:
    added, revoked = set(), set()
    for consumer, assigned in assignment.items():
        owned = subscriptions[consumer].owned_partitions
        revoked |= set(owned) - set(assigned)
        added |= set(assigned) - set(owned)
    assert not added & revoked, "a partition was revoked and re-assigned in one rebalance"
    return bool(revoked)


def verify(flavor: Flavor, subscriptions, assignment, partitions_per_topic):
    """For the cooperative assignor, first run the follow-up rebalances (at most 4)."""
    if flavor.cooperative:
        rebalances = 0
        while cooperative_revokes(subscriptions, assignment):
            for consumer, assigned in list(assignment.items()):
                old = subscriptions[consumer]
                subscriptions[consumer] = flavor.v2(old.topics, assigned, GENERATION)
            assignment = flavor.assign(partitions_per_topic, subscriptions)
            rebalances += 1
            assert rebalances <= 4
    verify_validity_and_balance(subscriptions, assignment, partitions_per_topic)
    return assignment


FLAVORS = [pytest.param(StickyAssignor, id="sticky"),
           pytest.param(CooperativeStickyAssignor, id="cooperative")]


@pytest.fixture(params=FLAVORS)
def flavor(request) -> Flavor:
    return Flavor(request.param)


# --------------------------------------------------------------------------------------
# AbstractStickyAssignorTest (both sticky assignors)
# --------------------------------------------------------------------------------------

def test_one_consumer_no_topic(flavor):
    subs = {"consumer": subscription([])}
    assignment = flavor.assign({}, subs)
    assert assignment == {"consumer": []}
    assert flavor.assignor.partitions_transferring_ownership == {}


def test_one_consumer_nonexistent_topic(flavor):
    subs = {"consumer": subscription(["topic"])}
    assignment = flavor.assign({"topic": 0}, subs)
    assert assignment == {"consumer": []}
    assert flavor.assignor.partitions_transferring_ownership == {}


def test_one_consumer_one_topic(flavor):
    assignment = flavor.assign({"topic": 3}, {"consumer": subscription(["topic"])})
    assert assignment["consumer"] == [tp("topic", 0), tp("topic", 1), tp("topic", 2)]
    assert flavor.assignor.partitions_transferring_ownership == {}


def test_only_assigns_partitions_from_subscribed_topics(flavor):
    subs = {"consumer": flavor.v2(["topic"], [tp("topic", 0), tp("topic", 1), tp("other", 0),
                                              tp("other", 1)])}
    assignment = flavor.assign({"topic": 2}, subs)
    assert assignment["consumer"] == [tp("topic", 0), tp("topic", 1)]
    assert flavor.assignor.partitions_transferring_ownership == {}


def test_one_consumer_multiple_topics(flavor):
    assignment = flavor.assign({"topic1": 1, "topic2": 2},
                               {"consumer": subscription(["topic1", "topic2"])})
    assert assignment["consumer"] == [tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)]


def test_two_consumers_one_topic_two_partitions(flavor):
    subs = {"consumer1": subscription(["topic"]), "consumer2": subscription(["topic"])}
    assignment = flavor.assign({"topic": 2}, subs)
    assert assignment["consumer1"] == [tp("topic", 0)]
    assert assignment["consumer2"] == [tp("topic", 1)]


def test_multiple_consumers_mixed_topic_subscriptions(flavor):
    subs = {"consumer1": subscription(["topic1"]),
            "consumer2": subscription(["topic1", "topic2"]),
            "consumer3": subscription(["topic1"])}
    ppt = {"topic1": 3, "topic2": 2}
    assignment = flavor.assign(ppt, subs)
    assert assignment["consumer1"] == [tp("topic1", 0), tp("topic1", 2)]
    assert assignment["consumer2"] == [tp("topic2", 0), tp("topic2", 1)]
    assert assignment["consumer3"] == [tp("topic1", 1)]
    assert flavor.assignor.partitions_transferring_ownership is None
    verify(flavor, subs, assignment, ppt)


def test_two_consumers_two_topics_six_partitions(flavor):
    subs = {c: subscription(["topic1", "topic2"]) for c in ("consumer1", "consumer2")}
    assignment = flavor.assign({"topic1": 3, "topic2": 3}, subs)
    assert assignment["consumer1"] == [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)]
    assert assignment["consumer2"] == [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)]


def test_consumer_owning_min_quota_expected_max_quota(flavor):
    topics = ["topic1", "topic2"]
    subs = {"consumer1": flavor.v2(topics, [tp("topic1", 0), tp("topic2", 1)]),
            "consumer2": flavor.v2(topics, [tp("topic1", 1), tp("topic2", 2)])}
    assignment = flavor.assign({"topic1": 2, "topic2": 3}, subs)
    assert assignment["consumer1"] == [tp("topic1", 0), tp("topic2", 1), tp("topic2", 0)]
    assert assignment["consumer2"] == [tp("topic1", 1), tp("topic2", 2)]
    assert flavor.assignor.partitions_transferring_ownership == {}


def test_max_quota_consumer_more_than_num_expected_max_capacity_members(flavor):
    topics = ["topic1", "topic2"]
    ppt = {"topic1": 2, "topic2": 2}
    subs = {"consumer1": flavor.v2(topics, [tp("topic1", 0), tp("topic2", 0)]),
            "consumer2": flavor.v2(topics, [tp("topic1", 1), tp("topic2", 1)]),
            "consumer3": flavor.v2(topics, [])}
    assignment = flavor.assign(ppt, subs)
    assert flavor.assignor.partitions_transferring_ownership == {tp("topic2", 0): "consumer3"}
    assert assignment["consumer1"] == [tp("topic1", 0)]
    assert assignment["consumer2"] == [tp("topic1", 1), tp("topic2", 1)]
    # the cooperative assignor holds t2p0 back until consumer1 has revoked it
    assert assignment["consumer3"] == ([] if flavor.cooperative else [tp("topic2", 0)])
    verify(flavor, subs, assignment, ppt)


def test_all_consumers_are_under_min_quota(flavor):
    topics = ["topic1", "topic2"]
    subs = {"consumer1": flavor.v2(topics, [tp("topic1", 0)]),
            "consumer2": flavor.v2(topics, [tp("topic1", 1)]),
            "consumer3": flavor.v2(topics, [])}
    assignment = flavor.assign({"topic1": 2, "topic2": 3}, subs)
    assert flavor.assignor.partitions_transferring_ownership == {}
    assert assignment["consumer1"] == [tp("topic1", 0), tp("topic2", 1)]
    assert assignment["consumer2"] == [tp("topic1", 1), tp("topic2", 2)]
    assert assignment["consumer3"] == [tp("topic2", 0)]


def test_add_remove_consumer_one_topic(flavor):
    ppt = {"topic": 3}
    subs = {"consumer1": subscription(["topic"])}
    assignment = flavor.assign(ppt, subs)
    assert assignment["consumer1"] == [tp("topic", 0), tp("topic", 1), tp("topic", 2)]

    subs = {"consumer1": flavor.v2(["topic"], assignment["consumer1"]),
            "consumer2": flavor.v2(["topic"], [])}
    assignment = flavor.assign(ppt, subs)
    assert flavor.assignor.partitions_transferring_ownership == {tp("topic", 2): "consumer2"}
    assert assignment["consumer1"] == [tp("topic", 0), tp("topic", 1)]
    assignment = verify(flavor, subs, assignment, ppt)
    assert assignment["consumer2"] == [tp("topic", 2)]

    subs = {"consumer2": flavor.v2(["topic"], assignment["consumer2"])}
    assignment = flavor.assign(ppt, subs)
    assert set(assignment["consumer2"]) == {tp("topic", 0), tp("topic", 1), tp("topic", 2)}
    assert flavor.assignor.partitions_transferring_ownership == {}


def test_topic_balance_after_reassignment(flavor):
    topics = ["topic1", "topic2"]
    ppt = {"topic1": 12, "topic2": 12}

    def per_topic(assignment, expected):
        for parts in assignment.values():
            assert sum(p.topic == "topic1" for p in parts) == expected
            assert sum(p.topic == "topic2" for p in parts) == expected

    subs = {"consumer1": subscription(topics)}
    assignment = flavor.assign(ppt, subs)
    per_topic(assignment, 12)
    subs = {"consumer1": flavor.v2(topics, assignment["consumer1"]),
            "consumer2": flavor.v2(topics, [])}
    assignment = verify(flavor, subs, flavor.assign(ppt, subs), ppt)
    per_topic(assignment, 6)
    subs = {"consumer1": flavor.v2(topics, assignment["consumer1"]),
            "consumer2": flavor.v2(topics, assignment["consumer2"]),
            "consumer3": flavor.v2(topics, []), "consumer4": flavor.v2(topics, [])}
    assignment = verify(flavor, subs, flavor.assign(ppt, subs), ppt)
    per_topic(assignment, 3)
    subs = {"consumer3": flavor.v2(topics, assignment["consumer3"]),
            "consumer4": flavor.v2(topics, assignment["consumer4"])}
    assignment = flavor.assign(ppt, subs)
    per_topic(assignment, 6)
    assert flavor.assignor.partitions_transferring_ownership == {}


def test_add_remove_two_consumers_two_topics(flavor):
    topics = ["topic1", "topic2"]
    ppt = {"topic1": 3, "topic2": 4}
    subs = {"consumer1": subscription(topics), "consumer2": subscription(topics)}
    assignment = flavor.assign(ppt, subs)
    assert assignment["consumer1"] == [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1),
                                       tp("topic2", 3)]
    assert assignment["consumer2"] == [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)]

    subs = {"consumer1": flavor.v2(topics, assignment["consumer1"]),
            "consumer2": flavor.v2(topics, assignment["consumer2"]),
            "consumer3": flavor.v2(topics, []), "consumer4": flavor.v2(topics, [])}
    assignment = flavor.assign(ppt, subs)
    assert flavor.assignor.partitions_transferring_ownership == {
        tp("topic1", 2): "consumer3", tp("topic2", 3): "consumer3", tp("topic2", 2): "consumer4"}
    assert assignment["consumer1"] == [tp("topic1", 0), tp("topic2", 1)]
    assert assignment["consumer2"] == [tp("topic2", 0), tp("topic1", 1)]
    if flavor.cooperative:
        assert assignment["consumer3"] == [] and assignment["consumer4"] == []
        assignment = verify(flavor, subs, assignment, ppt)
    assert assignment["consumer3"] == [tp("topic1", 2), tp("topic2", 3)]
    assert assignment["consumer4"] == [tp("topic2", 2)]

    subs = {"consumer3": flavor.v2(topics, assignment["consumer3"]),
            "consumer4": flavor.v2(topics, assignment["consumer4"])}
    assignment = flavor.assign(ppt, subs)
    assert assignment["consumer3"] == [tp("topic1", 2), tp("topic2", 3), tp("topic1", 0),
                                       tp("topic2", 1)]
    assert assignment["consumer4"] == [tp("topic2", 2), tp("topic1", 1), tp("topic2", 0)]
    assert flavor.assignor.partitions_transferring_ownership == {}


def test_poor_round_robin_assignment_scenario(flavor):
    ppt = {f"topic{i}": (i % 2) + 1 for i in range(1, 6)}
    all5 = [f"topic{i}" for i in range(1, 6)]
    odd = ["topic1", "topic3", "topic5"]
    subs = {"consumer1": subscription(all5), "consumer2": subscription(odd),
            "consumer3": subscription(odd), "consumer4": subscription(all5)}
    verify(flavor, subs, flavor.assign(ppt, subs), ppt)


def test_add_remove_topic_two_consumers(flavor):
    ppt = {"topic": 3}
    subs = {"consumer1": subscription(["topic"]), "consumer2": subscription(["topic"])}
    assignment = flavor.assign(ppt, subs)
    first1, first2 = assignment["consumer1"], assignment["consumer2"]
    assert sorted([len(first1), len(first2)]) == [1, 2]

    ppt["topic2"] = 3
    subs = {"consumer1": flavor.v2(["topic", "topic2"], first1),
            "consumer2": flavor.v2(["topic", "topic2"], first2)}
    assignment = flavor.assign(ppt, subs)
    assert flavor.assignor.partitions_transferring_ownership == {}
    second1, second2 = assignment["consumer1"], assignment["consumer2"]
    assert len(second1) == 3 and len(second2) == 3
    assert set(first1) <= set(second1) and set(first2) <= set(second2)

    del ppt["topic"]
    subs = {"consumer1": flavor.v2(["topic2"], second1),
            "consumer2": flavor.v2(["topic2"], second2)}
    assignment = flavor.assign(ppt, subs)
    third1, third2 = assignment["consumer1"], assignment["consumer2"]
    assert sorted([len(third1), len(third2)]) == [1, 2]
    assert set(third1) <= set(second1) and set(third2) <= set(second2)


def test_reassignment_after_one_consumer_leaves(flavor):
    ppt = {canonical("t", i, 20): i for i in range(1, 20)}
    subs = {canonical("c", i, 20): subscription([canonical("t", j, 20) for j in range(1, i + 1)])
            for i in range(1, 20)}
    assignment = verify(flavor, subs, flavor.assign(ppt, subs), ppt)
    subs = {c: flavor.v2(s.topics, assignment[c]) for c, s in subs.items()}
    del subs["c10"]
    assignment = flavor.assign(ppt, subs)
    verify(flavor, subs, assignment, ppt)
    assert flavor.assignor.is_sticky()


def test_reassignment_after_one_consumer_added(flavor):
    ppt = {"topic": 20}
    subs = {canonical("c", i, 10): subscription(["topic"]) for i in range(1, 10)}
    assignment = flavor.assign(ppt, subs)
    verify(flavor, subs, assignment, ppt)
    subs[canonical("c", 10, 10)] = subscription(["topic"])
    assignment = flavor.assign(ppt, subs)
    assert flavor.assignor.partitions_transferring_ownership == {}
    verify(flavor, subs, assignment, ppt)


def test_same_subscriptions(flavor):
    ppt = {canonical("t", i, 15): i for i in range(1, 15)}
    topics = list(ppt)
    subs = {canonical("c", i, 9): subscription(topics) for i in range(1, 9)}
    assignment = verify(flavor, subs, flavor.assign(ppt, subs), ppt)
    subs = {c: flavor.v2(topics, assignment[c]) for c in subs}
    del subs[canonical("c", 5, 9)]
    assignment = flavor.assign(ppt, subs)
    assert flavor.assignor.partitions_transferring_ownership == {}
    verify(flavor, subs, assignment, ppt)


def test_new_subscription(flavor):
    ppt = {canonical("t", i, 5): 1 for i in range(1, 5)}
    subs = {}
    for i in range(3):
        subs[canonical("c", i, 3)] = subscription(
            [canonical("t", j, 5) for j in range(i, 3 * i - 1)])
    verify(flavor, subs, flavor.assign(ppt, subs), ppt)
    subs[canonical("c", 0, 3)].topics.append(canonical("t", 1, 5))
    verify(flavor, subs, flavor.assign(ppt, subs), ppt)
    assert flavor.assignor.is_sticky()


def test_move_existing_assignments(flavor):
    ppt = {f"topic{i}": 1 for i in range(1, 7)}
    subs = {"consumer1": flavor.v2(["topic1", "topic2"], [tp("topic1", 0)]),
            "consumer2": flavor.v2(["topic1", "topic2", "topic3", "topic4"],
                                   [tp("topic2", 0), tp("topic3", 0)]),
            "consumer3": flavor.v2(["topic2", "topic3", "topic4", "topic5", "topic6"],
                                   [tp("topic4", 0), tp("topic5", 0), tp("topic6", 0)])}
    assignment = flavor.assign(ppt, subs)
    assert flavor.assignor.partitions_transferring_ownership is None
    verify(flavor, subs, assignment, ppt)


def test_stickiness(flavor):
    ppt = {"topic1": 3}
    subs = {f"consumer{i}": subscription(["topic1"]) for i in range(1, 5)}
    assignment = flavor.assign(ppt, subs)
    assert all(len(v) <= 1 for v in assignment.values())
    before = {c: v[0] for c, v in assignment.items() if v}
    subs = {c: flavor.v2(["topic1"], assignment[c]) for c in ("consumer2", "consumer3",
                                                              "consumer4")}
    assignment = flavor.assign(ppt, subs)
    assert flavor.assignor.partitions_transferring_ownership == {}
    for consumer, parts in assignment.items():
        assert len(parts) == 1
        assert consumer not in before or before[consumer] in parts


def test_assignment_updated_for_deleted_topic(flavor):
    subs = {"consumer": subscription(["topic1", "topic2", "topic3"])}
    assignment = flavor.assign({"topic1": 1, "topic3": 100}, subs)
    assert sum(map(len, assignment.values())) == 101


def test_no_exception_thrown_when_only_subscribed_topic_deleted(flavor):
    assignment = flavor.assign({"topic": 3}, {"consumer": subscription(["topic"])})
    subs = {"consumer": flavor.v2(["topic"], assignment["consumer"])}
    assignment = flavor.assign({}, subs)
    assert assignment == {"consumer": []}
    assert flavor.assignor.partitions_transferring_ownership == {}


def test_reassignment_with_random_subscriptions_and_changes(flavor):
    rnd = random.Random(42)
    for _ in range(8):  # Java runs 100 rounds with 20-40 members
        num_topics = rnd.randrange(10, 20)
        topics = [canonical("t", i, 20) for i in range(num_topics)]
        ppt = {t: i + 1 for i, t in enumerate(topics)}
        num_consumers = rnd.randrange(20, 40)

        def sublist(topics=topics):
            chosen = list(topics)
            for _ in range(rnd.randrange(len(topics))):
                chosen.pop(rnd.randrange(len(chosen)))
            return sorted(chosen)

        subs = {canonical("c", i, 40): subscription(sublist()) for i in range(num_consumers)}
        flavor.new()
        assignment = verify(flavor, subs, flavor.assign(ppt, subs), ppt)
        subs = {c: flavor.v2(sublist(), assignment[c]) for c in subs}
        assignment = flavor.assign(ppt, subs)
        verify(flavor, subs, assignment, ppt)
        assert flavor.assignor.is_sticky()


def test_all_consumers_reach_expected_quota_and_are_considered_filled(flavor):
    subs = {"consumer1": flavor.v2(["topic"], [tp("topic", 0), tp("topic", 1)]),
            "consumer2": flavor.v2(["topic"], [tp("topic", 2)]),
            "consumer3": flavor.v2(["topic"], [])}
    assignment = flavor.assign({"topic": 4}, subs)
    assert assignment == {"consumer1": [tp("topic", 0), tp("topic", 1)],
                          "consumer2": [tp("topic", 2)], "consumer3": [tp("topic", 3)]}
    assert flavor.assignor.partitions_transferring_ownership == {}


@pytest.mark.parametrize("other_generation", [9, -1], ids=["stale", "none"])
def test_owned_partitions_are_invalidated_for_consumer_with_stale_or_no_generation(
        flavor, other_generation):
    topics = ["topic", "topic2"]
    owned = [tp("topic", 0), tp("topic", 2), tp("topic2", 1)]
    subs = {"consumer1": flavor.v2(topics, owned, 10),
            "consumer2": flavor.v2(topics, owned, other_generation)}
    assignment = flavor.assign({"topic": 3, "topic2": 3}, subs)
    assert set(assignment["consumer1"]) == set(owned)
    assert set(assignment["consumer2"]) == {tp("topic", 1), tp("topic2", 0), tp("topic2", 2)}
    assert flavor.assignor.partitions_transferring_ownership == {}


def test_partitions_claimed_by_multiple_consumers_in_same_generation(flavor):
    subs = {"consumer1": flavor.v2(["topic"], [tp("topic", 0), tp("topic", 1)]),
            "consumer2": flavor.v2(["topic"], [tp("topic", 0), tp("topic", 2)]),
            "consumer3": flavor.v2(["topic"], [])}
    assignment = flavor.assign({"topic": 3}, subs)
    assert flavor.assignor.partitions_transferring_ownership == {tp("topic", 0): "consumer3"}
    assert assignment["consumer1"] == [tp("topic", 1)]
    assert assignment["consumer2"] == [tp("topic", 2)]
    # StickyAssignorTest / CooperativeStickyAssignorTest ...InSameGenerationWithEqual...
    assert assignment["consumer3"] == ([] if flavor.cooperative else [tp("topic", 0)])


def test_claimed_by_multiple_consumers_in_same_generation_unequal(flavor):
    subs = {"consumer1": flavor.v2(["topic"], [tp("topic", 0), tp("topic", 1)]),
            "consumer2": flavor.v2(["topic"], [tp("topic", 0), tp("topic", 2)]),
            "consumer3": flavor.v2(["topic"], [])}
    assignment = flavor.assign({"topic": 4}, subs)
    assert assignment["consumer1"] == [tp("topic", 1), tp("topic", 3)]
    assert assignment["consumer2"] == [tp("topic", 2)]
    assert assignment["consumer3"] == ([] if flavor.cooperative else [tp("topic", 0)])


def test_ensure_partitions_assigned_to_highest_generation(flavor):
    topics = ["topic", "topic2", "topic3"]
    subs = {"consumer1": flavor.v2(topics, [tp("topic", 0), tp("topic2", 0), tp("topic3", 0)], 10),
            "consumer2": flavor.v2(topics, [tp("topic", 1), tp("topic2", 1), tp("topic3", 1)], 9),
            "consumer3": flavor.v2(topics, [tp("topic2", 1), tp("topic3", 0), tp("topic3", 2)], 8)}
    assignment = flavor.assign({t: 3 for t in topics}, subs)
    assert set(assignment["consumer1"]) == {tp("topic", 0), tp("topic2", 0), tp("topic3", 0)}
    assert set(assignment["consumer2"]) == {tp("topic", 1), tp("topic2", 1), tp("topic3", 1)}
    assert set(assignment["consumer3"]) == {tp("topic", 2), tp("topic2", 2), tp("topic3", 2)}
    assert flavor.assignor.partitions_transferring_ownership == {}


def test_no_reassignment_on_current_members(flavor):
    topics = ["topic", "topic2", "topic3", "topic1"]
    subs = {"consumer1": flavor.v2(topics, [], -1),
            "consumer2": flavor.v2(topics, [tp("topic", 0), tp("topic2", 0), tp("topic1", 0)], 9),
            "consumer3": flavor.v2(topics, [tp("topic3", 2), tp("topic2", 2), tp("topic1", 1)], 8),
            "consumer4": flavor.v2(topics, [tp("topic3", 1), tp("topic", 1), tp("topic", 2)], 7)}
    assignment = flavor.assign({t: 3 for t in topics}, subs)
    assert set(assignment["consumer1"]) == {tp("topic1", 2), tp("topic2", 1), tp("topic3", 0)}
    assert flavor.assignor.partitions_transferring_ownership == {}


def test_owned_partitions_invalidated_for_consumer_with_multiple_generation(flavor):
    topics = ["topic", "topic2"]
    subs = {"consumer1": flavor.v2(topics, [tp("topic", 0), tp("topic2", 1), tp("topic", 1)], 10),
            "consumer2": flavor.v2(topics, [tp("topic", 0), tp("topic2", 1), tp("topic2", 2)], 8)}
    assignment = flavor.assign({"topic": 3, "topic2": 3}, subs)
    assert set(assignment["consumer1"]) == {tp("topic", 0), tp("topic2", 1), tp("topic", 1)}
    assert set(assignment["consumer2"]) == {tp("topic", 2), tp("topic2", 2), tp("topic2", 0)}
    assert flavor.assignor.partitions_transferring_ownership == {}


def test_subscription_not_equal_and_assign_same_partition_with_3_generation(flavor):
    ppt = {"topic": 6, "topic1": 1}
    for g1, g2, g3 in [(1, 2, 3), (1, 3, 2), (2, 1, 3), (2, 3, 1), (3, 1, 2), (3, 2, 1)]:
        subs = {"consumer1": flavor.v2(["topic"], [tp("topic", 0), tp("topic", 2)], g1),
                "consumer2": flavor.v2(["topic"], [tp("topic", 1), tp("topic", 2),
                                                   tp("topic", 3)], g2),
                "consumer3": flavor.v2(["topic"], [tp("topic", 2), tp("topic", 4),
                                                   tp("topic", 5)], g3),
                "consumer4": flavor.v2(["topic1"], [tp("topic1", 0)], 2)}
        assignment = flavor.assign(ppt, subs)
        flat = [p for parts in assignment.values() for p in parts]
        assert len(flat) == len(set(flat))
        assert all(1 <= len(parts) <= 2 for parts in assignment.values())


def test_multiple_consumers_leaving_and_random_subscription(flavor):
    rnd = random.Random(7)
    topic_count, consumer_count = 40, 200
    ppt = {canonical("t", i, topic_count): rnd.randrange(10) + 1 for i in range(topic_count)}
    subs = {}
    for i in range(consumer_count):
        topics = [canonical("t", rnd.randrange(topic_count), topic_count)
                  for _ in range(rnd.randrange(20))]
        subs[canonical("c", i, consumer_count)] = subscription(topics)
    assignment = flavor.assign(ppt, subs)
    verify_validity_and_balance(subs, assignment, ppt)
    subs = {c: flavor.v2(s.topics, assignment[c]) for c, s in subs.items()}
    for _ in range(50):
        subs.pop(canonical("c", rnd.randrange(consumer_count), consumer_count), None)
    assignment = flavor.assign(ppt, subs)
    verify_validity_and_balance(subs, assignment, ppt)
    assert flavor.assignor.is_sticky()


ALL3 = ["t1", "t2", "t3"]
RACK_TOPICS = {"t1": 6, "t2": 7, "t3": 2}


def _rack_test_assign(flavor, consumer_topics, owned=None):
    subs = {f"consumer{i}": Subscription(list(topics),
                                         owned_partitions=parse(owned[i]) if owned else [])
            for i, topics in enumerate(consumer_topics)}
    # verifyRackAssignment builds its map with new HashMap<>(consumers.size())
    order = hash_order(subs, string_hash_u32, initial_capacity=len(subs))
    assignment = flavor.assignor.assign_partitions(RACK_TOPICS, {c: subs[c] for c in order})
    return [sorted_str(assignment[f"consumer{i}"]) for i in range(len(consumer_topics))]


def test_rack_aware_assignment_with_uniform_subscription_no_racks(flavor):
    expected = ["t1-0, t1-3, t2-0, t2-3, t2-6", "t1-1, t1-4, t2-1, t2-4, t3-0",
                "t1-2, t1-5, t2-2, t2-5, t3-1"]
    assert _rack_test_assign(flavor, [ALL3] * 3) == expected
    # already owning that assignment keeps it
    assert _rack_test_assign(flavor, [ALL3] * 3, expected) == expected


def test_rack_aware_assignment_with_non_equal_subscription_no_racks(flavor):
    consumer_topics = [ALL3, ALL3, ["t1", "t3"]]
    expected = ["t1-5, t2-0, t2-2, t2-4, t2-6", "t1-3, t2-1, t2-3, t2-5, t3-0",
                "t1-0, t1-1, t1-2, t1-4, t3-1"]
    assert _rack_test_assign(flavor, consumer_topics) == expected
    assert _rack_test_assign(flavor, consumer_topics, expected) == expected
    owned = ["t1-0, t1-1, t1-2, t1-3, t1-4", "t1-5, t2-0, t2-1, t2-2, t2-3",
             "t2-4, t2-5, t2-6, t3-0, t3-1"]
    if not flavor.cooperative:
        # "owned" only sits in Subscription.owned_partitions, which StickyAssignor ignores
        assert _rack_test_assign(flavor, consumer_topics, owned) == expected
    else:
        intermediate = ["t1-2, t1-3, t1-4", "t2-0, t2-1, t2-2, t2-3", "t3-0, t3-1"]
        assert _rack_test_assign(flavor, consumer_topics, owned) == intermediate
        assert _rack_test_assign(flavor, consumer_topics, intermediate) == [
            "t1-2, t1-3, t1-4, t2-4, t2-5", "t2-0, t2-1, t2-2, t2-3, t2-6",
            "t1-0, t1-1, t1-5, t3-0, t3-1"]


# --------------------------------------------------------------------------------------
# StickyAssignorTest
# --------------------------------------------------------------------------------------

def sticky_v0(topics, partitions) -> Subscription:
    from kgroup.client.assignors.sticky import serialize_topic_partition_assignment_v0
    return Subscription(list(topics), serialize_topic_partition_assignment_v0(partitions))


def sticky_v1(topics, partitions, generation) -> Subscription:
    return Subscription(list(topics), serialize_topic_partition_assignment(
        MemberData(partitions, generation)), list(partitions))


def test_sticky_member_data_all_protocol_versions():
    assignor = StickyAssignor()
    owned = [tp("topic1", 0), tp("topic2", 1)]
    flavor = Flavor(StickyAssignor)
    for sub in (sticky_v1(["topic"], owned, GENERATION),
                flavor.v2(["topic"], owned, GENERATION)):
        data = assignor.member_data(sub)
        assert data.partitions == owned and data.generation == GENERATION
    data = assignor.member_data(sticky_v0(["topic"], owned))
    assert data.partitions == owned and data.generation is None


def test_sticky_member_data_with_inconsistent_data():
    assignor = StickyAssignor()
    from kgroup.client.assignors import Assignment
    assignor.on_assignment(Assignment([tp("topic", 1)]), GENERATION)
    user_data = assignor.subscription_user_data({"topic"})
    data = assignor.member_data(Subscription(["topic"], user_data, [tp("topic", 0)]))
    assert data.partitions == [tp("topic", 1)] and data.generation == GENERATION


def test_sticky_member_data_will_honor_user_data():
    assignor = StickyAssignor()
    owned = [tp("topic1", 0), tp("topic2", 1)]
    sub = Subscription(["topic"], serialize_topic_partition_assignment(
        MemberData(owned, GENERATION - 1)), [], GENERATION)
    data = assignor.member_data(sub)
    assert data.partitions == owned and data.generation == GENERATION - 1


def test_sticky_assignor_with_old_version_subscriptions():
    assignor = StickyAssignor()
    flavor = Flavor(StickyAssignor)
    subs = {"consumer1": sticky_v0(["topic1"], [tp("topic1", 0)]),
            "consumer2": sticky_v1(["topic1"], [tp("topic1", 1)], GENERATION),
            "consumer3": flavor.v2(["topic1"], [], GENERATION)}
    assignment = assignor.assign_partitions({"topic1": 3}, string_hash_map(subs))
    assert assignment["consumer1"] == [tp("topic1", 0)]
    assert assignment["consumer2"] == [tp("topic1", 1)]
    assert assignment["consumer3"] == [tp("topic1", 2)]


def test_sticky_schema_backward_compatibility():
    flavor = Flavor(StickyAssignor)
    subs = {"consumer1": flavor.v2(["topic"], [tp("topic", 0), tp("topic", 2)], 1),
            "consumer2": sticky_v0(["topic"], [tp("topic", 1)]),
            "consumer3": subscription(["topic"])}
    assignment = flavor.assign({"topic": 3}, subs)
    assert all(len(v) == 1 for v in assignment.values())
    assert assignment["consumer1"][0] in (tp("topic", 0), tp("topic", 2))
    assert assignment["consumer2"] == [tp("topic", 1)]


@pytest.mark.parametrize("equal", [True, False])
def test_sticky_assignment_with_multiple_generations1(equal):
    flavor = Flavor(StickyAssignor)
    all_topics = ["topic", "topic2"]
    c2_topics = all_topics if equal else ["topic"]
    ppt = {"topic": 6, "topic2": 6}
    subs = {"consumer1": subscription(all_topics), "consumer2": subscription(c2_topics),
            "consumer3": subscription(all_topics)}
    a = flavor.assign(ppt, subs)
    r1 = [a["consumer1"], a["consumer2"], a["consumer3"]]
    assert [len(x) for x in r1] == [4, 4, 4]

    subs = {"consumer1": flavor.v2(all_topics, r1[0], GENERATION),
            "consumer2": flavor.v2(c2_topics, r1[1], GENERATION)}
    a = flavor.assign(ppt, subs)
    assert len(a["consumer1"]) == 6 and len(a["consumer2"]) == 6
    if equal:
        assert set(r1[0]) <= set(a["consumer1"])
    assert set(r1[1]) <= set(a["consumer2"])
    assert set(a["consumer2"]) & set(r1[2])
    verify_validity_and_balance(subs, a, ppt)

    r2c2 = a["consumer2"]
    subs = {"consumer2": flavor.v2(c2_topics, r2c2, 2),
            "consumer3": flavor.v2(all_topics, r1[2], 1)}
    a = flavor.assign(ppt, subs)
    assert len(a["consumer2"]) == 6 and len(a["consumer3"]) == 6
    assert not set(a["consumer2"]) & set(a["consumer3"])
    verify_validity_and_balance(subs, a, ppt)


@pytest.mark.parametrize("equal", [True, False])
def test_sticky_assignment_with_conflicting_previous_generations(equal):
    flavor = Flavor(StickyAssignor)
    all_topics = ["topic", "topic2", "topic3"]
    c1_topics = all_topics if equal else ["topic"]
    c2_topics = all_topics if equal else ["topic", "topic2"]
    ppt = {t: 4 for t in all_topics}
    c1 = parse("topic-0, topic-1, topic-2, topic2-2, topic2-3, topic3-0") if equal else \
        parse("topic-0, topic-1, topic-2, topic-3")
    c2 = parse("topic-0, topic-1, topic2-0, topic2-1, topic2-2, topic2-3")
    c3 = parse("topic-2, topic-3, topic3-0, topic3-1, topic3-2, topic3-3")
    subs = {"consumer1": flavor.v2(c1_topics, c1, 1), "consumer2": flavor.v2(c2_topics, c2, 2),
            "consumer3": flavor.v2(all_topics, c3, 2)}
    a = flavor.assign(ppt, subs)
    assert [len(a[c]) for c in ("consumer1", "consumer2", "consumer3")] == [4, 4, 4]
    assert set(a["consumer2"]) <= set(c2) and set(a["consumer3"]) <= set(c3)
    verify_validity_and_balance(subs, a, ppt)


# --------------------------------------------------------------------------------------
# CooperativeStickyAssignorTest
# --------------------------------------------------------------------------------------

def test_cooperative_encode_and_decode_generation():
    assignor = CooperativeStickyAssignor()
    sub = Subscription(["topic"], assignor.subscription_user_data({"topic"}))
    assert assignor.member_data(sub).generation == -1
    assignor.on_assignment(None, 10)
    sub = Subscription(["topic"], assignor.subscription_user_data({"topic"}))
    assert assignor.member_data(sub).generation == 10


def test_cooperative_decode_generation():
    assert CooperativeStickyAssignor().member_data(Subscription(["topic"])).generation is None


def test_cooperative_member_data_with_inconsistent_data():
    from kgroup.client.assignors import Assignment
    assignor = CooperativeStickyAssignor()
    assignor.on_assignment(Assignment([tp("topic", 1)]), GENERATION)
    user_data = assignor.subscription_user_data({"topic"})
    data = assignor.member_data(Subscription(["topic"], user_data, [tp("topic", 0)]))
    assert data.partitions == [tp("topic", 0)] and data.generation == GENERATION


@pytest.mark.parametrize("user_data_generation", [GENERATION, GENERATION - 1])
def test_cooperative_member_data_with_empty_partitions(user_data_generation):
    assignor = CooperativeStickyAssignor()
    assignor.on_assignment(None, user_data_generation)
    sub = Subscription(["topic"], assignor.subscription_user_data({"topic"}), [], GENERATION)
    data = assignor.member_data(sub)
    assert data.partitions == [] and data.generation == GENERATION


def test_cooperative_assignor_with_old_version_subscriptions():
    assignor = CooperativeStickyAssignor()

    def v1(partitions):
        assignor.on_assignment(None, GENERATION)
        return Subscription(["topic1"], assignor.subscription_user_data({"topic1"}), partitions)

    subs = {"consumer1": v1([tp("topic1", 0)]), "consumer2": v1([tp("topic1", 1)]),
            "consumer3": Subscription(["topic1"], assignor.subscription_user_data({"topic1"}),
                                      [], GENERATION)}
    assignment = assignor.assign_partitions({"topic1": 3}, string_hash_map(subs))
    assert assignment == {"consumer1": [tp("topic1", 0)], "consumer2": [tp("topic1", 1)],
                          "consumer3": [tp("topic1", 2)]}


# --------------------------------------------------------------------------------------
# RangeAssignorTest / RoundRobinAssignorTest (through the public assign())
# --------------------------------------------------------------------------------------

def run(assignor, counts, subs):
    result = assignor.assign(ClusterMetadata(counts), subs)
    return {m: a.partitions for m, a in result.items()}


def static(topics, instance):
    return Subscription(list(topics), group_instance_id=instance)


def test_range_vectors():
    r = RangeAssignor()
    assert run(r, {}, {"consumer1": subscription([])}) == {"consumer1": []}
    assert run(r, {}, {"consumer1": subscription(["topic1"])}) == {"consumer1": []}
    assert run(r, {"topic1": 3, "other": 3}, {"consumer1": subscription(["topic1"])}) == {
        "consumer1": [tp("topic1", 0), tp("topic1", 1), tp("topic1", 2)]}
    assert run(r, {"topic1": 1, "topic2": 2}, {"consumer1": subscription(["topic1", "topic2"])}
               ) == {"consumer1": [tp("topic1", 0), tp("topic2", 0), tp("topic2", 1)]}
    assert run(r, {"topic1": 1}, {"consumer1": subscription(["topic1"]),
                                  "consumer2": subscription(["topic1"])}) == {
        "consumer1": [tp("topic1", 0)], "consumer2": []}
    assert run(r, {"topic1": 3, "topic2": 2}, {
        "consumer1": subscription(["topic1"]), "consumer2": subscription(["topic1", "topic2"]),
        "consumer3": subscription(["topic1"])}) == {
        "consumer1": [tp("topic1", 0)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
        "consumer3": [tp("topic1", 2)]}
    both = ["topic1", "topic2"]
    six = {"topic1": 3, "topic2": 3}
    assert run(r, six, {"consumer1": subscription(both), "consumer2": subscription(both)}) == {
        "consumer1": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
        "consumer2": [tp("topic1", 2), tp("topic2", 2)]}
    # testTwoStaticConsumersTwoTopicsSixPartitions: instance ids decide, not member ids
    assert run(r, six, {"consumer-b": static(both, "instance1"),
                        "consumer-a": static(both, "instance2")}) == {
        "consumer-b": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
        "consumer-a": [tp("topic1", 2), tp("topic2", 2)]}
    # testOneStaticConsumerAndOneDynamicConsumerTwoTopicsSixPartitions
    assert run(r, six, {"consumer-b": static(both, "instance1"),
                        "consumer-a": subscription(both)})["consumer-b"] == [
        tp("topic1", 0), tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)]


def test_range_static_member_assignment_persistent():
    r = RangeAssignor()
    both = ["topic1", "topic2"]
    counts = {"topic1": 5, "topic2": 4}
    subs = {f"consumer{i}": static(both, f"instance{i}") for i in (1, 2, 3)}
    subs["consumer4"] = subscription(both)
    expected = {"consumer1": [tp("topic1", 0), tp("topic1", 1), tp("topic2", 0)],
                "consumer2": [tp("topic1", 2), tp("topic2", 1)],
                "consumer3": [tp("topic1", 3), tp("topic2", 2)],
                "consumer4": [tp("topic1", 4), tp("topic2", 3)]}
    assert run(r, counts, subs) == expected
    del subs["consumer4"]
    subs["consumer5"] = subscription(both)
    expected["consumer5"] = expected.pop("consumer4")
    assert run(r, counts, subs) == expected
    # member ids change after a rolling bounce: the instance ids keep the assignment
    bounced = {"consumer9": static(both, "instance1"), "consumer8": static(both, "instance2"),
               "consumer7": static(both, "instance3"), "consumer5": subscription(both)}
    result = run(r, counts, bounced)
    assert result["consumer9"] == expected["consumer1"]
    assert result["consumer7"] == expected["consumer3"]


def test_roundrobin_vectors():
    rr = RoundRobinAssignor()
    assert run(rr, {"topic": 3}, {"consumer": subscription(["topic"])}) == {
        "consumer": [tp("topic", 0), tp("topic", 1), tp("topic", 2)]}
    assert run(rr, {"topic1": 3, "topic2": 2}, {
        "consumer1": subscription(["topic1"]), "consumer2": subscription(["topic1", "topic2"]),
        "consumer3": subscription(["topic1"])}) == {
        "consumer1": [tp("topic1", 0)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 1)],
        "consumer3": [tp("topic1", 2)]}
    both = ["topic1", "topic2"]
    six = {"topic1": 3, "topic2": 3}
    assert run(rr, six, {"consumer1": subscription(both), "consumer2": subscription(both)}) == {
        "consumer1": [tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)],
        "consumer2": [tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)]}
    # static members sort by group.instance.id, before dynamic ones
    assert run(rr, six, {"consumer-b": static(both, "instance1"),
                         "consumer-a": static(both, "instance2")})["consumer-b"] == [
        tp("topic1", 0), tp("topic1", 2), tp("topic2", 1)]
    assert run(rr, six, {"consumer-b": static(both, "instance1"),
                         "consumer-a": subscription(both)})["consumer-a"] == [
        tp("topic1", 1), tp("topic2", 0), tp("topic2", 2)]
