"""Kafka's ``RangeAssignor`` ("range"), the Java client's default strategy.

Per topic, the partitions are laid out in numeric order and the subscribed members in
``MemberInfo`` order (static members by group.instance.id first, then dynamic members by
member.id).  Each member gets a contiguous range of ``n // members`` partitions and the first
``n % members`` members get one more.  With two members C0, C1 and topics t0, t1 of three
partitions each: ``C0: [t0p0, t0p1, t1p0, t1p1]`` and ``C1: [t0p2, t1p2]``.

A member's list follows the Java client's topic iteration order (``HashMap`` order of the
topic names).  Rack-aware range assignment (KIP-881) is not implemented: racks are ignored,
which is what the Java client does whenever consumers or partitions carry no rack ids.
"""
from __future__ import annotations

from typing import Mapping

from .base import AbstractPartitionAssignor, Subscription, TopicPartition, member_sort_key


class RangeAssignor(AbstractPartitionAssignor):
    name = "range"

    def assign_partitions(self, partitions_per_topic: Mapping[str, int],
                          subscriptions: Mapping[str, Subscription]
                          ) -> dict[str, list[TopicPartition]]:
        consumers_per_topic: dict[str, list[str]] = {}
        for member, subscription in subscriptions.items():
            for topic in subscription.topics:
                consumers_per_topic.setdefault(topic, []).append(member)

        assignment: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        for topic, num_partitions in partitions_per_topic.items():
            if num_partitions <= 0:
                continue
            members = consumers_per_topic.get(topic)
            if not members:
                continue
            # stable sort, then drop repeats (a topic listed twice by one member)
            ordered = sorted(members, key=lambda m: member_sort_key(
                m, subscriptions[m].group_instance_id))
            ordered = list(dict.fromkeys(ordered))
            per_member, extra = divmod(num_partitions, len(ordered))
            start = 0
            for i, member in enumerate(ordered):
                length = per_member + (1 if i < extra else 0)
                assignment[member].extend(
                    TopicPartition(topic, p) for p in range(start, start + length))
                start += length
        return assignment
