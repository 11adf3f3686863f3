"""The ``simple`` share group assignor gives Kafka's assignment for the same group: cases worked out
by hand from SimpleHomogeneousAssignmentBuilder / SimpleHeterogeneousAssignmentBuilder (Kafka 4.3),
where the choice depends on Java's hash iteration orders. Hash values used below:
String "a".hashCode = 97, "b" = 98, "m1" = 3428, "m2" = 3429, "m3" = 3430 (HashMap buckets of a
16-slot table: 1, 2, 4, 5, 6); a Uuid whose halves are equal hashes to 0, one of 15 zero bytes and
a 1 hashes to 1; TopicIdPartition(t, p).hashCode = 31 * t.hashCode() + p."""
from kgroup.coordinator.share_group.simple_assignor import assign
from kgroup.java_compat import string_hash_code, topic_id_partition_hash, uuid_hash_code

H0 = b"\x12" * 16                  # Uuid.hashCode 0
H1 = bytes(15) + b"\x01"           # Uuid.hashCode 1


def test_the_hash_values_the_cases_rely_on():
    assert [string_hash_code(s) for s in ("a", "b", "m1", "m2", "m3")] == [97, 98, 3428, 3429, 3430]
    assert uuid_hash_code(H0) == 0 and uuid_hash_code(H1) == 1
    assert [topic_id_partition_hash((H1, p)) for p in range(4)] == [31, 32, 33, 34]


def test_partitions_are_walked_in_topic_id_partition_hash_order():
    # 3 members, 2 partitions: sharing 2, desired counts [2, 1, 1]. finalAssignmentByPartition
    # (table of 8) iterates (T,1) (bucket 0) before (T,0) (bucket 7): (T,1) goes to m1 and m2 (m2
    # is then full), (T,0) to m3, then the restarted member iterator gives it to m1.
    members = {"m1": frozenset({"t"}), "m2": frozenset({"t"}), "m3": frozenset({"t"})}
    got = assign(members, {}, {"t": H1}, {H1: frozenset({0, 1})})
    assert got == {"m1": {H1: frozenset({0, 1})}, "m2": {H1: frozenset({1})}, "m3": {H1: frozenset({0})}}


def test_members_are_numbered_in_string_hash_order():
    # "b" joined first, but the member spec is a HashMap<String, _>: "a" (bucket 1) is member 0 and
    # its desired count is 2 of the 3 partitions (sharing 1, counts [2, 1]).
    members = {"b": frozenset({"t"}), "a": frozenset({"t"})}
    got = assign(members, {}, {"t": H0}, {H0: frozenset({0, 1, 2})})
    assert got == {"a": {H0: frozenset({0, 2})}, "b": {H0: frozenset({1})}}


def test_an_overfilled_member_gives_up_partitions_in_hash_set_order():
    # "a" held 0, 1, 2 of 4 partitions; with "b" both want 2. a's HashSet<TopicIdPartition> (16
    # slots) iterates (T,1) (bucket 0), (T,2), (T,0) (bucket 15): it gives up (T,1) and keeps 0, 2.
    # The remaining partitions in finalAssignmentByPartition's order (8 slots): (T,1), then (T,3).
    members = {"a": frozenset({"t"}), "b": frozenset({"t"})}
    old = {"a": {H1: frozenset({0, 1, 2})}}
    got = assign(members, old, {"t": H1}, {H1: frozenset({0, 1, 2, 3})})
    assert got == {"a": {H1: frozenset({0, 2})}, "b": {H1: frozenset({1, 3})}}


def test_heterogeneous_topics_and_members_in_java_order():
    # Topics in HashSet<Uuid> order (X hashes to 0, Y to 1); X's subscribers [a, b] (a first, by
    # String hash, though b joined first) want one partition each, Y's only subscriber b gets Y-0.
    members = {"b": frozenset({"x", "y"}), "a": frozenset({"x"})}
    got = assign(members, {}, {"x": H0, "y": H1}, {H0: frozenset({0, 1}), H1: frozenset({0})})
    assert got == {"a": {H0: frozenset({0})}, "b": {H0: frozenset({1}), H1: frozenset({0})}}


def test_nothing_subscribed_assigns_nothing_and_unsubscribed_topics_are_dropped():
    members = {"a": frozenset({"gone"}), "b": frozenset({"gone"})}
    assert assign(members, {"a": {H0: frozenset({0})}}, {}, {}) == {"a": {}, "b": {}}
    members = {"a": frozenset({"t"})}
    assert assign(members, {"a": {H0: frozenset({0}), H1: frozenset({0})}}, {"t": H1},
                  {H1: frozenset({0})}) == {"a": {H1: frozenset({0})}}


def test_a_partition_no_longer_assignable_stays_with_its_member_as_in_kafka():
    # revokeUnassignablePartitions keeps every old partition of a subscribed topic: partition 1 is
    # not assignable now, yet a keeps it (it counts in a's share of 1: nothing more is added).
    members = {"a": frozenset({"t"})}
    got = assign(members, {"a": {H0: frozenset({1})}}, {"t": H0}, {H0: frozenset({0})})
    assert got == {"a": {H0: frozenset({1})}}
