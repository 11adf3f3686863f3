"""Kafka's sticky assignment (``AbstractStickyAssignor``) and the eager ``StickyAssignor``.

Goals, in priority order: (1) a balanced assignment - partition counts differ by at most one,
or no member with 2+ fewer partitions than another could take one of that member's
partitions; (2) keep partitions where they were.

Two algorithms, chosen like Java's 3.x/4.x client does:

* **constrained** - every member subscribes to the same topics.  Members keep up to their
  quota (``floor``/``ceil`` of partitions / members) of the partitions they owned, the rest is
  dealt round-robin to the members below quota.  O(P log P).
* **general** - subscriptions differ.  Owned partitions are kept, the unassigned ones go to the
  least-loaded subscribed member, then partitions are moved from over-loaded members until no
  move improves the balance, preferring moves that undo earlier ones (``PartitionMovements``).

Previous ownership comes from :meth:`AbstractStickyAssignor.member_data`: the user data for
"sticky" (this module), ``owned_partitions``/``generation_id`` for "cooperative-sticky".  Claims
on a partition by several members are settled by generation: the highest wins, equal
generations invalidate the claim.

Efficiency.  Java walks a ``TreeSet`` of members ordered by (partition count, member id) to
find the least-loaded member subscribed to a topic, and re-checks the whole assignment for
balance before each candidate move.  Here every topic has a lazily-updated heap of its
subscribers and one of its owners, so both questions take O(log n); "is balanced" becomes
"no topic has an owner holding 2+ more partitions than one of its subscribers", re-checked
only for the topics of the two members a move touches.  The results are the same: a
randomized comparison against the Java algorithm found no difference outside the cases below.

Deliberate differences from Java, all on inputs where Java throws or hands out an invalid
assignment: a partition goes back to its previous owner (older generation) only if that member
still subscribes to the topic and takes part in balancing (Java may assign an unsubscribed
topic, or throw); owned partitions numbered beyond the topic's partition count are ignored; a
member with an empty subscription makes the group "not uniformly subscribed" (Java overlooks
such a member when its HashMap visits it first, then gives it partitions).

Not implemented: rack-aware assignment (KIP-881) - racks are ignored, as Java does when the
consumers or the partitions carry no rack ids; Java's ``ByteBuffer`` position side effects on
re-used subscriptions (user data are immutable ``bytes`` here).  Like Java, the assignor
instance remembers the highest generation it has seen across calls.
"""
from __future__ import annotations

import abc
import heapq
import struct
from collections import deque
from typing import Mapping, NamedTuple

from kgroup.protocol.primitives import INT16, INT32

from kgroup.java_compat import JavaHashSet, string_map_order, string_sort_key

from .base import AbstractPartitionAssignor, Assignment, Subscription, TopicPartition

DEFAULT_GENERATION = -1


class MemberData(NamedTuple):
    """A member's previously owned partitions and the generation they belong to (None when
    the member reported no generation)."""

    partitions: list[TopicPartition]
    generation: int | None
    rack_id: str | None = None


class _ConsumerGeneration(NamedTuple):
    consumer: str
    generation: int


