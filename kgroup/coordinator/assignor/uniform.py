"""The ``uniform`` server-side assignor (Kafka's UniformAssignor): balance first, then stickiness.

Two builders, as in Kafka's (4.0 to 4.3) ``group-coordinator/.../assignor/``:

- homogeneous (every member subscribes to the same topics; UniformHomogeneousAssignmentBuilder):
  each member keeps what it has up to its quota (``partitions // members``, one more for
  ``partitions % members`` of them: those already holding that many first), walking its
  assignment in the order given; what is over quota or unowned is handed out in
  order to the members under quota. One pass over members and partitions.
- heterogeneous (UniformHeterogeneousAssignmentBuilder): keep what is still subscribed, give each
  unassigned partition to the least loaded subscriber of its topic (topics ordered by partitions
  per subscriber, descending), then move partitions from the most to the least loaded subscribers
  topic by topic until no topic improves (at most 16 rounds).

Partitions are plain ints in lists; per-topic owners are int lists indexed by partition, member
sizes an int list indexed by member: no per-partition objects.
"""
from __future__ import annotations

from ...java_compat import hash_set_copy_order, uuid_hash_code, uuid_sort_key
from .spec import GroupAssignment, GroupSpec, PartitionAssignorError, SubscriptionType

NAME = "uniform"
MAX_ITERATION_COUNT = 16


def assign(group: GroupSpec, topic_partitions: dict[bytes, int]) -> GroupAssignment:
    """The target assignment; ``topic_partitions`` maps each existing topic id to its partition count."""
    if not group.members:
        return {}
    if group.subscription_type is SubscriptionType.HOMOGENEOUS:
        return _homogeneous(group, topic_partitions)
    return _Heterogeneous(group, topic_partitions).build()


# -- homogeneous ---------------------------------------------------------------------------------

def _homogeneous(group: GroupSpec, topic_partitions: dict[bytes, int]) -> GroupAssignment:
    members = group.members
    first = next(iter(members.values()))
    subscribed_order = hash_set_copy_order(first.subscribed_topic_ids, uuid_hash_code)
    if not subscribed_order:
        return {}
    subscribed = set(subscribed_order)

    # Partitions any member holds now (GroupSpec.isPartitionAssigned).
    held: dict[bytes, set] = {}
    for m in members.values():
        for topic_id, parts in m.assignment.items():
            if topic_id in subscribed:
                s = held.get(topic_id)
                if s is None:
                    held[topic_id] = set(parts)
                else:
                    s.update(parts)

    # Unassigned partitions as (topic id, partitions) chunks, in Kafka's order: each subscribed
    # topic's free partitions ascending, then partitions revoked for being over quota.
    unassigned: list[tuple[bytes, list[int]]] = []
    total = 0
    for topic_id in subscribed_order:
        n = topic_partitions.get(topic_id, -1)
        if n == -1:
            raise PartitionAssignorError(
                f"Members are subscribed to topic {topic_id.hex()} which doesn't exist in the topic metadata.")
        h = held.get(topic_id)
        free = list(range(n)) if not h else sorted(set(range(n)).difference(h))
        if free:
            unassigned.append((topic_id, free))
        total += n

    # maybeRevokePartitions: each member keeps what it has up to its quota, walking its assignment
    # in the order given (the caller gives Kafka's: see MemberSpec.assignment); the extra partitions go to members that already hold min + 1, unless the remaining members
    # are just enough to take the remaining extras.
    member_count = len(members)
    minimum_quota, extra = divmod(total, member_count)
    target: GroupAssignment = {}
    unfilled: list[tuple[str, int]] = []
    for index, (member_id, m) in enumerate(members.items()):
        quota = minimum_quota
        has_extra = extra > 0
        if has_extra:
            quota += 1
        new: dict[bytes, list[int]] = {}
        for topic_id, parts in m.assignment.items():
            if topic_id not in subscribed:
                continue                      # no longer subscribed: the whole topic goes
            if len(parts) <= quota:
                quota -= len(parts)
                if parts:
                    new[topic_id] = list(parts)
            else:
                parts = list(parts)
                if quota:
                    new[topic_id] = parts[:quota]
                unassigned.append((topic_id, parts[quota:]))
                quota = 0
        if quota > 0 and has_extra and member_count - index > extra:
            quota -= 1                        # give the extra partition up for a member that has it
            has_extra = False
        if quota > 0:
            unfilled.append((member_id, quota))
        if has_extra:
            extra -= 1
        target[member_id] = new

    # assignRemainingPartitions: the unassigned partitions in order to the members under quota,
    # in member order.
    chunk, pos = 0, 0
    for member_id, quota in unfilled:
        new = target[member_id]
        while quota and chunk < len(unassigned):
            topic_id, parts = unassigned[chunk]
            take = parts[pos:pos + quota]
            quota -= len(take)
            pos += len(take)
            if pos == len(parts):
                chunk, pos = chunk + 1, 0
            have = new.get(topic_id)
            if have is None:
                new[topic_id] = take
            else:
                have.extend(take)
    if chunk < len(unassigned):
        raise PartitionAssignorError("Partitions were left unassigned")
    return target


# -- heterogeneous -------------------------------------------------------------------------------

class _Heterogeneous:
    """UniformHeterogeneousAssignmentBuilder, step for step (members are indices into member_ids)."""

    def __init__(self, group: GroupSpec, topic_partitions: dict[bytes, int]):
        self.group = group
        self.topic_partitions = topic_partitions
        self.member_ids = list(group.members)
        self.sizes = [0] * len(self.member_ids)
        self.subscribers: dict[bytes, list[int]] = {}
        for index, member_id in enumerate(self.member_ids):
            for topic_id in group.members[member_id].subscribed_topic_ids:
                if topic_partitions.get(topic_id, -1) == -1:
                    raise PartitionAssignorError(
                        f"Members are subscribed to topic {topic_id.hex()} which doesn't exist in the "
                        f"topic metadata.")
                subs = self.subscribers.get(topic_id)
                if subs is None:
                    self.subscribers[topic_id] = [index]
                elif subs[-1] != index:     # a subscription lists a topic once
                    subs.append(index)
        self.owners = {t: [-1] * topic_partitions[t] for t in self.subscribers}
        self.target: list[dict[bytes, set]] = []

    def _topic_key(self, topic_id: bytes):
        # partitions per subscriber descending, then subscriber count ascending, then topic id
        n, s = self.topic_partitions[topic_id], len(self.subscribers[topic_id])
        return (-(n / s), s) + uuid_sort_key(topic_id)

    def build(self) -> GroupAssignment:
        if not self.subscribers:
            return {}
        self._keep_subscribed()
        unassigned = {}
        for topic_id, owners in self.owners.items():
            free = [p for p, o in enumerate(owners) if o == -1] if -1 in owners else None
            if free:
                unassigned[topic_id] = free
        balancer = _Balancer(self.sizes)
        for topic_id in sorted(unassigned, key=self._topic_key):
            balancer.initialize(self.subscribers[topic_id])
            for partition in unassigned[topic_id]:
                self._assign(topic_id, partition, balancer.next_least_loaded())
        movable = [t for t, subs in self.subscribers.items() if len(subs) >= 2]
        if movable:
            self._balance_topics(movable)
        return {m: {t: list(p) for t, p in a.items()} for m, a in zip(self.member_ids, self.target)}

    def _keep_subscribed(self) -> None:
        members = self.group.members
        for index, member_id in enumerate(self.member_ids):
            m = members[member_id]
            subscribed = m.subscribed_topic_ids
            if not isinstance(subscribed, (set, frozenset)):
                subscribed = frozenset(subscribed)
            kept: dict[bytes, set] = {}
            for topic_id, parts in m.assignment.items():
                if topic_id in subscribed:
                    self.sizes[index] += len(parts)
                    owners = self.owners[topic_id]
                    for p in parts:
                        owners[p] = index
                    if parts:
                        kept[topic_id] = set(parts)
            self.target.append(kept)

    def _assign(self, topic_id: bytes, partition: int, index: int) -> None:
        owners = self.owners[topic_id]
        old = owners[partition]
        if old != -1:
            parts = self.target[old].get(topic_id)
            if parts is not None:
                parts.discard(partition)
                if not parts:
                    del self.target[old][topic_id]
            self.sizes[old] -= 1
        self.target[index].setdefault(topic_id, set()).add(partition)
        owners[partition] = index
        self.sizes[index] += 1

    def _balance_topics(self, topic_ids: list[bytes]) -> None:
        ordered = sorted(topic_ids, key=self._topic_key)
        last_rebalanced = -1
        balancer = _Balancer(self.sizes)
        for _ in range(MAX_ITERATION_COUNT):
            for i, topic_id in enumerate(ordered):
                if i == last_rebalanced:
                    return      # a whole round without a move
                moved = self._balance_topic(topic_id, balancer)
                if moved > 0 or last_rebalanced == -1:
                    last_rebalanced = i

    def _balance_topic(self, topic_id: bytes, balancer: "_Balancer") -> int:
        moved = 0
        owners = self.owners[topic_id]
        if balancer.initialize(self.subscribers[topic_id]) <= 1:
            return moved
        # the topic's partitions grouped by owner (by owner index, then partition)
        partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, p in enumerate(partitions):
            o = owners[p]
            if o not in start:
                start[o] = i
            end[o] = i + 1
        while not balancer.is_balanced():
            while True:
                most = balancer.next_most_loaded()
                if most == -1:
                    break
                if most not in end or end[most] - start[most] <= 0:
                    balancer.exclude_most_loaded()
                    continue
                break
            if most == -1:
                break
            partition = partitions[end[most] - 1]
            end[most] -= 1
            least = balancer.next_least_loaded()
            if balancer.is_balanced():
                break
            self._assign(topic_id, partition, least)
            moved += 1
        return moved


class _Balancer:
    """Kafka's MemberAssignmentBalancer: a least-loaded range growing right and a most-loaded range
    growing left over the members sorted by assigned partition count."""

    __slots__ = ("sizes", "sorted", "least_end", "least_count", "next_least",
                 "most_start", "most_end", "most_count", "next_most")

    def __init__(self, sizes: list[int]):
        self.sizes = sizes
        self.sorted: list[int] = []

    def initialize(self, members: list[int]) -> int:
        if not members:
            raise ValueError("Cannot balance an empty subscriber list.")
        sizes = self.sizes
        self.sorted = s = sorted(members, key=lambda i: (sizes[i], i))
        self.least_end = 0
        self.least_count = sizes[s[0]] - 1
        self.next_least = 0
        self.most_start = self.most_end = len(s)
        self.most_count = sizes[s[-1]] + 1
        self.next_most = len(s) - 1
        return sizes[s[-1]] - sizes[s[0]]

    def next_least_loaded(self) -> int:
        s, sizes = self.sorted, self.sizes
        if self.next_least >= self.least_end:
            self.least_count += 1
            while self.least_end < len(s) and sizes[s[self.least_end]] == self.least_count:
                self.least_end += 1
            self.next_least = 0
        m = s[self.next_least]
        self.next_least += 1
        return m

    def next_most_loaded(self) -> int:
        s, sizes = self.sorted, self.sizes
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                # emptied by exclude_most_loaded: restart from the next member's count
                self.most_count = sizes[s[self.most_start - 1]]
            else:
                self.most_count -= 1
            while self.most_start > 0 and sizes[s[self.most_start - 1]] == self.most_count:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        m = s[self.next_most]
        self.next_most -= 1
        return m

    def exclude_most_loaded(self) -> None:
        s = self.sorted
        i = self.next_most + 1
        s[i], s[self.most_end - 1] = s[self.most_end - 1], s[i]
        self.most_end -= 1

    def is_balanced(self) -> bool:
        return self.most_count - self.least_count <= 1
