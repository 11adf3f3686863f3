"""Kafka's ``RoundRobinAssignor`` ("roundrobin").

All partitions of all subscribed topics, sorted by topic then partition, are dealt to the
members in ``MemberInfo`` order (static members by group.instance.id, then dynamic ones by
member.id) with a circular iterator that skips members not subscribed to the partition's
topic.  With equal subscriptions the counts differ by at most one; with unequal ones the
result can be unbalanced: C0 on t0, C1 on t0+t1, C2 on t0+t1+t2 (1, 2 and 3 partitions) gives
``C0: [t0p0]``, ``C1: [t1p0]``, ``C2: [t1p1, t2p0, t2p1, t2p2]``.
"""
from __future__ import annotations

from typing import Mapping

from kgroup.java_compat import string_sort_key

from .base import AbstractPartitionAssignor, Subscription, TopicPartition, member_sort_key


class RoundRobinAssignor(AbstractPartitionAssignor):
    name = "roundrobin"

    def assign_partitions(self, partitions_per_topic: Mapping[str, int],
                          subscriptions: Mapping[str, Subscription]
                          ) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        if not subscriptions:
            return assignment
        members = sorted(subscriptions, key=lambda m: member_sort_key(
            m, subscriptions[m].group_instance_id))
        topic_sets = [frozenset(subscriptions[m].topics) for m in members]
        lists = [assignment[m] for m in members]
        all_topics = sorted({t for s in subscriptions.values() for t in s.topics},
                            key=string_sort_key)

        n = len(members)
        i = 0  # the circular iterator's next member
        for topic in all_topics:
            count = partitions_per_topic.get(topic)
            if count is None:
                continue
            for p in range(count):
                while topic not in topic_sets[i]:
                    i = (i + 1) % n
                lists[i].append(TopicPartition(topic, p))
                i = (i + 1) % n
        return assignment