class AbstractStickyAssignor(AbstractPartitionAssignor):
    """Shared sticky logic; subclasses say where previous ownership comes from."""

    def __init__(self) -> None:
        # Java keeps the highest generation it has ever seen on the assignor instance.
        self._max_generation = DEFAULT_GENERATION
        self._partition_movements: _PartitionMovements | None = None
        #: partition -> new owner for partitions moving between members in the last
        #: assignment (computed by the constrained algorithm; None after the general one)
        self.partitions_transferring_ownership: dict[TopicPartition, str] | None = {}

    @abc.abstractmethod
    def member_data(self, subscription: Subscription) -> MemberData:
        """Previously owned partitions and generation of one member."""

    def max_generation(self) -> int:
        return self._max_generation

    def is_sticky(self) -> bool:
        """False if, in the last general assignment, partitions of one topic moved both from
        A to B and from B to A (what Java's ``isSticky()`` checks)."""
        return self._partition_movements is None or self._partition_movements.is_sticky()

    def assign_partitions(self, partitions_per_topic: Mapping[str, int],
                          subscriptions: Mapping[str, Subscription]
                          ) -> dict[str, list[TopicPartition]]:
        if not subscriptions:
            self.partitions_transferring_ownership = {}
            return {}
        member_data = {m: self.member_data(s) for m, s in subscriptions.items()}
        owned: dict[str, list[TopicPartition]] = {}
        multiple_owners: set[TopicPartition] = set()
        if self._all_subscriptions_equal(partitions_per_topic, subscriptions, member_data,
                                         owned, multiple_owners):
            self.partitions_transferring_ownership = {}
            # Java collects the owned partitions in a fresh HashMap and walks it in hash order
            owned = {c: owned[c] for c in string_map_order(owned)}
            builder = _ConstrainedAssignment(partitions_per_topic, owned, multiple_owners,
                                             self.partitions_transferring_ownership)
            return builder.build()
        self.partitions_transferring_ownership = None
        self._partition_movements = _PartitionMovements()
        builder = _GeneralAssignment(partitions_per_topic, subscriptions, member_data, owned,
                                     self._max_generation, self._partition_movements)
        return builder.build()

    def _all_subscriptions_equal(self, partitions_per_topic, subscriptions, member_data,
                                 owned_by_consumer, multiple_owners) -> bool:
        """True iff all members subscribe to the same topics.  Fills ``owned_by_consumer``
        with each member's still-valid previously owned partitions (conflicting claims
        settled by generation) and ``multiple_owners`` with partitions claimed by several
        members of the same generation."""
        equal = True
        subscribed: set[str] | None = None
        previous_owner: dict[TopicPartition, str] = {}
        for consumer, subscription in subscriptions.items():
            topics = subscription.topics
            # Java takes the first non-empty subscription as the reference, so members with
            # no topics met before it are overlooked and then handed partitions; here any
            # difference, an empty subscription included, means "not all equal".
            if subscribed is None:
                subscribed = set(topics)
            elif equal and not (len(topics) == len(subscribed) and subscribed.issuperset(topics)):
                equal = False

            data = member_data[consumer]
            generation = DEFAULT_GENERATION if data.generation is None else data.generation
            if generation > self._max_generation:
                self._max_generation = generation
            owned: list[TopicPartition] = []
            owned_by_consumer[consumer] = owned
            for tp in data.partitions:
                if tp.topic not in partitions_per_topic:
                    continue
                other = previous_owner.get(tp)
                if other is None:
                    owned.append(tp)
                    previous_owner[tp] = consumer
                    continue
                other_generation = max(subscriptions[other].generation_id, DEFAULT_GENERATION)
                if generation == other_generation:
                    # claimed twice in one generation: nobody keeps it
                    multiple_owners.add(tp)
                    _remove_first(owned_by_consumer[other], tp)
                    previous_owner[tp] = consumer
                elif generation > other_generation:
                    owned.append(tp)
                    _remove_first(owned_by_consumer[other], tp)
                    previous_owner[tp] = consumer
        return equal


def _remove_first(items: list, value) -> None:
    try:
        items.remove(value)
    except ValueError:
        pass


# --------------------------------------------------------------------------------------
# constrained assignment (all subscriptions equal)
# --------------------------------------------------------------------------------------

