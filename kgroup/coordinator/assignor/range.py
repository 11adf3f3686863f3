"""The ``range`` server-side assignor (Kafka 4.0's RangeAssignor for the consumer protocol).

Members are sorted static members first (by instance id), then the others (by member id); each
subscribed topic is cut into contiguous ranges, ``partitions // subscribers`` each, one more for
the first ``partitions % subscribers``, handed out in that order. When every member subscribes to
the same topics and they have the same partition count, member i gets the same partition numbers
of every topic (co-partitioning, for joins). Stickiness comes from instance ids: a restarted
static member sorts where it did, so it gets its ranges back; the current assignment is not
consulted (as in Kafka).
"""
from __future__ import annotations

from ...java_compat import string_sort_key
from .spec import GroupAssignment, GroupSpec, PartitionAssignorError, SubscriptionType

NAME = "range"


def _sorted_member_ids(group: GroupSpec) -> list[str]:
    members = group.members
    static = sorted((string_sort_key(m.instance_id), string_sort_key(mid), mid)
                    for mid, m in members.items() if m.instance_id is not None)
    dynamic = [mid for mid, m in members.items() if m.instance_id is None]
    return [mid for _, _, mid in static] + sorted(dynamic, key=string_sort_key)


def assign(group: GroupSpec, topic_partitions: dict[bytes, int]) -> GroupAssignment:
    if not group.members:
        return {}
    member_ids = _sorted_member_ids(group)
    members = group.members
    # topic id -> [partition count, subscriber count, minimum quota, extra partitions left, next start]
    topics: dict[bytes, list[int]] = {}
    if group.subscription_type is SubscriptionType.HOMOGENEOUS:
        for topic_id in members[member_ids[0]].subscribed_topic_ids:
            topics[topic_id] = [_count(topic_partitions, topic_id), len(member_ids), 0, 0, 0]
    else:
        for mid in member_ids:
            for topic_id in members[mid].subscribed_topic_ids:
                t = topics.get(topic_id)
                if t is None:
                    topics[topic_id] = [_count(topic_partitions, topic_id), 1, 0, 0, 0]
                else:
                    t[1] += 1
    for t in topics.values():
        t[2], t[3] = divmod(t[0], t[1])
    out: GroupAssignment = {}
    homogeneous = group.subscription_type is SubscriptionType.HOMOGENEOUS
    for mid in member_ids:
        assignment: dict[bytes, list[int]] = {}
        for topic_id in (topics if homogeneous else members[mid].subscribed_topic_ids):
            t = topics[topic_id]
            quota = t[2]
            if t[3] > 0:
                quota += 1
                t[3] -= 1
            start = t[4]
            end = min(start + quota, t[0])
            t[4] = end
            if start < end:
                assignment[topic_id] = list(range(start, end))
        out[mid] = assignment
    return out


def _count(topic_partitions: dict[bytes, int], topic_id: bytes) -> int:
    n = topic_partitions.get(topic_id, -1)
    if n == -1:
        raise PartitionAssignorError("Member is subscribed to a non-existent topic")
    return n
