"""The consumer partition-assignor interface, mirroring Kafka's ``ConsumerPartitionAssignor``.

The group leader runs one assignor over every member's :class:`Subscription` and hands each
member an :class:`Assignment`.  The data classes here are the assignor-level view of the
consumer protocol; encoding them on the wire is the protocol layer's business.

Java's assignors iterate ``HashMap``s in several places where the iteration order decides the
result (which member keeps its extra partition, the order of a member's partition list, the
byte layout of the sticky user data).  To give the same results as the Java client for the
same input, the helpers at the bottom of this module reproduce ``java.util.HashMap``'s
iteration order: ``String.hashCode``/``TopicPartition.hashCode``, the bit spreading, the table
size and its doubling.  A ``group_subscription`` dict given to :meth:`assign` stands for the
``HashMap`` the Java ``ConsumerCoordinator`` builds by inserting the members in that order.
"""
from __future__ import annotations

import abc
import enum
import functools
import heapq
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterable, Mapping, NamedTuple


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

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        """Called on every member once the leader's assignment reaches it."""


class AbstractPartitionAssignor(ConsumerPartitionAssignor):
    """Collects partition counts for the subscribed topics, then delegates to
    :meth:`assign_partitions`, like Java's ``AbstractPartitionAssignor``."""

    def assign(self, cluster: ClusterMetadata,
               group_subscription: Mapping[str, Subscription]) -> dict[str, Assignment]:
        subscriptions = java_ordered(group_subscription)
        # HashSet of all subscribed topics, then a HashMap topic -> count (topics without
        # metadata or with no partitions are skipped)
        all_topics = dict.fromkeys(t for s in subscriptions.values() for t in s.topics)
        partitions_per_topic: dict[str, int] = {}
        for topic in java_hash_order(all_topics, java_string_hash):
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
        return (0, java_string_key(group_instance_id))
    return (1, java_string_key(member_id))


# --------------------------------------------------------------------------------------
# java.util.HashMap emulation
# --------------------------------------------------------------------------------------

_INT_MASK = 0xFFFFFFFF


def java_string_key(s: str) -> str:
    """Sort key giving ``String.compareTo`` order (by UTF-16 code units).  It is the string
    itself unless the string holds characters outside the Basic Multilingual Plane, which are
    replaced by their two surrogate code units."""
    if s.isascii() or max(s) <= "\uffff":
        return s
    data = s.encode("utf-16-be", "surrogatepass")
    return "".join(chr((data[i] << 8) | data[i + 1]) for i in range(0, len(data), 2))


@functools.lru_cache(maxsize=65536)
def java_string_hash(s: str) -> int:
    """``String.hashCode`` as an unsigned 32-bit value."""
    h = 0
    if s.isascii():
        for ch in s.encode("ascii"):
            h = (31 * h + ch) & _INT_MASK
        return h
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _INT_MASK
    return h


def topic_partition_hash(tp: TopicPartition) -> int:
    """``TopicPartition.hashCode``: 31 * (31 + partition) + topic.hashCode()."""
    return (31 * (31 + tp.partition) + java_string_hash(tp.topic)) & _INT_MASK


def java_spread(h: int) -> int:
    """``HashMap.hash``: h ^ (h >>> 16)."""
    return h ^ (h >> 16)


def java_table_size(n: int, initial_capacity: int | None = None) -> int:
    """Table length of a ``HashMap`` after ``n`` insertions (no removals), created with
    ``new HashMap<>()`` or ``new HashMap<>(initial_capacity)``."""
    if initial_capacity is None:
        cap = 16
    else:
        cap = 1
        while cap < initial_capacity:
            cap <<= 1
    while n > cap * 3 // 4:
        cap <<= 1
    return cap


def java_hash_order(keys: Iterable[Hashable], hash_fn: Callable[[Hashable], int],
                    initial_capacity: int | None = None) -> list:
    """Iteration order of a ``HashMap``/``HashSet`` into which ``keys`` were inserted in the
    given order.  A bucket keeps insertion order (resizing splits buckets preserving it), so
    the order is a stable sort by bucket index.  A bucket that would reach nine entries while
    the table is shorter than 64 doubles the table, as ``treeifyBin`` does; the iteration order
    of real tree bins (nine or more colliding keys in a table of 64+) is not reproduced."""
    keys = list(keys)
    if not keys:
        return keys
    spread = [java_spread(hash_fn(k)) for k in keys]
    cap = 16 if initial_capacity is None else java_table_size(0, initial_capacity)
    # replay the insertions to find the final table size (bucket overflow can grow it)
    counts: dict[int, int] = {}
    size = 0
    for i, h in enumerate(spread):
        b = h & (cap - 1)
        c = counts.get(b, 0)
        counts[b] = c + 1
        size += 1
        if c >= 8 and cap < 64:
            cap <<= 1
            counts = {}
            for h2 in spread[:i + 1]:
                b2 = h2 & (cap - 1)
                counts[b2] = counts.get(b2, 0) + 1
        if size > cap * 3 // 4:
            cap <<= 1
            counts = {}
            for h2 in spread[:i + 1]:
                b2 = h2 & (cap - 1)
                counts[b2] = counts.get(b2, 0) + 1
    mask = cap - 1
    order = sorted(range(len(keys)), key=lambda i: spread[i] & mask)
    return [keys[i] for i in order]


def java_ordered(mapping: Mapping[str, object]) -> dict:
    """The mapping re-ordered as the ``HashMap<String, _>`` built from it iterates."""
    return {k: mapping[k] for k in java_hash_order(mapping, java_string_hash)}


class JavaHashSet:
    """The iteration head of a ``HashSet<TopicPartition>`` under adds and removes.

    Only ``first()`` (``set.iterator().next()``) is needed by the sticky assignor; it is kept
    in a heap keyed by (bucket, insertion sequence) and rebuilt when the table doubles."""

    __slots__ = ("_cap", "_seq", "_items", "_heap", "_counts")

    def __init__(self) -> None:
        self._cap = 16
        self._seq = 0
        self._items: dict[TopicPartition, tuple[int, int]] = {}  # tp -> (spread hash, seq)
        self._heap: list[tuple[int, int, TopicPartition]] = []
        self._counts: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, tp) -> bool:
        return tp in self._items

    def __iter__(self):
        mask = self._cap - 1
        return iter(sorted(self._items, key=lambda t: (self._items[t][0] & mask,
                                                       self._items[t][1])))

    def _rebuild(self) -> None:
        mask = self._cap - 1
        self._counts = {}
        heap = []
        for tp, (h, seq) in self._items.items():
            b = h & mask
            self._counts[b] = self._counts.get(b, 0) + 1
            heap.append((b, seq, tp))
        heapq.heapify(heap)
        self._heap = heap

    def add(self, tp: TopicPartition) -> None:
        if tp in self._items:
            return
        h = java_spread(topic_partition_hash(tp))
        seq = self._seq
        self._seq += 1
        self._items[tp] = (h, seq)
        b = h & (self._cap - 1)
        c = self._counts.get(b, 0)
        self._counts[b] = c + 1
        heapq.heappush(self._heap, (b, seq, tp))
        grow = False
        if c >= 8 and self._cap < 64:
            self._cap <<= 1
            grow = True
        if len(self._items) > self._cap * 3 // 4:
            self._cap <<= 1
            grow = True
        if grow:
            self._rebuild()

    def discard(self, tp: TopicPartition) -> None:
        entry = self._items.pop(tp, None)
        if entry is not None:
            b = entry[0] & (self._cap - 1)
            self._counts[b] -= 1

    def first(self) -> TopicPartition:
        heap = self._heap
        items = self._items
        mask = self._cap - 1
        while heap:
            b, seq, tp = heap[0]
            entry = items.get(tp)
            if entry is not None and entry[1] == seq and (entry[0] & mask) == b:
                return tp
            heapq.heappop(heap)
        raise KeyError("first() of an empty set")