class _ConstrainedAssignment:
    def __init__(self, partitions_per_topic: Mapping[str, int],
                 owned_by_consumer: dict[str, list[TopicPartition]],
                 multiple_owners: set[TopicPartition],
                 transferring: dict[TopicPartition, str]):
        self.partitions_per_topic = partitions_per_topic
        self.owned_by_consumer = owned_by_consumer
        self.multiple_owners = multiple_owners
        self.transferring = transferring
        self.maybe_revoked: dict[TopicPartition, str] = {}
        total = sum(partitions_per_topic.values())
        n = len(owned_by_consumer)
        self.min_quota, self.expected_over_min = divmod(total, n)
        self.max_quota = self.min_quota + (1 if self.expected_over_min else 0)
        self.current_over_min = 0
        self.under_min: list[str] = []
        self.exactly_min: list[str] = []
        self.assignment: dict[str, list[TopicPartition]] = {c: [] for c in owned_by_consumer}
        self.assigned: set[TopicPartition] = set()

    def build(self) -> dict[str, list[TopicPartition]]:
        self._assign_owned_partitions()
        unassigned = self._unassigned_partitions()
        self.under_min.sort(key=string_sort_key)
        self.exactly_min.sort(key=string_sort_key)
        self._assign_round_robin(unassigned)
        self._verify_unfilled_members()
        return self.assignment

    def _assign_owned_partitions(self) -> None:
        min_quota, max_quota = self.min_quota, self.max_quota
        for consumer, owned in self.owned_by_consumer.items():  # Java HashMap order
            counts = self.partitions_per_topic
            owned = sorted((tp for tp in owned if tp.partition < counts[tp.topic]),
                           key=lambda tp: (tp.partition, tp.topic))
            if self.multiple_owners:
                owned = [tp for tp in owned if tp not in self.multiple_owners]
            if len(owned) < min_quota:
                # keep everything, still needs more
                keep = len(owned)
                self.under_min.append(consumer)
            elif len(owned) >= max_quota and self.current_over_min < self.expected_over_min:
                # one of the members allowed max_quota: keep max_quota, revoke the rest
                keep = max_quota
                self.current_over_min += 1
                if self.current_over_min == self.expected_over_min:
                    self.exactly_min.clear()
            else:
                # keep min_quota, revoke the rest; may still get one more
                keep = min_quota
                if self.current_over_min < self.expected_over_min:
                    self.exactly_min.append(consumer)
            kept = owned[:keep]
            self.assignment[consumer].extend(kept)
            self.assigned.update(kept)
            for tp in owned[keep:]:
                self.maybe_revoked[tp] = consumer

    def _unassigned_partitions(self) -> list[TopicPartition]:
        assigned = self.assigned
        unassigned = []
        for topic in sorted(self.partitions_per_topic, key=string_sort_key):
            for p in range(self.partitions_per_topic[topic]):
                tp = TopicPartition(topic, p)
                if tp not in assigned:
                    unassigned.append(tp)
        return unassigned

    def _assign_new_partition(self, tp: TopicPartition, consumer: str) -> int:
        mine = self.assignment[consumer]
        mine.append(tp)
        previous = self.maybe_revoked.get(tp)
        if (previous is not None and previous != consumer) or tp in self.multiple_owners:
            self.transferring[tp] = consumer
        return len(mine)

    def _assign_round_robin(self, unassigned: list[TopicPartition]) -> None:
        under = self.under_min
        exactly = deque(self.exactly_min)
        pos = 0  # a LinkedList iterator over `under`: index of the next element
        for tp in unassigned:
            if pos < len(under):
                consumer = under[pos]
                pos += 1
            elif not under and not exactly:
                raise RuntimeError("No more unfilled consumers to be assigned.")
            elif not under:
                consumer = exactly.popleft()
            else:
                consumer = under[0]
                pos = 1
            count = self._assign_new_partition(tp, consumer)
            if count == self.min_quota:
                del under[pos - 1]  # iterator.remove()
                pos -= 1
                exactly.append(consumer)
            elif count == self.max_quota:
                self.current_over_min += 1
        self.exactly_min = list(exactly)

    def _verify_unfilled_members(self) -> None:
        if not self.under_min:
            return
        if self.current_over_min != self.expected_over_min:
            raise RuntimeError("We haven't reached the expected number of members with more "
                               "than the minQuota partitions, but no more partitions to be "
                               "assigned")
        for member in self.under_min:
            if len(self.assignment[member]) != self.min_quota:
                raise RuntimeError(f"Consumer: [{member}] doesn't reach minQuota partitions, "
                                   "and no more partitions to be assigned")


