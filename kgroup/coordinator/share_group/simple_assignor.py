"""The ``simple`` share group assignor (Kafka's SimpleAssignor with its homogeneous and
heterogeneous builders). Pure.

Unlike a consumer group's assignors, a partition may go to several members: each assignable
partition is shared by ``desired sharing`` = ceil(members / partitions) members, and each member
gets its share of the partitions (member i of n gets ceil(p·(i+1)) - ceil(p·i), with
p = sharing·partitions/n), so counts differ by at most one. The previous target is kept where
it fits (stickiness): partitions of unsubscribed or unassignable topics are dropped, members over
their count give up partitions, partitions over-shared lose members, then the partitions still
short of their sharing go round-robin to the members short of their count. When members subscribe
to different topics (heterogeneous), the same is done topic by topic among that topic's subscribers.

Kafka iterates Java hash maps; this walks members in the given order and partitions sorted, so the
choice among equally good assignments can differ from Kafka's, never the counts.
"""
from __future__ import annotations

import math
from typing import Mapping

NAME = "simple"


def _share(member_ids: list, old: Mapping[str, set], targets: list) -> dict[str, set]:
    """One builder run: ``old`` member -> set of (topic id, partition) it had; ``targets`` the
    assignable (topic id, partition)s, sorted. Returns member -> its new set."""
    n, p = len(member_ids), len(targets)
    if n == 0:
        return {}
    if p == 0:
        return {m: set() for m in member_ids}
    sharing = (n + p - 1) // p
    precise = sharing * p / n
    desired = {m: math.ceil(precise * (i + 1)) - math.ceil(precise * i) for i, m in enumerate(member_ids)}
    target_set = set(targets)
    owners: dict = {tp: [] for tp in targets}
    new: dict[str, list] = {}
    for m in member_ids:
        kept = sorted(tp for tp in old.get(m, ()) if tp in target_set)
        # over its count: give up the partitions past it (revokeOverfilledMembers)
        kept = kept[:desired[m]]
        new[m] = kept
        for tp in kept:
            owners[tp].append(m)
    # over-shared partitions lose members (revokeOversharedPartitions)
    for tp in targets:
        while len(owners[tp]) > sharing:
            m = owners[tp].pop(0)
            new[m].remove(tp)
    unfilled = [m for m in member_ids if len(new[m]) < desired[m]]
    have = {m: set(new[m]) for m in member_ids}
    pos = 0
    for tp in targets:               # assignRemainingPartitions
        if not unfilled:
            break
        need = sharing - len(owners[tp])
        while need > 0 and unfilled:
            for k in range(len(unfilled)):
                idx = (pos + k) % len(unfilled)
                m = unfilled[idx]
                if tp not in have[m]:
                    break
            else:
                break                # every short member has it already
            have[m].add(tp)
            owners[tp].append(m)
            need -= 1
            if len(have[m]) >= desired[m]:
                unfilled.pop(idx)
                pos = idx if unfilled else 0
            else:
                pos = idx + 1
            if unfilled:
                pos %= len(unfilled)
    return have


def assign(members: Mapping[str, frozenset], old_targets: Mapping[str, Mapping[bytes, frozenset]],
           topic_ids: Mapping[str, bytes], assignable: Mapping[bytes, frozenset]) -> dict[str, dict[bytes, frozenset]]:
    """The target assignment: ``members`` member id -> subscribed topic names (in member order);
    ``old_targets`` the current target; ``topic_ids`` name -> id of the existing topics;
    ``assignable`` topic id -> the partitions that may be assigned (initialized share-partitions).
    Returns member id -> {topic id: frozenset of partitions} (no empty sets)."""
    if not members:
        return {}
    ids = list(members)
    old = {m: {(t, p) for t, ps in old_targets.get(m, {}).items() for p in ps} for m in ids}

    def targets_of(names) -> list:
        return sorted((topic_ids[n], p) for n in names if n in topic_ids
                      for p in assignable.get(topic_ids[n], ()))
    subscriptions = list(members.values())
    if all(s == subscriptions[0] for s in subscriptions):
        result = _share(ids, old, targets_of(subscriptions[0]))
    else:
        result = {m: set() for m in ids}
        for name in sorted(set().union(*subscriptions)):
            if name not in topic_ids:
                continue
            tid = topic_ids[name]
            subscribers = [m for m in ids if name in members[m]]
            per_topic = _share(subscribers, {m: {tp for tp in old[m] if tp[0] == tid} for m in subscribers},
                               targets_of((name,)))
            for m, tps in per_topic.items():
                result[m] |= tps
    out: dict[str, dict[bytes, frozenset]] = {}
    for m in ids:
        by_topic: dict = {}
        for t, p in result[m]:
            by_topic.setdefault(t, set()).add(p)
        out[m] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out
