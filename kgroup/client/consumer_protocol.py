"""The "consumer" embedded protocol: subscription and assignment bytes, as Java's ``ConsumerProtocol``.

JoinGroup carries one ``ConsumerProtocolSubscription`` per assignor (``protocols[].metadata``) and
SyncGroup carries one ``ConsumerProtocolAssignment`` per member. On the wire each is an int16
version followed by the struct at that version (``MessageUtil.toVersionPrefixedByteBuffer``).

Java always serializes at the highest version it knows (3): topics sorted, owned partitions
sorted by (topic, partition) and grouped per topic, generation id (-1 if none), rack id (null if
none). Assignments keep the assignor's order, grouping partitions under the first occurrence of
their topic. A newer version is parsed with the layout of the newest version we know (versions
only ever append fields), an older one with its own layout.
"""
from __future__ import annotations

from kgroup.protocol.consumer_protocol import (HIGHEST_VERSION, ConsumerProtocolAssignment,
                                               ConsumerProtocolSubscription, check_version)
from kgroup.protocol.consumer_protocol import decode_assignment as decode_assignment_message
from kgroup.protocol.consumer_protocol import decode_subscription as decode_subscription_message

from .assignors import Assignment, Subscription, TopicPartition

PROTOCOL_TYPE = "consumer"


def encode_subscription(subscription: Subscription, version: int = HIGHEST_VERSION) -> bytes:
    """``ConsumerProtocol.serializeSubscription``."""
    version = check_version(version)
    data = ConsumerProtocolSubscription(
        topics=sorted(subscription.topics),
        user_data=subscription.user_data,
        generation_id=subscription.generation_id if subscription.generation_id is not None else -1,
        rack_id=subscription.rack_id or None,
    )
    current = None
    for tp in sorted(subscription.owned_partitions):
        if current is None or current.topic != tp.topic:
            current = ConsumerProtocolSubscription.TopicPartition(topic=tp.topic, partitions=[])
            data.owned_partitions.append(current)
        current.partitions.append(tp.partition)
    return data.to_versioned_bytes(version)


def decode_subscription(buf, group_instance_id: str | None = None) -> Subscription:
    """``ConsumerProtocol.deserializeSubscription`` (an empty rack id reads as none)."""
    data = decode_subscription_message(buf)
    owned = [TopicPartition(t.topic, p) for t in data.owned_partitions for p in t.partitions]
    user_data = None if data.user_data is None else bytes(data.user_data)
    return Subscription(list(data.topics), user_data, owned, data.generation_id,
                        data.rack_id or None, group_instance_id)


def encode_assignment(assignment: Assignment, version: int = HIGHEST_VERSION) -> bytes:
    """``ConsumerProtocol.serializeAssignment``."""
    version = check_version(version)
    data = ConsumerProtocolAssignment(user_data=assignment.user_data)
    by_topic: dict[str, object] = {}
    for tp in assignment.partitions:
        entry = by_topic.get(tp.topic)
        if entry is None:
            entry = ConsumerProtocolAssignment.TopicPartition(topic=tp.topic, partitions=[])
            by_topic[tp.topic] = entry
            data.assigned_partitions.append(entry)
        entry.partitions.append(tp.partition)
    return data.to_versioned_bytes(version)


def decode_assignment(buf) -> Assignment:
    """``ConsumerProtocol.deserializeAssignment``."""
    data = decode_assignment_message(buf)
    parts = [TopicPartition(t.topic, p) for t in data.assigned_partitions for p in t.partitions]
    return Assignment(parts, None if data.user_data is None else bytes(data.user_data))