# --------------------------------------------------------------------------------------
# general assignment (subscriptions differ)
# --------------------------------------------------------------------------------------

class _PartitionMovements:
    """Which partitions moved between which members during one general assignment, so a
    move can undo an earlier one instead of shuffling a second partition of the topic."""

    def __init__(self) -> None:
        self.by_topic: dict[str, dict[tuple[str, str], JavaHashSet]] = {}
        self.movements: dict[TopicPartition, tuple[str, str]] = {}

    def _remove_record(self, tp: TopicPartition) -> tuple[str, str]:
        pair = self.movements.pop(tp)
        pairs = self.by_topic[tp.topic]
        moved = pairs[pair]
        moved.discard(tp)
        if not len(moved):
            del pairs[pair]
            if not pairs:
                del self.by_topic[tp.topic]
        return pair

    def _add_record(self, tp: TopicPartition, pair: tuple[str, str]) -> None:
        self.movements[tp] = pair
        pairs = self.by_topic.get(tp.topic)
        if pairs is None:
            pairs = self.by_topic[tp.topic] = {}
        moved = pairs.get(pair)
        if moved is None:
            moved = pairs[pair] = JavaHashSet()
        moved.add(tp)

    def move(self, tp: TopicPartition, old: str, new: str) -> None:
        if tp in self.movements:
            src, _ = self._remove_record(tp)
            if src != new:  # not simply moving back
                self._add_record(tp, (src, new))
        else:
            self._add_record(tp, (old, new))

    def partition_to_move(self, tp: TopicPartition, old: str, new: str) -> TopicPartition:
        """Moving ``tp`` from ``old`` to ``new``: if a partition of the topic earlier moved
        the opposite way, move that one back instead (the first one in Java's HashSet)."""
        pairs = self.by_topic.get(tp.topic)
        if pairs is None:
            return tp
        record = self.movements.get(tp)
        if record is not None:
            old = record[0]
        reverse = pairs.get((new, old))
        if reverse is None:
            return tp
        return reverse.first()

    def is_sticky(self) -> bool:
        for pairs in self.by_topic.values():
            for src, dst in pairs:
                if (dst, src) in pairs:
                    return False
        return True


class _GeneralAssignment:
    def __init__(self, partitions_per_topic: Mapping[str, int],
                 subscriptions: Mapping[str, Subscription],
                 member_data: dict[str, MemberData],
                 owned_by_consumer: dict[str, list[TopicPartition]],
                 max_generation: int,
                 movements: _PartitionMovements):
        self.partitions_per_topic = partitions_per_topic
        self.subscriptions = subscriptions
        self.member_data = member_data
        self.max_generation = max_generation
        self.movements = movements
        self.revocation_required = False

        # topic -> potential consumers (a list, as in Java: repeats count), and back
        self.topic_consumers: dict[str, list[str]] = {t: [] for t in partitions_per_topic}
        self.consumer_topics: dict[str, list[str]] = {}
        for consumer, subscription in subscriptions.items():
            topics = [t for t in subscription.topics if t in partitions_per_topic]
            self.consumer_topics[consumer] = topics
            for t in topics:
                self.topic_consumers[t].append(consumer)
        self.consumer_topic_set = {c: frozenset(ts) for c, ts in self.consumer_topics.items()}
        self.consumer_topic_list = {c: list(dict.fromkeys(ts))
                                    for c, ts in self.consumer_topics.items()}

        # the current assignment as insertion-ordered dicts (an ArrayList with O(1) remove)
        self.assignment: dict[str, dict[TopicPartition, None]] = {
            c: dict.fromkeys(owned_by_consumer.get(c, ())) for c in subscriptions}
        self.owner: dict[TopicPartition, str] = {}
        for consumer, parts in self.assignment.items():
            for tp in parts:
                self.owner[tp] = consumer

        sorted_topics = sorted(self.topic_consumers,
                               key=lambda t: (len(self.topic_consumers[t]), string_sort_key(t)))
        self.sorted_partitions = [TopicPartition(t, p) for t in sorted_topics
                                  for p in range(partitions_per_topic[t])]
        self.member_key = {c: string_sort_key(c) for c in subscriptions}

    # ---- bookkeeping of sizes: heaps of subscribers / owners per topic -----------------

    def _init_tracking(self) -> None:
        self.active: set[str] = set(self.assignment)
        self.owned_topics: dict[str, dict[str, int]] = {c: {} for c in self.assignment}
        for consumer, parts in self.assignment.items():
            counts = self.owned_topics[consumer]
            for tp in parts:
                counts[tp.topic] = counts.get(tp.topic, 0) + 1
        self.sub_heaps: dict[str, list] = {t: [] for t in self.topic_consumers}
        self.owner_heaps: dict[str, list] = {t: [] for t in self.topic_consumers}
        for consumer, topics in self.consumer_topic_list.items():
            n = len(self.assignment[consumer])
            entry = (n, self.member_key[consumer], consumer)
            for t in topics:
                self.sub_heaps[t].append(entry)
            for t in self.owned_topics[consumer]:
                self.owner_heaps[t].append((-n, consumer))
        for heap in self.sub_heaps.values():
            heapq.heapify(heap)
        for heap in self.owner_heaps.values():
            heapq.heapify(heap)
        self.size_count: dict[int, int] = {}
        for parts in self.assignment.values():
            n = len(parts)
            self.size_count[n] = self.size_count.get(n, 0) + 1
        self.min_size = min(self.size_count)
        self.max_size = max(self.size_count)
        self.tracking = False  # whether moves mark topics for the balance check
        self.dirty: set[str] = set()
        self.violating: set[str] = set()

    def _size_changed(self, consumer: str, old: int) -> None:
        n = len(self.assignment[consumer])
        topics = self.consumer_topic_list[consumer]
        if n < old:
            # Subscriber heaps are min-heaps that may under-estimate a member's size (growth
            # is applied lazily when the entry surfaces); a shrink must be pushed now.
            entry = (n, self.member_key[consumer], consumer)
            for t in topics:
                heapq.heappush(self.sub_heaps[t], entry)
        for t in self.owned_topics[consumer]:
            heapq.heappush(self.owner_heaps[t], (-n, consumer))
        if self.tracking:
            self.dirty.update(topics)
        counts = self.size_count
        left = counts[old] - 1
        if left:
            counts[old] = left
        else:
            del counts[old]
        counts[n] = counts.get(n, 0) + 1
        if n < self.min_size:
            self.min_size = n
        if n > self.max_size:
            self.max_size = n
        while self.min_size not in counts:
            self.min_size += 1
        while self.max_size not in counts:
            self.max_size -= 1

    def _deactivate(self, consumer: str) -> None:
        self.active.discard(consumer)
        n = len(self.assignment[consumer])
        left = self.size_count[n] - 1
        if left:
            self.size_count[n] = left
        else:
            del self.size_count[n]
        if self.size_count:
            self.min_size = min(self.size_count)
            self.max_size = max(self.size_count)

    def _least_loaded_subscriber(self, topic: str) -> tuple[int, str] | None:
        """(size, member) of the first member of Java's sortedCurrentSubscriptions that
        subscribes to ``topic``: least partitions, then smallest member id."""
        heap = self.sub_heaps[topic]
        assignment, active = self.assignment, self.active
        while heap:
            n, key, consumer = heap[0]
            if consumer not in active:
                heapq.heappop(heap)
                continue
            current = len(assignment[consumer])
            if current == n:
                return n, consumer
            if current > n:  # grown since: re-file at its current size
                heapq.heapreplace(heap, (current, key, consumer))
            else:  # shrunk since: a fresher entry is in the heap
                heapq.heappop(heap)
        return None

    def _most_loaded_owner_size(self, topic: str) -> int | None:
        heap = self.owner_heaps[topic]
        assignment, active, owned_topics = self.assignment, self.active, self.owned_topics
        while heap:
            neg, consumer = heap[0]
            if (consumer in active and len(assignment[consumer]) == -neg
                    and topic in owned_topics[consumer]):
                return -neg
            heapq.heappop(heap)
        return None

    def _is_balanced(self) -> bool:
        """Java's isBalanced(): counts differ by at most one, or no partition could move to
        a subscribed member with 2+ fewer partitions than its owner.  The latter means: no
        topic whose most loaded owner has 2+ more partitions than its least loaded
        subscriber."""
        if self.min_size >= self.max_size - 1:
            return True
        if self.dirty:
            for topic in self.dirty:
                least = self._least_loaded_subscriber(topic)
                most = self._most_loaded_owner_size(topic)
                if least is not None and most is not None and most > least[0] + 1:
                    self.violating.add(topic)
                else:
                    self.violating.discard(topic)
            self.dirty.clear()
        return not self.violating

    def _add(self, consumer: str, tp: TopicPartition) -> None:
        old = len(self.assignment[consumer])
        self.assignment[consumer][tp] = None
        self.owner[tp] = consumer
        counts = self.owned_topics[consumer]
        counts[tp.topic] = counts.get(tp.topic, 0) + 1
        self._size_changed(consumer, old)

    def _remove(self, consumer: str, tp: TopicPartition) -> None:
        old = len(self.assignment[consumer])
        del self.assignment[consumer][tp]
        counts = self.owned_topics[consumer]
        left = counts[tp.topic] - 1
        if left:
            counts[tp.topic] = left
        else:
            del counts[tp.topic]
        self._size_changed(consumer, old)

    # ---- the algorithm ------------------------------------------------------------------

    def build(self) -> dict[str, list[TopicPartition]]:
        previous = self._previous_assignment()
        assigned = self._assign_owned_partitions()
        unassigned = [tp for tp in self.sorted_partitions if tp not in assigned]
        self._balance(previous, unassigned)
        return {c: list(self.assignment[c]) for c in self.subscriptions}

    def _previous_assignment(self) -> dict[TopicPartition, _ConsumerGeneration]:
        """Partitions' owners in generations older than the newest one (the newest claim
        among them wins; ties go to the member met first)."""
        previous: dict[TopicPartition, _ConsumerGeneration] = {}
        for consumer in self.subscriptions:
            data = self.member_data[consumer]
            if data.generation is not None and data.generation < self.max_generation:
                generation = data.generation
            elif data.generation is None and self.max_generation > DEFAULT_GENERATION:
                generation = DEFAULT_GENERATION
            else:
                continue
            for tp in data.partitions:
                known = previous.get(tp)
                if known is None or generation > known.generation:
                    previous[tp] = _ConsumerGeneration(consumer, generation)
        return previous

    def _assign_owned_partitions(self) -> set[TopicPartition]:
        assigned: set[TopicPartition] = set()
        for consumer, parts in self.assignment.items():
            topics = self.subscriptions[consumer].topics
            topic_set = set(topics)
            for tp in list(parts):
                if tp.topic not in self.topic_consumers:
                    del parts[tp]
                    self.owner.pop(tp, None)
                elif tp.topic not in topic_set:
                    del parts[tp]
                    self.revocation_required = True
                elif tp.partition >= self.partitions_per_topic[tp.topic]:
                    del parts[tp]
                    self.owner.pop(tp, None)
                else:
                    assigned.add(tp)
        return assigned

    def _can_topic_participate(self, topic: str) -> bool:
        return len(self.topic_consumers[topic]) >= 2

    def _max_assignment_size(self, consumer: str) -> int:
        topics = self.consumer_topics[consumer]
        if len(topics) == len(self.partitions_per_topic):
            return sum(self.partitions_per_topic.values())
        return sum(self.partitions_per_topic[t] for t in topics)

    def _can_consumer_participate(self, consumer: str) -> bool:
        parts = self.assignment[consumer]
        if len(parts) < self._max_assignment_size(consumer):
            return True
        return any(self._can_topic_participate(t) for t in self.owned_topics[consumer])

    def _balance(self, previous: dict[TopicPartition, _ConsumerGeneration],
                 unassigned: list[TopicPartition]) -> None:
        self._init_tracking()
        initializing = self.max_size == 0

        for tp in unassigned:
            if not self.topic_consumers[tp.topic]:
                continue
            least = self._least_loaded_subscriber(tp.topic)
            if least is not None:
                self._add(least[1], tp)

        # partitions of topics with a single potential consumer can't move
        fixed_topics = {t for t in self.topic_consumers if not self._can_topic_participate(t)}
        if fixed_topics:
            self.sorted_partitions = [tp for tp in self.sorted_partitions
                                      if tp.topic not in fixed_topics]
            unassigned = [tp for tp in unassigned if tp.topic not in fixed_topics]

        # members that can neither gain nor lose partitions sit the balancing out
        fixed_assignments = {}
        for consumer in self.consumer_topics:
            if not self._can_consumer_participate(consumer):
                self._deactivate(consumer)
                fixed_assignments[consumer] = self.assignment.pop(consumer)
        self.dirty = {t for t in self.topic_consumers if self._can_topic_participate(t)}
        self.tracking = True

        pre_balance = {c: dict(parts) for c, parts in self.assignment.items()}
        pre_balance_owner = dict(self.owner)

        if not self.revocation_required:
            self._perform_reassignments(unassigned, previous)
        performed = self._perform_reassignments(self.sorted_partitions, previous)

        if (not initializing and performed
                and _balance_score(self.assignment) >= _balance_score(pre_balance)):
            self.assignment = pre_balance
            self.owner = pre_balance_owner

        self.assignment.update(fixed_assignments)

    def _perform_reassignments(self, partitions: list[TopicPartition],
                               previous: dict[TopicPartition, _ConsumerGeneration]) -> bool:
        performed = False
        assignment, owner = self.assignment, self.owner
        while True:
            modified = False
            for tp in partitions:
                if self._is_balanced():
                    break
                consumer = owner[tp]
                size = len(assignment[consumer])
                prev = previous.get(tp)
                if (prev is not None and prev.consumer in self.active
                        and tp.topic in self.consumer_topic_set[prev.consumer]
                        and size > len(assignment[prev.consumer]) + 1):
                    self._reassign(tp, prev.consumer)
                    performed = modified = True
                    continue
                least = self._least_loaded_subscriber(tp.topic)
                if least is not None and size > least[0] + 1:
                    self._reassign(tp, least[1])
                    performed = modified = True
            if not modified:
                return performed

    def _reassign(self, tp: TopicPartition, new_consumer: str) -> None:
        consumer = self.owner[tp]
        to_move = self.movements.partition_to_move(tp, consumer, new_consumer)
        old_consumer = self.owner[to_move]
        self.movements.move(to_move, old_consumer, new_consumer)
        self._remove(old_consumer, to_move)
        self._add(new_consumer, to_move)


