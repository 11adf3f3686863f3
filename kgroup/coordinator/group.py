"""The ``Group`` interface every group type implements (Kafka's ``Group``), and ``GroupType``.

A shard keeps ONE map, ``groups: dict[str, Group]``, shared by the managers that act on it
(``GroupMetadataManager`` for the classic protocol, ``ConsumerGroupManager`` for KIP-848,
``OffsetMetadataManager``, ``Migration``). A handler looks a group up once and asks it: whether an
offset commit, fetch or delete is allowed, whether the group still uses a topic, how its offsets
expire, what its deletion writes. Only the protocol handlers that exist for one type (JoinGroup for
classic groups, ConsumerGroupHeartbeat for consumer groups) ask for that type, as Kafka's
``classicGroup(id)`` / ``consumerGroup(id)`` do.
"""
from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from typing import Callable

from ..protocol.messages.list_groups import ListGroupsResponse


class GroupType(enum.Enum):
    CLASSIC = "classic"
    CONSUMER = "consumer"
    SHARE = "share"
    STREAMS = "streams"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, name: str | None) -> "GroupType":
        """Case-insensitive; UNKNOWN for anything else (Kafka's GroupType.parse)."""
        if name is None:
            return cls.UNKNOWN
        try:
            return cls(name.strip().lower())
        except ValueError:
            return cls.UNKNOWN


# An offset's expiration base: CommittedOffset -> the timestamp retention counts from.
OffsetExpirationCondition = Callable[[object], int]
# Kafka's CommitPartitionValidator: (topic name, topic id or None, partition) -> None, raising
# KafkaError for a partition the commit may not write. None stands for Kafka's NO_OP.
CommitPartitionValidator = Callable[[str, "bytes | None", int], None]


class Group(ABC):
    """What the coordinator asks of any group, whatever its protocol."""

    __slots__ = ()
    group_id: str
    type: GroupType             # a class attribute of each implementation

    @abstractmethod
    def state_string(self) -> str:
        """The state as Kafka names it in ListGroups/Describe ("Stable", "Empty", ...)."""

    @abstractmethod
    def is_empty(self) -> bool:
        """No members: the group may be deleted, and expired once its offsets are gone."""

    @abstractmethod
    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation_or_epoch: int,
                               is_transactional: bool, api_version: int) -> CommitPartitionValidator | None:
        """Raise KafkaError when the member may not commit (OffsetCommit / TxnOffsetCommit); else
        the check each committed partition must pass, or None when there is none."""

    @abstractmethod
    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Raise KafkaError when the member may not fetch offsets (OffsetFetch v9+ names it)."""

    @abstractmethod
    def validate_offset_delete(self) -> None:
        """Raise KafkaError when OffsetDelete is refused for the group as a whole."""

    @abstractmethod
    def validate_delete_group(self) -> None:
        """Raise KafkaError when DeleteGroups is refused (NON_EMPTY_GROUP, ...)."""

    @abstractmethod
    def is_subscribed_to_topic(self, topic: str) -> bool:
        """The group still uses the topic: its offsets are neither expired nor deletable."""

    @abstractmethod
    def offset_expiration_condition(self) -> OffsetExpirationCondition | None:
        """How retention counts for this group's offsets (KIP-211), or None: they never expire now."""

    @abstractmethod
    def create_group_tombstone_records(self, records: list) -> None:
        """Append the records whose replay removes the group."""

    def should_expire(self) -> bool:
        """Whether the periodic cleanup expires this group's offsets and deletes it when empty."""
        return True

    def cancel_timers(self, timer) -> None:  # noqa: B027 (a hook: a group without timers has none to cancel)
        """Cancel the group's timers (deletion, unload)."""

    def is_in_states(self, states: set[str]) -> bool:
        """``states``: lower-case state names (ListGroups' filter)."""
        return self.state_string().lower() in states

    def as_listed_group(self) -> ListGroupsResponse.ListedGroup:
        return ListGroupsResponse.ListedGroup(group_id=self.group_id, protocol_type=self.protocol_type_name(),
                                              group_state=self.state_string(), group_type=str(self.type))

    def protocol_type_name(self) -> str:
        """The protocol type ListGroups shows ("consumer" for consumer groups)."""
        return "consumer"
