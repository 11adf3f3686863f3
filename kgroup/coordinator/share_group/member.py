"""A member of a share group (Kafka's ShareGroupMember), immutable.

Its epochs, state and assignment come from the CurrentMemberAssignment record (type 14), its
subscription and client details from the MemberMetadata record (type 10). Assignments are
``{topic id: frozenset of partitions}`` with no empty sets. Share group members never revoke: a
new target assignment is taken at once, so a member is always STABLE.
"""
from __future__ import annotations

import dataclasses

from ..consumer_group.member import Assignment, MemberState, freeze

__all__ = ["ShareGroupMember", "MemberState", "Assignment", "freeze"]


@dataclasses.dataclass(frozen=True, slots=True)
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset = frozenset()
    assigned_partitions: Assignment = dataclasses.field(default_factory=dict)

    def replace(self, **changes) -> "ShareGroupMember":
        return dataclasses.replace(self, **changes)

    def with_epoch(self, member_epoch: int, **changes) -> "ShareGroupMember":
        """Kafka's Builder.updateMemberEpoch: the current epoch becomes the previous one."""
        return dataclasses.replace(self, member_epoch=member_epoch, previous_member_epoch=self.member_epoch,
                                   **changes)

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch
