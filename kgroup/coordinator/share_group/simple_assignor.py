"""The ``simple`` share group assignor (Kafka's SimpleAssignor with its SimpleHomogeneousAssignmentBuilder
and SimpleHeterogeneousAssignmentBuilder), step for step and in Java's iteration orders, so that the
same group gives Kafka's assignment. Pure.

Unlike a consumer group's assignors, a partition may go to several members: each assignable
partition is shared by ``desired sharing`` = ceil(members / partitions) members, and member i (of
n, in the order of the group spec's member map) gets ceil(p·(i+1)) - ceil(p·i) partitions, with
p = sharing·partitions/n. The previous target is kept where it fits (stickiness): partitions of
topics nobody subscribes to any more are dropped, members over their count give up partitions,
partitions over-shared lose members, then the partitions short of their sharing go to the members
short of their count, walking the members round and round. With different subscriptions
(heterogeneous) the same is done topic by topic among that topic's subscribers.

Every choice among equally good assignments follows the iteration order of Kafka's Java hash maps
and sets (``java_compat.JavaHashMap``): the members as ``HashMap<String, _>`` keys (String.hashCode)
inserted in the group's order; a member's subscribed topic names as a ``HashSet<String>``; its
previous assignment as ``Assignment.fromRecord`` rebuilds it (``HashMap<Uuid, _>``, partitions a
``HashSet<Integer>`` copied from the list); partitions by ``TopicIdPartition`` (a record:
31·Uuid.hashCode + partition) or ``Integer`` hash; member indexes by ``Integer`` hash; and the
capacities Kafka's ``AssignorHelpers.newHashMap``/``newHashSet`` ask for. Not modelled: a previous
assignment's partitions that collide in one bucket keep their ascending order (Kafka keeps the
record's), and tree bins.

As in Kafka, a partition of a still-subscribed topic that is no longer assignable stays with its
members (counted in their share) until a rebalance moves it.
"""
from __future__ import annotations

import math
from typing import Mapping

from ...java_compat import (JavaHashMap, hash_map_capacity, hash_set_copy_order, int_hash, int_hash_set_copy_order,
                            string_hash_u32, string_map_order, topic_id_partition_hash, uuid_hash_code,
                            uuid_map_order)

NAME = "simple"


def _desired_counts(n: int, sharing: int, partitions: int) -> list[int]:
    precise = sharing * partitions / n
    return [math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i in range(n)]


def _old_assignment(old: Mapping[bytes, frozenset]) -> list[tuple[bytes, list[int]]]:
    """A member's previous assignment in ``Assignment.fromRecord``'s iteration order."""
    return [(t, int_hash_set_copy_order(sorted(old[t]))) for t in uuid_map_order(list(old))]


def _subscribed_ids(names, topic_ids: Mapping[str, bytes]) -> list[bytes]:
    """``TopicIds`` over a member's ``HashSet<String>`` of subscribed names: the existing ones."""
    return [topic_ids[n] for n in hash_set_copy_order(list(names), string_hash_u32) if n in topic_ids]


class _Result:
    """``newGroupAssignment`` next to ``oldGroupAssignment``: a member's copy is made on first change."""

    def __init__(self, old: list[list[tuple[bytes, list[int]]]]):
        self.old = old
        self.new: dict[int, dict[bytes, set]] = {}

    def copy(self, m: int) -> dict[bytes, set]:
        a = self.new.get(m)
        if a is None:
            a = self.new[m] = {t: set(ps) for t, ps in self.old[m]}
        return a

    def final(self, m: int) -> dict[bytes, frozenset]:
        a = self.new.get(m)
        if a is None:
            return {t: frozenset(ps) for t, ps in self.old[m] if ps}
        return {t: frozenset(ps) for t, ps in a.items() if ps}


def _homogeneous(n: int, subscribed: list[bytes], old: list, assignable: Mapping) -> _Result:
    """SimpleHomogeneousAssignmentBuilder.build."""
    res = _Result(old)
    subscribed_set = set(subscribed)
    targets = [(t, p) for t in subscribed for p in sorted(assignable.get(t, ()))]
    sharing = (n + len(targets) - 1) // len(targets) if targets else 0
    desired = _desired_counts(n, sharing, len(targets)) if targets else [0] * n
    by_partition = JavaHashMap(topic_id_partition_hash, hash_map_capacity(len(targets)))
    by_member = JavaHashMap(int_hash, hash_map_capacity(n))
    unfilled = JavaHashMap(int_hash, hash_map_capacity(n))
    overfilled = JavaHashMap(int_hash, hash_map_capacity(n))
    # revokeUnassignablePartitions
    for m in range(n):
        count = 0
        for t, ps in old[m]:
            if t in subscribed_set:
                for p in ps:
                    count += 1
                    by_partition.setdefault((t, p), JavaHashMap).add(m)
                    by_member.setdefault(m, lambda: JavaHashMap(topic_id_partition_hash)).add((t, p))
                    if count >= desired[m]:
                        res.copy(m)
            else:
                res.copy(m).pop(t, None)
        if count < desired[m]:
            unfilled.add(m)
        elif count > desired[m]:
            overfilled.add(m)
    # revokeOverfilledMembers
    for m in overfilled:
        mine = by_member.get(m)
        if len(mine) > desired[m]:
            for tp in mine.keys():
                res.copy(m)[tp[0]].discard(tp[1])
                by_partition[tp].remove(m)
                mine.remove(tp)
                if len(mine) == desired[m]:
                    break
    # revokeOversharedPartitions
    for tp, members in by_partition.items():
        count = len(members)
        if count > sharing:
            for m in members.keys():
                ps = res.copy(m).get(tp[0])
                if ps is not None and tp[1] in ps:
                    ps.discard(tp[1])
                    count -= 1
                    members.remove(m)
                    by_member[m].remove(tp)
                    unfilled.add(m)
                if count <= sharing:
                    break
    for tp in targets:
        by_partition.setdefault(tp, JavaHashMap)
    # assignRemainingPartitions
    _assign_remaining(by_partition.items(), unfilled, sharing, desired, res, by_member,
                      lambda: JavaHashMap(topic_id_partition_hash), lambda tp: tp)
    return res