def _balance_score(assignment: Mapping[str, Mapping]) -> int:
    """Sum of |size(a) - size(b)| over all pairs of members (0 when perfectly balanced)."""
    sizes = sorted(len(parts) for parts in assignment.values())
    n = len(sizes)
    return sum(s * (2 * i - n + 1) for i, s in enumerate(sizes))


# --------------------------------------------------------------------------------------
# StickyAssignor ("sticky", eager) and its user data
# --------------------------------------------------------------------------------------

class StickyAssignor(AbstractStickyAssignor):
    """The eager sticky assignor: members revoke everything before re-joining, so each
    reports its previous assignment and generation in the subscription user data
    (``StickyAssignorUserData`` v1: ``[topic, [partition]]`` then ``generation``)."""

    name = "sticky"

    def __init__(self) -> None:
        super().__init__()
        self._member_assignment: list[TopicPartition] | None = None
        self._generation = DEFAULT_GENERATION

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        self._member_assignment = list(assignment.partitions)
        self._generation = generation_id

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        if self._member_assignment is None:
            return None
        return serialize_topic_partition_assignment(
            MemberData(self._member_assignment, self._generation))

    def member_data(self, subscription: Subscription) -> MemberData:
        if not subscription.user_data:
            return MemberData([], None, subscription.rack_id)
        return deserialize_topic_partition_assignment(subscription.user_data)


def serialize_topic_partition_assignment(data: MemberData) -> bytes:
    """StickyAssignorUserData v1.  Topics appear in the order Java's
    ``CollectionUtils.groupPartitionsByTopic`` (a HashMap) yields them."""
    by_topic: dict[str, list[int]] = {}
    for tp in data.partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(INT32.pack(len(by_topic)))
    for topic in string_map_order(by_topic):
        name = topic.encode("utf-8", "replace")
        partitions = by_topic[topic]
        out += INT16.pack(len(name))
        out += name
        out += INT32.pack(len(partitions))
        out += struct.pack(f">{len(partitions)}i", *partitions)
    generation = DEFAULT_GENERATION if data.generation is None else data.generation
    out += INT32.pack(generation)
    return bytes(out)


def serialize_topic_partition_assignment_v0(partitions: list[TopicPartition]) -> bytes:
    """StickyAssignorUserData v0 (no generation), as written by clients before 2.3."""
    return serialize_topic_partition_assignment(MemberData(partitions, None))[:-4]


class _SchemaError(ValueError):
    pass


def _read_previous_assignment(buf: bytes, pos: int) -> tuple[list[TopicPartition], int]:
    """The ``[topic, [partition]]`` array; raises _SchemaError where Java's Schema.read would
    throw (negative or oversized lengths, buffer underflow)."""
    size = len(buf)
    try:
        (count,) = INT32.unpack_from(buf, pos)
        pos += 4
        if count < 0 or count > size - pos:
            raise _SchemaError(f"bad array size {count}")
        partitions: list[TopicPartition] = []
        for _ in range(count):
            (length,) = INT16.unpack_from(buf, pos)
            pos += 2
            if length < 0 or length > size - pos:
                raise _SchemaError(f"bad string length {length}")
            topic = buf[pos:pos + length].decode("utf-8", "replace")
            pos += length
            (n,) = INT32.unpack_from(buf, pos)
            pos += 4
            if n < 0 or 4 * n > size - pos:
                raise _SchemaError(f"bad array size {n}")
            partitions += [TopicPartition(topic, p)
                           for p in struct.unpack_from(f">{n}i", buf, pos)]
            pos += 4 * n
    except struct.error as e:
        raise _SchemaError(str(e)) from None
    return partitions, pos


def deserialize_topic_partition_assignment(user_data: bytes) -> MemberData:
    """Read v1, else v0 (no generation); unreadable data means "owned nothing", with the
    default generation."""
    buf = bytes(user_data)
    try:
        partitions, pos = _read_previous_assignment(buf, 0)
        if pos + 4 > len(buf):
            raise _SchemaError("no generation")
        return MemberData(partitions, INT32.unpack_from(buf, pos)[0])
    except _SchemaError:
        pass
    try:
        partitions, _ = _read_previous_assignment(buf, 0)
        return MemberData(partitions, None)
    except _SchemaError:
        return MemberData([], DEFAULT_GENERATION)

