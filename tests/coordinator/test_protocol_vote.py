"""Protocol selection by vote. Candidates are the protocols every member supports; each
member votes for its first supported candidate; the most votes wins. Expected Java values below
were produced with OpenJDK 17 (String.hashCode, HashMap iteration, Stream.max)."""
from __future__ import annotations

import pytest

from kgroup.coordinator.classic_group import ClassicGroup, ClassicGroupMember
from kgroup.coordinator.partitioner import group_partition
from tests.coordinator.support import E, Ctx, protocols


def group_with(*member_protocols):
    g = ClassicGroup("g", 0)
    for i, names in enumerate(member_protocols):
        g.add(ClassicGroupMember(f"m{i}", None, "c", "h", 1000, 1000, "consumer", [(n, b"") for n in names]))
    return g


@pytest.mark.parametrize("members, expected", [
    ([["range"]], "range"),
    # roundrobin is the only protocol everyone supports
    ([["range", "roundrobin"], ["roundrobin", "range"], ["roundrobin"]], "roundrobin"),
    # two members prefer range, one roundrobin: range wins 2-1
    ([["range", "roundrobin"], ["range", "roundrobin"], ["roundrobin", "range"]], "range"),
    # a protocol that not every member supports cannot be voted for even if preferred
    ([["sticky", "range"], ["sticky", "range"], ["range"]], "range"),
    # preference order, not list position in the group, decides each vote
    ([["cooperative-sticky", "range"], ["cooperative-sticky", "range"], ["range", "cooperative-sticky"]],
     "cooperative-sticky"),
])
def test_the_most_voted_protocol_every_member_supports_wins(members, expected):
    assert group_with(*members).select_protocol() == expected


def test_a_tied_vote_is_broken_like_kafka():
    # 1-1 tie: Kafka's HashMap iterates [range, roundrobin] and Stream.max keeps the first max.
    assert group_with(["roundrobin", "range"], ["range", "roundrobin"]).select_protocol() == "range"
    assert group_with(["range", "roundrobin"], ["roundrobin", "range"]).select_protocol() == "range"


def test_group_partition_of_my_group():
    assert group_partition("my-group") == 12


def test_the_coordinator_answers_joins_with_the_voted_protocol():
    c = Ctx()
    t1 = c.join("g", version=3, protos=protocols("range", "roundrobin"))
    t2 = c.join("g", version=3, protos=protocols("roundrobin", "range"))
    t3 = c.join("g", version=3, protos=protocols("roundrobin"))
    for _ in range(3):
        c.advance(3000)
    assert {c.answer(t).protocol_name for t in (t1, t2, t3)} == {"roundrobin"}
    leader = c.answer(t1)
    assert [len(m.metadata) > 0 for m in leader.members] == [True, True, True]
    assert c.answer(c.join("g", version=3, protos=protocols("range"))).error_code == E.INCONSISTENT_GROUP_PROTOCOL
