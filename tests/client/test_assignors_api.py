"""The public assignor API, the seed documents' worked examples, the user-data bytes, Java's
HashMap order, and the documented custom assignor."""
from __future__ import annotations

import pathlib
import re

import pytest
from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData

from kgroup.client.assignors import (ASSIGNORS, Assignment, ClusterMetadata,
                                     ConsumerPartitionAssignor, CooperativeStickyAssignor,
                                     MemberData, RangeAssignor, RebalanceProtocol,
                                     RoundRobinAssignor, StickyAssignor, Subscription,
                                     TopicPartition, get_assignor)
from kgroup.client.assignors.sticky import (deserialize_topic_partition_assignment,
                                            serialize_topic_partition_assignment,
                                            serialize_topic_partition_assignment_v0)

ROOT = pathlib.Path(__file__).resolve().parents[2]
TP = TopicPartition


def parts(text: str) -> list[TopicPartition]:
    """"t0p0 t1p2" -> [TP(t0, 0), TP(t1, 2)]"""
    out = []
    for item in text.split():
        topic, p = item.split("p")
        out.append(TP(topic, int(p)))
    return out


def run(assignor, counts, subs):
    return {m: a.partitions for m, a in assignor.assign(ClusterMetadata(counts), subs).items()}


def test_interface():
    expected = {"range": ([RebalanceProtocol.EAGER], RangeAssignor),
                "roundrobin": ([RebalanceProtocol.EAGER], RoundRobinAssignor),
                "sticky": ([RebalanceProtocol.EAGER], StickyAssignor),
                "cooperative-sticky": ([RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER],
                                       CooperativeStickyAssignor)}
    assert set(ASSIGNORS) == set(expected)
    for name, (protocols, cls) in expected.items():
        assignor = get_assignor(name)
        assert isinstance(assignor, cls) and isinstance(assignor, ConsumerPartitionAssignor)
        assert assignor.name == name and assignor.version == 0
        assert assignor.supported_protocols() == protocols
    with pytest.raises(ValueError):
        get_assignor("nope")
    assert RangeAssignor().subscription_user_data({"t"}) is None
    assert StickyAssignor().subscription_user_data({"t"}) is None  # nothing owned yet
    assert CooperativeStickyAssignor().subscription_user_data({"t"}) == b"\xff\xff\xff\xff"
    assert sorted([TP("b", 0), TP("a", 10), TP("a", 2)]) == [TP("a", 2), TP("a", 10), TP("b", 0)]
    assert str(TP("orders", 3)) == "orders-3"
    cluster = ClusterMetadata({"t": 2})
    assert cluster.partitions_for_topic("t") == {0, 1} and cluster.partitions_for_topic("x") is None


def test_assign_returns_every_member_in_input_order():
    subs = {"z": Subscription(["t"]), "a": Subscription([]), "m": Subscription(["gone"])}
    for cls in ASSIGNORS.values():
        result = cls().assign(ClusterMetadata({"t": 3}), subs)
        assert list(result) == ["z", "a", "m"]
        assert all(isinstance(a, Assignment) for a in result.values())
        assert result["z"].partitions == parts("tp0 tp1 tp2")
        assert result["a"].partitions == [] and result["m"].partitions == []


# ---- worked examples of Kafka's assignor documentation ----------------------------------

def test_range_gives_the_first_members_the_extra_partition_of_each_topic():
    subs = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    assert run(RangeAssignor(), {"t0": 3, "t1": 3}, subs) == {
        "C0": parts("t0p0 t0p1 t1p0 t1p1"), "C1": parts("t0p2 t1p2")}


def test_range_splits_ten_and_eleven_partitions_over_three_members():
    subs = {"C1-0": Subscription(["T1"]), "C2-0": Subscription(["T1"]),
            "C2-1": Subscription(["T1"])}
    sizes = {m: [p.partition for p in v] for m, v in run(RangeAssignor(), {"T1": 10}, subs).items()}
    assert sizes == {"C1-0": [0, 1, 2, 3], "C2-0": [4, 5, 6], "C2-1": [7, 8, 9]}
    sizes = {m: [p.partition for p in v] for m, v in run(RangeAssignor(), {"T1": 11}, subs).items()}
    assert sizes == {"C1-0": [0, 1, 2, 3], "C2-0": [4, 5, 6, 7], "C2-1": [8, 9, 10]}


def test_roundrobin_alternates_members_over_all_partitions_with_equal_subscriptions():
    subs = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    assert run(RoundRobinAssignor(), {"t0": 3, "t1": 3}, subs) == {
        "C0": parts("t0p0 t0p2 t1p1"), "C1": parts("t0p1 t1p0 t1p2")}


UNEQUAL = {"C0": Subscription(["t0"]), "C1": Subscription(["t0", "t1"]),
           "C2": Subscription(["t0", "t1", "t2"])}
UNEQUAL_COUNTS = {"t0": 1, "t1": 2, "t2": 3}


def test_roundrobin_skips_members_not_subscribed_to_a_topic():
    assert run(RoundRobinAssignor(), UNEQUAL_COUNTS, UNEQUAL) == {
        "C0": parts("t0p0"), "C1": parts("t1p0"), "C2": parts("t1p1 t2p0 t2p1 t2p2")}