def _assign_remaining(partitions, unfilled: JavaHashMap, sharing: int, desired, res: _Result, by_member,
                      new_member_set, topic_partition) -> None:
    """assignRemainingPartitions: one pass over the partitions, the unfilled members round and
    round (an iterator restarted once exhausted, if it placed anything on its way)."""
    if not len(unfilled):
        return
    order, pos = unfilled.keys(), 0
    assigned_this_round = False
    for key, members in partitions:
        if len(members) < sharing:
            to_make = sharing - len(members)
            while to_make > 0:
                if pos >= len(order):
                    if not assigned_this_round or not len(unfilled):
                        break
                    order, pos = unfilled.keys(), 0
                    assigned_this_round = False
                m = order[pos]
                pos += 1
                if m not in members:
                    t, p = topic_partition(key)
                    res.copy(m).setdefault(t, set()).add(p)
                    mine = by_member.setdefault(m, new_member_set)
                    mine.add(key)
                    to_make -= 1
                    assigned_this_round = True
                    if len(mine) >= desired[m]:
                        unfilled.remove(m)
        if not len(unfilled):
            break


def _heterogeneous(n: int, subscriptions: list[list[bytes]], old: list, assignable: Mapping) -> _Result:
    """SimpleHeterogeneousAssignmentBuilder.build: topic by topic (a ``HashSet<Uuid>`` of every
    member's subscriptions), among that topic's subscribers."""
    res = _Result(old)
    topics = JavaHashMap(uuid_hash_code)
    subscribers: dict[bytes, list[int]] = {}
    for m in range(n):
        for t in subscriptions[m]:
            topics.add(t)
            subscribers.setdefault(t, []).append(m)
    for t in topics.keys():
        targets = sorted(assignable.get(t, ()))
        subs = subscribers[t]
        sharing = (len(subs) + len(targets) - 1) // len(targets) if targets else 0
        desired = [0] * n
        if targets:
            for i, c in enumerate(_desired_counts(len(subs), sharing, len(targets))):
                desired[subs[i]] = c
        by_partition = JavaHashMap(int_hash, hash_map_capacity(len(targets)))
        by_member = JavaHashMap(int_hash, hash_map_capacity(len(subs)))
        # revokeUnassignablePartitions: the topic is subscribed (by someone), so partitions stay
        for m in range(n):
            ps = dict(old[m]).get(t)
            if ps is not None:
                for p in ps:
                    by_partition.setdefault(p, JavaHashMap).add(m)
                    by_member.setdefault(m, JavaHashMap).add(p)
        # revokeOverfilledMembers
        for m, mine in by_member.items():
            if len(mine) > desired[m]:
                for p in mine.keys():
                    if len(mine) <= desired[m]:
                        break
                    by_partition[p].remove(m)
                    mine.remove(p)
                    res.copy(m)[t].discard(p)
        # revokeOversharedPartitions
        for p, members in by_partition.items():
            count = len(members)
            if count > sharing:
                for m in members.keys():
                    ps = res.copy(m).get(t)
                    if ps is not None and p in ps:
                        ps.discard(p)
                        count -= 1
                        members.remove(m)
                        by_member[m].remove(p)
                    if count <= sharing:
                        break
        capacity = hash_map_capacity(len(subs))
        for p in targets:
            by_partition.setdefault(p, lambda c=capacity: JavaHashMap(int_hash, c))
        unfilled = JavaHashMap(int_hash, hash_map_capacity(n))
        for m in subs:
            mine = by_member.get(m)
            if (0 if mine is None else len(mine)) < desired[m]:
                unfilled.add(m)
        _assign_remaining(by_partition.items(), unfilled, sharing, desired, res, by_member, JavaHashMap,
                          lambda p, t=t: (t, p))
    return res


def assign(members: Mapping[str, frozenset], old_targets: Mapping[str, Mapping[bytes, frozenset]],
           topic_ids: Mapping[str, bytes], assignable: Mapping[bytes, frozenset]) -> dict[str, dict[bytes, frozenset]]:
    """The target assignment: ``members`` member id -> subscribed topic names, in the order the
    group holds its members; ``old_targets`` the current target; ``topic_ids`` name -> id of the
    existing topics; ``assignable`` topic id -> the partitions that may be assigned (initialized
    share-partitions). Returns member id -> {topic id: frozenset of partitions} (no empty sets)."""
    if not members:
        return {}
    ids = string_map_order(list(members))           # the spec's HashMap<String, _> of members
    n = len(ids)
    old = [_old_assignment(old_targets.get(m, {})) for m in ids]
    subscriptions = [_subscribed_ids(members[m], topic_ids) for m in ids]
    names = [members[m] for m in ids]
    if not any(subscriptions):
        return {m: {} for m in ids}         # Kafka's builders: nothing subscribed, nothing assigned
    if all(s == names[0] for s in names):
        res = _homogeneous(n, subscriptions[0], old, assignable)
    else:
        res = _heterogeneous(n, subscriptions, old, assignable)
    return {m: res.final(i) for i, m in enumerate(ids)}
