"""KIP-848 ``__consumer_offsets`` records (types 3-8, 16): builders, tombstones and the loader's decoder.

Kafka writes a consumer group as several records so a change rewrites only what changed (its
GroupCoordinatorRecordHelpers): per member its subscription (5) and its current assignment with
epochs and state (8); per group its epoch (3), the subscribed topics' metadata (4), the target
assignment's epoch (6) and per-member target (7), and per subscribed regex its resolution (16).
Values are version 0. Builders return the same ``CoordinatorRecord`` as the classic records
(bytes to append plus the decoded structs for live replay).
"""
from __future__ import annotations

from typing import Mapping

from ...protocol import offsets_records as R
from ..coordinator_records import CoordinatorRecord, UnknownRecordType, decode_structs, read_version
from ..topic_metadata import TopicMetadata
from .member import Assignment, ConsumerGroupMember

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
RECORD_TYPES = R.CONSUMER_GROUP_RECORD_TYPES


def _record(record_type: int, key, value) -> CoordinatorRecord:
    return CoordinatorRecord(key.to_versioned_bytes(record_type),
                  None if value is None else value.to_versioned_bytes(0), record_type, key, value)


def _topic_partitions(cls, assignment: Assignment) -> list:
    # sorted, so equal assignments always give equal bytes
    return [cls(topic_id=t, partitions=sorted(p)) for t, p in sorted(assignment.items())]


def group_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return _record(GROUP_METADATA, R.ConsumerGroupMetadataKey(group_id=group_id),
                   R.ConsumerGroupMetadataValue(epoch=epoch))


def group_epoch_tombstone(group_id: str) -> CoordinatorRecord:
    return _record(GROUP_METADATA, R.ConsumerGroupMetadataKey(group_id=group_id), None)


def subscription_metadata_record(group_id: str, topics: Mapping[str, TopicMetadata]) -> CoordinatorRecord:
    V = R.ConsumerGroupPartitionMetadataValue
    P = V.TopicMetadata.PartitionMetadata
    value = V(topics=[V.TopicMetadata(topic_id=t.topic_id, topic_name=t.name, num_partitions=t.num_partitions,
                                      partition_metadata=[P(partition=p, racks=list(r)) for p, r in t.racks])
                      for _, t in sorted(topics.items())])
    return _record(PARTITION_METADATA, R.ConsumerGroupPartitionMetadataKey(group_id=group_id), value)


def subscription_metadata_tombstone(group_id: str) -> CoordinatorRecord:
    return _record(PARTITION_METADATA, R.ConsumerGroupPartitionMetadataKey(group_id=group_id), None)


def member_subscription_record(group_id: str, m: ConsumerGroupMember) -> CoordinatorRecord:
    V = R.ConsumerGroupMemberMetadataValue
    classic = None
    if m.classic_member_metadata is not None:
        session_timeout_ms, protocols = m.classic_member_metadata
        classic = V.ClassicMemberMetadata(session_timeout_ms=session_timeout_ms, supported_protocols=[
            V.ClassicMemberMetadata.ClassicProtocol(name=n, metadata=md) for n, md in protocols])
    value = V(instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
              subscribed_topic_names=sorted(m.subscribed_topic_names),
              subscribed_topic_regex=m.subscribed_topic_regex, rebalance_timeout_ms=m.rebalance_timeout_ms,
              server_assignor=m.server_assignor_name, classic_member_metadata=classic)
    return _record(MEMBER_METADATA, R.ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=m.member_id),
                   value)


def member_subscription_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return _record(MEMBER_METADATA, R.ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member_id),
                   None)


def target_assignment_epoch_record(group_id: str, assignment_epoch: int) -> CoordinatorRecord:
    return _record(TARGET_ASSIGNMENT_METADATA, R.ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id),
                   R.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=assignment_epoch))


def target_assignment_epoch_tombstone(group_id: str) -> CoordinatorRecord:
    return _record(TARGET_ASSIGNMENT_METADATA, R.ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id),
                   None)


def target_assignment_record(group_id: str, member_id: str, assignment: Assignment) -> CoordinatorRecord:
    V = R.ConsumerGroupTargetAssignmentMemberValue
    return _record(TARGET_ASSIGNMENT_MEMBER,
                   R.ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id),
                   V(topic_partitions=_topic_partitions(V.TopicPartition, assignment)))


def target_assignment_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return _record(TARGET_ASSIGNMENT_MEMBER,
                   R.ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None)


def _topic_partitions_with_epochs(cls, assignment: Assignment, m: ConsumerGroupMember) -> list:
    """Kafka's assignmentToTopicPartitions: per topic its partitions and, in the same order, the
    epoch each was assigned at."""
    out = []
    for t, p in sorted(assignment.items()):
        parts = sorted(p)
        out.append(cls(topic_id=t, partitions=parts, assignment_epochs=[m.assignment_epoch(t, x) for x in parts]))
    return out


def current_assignment_record(group_id: str, m: ConsumerGroupMember) -> CoordinatorRecord:
    V = R.ConsumerGroupCurrentMemberAssignmentValue
    value = V(member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=int(m.state),
              assigned_partitions=_topic_partitions_with_epochs(V.TopicPartitions, m.assigned_partitions, m),
              partitions_pending_revocation=_topic_partitions_with_epochs(V.TopicPartitions,
                                                                          m.partitions_pending_revocation, m))
    return _record(CURRENT_MEMBER_ASSIGNMENT,
                   R.ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=m.member_id), value)


def current_assignment_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return _record(CURRENT_MEMBER_ASSIGNMENT,
                   R.ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None)


def regular_expression_record(group_id: str, regex: str, resolved) -> CoordinatorRecord:
    """``resolved``: a group.ResolvedRegex (topics, version, timestamp); topics sorted, as Kafka."""
    return _record(REGULAR_EXPRESSION, R.ConsumerGroupRegularExpressionKey(group_id=group_id, regular_expression=regex),
                   R.ConsumerGroupRegularExpressionValue(topics=sorted(resolved.topics), version=resolved.version,
                                                         timestamp=resolved.timestamp))


def regular_expression_tombstone(group_id: str, regex: str) -> CoordinatorRecord:
    return _record(REGULAR_EXPRESSION,
                   R.ConsumerGroupRegularExpressionKey(group_id=group_id, regular_expression=regex), None)


def decode_record(key, value) -> CoordinatorRecord:
    """Decode a KIP-848 record (the classic decoder hands types 3-8 and 16 here). UnknownRecordType for any
    other type; RecordDecodeError for bytes that do not decode (the load must fail)."""
    record_type = read_version(key, "key")
    if record_type not in RECORD_TYPES:
        raise UnknownRecordType(record_type)
    return decode_structs(record_type, key, value)
