"""KIP-932 ``__consumer_offsets`` records (types 10-15): builders, tombstones and the loader's decoder.

Kafka's GroupCoordinatorRecordHelpers for share groups: per member its subscription (10) and its
current assignment with epochs (14); per group its epoch with the metadata hash of its subscribed
topics (11), the target assignment's epoch and time (12) and per-member target (13), and which of
its share-partitions the share coordinator holds state for (15). Values are version 0.
"""
from __future__ import annotations

from typing import Mapping

from ...protocol import offsets_records as R
from ..coordinator_records import CoordinatorRecord, UnknownRecordType, decode_structs, read_version
from .member import Assignment, ShareGroupMember

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
RECORD_TYPES = R.SHARE_GROUP_RECORD_TYPES


def _record(record_type: int, key, value) -> CoordinatorRecord:
    return CoordinatorRecord(key.to_versioned_bytes(record_type),
                             None if value is None else value.to_versioned_bytes(0), record_type, key, value)


def _topic_partitions(cls, assignment: Assignment) -> list:
    return [cls(topic_id=t, partitions=sorted(p)) for t, p in sorted(assignment.items())]


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> CoordinatorRecord:
    return _record(GROUP_METADATA, R.ShareGroupMetadataKey(group_id=group_id),
                   R.ShareGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash))


def group_epoch_tombstone(group_id: str) -> CoordinatorRecord:
    return _record(GROUP_METADATA, R.ShareGroupMetadataKey(group_id=group_id), None)


def member_subscription_record(group_id: str, m: ShareGroupMember) -> CoordinatorRecord:
    return _record(MEMBER_METADATA, R.ShareGroupMemberMetadataKey(group_id=group_id, member_id=m.member_id),
                   R.ShareGroupMemberMetadataValue(rack_id=m.rack_id, client_id=m.client_id,
                                                   client_host=m.client_host,
                                                   subscribed_topic_names=sorted(m.subscribed_topic_names)))


def member_subscription_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return _record(MEMBER_METADATA, R.ShareGroupMemberMetadataKey(group_id=group_id, member_id=member_id), None)


def target_assignment_epoch_record(group_id: str, assignment_epoch: int, timestamp: int) -> CoordinatorRecord:
    return _record(TARGET_ASSIGNMENT_METADATA, R.ShareGroupTargetAssignmentMetadataKey(group_id=group_id),
                   R.ShareGroupTargetAssignmentMetadataValue(assignment_epoch=assignment_epoch,
                                                             assignment_timestamp=timestamp))


def target_assignment_epoch_tombstone(group_id: str) -> CoordinatorRecord:
    return _record(TARGET_ASSIGNMENT_METADATA, R.ShareGroupTargetAssignmentMetadataKey(group_id=group_id), None)


def target_assignment_record(group_id: str, member_id: str, assignment: Assignment) -> CoordinatorRecord:
    V = R.ShareGroupTargetAssignmentMemberValue
    return _record(TARGET_ASSIGNMENT_MEMBER,
                   R.ShareGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id),
                   V(topic_partitions=_topic_partitions(V.TopicPartition, assignment)))


def target_assignment_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return _record(TARGET_ASSIGNMENT_MEMBER,
                   R.ShareGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None)


def current_assignment_record(group_id: str, m: ShareGroupMember) -> CoordinatorRecord:
    V = R.ShareGroupCurrentMemberAssignmentValue
    return _record(CURRENT_MEMBER_ASSIGNMENT,
                   R.ShareGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=m.member_id),
                   V(member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=int(m.state),
                     assigned_partitions=_topic_partitions(V.TopicPartitions, m.assigned_partitions)))


def current_assignment_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return _record(CURRENT_MEMBER_ASSIGNMENT,
                   R.ShareGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None)


def state_partition_metadata_record(group_id: str, initializing: Mapping, initialized: Mapping,
                                    deleting: Mapping[bytes, str]) -> CoordinatorRecord:
    """``initializing``/``initialized``: topic id -> InitMapValue (name, partitions, timestamp);
    ``deleting``: topic id -> name. Sorted, so equal states give equal bytes."""
    V = R.ShareGroupStatePartitionMetadataValue

    def infos(m):
        return [V.TopicPartitionsInfo(topic_id=t, topic_name=v.name, partitions=sorted(v.partitions))
                for t, v in sorted(m.items())]
    return _record(STATE_PARTITION_METADATA, R.ShareGroupStatePartitionMetadataKey(group_id=group_id),
                   V(initializing_topics=infos(initializing), initialized_topics=infos(initialized),
                     deleting_topics=[V.TopicInfo(topic_id=t, topic_name=n) for t, n in sorted(deleting.items())]))


def state_partition_metadata_tombstone(group_id: str) -> CoordinatorRecord:
    return _record(STATE_PARTITION_METADATA, R.ShareGroupStatePartitionMetadataKey(group_id=group_id), None)


def decode_record(key, value) -> CoordinatorRecord:
    """Decode a KIP-932 record (types 10-15); UnknownRecordType for any other type."""
    record_type = read_version(key, "key")
    if record_type not in RECORD_TYPES:
        raise UnknownRecordType(record_type)
    return decode_structs(record_type, key, value)
