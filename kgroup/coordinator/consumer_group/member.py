"""A member of a consumer-protocol group (Kafka's ConsumerGroupMember), immutable.

Its epochs and reconciliation state come from the CurrentMemberAssignment record (type 8), its
subscription and client details from the MemberMetadata record (type 5). Assignments are
``{topic id: frozenset of partitions}`` with no empty sets, so two members compare equal exactly
when Kafka's would.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Iterable, Mapping

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


def freeze(assignment: Mapping[bytes, Iterable[int]] | None) -> dict[bytes, frozenset]:
    """An assignment in canonical form: frozensets, no empty topics."""
    if not assignment:
        return {}
    out = {}
    for topic_id, parts in assignment.items():
        fs = parts if type(parts) is frozenset else frozenset(parts)
        if fs:
            out[topic_id] = fs
    return out


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

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        """Kafka's isReconciledTo: STABLE at the group's assignment epoch."""
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch
