"""The consumer partition-assignor interface, mirroring Kafka's ``ConsumerPartitionAssignor``.

The group leader runs one assignor over every member's :class:`Subscription` and hands each
member an :class:`Assignment`.  The data classes here are the assignor-level view of the
consumer protocol; encoding them on the wire is the protocol layer's business.

Java's assignors iterate ``HashMap``s in several places where the iteration order decides the
result (which member keeps its extra partition, the order of a member's partition list, the
byte layout of the sticky user data).  To give the same results as the Java client for the
same input, they walk them in ``java.util.HashMap``'s iteration order (``kgroup.java_compat``).  A ``group_subscription`` dict given to :meth:`assign` stands for the
``HashMap`` the Java ``ConsumerCoordinator`` builds by inserting the members in that order.
"""
from __future__ import annotations

import abc
import enum
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple

from kgroup.java_compat import string_hash_map, string_map_order, string_sort_key


class TopicPartition(NamedTuple):
    """A topic name and partition number; sorts by topic, then partition."""

    topic: str
    partition: int

    def __str__(self) -> str:  # Java's toString
        return f"{self.topic}-{self.partition}"


class RebalanceProtocol(enum.IntEnum):
    """EAGER revokes everything before re-joining; COOPERATIVE (KIP-429) keeps owned
    partitions and only revokes the ones the leader moves away."""

    EAGER = 0
    COOPERATIVE = 1


@dataclass
class Subscription:
    """One member's subscription as the leader sees it (ConsumerProtocolSubscription)."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1  # -1 (any negative) means "not present", like Java's Optional
    rack_id: str | None = None
    group_instance_id: str | None = None


@dataclass
class Assignment:
    """The partitions handed to one member, plus optional assignor user data."""

    partitions: list[TopicPartition]
    user_data: bytes | None = None


class ClusterMetadata:
    """Minimal cluster view for assignors: topic -> partition count (the assignors ignore racks:
    rack-aware assignment, KIP-881, is not implemented).

    Compatible with the two methods kafka-python's assignors call (``topics()`` and
    ``partitions_for_topic()``).
    """

    def __init__(self, partitions_per_topic: Mapping[str, int] | None = None):
        self._counts: dict[str, int] = dict(partitions_per_topic or {})

    def topics(self) -> set[str]:
        return set(self._counts)

    def partition_count(self, topic: str) -> int | None:
        return self._counts.get(topic)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = self._counts.get(topic)
        return None if n is None else set(range(n))

    def __repr__(self) -> str:
        return f"ClusterMetadata({self._counts!r})"


class ConsumerPartitionAssignor(abc.ABC):
    """Kafka's pluggable assignment strategy (``partition.assignment.strategy``)."""

    #: unique strategy name sent in JoinGroup ("range", "roundrobin", ...)
    name: str = ""
    #: version of the user-data encoding / algorithm
    version: int = 0

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.EAGER]

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        return None

    @abc.abstractmethod
    def assign(self, cluster: ClusterMetadata,
               group_subscription: Mapping[str, Subscription]) -> dict[str, Assignment]:
        """Return an :class:`Assignment` for every member of ``group_subscription``."""

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:  # noqa: B027 (an optional hook)
        """Called on every member once the leader's assignment reaches it."""


class AbstractPartitionAssignor(ConsumerPartitionAssignor):
    """Collects partition counts for the subscribed topics, then delegates to
    :meth:`assign_partitions`, like Java's ``AbstractPartitionAssignor``."""

    def assign(self, cluster: ClusterMetadata,
               group_subscription: Mapping[str, Subscription]) -> dict[str, Assignment]:
        subscriptions = string_hash_map(group_subscription)
        # HashSet of all subscribed topics, then a HashMap topic -> count (topics without
        # metadata or with no partitions are skipped)
        all_topics = dict.fromkeys(t for s in subscriptions.values() for t in s.topics)
        partitions_per_topic: dict[str, int] = {}
        for topic in string_map_order(all_topics):
            n = cluster.partition_count(topic)
            if n:
                partitions_per_topic[topic] = n
        raw = self.assign_partitions(partitions_per_topic, subscriptions)
        return {m: Assignment(list(raw.get(m, ()))) for m in group_subscription}

    @abc.abstractmethod
    def assign_partitions(self, partitions_per_topic: Mapping[str, int],
                          subscriptions: Mapping[str, Subscription]
                          ) -> dict[str, list[TopicPartition]]:
        """Assign given the partition count of each subscribed topic (in Java ``HashMap``
        order) and the subscriptions (in iteration order)."""


def member_sort_key(member_id: str, group_instance_id: str | None) -> tuple:
    """Java's ``MemberInfo`` order: static members (by group.instance.id) before dynamic
    ones (by member.id); strings compare by UTF-16 code units like ``String.compareTo``."""
    if group_instance_id is not None:
        return (0, string_sort_key(group_instance_id))
    return (1, string_sort_key(member_id))
