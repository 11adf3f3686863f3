"""What a server-side assignor sees (Kafka's GroupSpec + SubscribedTopicDescriber) and returns.

Topics are Kafka topic ids (16 bytes), partitions plain ints. A member's assignment maps a topic
id to a sequence of partitions; iteration order is significant (the homogeneous builder keeps the
first partitions it walks when it must give some up), so the coordinator passes them in the order
Kafka's ``Assignment.fromRecord`` maps iterate: topics as a ``HashMap<Uuid, ...>``, partitions as
a ``HashSet<Integer>`` (``java_compat.uuid_map_order`` / ``int_hash_set_copy_order``). The members'
order is the order of ``GroupSpec.members`` (Kafka's ``groupSpec.memberIds()``).
"""
from __future__ import annotations

import enum
from typing import Mapping, NamedTuple, Sequence


class PartitionAssignorError(Exception):
    """Kafka's PartitionAssignorException: the assignor cannot compute an assignment."""


class SubscriptionType(enum.Enum):
    HOMOGENEOUS = "HOMOGENEOUS"       # every member subscribes to the same topics
    HETEROGENEOUS = "HETEROGENEOUS"


class MemberSpec(NamedTuple):
    """One member: its subscription (topic ids that exist) and its current target assignment."""

    subscribed_topic_ids: frozenset | Sequence[bytes]
    assignment: Mapping[bytes, Sequence[int]] = {}
    instance_id: str | None = None
    rack_id: str | None = None


class GroupSpec(NamedTuple):
    members: Mapping[str, MemberSpec]
    subscription_type: SubscriptionType

    @classmethod
    def of(cls, members: Mapping[str, MemberSpec]) -> "GroupSpec":
        """The spec with its subscription type worked out as ConsumerGroup.subscriptionType does:
        homogeneous when every subscribed topic is subscribed by every member."""
        sets = {frozenset(m.subscribed_topic_ids) for m in members.values()}
        return cls(members, SubscriptionType.HOMOGENEOUS if len(sets) <= 1 else SubscriptionType.HETEROGENEOUS)


# The result: member id -> topic id -> partitions (unordered; Kafka returns sets)
GroupAssignment = dict[str, dict[bytes, list[int]]]
