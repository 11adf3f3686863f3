"""A member of a consumer-protocol group (Kafka's ConsumerGroupMember), immutable.

Its epochs, per-partition assignment epochs and reconciliation state come from the
CurrentMemberAssignment record (type 8), its
subscription and client details from the MemberMetadata record (type 5). Assignments are
``{topic id: frozenset of partitions}`` with no empty sets, so two members compare equal exactly
when Kafka's would; they are shared between members and never changed in place.
"""
from __future__ import annotations

import dataclasses
import enum
import sys
from types import MappingProxyType
from typing import Iterable, Mapping, TypeVar, cast

Assignment = Mapping[bytes, frozenset]
EMPTY: Assignment = {}


class MemberState(enum.IntEnum):
    """The reconciliation state, as stored in CurrentMemberAssignment.State (Kafka's MemberState)."""

    STABLE = 0                  # the member has its target assignment (or all it can have)
    UNREVOKED_PARTITIONS = 1    # waiting for the member to give up partitions it must revoke
    UNRELEASED_PARTITIONS = 2   # waiting for other members to give up partitions it is due
    UNKNOWN = 127               # a state written by a newer coordinator

    @classmethod
    def from_value(cls, value: int) -> "MemberState":
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


# Equal assignments (a Stable member's target and current assignment, members given the same
# partitions of different topics or groups) and equal name sets share one object. Bounded by
# the partitions and names held, emptied when over, so any input keeps it small.
_SHARED: dict = {}
_SHARED_BUDGET = 65536
_shared_held = 0


def _share(key, value, size: int):
    global _shared_held
    shared = _SHARED.get(key)
    if shared is not None:
        return shared
    if _shared_held + size > _SHARED_BUDGET:
        _SHARED.clear()
        _shared_held = 0
    _SHARED[key] = value
    _shared_held += size + 1
    return value


def shared_frozenset(items: Iterable) -> frozenset:
    """``frozenset(items)``, one object for equal sets (subscriptions, a topic's partitions)."""
    fs = items if type(items) is frozenset else frozenset(items)
    return _share(fs, fs, len(fs)) if fs else EMPTY_SET


EMPTY_SET: frozenset = frozenset()
_EMPTY_DICT = cast("dict[bytes, frozenset]", EMPTY)    # the same object, typed as freeze returns it


_Map = TypeVar("_Map", bound=dict)


def shared_mapping(mapping: _Map) -> _Map:
    """One object for equal read-only maps of hashable values (a group's subscribed topics'
    metadata, which groups subscribed to the same topics hold alike)."""
    if not mapping:
        return cast(_Map, EMPTY)
    return _share(tuple(mapping.items()), mapping, len(mapping))


def shared_name(s: str | None) -> str | None:
    """One object for equal client ids, hosts and assignor names (each request decodes its own)."""
    return s if s is None else sys.intern(s)


def freeze(assignment: Mapping[bytes, Iterable[int]] | None) -> dict[bytes, frozenset]:
    """An assignment in canonical form: frozensets, no empty topics; one object for equal
    assignments, to be read only (``Assignment`` is a Mapping)."""
    if not assignment:
        return _EMPTY_DICT
    out = {}
    for topic_id, parts in assignment.items():
        fs = shared_frozenset(parts)
        if fs:
            out[topic_id] = fs
    if not out:
        return _EMPTY_DICT
    key = tuple(out.items())
    return _share(key, out, len(out))


NO_EPOCHS: Mapping = MappingProxyType({})


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset = frozenset()
    subscribed_topic_regex: str | None = None
    server_assignor_name: str | None = None
    assigned_partitions: Assignment = dataclasses.field(default_factory=dict)
    partitions_pending_revocation: Assignment = dataclasses.field(default_factory=dict)
    # The JoinGroup data of a classic-protocol member inside a consumer group (online migration);
    # None for a consumer-protocol member. Kept as (session timeout ms, ((name, metadata), ...)).
    classic_member_metadata: tuple | None = None
    # The epoch at which each assigned (or pending revocation) partition was assigned to the member
    # (Kafka 4.3's per-partition assignment epochs, KIP-1251): {topic id: {partition: epoch}}, or,
    # in the usual case where they share one epoch, the small ``(epoch, assignment, ...)``: the
    # partitions of those (shared, frozen) assignments were assigned at ``epoch``. A partition
    # without a recorded epoch counts from the member's epoch. A commit with an older member epoch
    # is accepted for a partition assigned at or before it.
    assignment_epochs: Mapping[bytes, Mapping[int, int]] | tuple = dataclasses.field(default_factory=lambda: NO_EPOCHS)

    @property
    def classic(self) -> tuple:
        """``classic_member_metadata`` of a member known to use the classic protocol."""
        if self.classic_member_metadata is None:
            raise ValueError(f"member {self.member_id} does not use the classic protocol")
        return self.classic_member_metadata

    def with_epoch(self, member_epoch: int, **changes) -> "ConsumerGroupMember":
        """Kafka's Builder.updateMemberEpoch: the current epoch becomes the previous one."""
        return dataclasses.replace(self, member_epoch=member_epoch,
                                   previous_member_epoch=self.member_epoch, **changes)

    def replace(self, **changes) -> "ConsumerGroupMember":
        return dataclasses.replace(self, **changes)

    def assignment_epoch(self, topic_id: bytes, partition: int) -> int | None:
        """The epoch the partition was assigned at, None when the member neither holds it nor is
        revoking it (Kafka's assignmentEpoch / pendingRevocationEpoch). A partition with no
        recorded epoch counts from the member's epoch, as Kafka reads a record without them."""
        for a in (self.assigned_partitions, self.partitions_pending_revocation):
            parts = a.get(topic_id)
            if parts is not None and partition in parts:
                epochs = self.assignment_epochs
                if type(epochs) is tuple:
                    for covered in epochs[1:]:
                        held = covered.get(topic_id)
                        if held is not None and partition in held:
                            return epochs[0]
                    return max(self.member_epoch, 0)
                e = epochs.get(topic_id, NO_EPOCHS).get(partition)   # type: ignore[union-attr]
                return max(self.member_epoch, 0) if e is None else e
        return None

    def assignment_epochs_view(self) -> dict:
        """{topic id: {partition: epoch}} over every partition held, for comparisons."""
        return {t: {p: self.assignment_epoch(t, p) for p in ps}
                for a in (self.assigned_partitions, self.partitions_pending_revocation) for t, ps in a.items()}

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        """Kafka's isReconciledTo: STABLE at the group's assignment epoch."""
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch
