"""The reconciliation engine of the consumer group protocol (Kafka's CurrentAssignmentBuilder).

Given a member, the group's target assignment (and its epoch) and what the member says it owns,
it computes the member's next state. The rules that make the protocol safe:

- a member first gives up what it must revoke: it stays at its epoch in UNREVOKED_PARTITIONS with
  those partitions pending revocation, and moves on only once its heartbeat no longer lists any of
  them (an absent owned-partitions list counts as still owning them);
- a partition still owned by another member (its current epoch is not -1) is not handed out: the
  member reaches the target epoch in UNRELEASED_PARTITIONS and receives it once it is free;
- so a partition is never owned by two members of one epoch.

Pure: the partition epochs come from a function the group supplies.
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping

from ...protocol.errors import ErrorCode, KafkaError
from .member import Assignment, ConsumerGroupMember, MemberState

# (topic id, partition) -> epoch of its current owner, or -1 when nobody holds it
PartitionEpoch = Callable[[bytes, int], int]
# What a ConsumerGroupHeartbeat reports: (topic id, partitions) pairs, or None if not sent
OwnedPartitions = Iterable[tuple[bytes, Iterable[int]]] | None


class FencedMemberEpoch(KafkaError):
    def __init__(self, message: str):
        super().__init__(ErrorCode.FENCED_MEMBER_EPOCH, message)


def _owns_any(owned: OwnedPartitions, pending: Assignment) -> bool:
    if owned is None:
        return True
    for topic_id, partitions in owned:
        revoking = pending.get(topic_id)
        if revoking and not revoking.isdisjoint(partitions):
            return True
    return False


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
              partition_epoch: PartitionEpoch, owned: OwnedPartitions = None) -> ConsumerGroupMember:
    """The member's next state (the same object when it cannot move on)."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    # UNKNOWN: written by a newer coordinator; fence the member so it rejoins from scratch
    if owned is None or _has_any(owned):
        raise FencedMemberEpoch("The consumer group member is in a unknown state. "
                                "The member must abandon all its partitions and rejoin.")
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _has_any(owned) -> bool:
    for _ in owned:
        return True
    return False


def _next(member: ConsumerGroupMember, member_epoch: int, target_epoch: int, target: Assignment,
          partition_epoch: PartitionEpoch, owned: OwnedPartitions) -> ConsumerGroupMember:
    current: Mapping[bytes, frozenset] = member.assigned_partitions
    unreleased = False
    assigned: dict[bytes, frozenset] = {}
    revoking: dict[bytes, frozenset] = {}
    pending: dict[bytes, frozenset] = {}
    for topic_id in target.keys() | current.keys():
        want = target.get(topic_id, frozenset())
        have = current.get(topic_id, frozenset())
        keep = have & want                          # previously assigned and still targeted
        revoke = have - keep
        due = want - keep
        if due:
            free = frozenset(p for p in due if partition_epoch(topic_id, p) == -1)
            if len(free) != len(due):
                unreleased = True                   # someone else still owns some of them
            due = free
        if keep:
            assigned[topic_id] = keep
        if revoke:
            revoking[topic_id] = revoke
        if due:
            pending[topic_id] = due
    if revoking and _owns_any(owned, revoking):
        # Revoke first: stay at the current epoch until the member confirms.
        return member.with_epoch(member_epoch, state=MemberState.UNREVOKED_PARTITIONS,
                                 assigned_partitions=assigned, partitions_pending_revocation=revoking)
    # Nothing (left) to revoke: the member reaches the target epoch with whatever of its target
    # is free now; it waits in UNRELEASED_PARTITIONS for the rest.
    for topic_id, parts in pending.items():
        held = assigned.get(topic_id)
        assigned[topic_id] = parts if held is None else held | parts
    return member.with_epoch(target_epoch, assigned_partitions=assigned, partitions_pending_revocation={},
                             state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE)
