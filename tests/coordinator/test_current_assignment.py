"""Reconciliation (Kafka's CurrentAssignmentBuilder): the cases of Kafka's
CurrentAssignmentBuilderTest, ported input for input, plus a hypothesis check of the protocol's
safety rule on a simulated group (a partition is never owned by two members of one epoch)."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgroup.coordinator.assignor import GroupSpec, MemberSpec, uniform
from kgroup.coordinator.consumer_group.current_assignment import FencedMemberEpoch, reconcile
from kgroup.coordinator.consumer_group.member import ConsumerGroupMember, MemberState, freeze
from kgroup.protocol.errors import ErrorCode

T1, T2 = b"\x01" * 16, b"\x02" * 16
STABLE, UNREVOKED, UNRELEASED, UNKNOWN = (MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS,
                                          MemberState.UNRELEASED_PARTITIONS, MemberState.UNKNOWN)


def A(t1=(), t2=()):
    return freeze({T1: t1, T2: t2})


def member(state, epoch, previous, assigned, pending=None):
    return ConsumerGroupMember("member", member_epoch=epoch, previous_member_epoch=previous, state=state,
                               assigned_partitions=assigned, partitions_pending_revocation=pending or {})


def epoch_of(value):
    return lambda topic_id, partition: value


def owned(t1, t2):
    return [(T1, list(t1)), (T2, list(t2))]


def test_stable_to_stable():
    m = member(STABLE, 10, 10, A((1, 2, 3), (4, 5, 6)))
    got = reconcile(m, 11, A((1, 2, 3), (4, 5, 6)), epoch_of(10))
    assert got == member(STABLE, 11, 10, A((1, 2, 3), (4, 5, 6)))


def test_stable_to_stable_with_new_partitions():
    m = member(STABLE, 10, 10, A((1, 2, 3), (4, 5, 6)))
    got = reconcile(m, 11, A((1, 2, 3, 4), (4, 5, 6, 7)), epoch_of(-1))
    assert got == member(STABLE, 11, 10, A((1, 2, 3, 4), (4, 5, 6, 7)))


def test_stable_to_unrevoked_partitions():
    m = member(STABLE, 10, 10, A((1, 2, 3), (4, 5, 6)))
    got = reconcile(m, 11, A((2, 3, 4), (5, 6, 7)), epoch_of(-1))
    assert got == member(UNREVOKED, 10, 10, A((2, 3), (5, 6)), A((1,), (4,)))


def test_stable_to_unreleased_partitions():
    m = member(STABLE, 10, 10, A((1, 2, 3), (4, 5, 6)))
    got = reconcile(m, 11, A((1, 2, 3, 4), (4, 5, 6, 7)), epoch_of(10))
    assert got == member(UNRELEASED, 11, 10, A((1, 2, 3), (4, 5, 6)))


def test_stable_to_unreleased_partitions_with_owned_partitions_not_having_revoked_partitions():
    m = member(STABLE, 10, 10, A((1, 2, 3), (4, 5, 6)))
    got = reconcile(m, 11, A((1, 2, 3), (4, 5, 7)), lambda t, p: 10 if t == T2 else -1, owned=[])
    assert got == member(UNRELEASED, 11, 10, A((1, 2, 3), (4, 5)))


def test_unrevoked_partitions_to_stable():
    m = member(UNREVOKED, 10, 10, A((2, 3), (5, 6)), A((1,), (4,)))
    got = reconcile(m, 11, A((2, 3), (5, 6)), epoch_of(-1), owned=owned((2, 3), (5, 6)))
    assert got == member(STABLE, 11, 10, A((2, 3), (5, 6)))


def test_remains_in_unrevoked_partitions():
    m = member(UNREVOKED, 10, 10, A((2, 3), (5, 6)), A((1,), (4,)))
    target = A((3,), (6,))
    assert reconcile(m, 12, target, epoch_of(-1), owned=None) is m
    assert reconcile(m, 12, target, epoch_of(-1), owned=owned((1, 2, 3), (5, 6))) is m
    assert reconcile(m, 12, target, epoch_of(-1), owned=owned((2, 3), (4, 5, 6))) is m


def test_unrevoked_partitions_to_unrevoked_partitions():
    m = member(UNREVOKED, 10, 10, A((2, 3), (5, 6)), A((1,), (4,)))
    got = reconcile(m, 12, A((3,), (6,)), epoch_of(-1), owned=owned((2, 3), (5, 6)))
    assert got == member(UNREVOKED, 11, 10, A((3,), (6,)), A((2,), (5,)))


def test_unrevoked_partitions_to_unreleased_partitions():
    m = member(UNREVOKED, 11, 10, A((2, 3), (5, 6)))
    got = reconcile(m, 11, A((2, 3, 4), (5, 6, 7)), epoch_of(10), owned=owned((2, 3), (5, 6)))
    assert got == member(UNRELEASED, 11, 11, A((2, 3), (5, 6)))


def test_unreleased_partitions_to_stable():
    m = member(UNRELEASED, 11, 11, A((2, 3), (5, 6)))
    got = reconcile(m, 12, A((2, 3), (5, 6)), epoch_of(10))
    assert got == member(STABLE, 12, 11, A((2, 3), (5, 6)))


def test_unreleased_partitions_to_stable_with_new_partitions():
    m = member(UNRELEASED, 11, 11, A((2, 3), (5, 6)))
    got = reconcile(m, 11, A((2, 3, 4), (5, 6, 7)), epoch_of(-1))
    assert got == member(STABLE, 11, 11, A((2, 3, 4), (5, 6, 7)))


def test_unreleased_partitions_to_unreleased_partitions():
    m = member(UNRELEASED, 11, 11, A((2, 3), (5, 6)))
    got = reconcile(m, 11, A((2, 3, 4), (5, 6, 7)), epoch_of(10))
    assert got == m


def test_unreleased_partitions_to_unrevoked_partitions():
    m = member(UNRELEASED, 11, 11, A((2, 3), (5, 6)))
    got = reconcile(m, 12, A((3,), (6,)), epoch_of(10))
    assert got == member(UNREVOKED, 11, 11, A((3,), (6,)), A((2,), (5,)))


def test_unknown_state():
    m = member(UNKNOWN, 11, 11, A((3,), (6,)), A((2,), (5,)))
    with pytest.raises(FencedMemberEpoch) as e:
        reconcile(m, 12, A((3,), (6,)), epoch_of(10))
    assert e.value.code == ErrorCode.FENCED_MEMBER_EPOCH
    with pytest.raises(FencedMemberEpoch):
        reconcile(m, 12, A((3,), (6,)), epoch_of(10), owned=owned((3,), ()))
    # the member rejoins owning nothing
    got = reconcile(m, 12, A((3,), (6,)), epoch_of(11), owned=[])
    assert got == member(STABLE, 12, 11, A((3,), (6,)))


def test_state_values_are_kafkas():
    assert [int(s) for s in (STABLE, UNREVOKED, UNRELEASED, UNKNOWN)] == [0, 1, 2, 127]
    assert MemberState.from_value(9) is UNKNOWN


# -- the safety rule on a simulated group ----------------------------------------------------------

@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_never_two_owners_and_everyone_converges(data):
    """Members join and leave while others heartbeat in random order, some slow to revoke. At every
    step no partition is held by two members, neither in the coordinator's view (assigned or
    pending revocation) nor by the clients themselves; once churn stops and everyone heartbeats,
    all reach the target epoch, STABLE, with exactly their target assignment."""
    topics = {T1: data.draw(st.integers(1, 12)), T2: data.draw(st.integers(0, 12))}
    members: dict[str, ConsumerGroupMember] = {}
    held: dict[str, set] = {}               # what each client owns right now
    group_epoch, target_epoch, target = 0, 0, {}
    names = iter(f"m{i}" for i in range(100))

    def partition_epoch(topic_id, partition):
        for m in members.values():
            if partition in m.assigned_partitions.get(topic_id, ()) or \
                    partition in m.partitions_pending_revocation.get(topic_id, ()):
                return m.member_epoch
        return -1

    def check_exclusive():
        seen = set()
        for m in members.values():
            for a in (m.assigned_partitions, m.partitions_pending_revocation):
                for t, ps in a.items():
                    for p in ps:
                        assert (t, p) not in seen, (t, p)
                        seen.add((t, p))
        clients = [tp for h in held.values() for tp in h]
        assert len(clients) == len(set(clients)), "a partition owned by two clients"

    def new_target():
        nonlocal group_epoch, target_epoch, target
        group_epoch += 1
        spec = GroupSpec.of({mid: MemberSpec(frozenset(topics), target.get(mid, {})) for mid in members})
        target = {mid: freeze(a) for mid, a in uniform.assign(spec, topics).items()}
        target_epoch = group_epoch

    def heartbeat(mid, revoke_now):
        m = members[mid]
        mine = {(t, p) for t, ps in m.assigned_partitions.items() for p in ps}
        if revoke_now:      # the client gives up what it was told to revoke, takes what it got
            held[mid] = mine
        owned = {}
        for t, p in held[mid]:
            owned.setdefault(t, []).append(p)
        members[mid] = reconcile(m, target_epoch, target.get(mid, {}), partition_epoch, list(owned.items()))
        check_exclusive()

    for _ in range(data.draw(st.integers(1, 25))):
        action = data.draw(st.sampled_from(["join", "leave", "beat", "beat", "beat"]))
        if action == "join" or not members:
            mid = next(names)
            members[mid] = ConsumerGroupMember(mid)
            held[mid] = set()
            new_target()
        elif action == "leave" and len(members) > 1:
            mid = data.draw(st.sampled_from(sorted(members)))
            del members[mid], held[mid]
            target.pop(mid, None)
            new_target()
        else:
            heartbeat(data.draw(st.sampled_from(sorted(members))), data.draw(st.booleans()))
    for _ in range(6):          # churn stops; everybody heartbeats and revokes promptly
        for mid in sorted(members):
            heartbeat(mid, True)
    for mid, m in members.items():
        assert m.state is STABLE and m.member_epoch == target_epoch, m
        assert m.assigned_partitions == target.get(mid, {})