@pytest.mark.parametrize("cls", [StickyAssignor, CooperativeStickyAssignor])
def test_sticky_balances_unequal_subscriptions(cls):
    assert run(cls(), UNEQUAL_COUNTS, UNEQUAL) == {
        "C0": parts("t0p0"), "C1": parts("t1p0 t1p1"), "C2": parts("t2p0 t2p1 t2p2")}


def test_sticky_moves_only_the_partitions_of_a_member_that_left():
    """Three members, four topics of two partitions; C1 leaves.  The others keep what they
    had and only C1's partitions move (the StickyAssignor documentation's example 2, whose
    table lists t1-1 twice where C1 had t0-1; its final placement is that of pre-2.3 clients -
    current Kafka, like us, puts t0p1 on C0 and t2p0, t3p1 on C2)."""
    counts = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}
    topics = list(counts)
    leader = StickyAssignor()
    subs = {m: Subscription(topics) for m in ("C0", "C1", "C2")}
    first = run(leader, counts, subs)
    assert first == {"C0": parts("t0p0 t1p1 t3p0"), "C1": parts("t0p1 t2p0 t3p1"),
                     "C2": parts("t1p0 t2p1")}
    members = {m: StickyAssignor() for m in ("C0", "C2")}
    for m, assignor in members.items():
        assignor.on_assignment(Assignment(first[m]), generation_id=1)
    subs = {m: Subscription(topics, a.subscription_user_data(set(topics)))
            for m, a in members.items()}
    second = run(leader, counts, subs)
    assert second == {"C0": parts("t0p0 t3p0 t1p1 t0p1"), "C2": parts("t1p0 t2p1 t2p0 t3p1")}
    for m in ("C0", "C2"):
        assert set(first[m]) <= set(second[m])


def test_sticky_keeps_more_placements_than_roundrobin_after_a_member_leaves():
    """StickyAssignor's documented example 2: after C0 leaves, sticky keeps 5 placements."""
    sticky = StickyAssignor()
    first = run(sticky, UNEQUAL_COUNTS, UNEQUAL)
    subs = {}
    for m in ("C1", "C2"):
        member = StickyAssignor()
        member.on_assignment(Assignment(first[m]), 1)
        subs[m] = Subscription(UNEQUAL[m].topics, member.subscription_user_data(set()))
    assert run(sticky, UNEQUAL_COUNTS, subs) == {"C1": parts("t1p0 t1p1 t0p0"),
                                                 "C2": parts("t2p0 t2p1 t2p2")}
    assert run(RoundRobinAssignor(), UNEQUAL_COUNTS, {m: UNEQUAL[m] for m in ("C1", "C2")}) == {
        "C1": parts("t0p0 t1p1"), "C2": parts("t1p0 t2p0 t2p1 t2p2")}


# ---- StickyAssignorUserData ---------------------------------------------------------------

def test_sticky_user_data_bytes():
    data = serialize_topic_partition_assignment(MemberData(parts("t0p0 t0p1"), 5))
    assert data.hex() == "00000001" "0002" "7430" "00000002" "00000000" "00000001" "00000005"
    # topics in Java HashMap order: "topic2" before "topic1" is not the insertion order
    data = serialize_topic_partition_assignment(
        MemberData([TP("topic2", 0), TP("topic1", 3), TP("topic2", 1)], 1))
    decoded = deserialize_topic_partition_assignment(data)
    assert decoded == MemberData([TP("topic1", 3), TP("topic2", 0), TP("topic2", 1)], 1)
    v0 = serialize_topic_partition_assignment_v0(parts("t0p0"))
    assert deserialize_topic_partition_assignment(v0) == MemberData(parts("t0p0"), None)
    assert deserialize_topic_partition_assignment(b"\x00\x00") == MemberData([], -1)
    assert deserialize_topic_partition_assignment(b"\x7f\xff\xff\xff") == MemberData([], -1)


def test_sticky_user_data_matches_kafka_python_schema():
    """kafka-python writes the same v1 struct, behind a 2-byte version header Java doesn't use."""
    ours = serialize_topic_partition_assignment(MemberData(
        [TP("a", 1), TP("bb", 0), TP("a", 0)], 7))
    theirs = StickyAssignorUserData.decode(ours, version=1, header=False)
    assert theirs.generation == 7
    assert {(t.topic, tuple(t.partitions)) for t in theirs.previous_assignment} == {
        ("a", (1, 0)), ("bb", (0,))}
    encoded = StickyAssignorUserData([("x", [3, 4])], 9).encode(version=1, header=False)
    assert deserialize_topic_partition_assignment(encoded) == MemberData(parts("xp3 xp4"), 9)


def test_sticky_round_trip_through_on_assignment():
    assignor = StickyAssignor()
    assignor.on_assignment(Assignment(parts("t0p2 t1p0")), generation_id=4)
    user_data = assignor.subscription_user_data({"t0", "t1"})
    assert assignor.member_data(Subscription(["t0"], user_data)) == MemberData(
        parts("t0p2 t1p0"), 4)
    assert assignor.member_data(Subscription(["t0"], b"")) == MemberData([], None)


# ---- the documented example --------------------------------------------------------------

def test_custom_assignor_doc_example():
    text = (ROOT / "docs" / "custom_assignor.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "custom_assignor.md", "exec"), namespace)  # runs the doc's asserts
    weighted = namespace["WeightedAssignor"]()
    assert isinstance(weighted, ConsumerPartitionAssignor) and weighted.name == "weighted"
    assert weighted.supported_protocols() == [RebalanceProtocol.EAGER]
