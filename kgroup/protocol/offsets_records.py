"""Record key/value schemas Kafka writes to __consumer_offsets and __transaction_state.

A record key starts with an int16, its record type (the ``apiKey`` of Kafka's coordinator-key and
coordinator-value specs, ``API_KEY`` here). Kafka 4's specs version a key's fields from 0 and write
the type in front; the key definitions here use the type as the key's version, which puts the same
bytes on the wire (OffsetCommitKey covers types 0 and 1, Kafka's LegacyOffsetCommitKey and
OffsetCommitKey).
"""
from .schema import F, message

OffsetCommitKey = message('OffsetCommitKey', 1, '0-1', flexible='none',
    fields=[
        F('group', 'string', '0-1'),
        F('topic', 'string', '0-1'),
        F('partition', 'int32', '0-1'),
])

OffsetCommitValue = message('OffsetCommitValue', 1, '0-4', flexible='4+',
    fields=[
        F('offset', 'int64', '0+'),
        F('leader_epoch', 'int32', '3+', default=-1),
        F('metadata', 'string', '0+'),
        F('commit_timestamp', 'int64', '0+'),
        F('expire_timestamp', 'int64', '1', default=-1),
        F('topic_id', 'uuid', '4+', tag=0, tagged='4+'),
])

GroupMetadataKey = message('GroupMetadataKey', 2, '2', flexible='none',
    fields=[
        F('group', 'string', '2'),
])

GroupMetadataValue = message('GroupMetadataValue', 2, '0-4', flexible='4+',
    common=[
        ('MemberMetadata', [
            F('member_id', 'string', '0+'),
            F('group_instance_id', 'string', '3+', nullable='3+', default="null"),
            F('client_id', 'string', '0+'),
            F('client_host', 'string', '0+'),
            F('rebalance_timeout', 'int32', '1+', default=-1),
            F('session_timeout', 'int32', '0+'),
            F('subscription', 'bytes', '0+'),
            F('assignment', 'bytes', '0+'),
        ]),
    ],
    fields=[
        F('protocol_type', 'string', '0+'),
        F('generation', 'int32', '0+'),
        F('protocol', 'string', '0+', nullable='0+'),
        F('leader', 'string', '0+', nullable='0+'),
        F('current_state_timestamp', 'int64', '2+', default=-1),
        F('members', '[]MemberMetadata', '0+'),
])

TransactionLogKey = message('TransactionLogKey', 0, '0', flexible='none',
    fields=[
        F('transactional_id', 'string', '0'),
])

TransactionLogValue = message('TransactionLogValue', 0, '0-1', flexible='1+',
    fields=[
        F('producer_id', 'int64', '0+'),
        F('previous_producer_id', 'int64', '1+', tag=0, tagged='1+', default=-1),
        F('next_producer_id', 'int64', '1+', tag=1, tagged='1+', default=-1),
        F('producer_epoch', 'int16', '0+'),
        F('next_producer_epoch', 'int16', '1+', tag=3, tagged='1+', default=-1),
        F('transaction_timeout_ms', 'int32', '0+'),
        F('transaction_status', 'int8', '0+'),
        F('transaction_partitions', '[]PartitionsSchema', '0+', nullable='0+', fields=[
            F('topic', 'string', '0+'),
            F('partition_ids', '[]int32', '0+'),
        ]),
        F('transaction_last_update_timestamp_ms', 'int64', '0+'),
        F('transaction_start_timestamp_ms', 'int64', '0+'),
        F('client_transaction_version', 'int16', '1+', tag=2, tagged='1+', default=0),
])


# -- KIP-848 consumer group records (key versions 3-8 are their record types) ------------------------
# One group is several records so a change rewrites only what changed: the group epoch (3), the
# subscribed topics' metadata (4), each member's subscription (5), the target assignment's epoch (6)
# and per-member target (7), and each member's current assignment and reconciliation state (8). Kafka
# writes a group's records in the order 5/4/3 (members, metadata, epoch), then 7/6 (target), then 8,
# and tombstones them in the reverse order when a member or the group goes away.

ConsumerGroupMetadataKey = message('ConsumerGroupMetadataKey', 3, '3', flexible='none',
    fields=[
        F('group_id', 'string', '3'),
])

ConsumerGroupMetadataValue = message('ConsumerGroupMetadataValue', 3, '0', flexible='0+',
    fields=[
        F('epoch', 'int32', '0+'),
        F('metadata_hash', 'int64', '0+', tag=0, tagged='0+', default=0),
])

ConsumerGroupPartitionMetadataKey = message('ConsumerGroupPartitionMetadataKey', 4, '4', flexible='none',
    fields=[
        F('group_id', 'string', '4'),
])

ConsumerGroupPartitionMetadataValue = message('ConsumerGroupPartitionMetadataValue', 4, '0', flexible='0+',
    fields=[
        F('topics', '[]TopicMetadata', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('topic_name', 'string', '0+'),
            F('num_partitions', 'int32', '0+'),
            F('partition_metadata', '[]PartitionMetadata', '0+', fields=[
                F('partition', 'int32', '0+'),
                F('racks', '[]string', '0+'),
            ]),
        ]),
])

ConsumerGroupMemberMetadataKey = message('ConsumerGroupMemberMetadataKey', 5, '5', flexible='none',
    fields=[
        F('group_id', 'string', '5'),
        F('member_id', 'string', '5'),
])

ConsumerGroupMemberMetadataValue = message('ConsumerGroupMemberMetadataValue', 5, '0', flexible='0+',
    fields=[
        F('instance_id', 'string', '0+', nullable='0+'),
        F('rack_id', 'string', '0+', nullable='0+'),
        F('client_id', 'string', '0+'),
        F('client_host', 'string', '0+'),
        F('subscribed_topic_names', '[]string', '0+'),
        F('subscribed_topic_regex', 'string', '0+', nullable='0+'),
        F('rebalance_timeout_ms', 'int32', '0+', default=-1),
        F('server_assignor', 'string', '0+', nullable='0+'),
        # A classic-protocol member inside a consumer group (online migration) keeps its JoinGroup
        # data here; Kafka writes the tag even when null (marker 0), absent means an empty struct.
        F('classic_member_metadata', 'ClassicMemberMetadata', '0+', nullable='0+', tag=0,
          tagged='0+', fields=[
            F('session_timeout_ms', 'int32', '0+'),
            F('supported_protocols', '[]ClassicProtocol', '0+', fields=[
                F('name', 'string', '0+'),
                F('metadata', 'bytes', '0+'),
            ]),
        ]),
])

ConsumerGroupTargetAssignmentMetadataKey = message('ConsumerGroupTargetAssignmentMetadataKey', 6, '6',
                                                   flexible='none',
    fields=[
        F('group_id', 'string', '6'),
])

ConsumerGroupTargetAssignmentMetadataValue = message('ConsumerGroupTargetAssignmentMetadataValue', 6, '0',
                                                     flexible='0+',
    fields=[
        F('assignment_epoch', 'int32', '0+'),
        F('assignment_timestamp', 'int64', '0+', tag=0, tagged='0+', default=0),
])

ConsumerGroupTargetAssignmentMemberKey = message('ConsumerGroupTargetAssignmentMemberKey', 7, '7',
                                                 flexible='none',
    fields=[
        F('group_id', 'string', '7'),
        F('member_id', 'string', '7'),
])

ConsumerGroupTargetAssignmentMemberValue = message('ConsumerGroupTargetAssignmentMemberValue', 7, '0',
                                                   flexible='0+',
    fields=[
        F('topic_partitions', '[]TopicPartition', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]int32', '0+'),
        ]),
])

ConsumerGroupCurrentMemberAssignmentKey = message('ConsumerGroupCurrentMemberAssignmentKey', 8, '8',
                                                  flexible='none',
    fields=[
        F('group_id', 'string', '8'),
        F('member_id', 'string', '8'),
])

ConsumerGroupCurrentMemberAssignmentValue = message('ConsumerGroupCurrentMemberAssignmentValue', 8, '0',
                                                    flexible='0+',
    common=[
        ('TopicPartitions', [
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]int32', '0+'),
            F('assignment_epochs', '[]int32', '0+', nullable='0+', tag=0, tagged='0+', default="null"),
        ]),
    ],
    fields=[
        F('member_epoch', 'int32', '0+'),
        F('previous_member_epoch', 'int32', '0+'),
        F('state', 'int8', '0+'),
        F('assigned_partitions', '[]TopicPartitions', '0+'),
        F('partitions_pending_revocation', '[]TopicPartitions', '0+'),
])

# A consumer group's regular expression as resolved against the topics (type 16): Kafka persists
# the resolution so a coordinator that loads the group has the same topics for it.
ConsumerGroupRegularExpressionKey = message('ConsumerGroupRegularExpressionKey', 16, '16', flexible='none',
    fields=[
        F('group_id', 'string', '16'),
        F('regular_expression', 'string', '16'),
])

ConsumerGroupRegularExpressionValue = message('ConsumerGroupRegularExpressionValue', 16, '0', flexible='0+',
    fields=[
        F('topics', '[]string', '0+'),
        F('version', 'int64', '0+'),
        F('timestamp', 'int64', '0+'),
])

# The one table of record types (Kafka's CoordinatorRecordType): record type, which is also the
# version its key is read at -> (key schema, value schema). The value's own int16 prefix gives its
# version. The coordinator's decoders and ``kgroup dump-log`` read records through it.
RECORD_SCHEMAS = {
    0: (OffsetCommitKey, OffsetCommitValue),        # legacy offset commit (value version 0 only)
    1: (OffsetCommitKey, OffsetCommitValue),
    2: (GroupMetadataKey, GroupMetadataValue),
    3: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    4: (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue),
    5: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    6: (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue),
    7: (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue),
    8: (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue),
    16: (ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue),
}

CLASSIC_RECORD_TYPES = frozenset((0, 1, 2))
CONSUMER_GROUP_RECORD_TYPES = frozenset(RECORD_SCHEMAS) - CLASSIC_RECORD_TYPES     # KIP-848: 3-8, 16


# -- KIP-932 share group records (key versions 10-15 are their record types) --------------------------
# As a consumer group, a share group is several records: each member's subscription (10), the group
# epoch with the hash of its subscribed topics' metadata (11), the target assignment's epoch (12) and
# per-member target (13), each member's current assignment (14), and which share-partitions the share
# coordinator holds state for (15: initializing, initialized, deleting). Kafka 4.3's formats.

ShareGroupMemberMetadataKey = message('ShareGroupMemberMetadataKey', 10, '10', flexible='none',
    fields=[
        F('group_id', 'string', '10'),
        F('member_id', 'string', '10'),
])

ShareGroupMemberMetadataValue = message('ShareGroupMemberMetadataValue', 10, '0', flexible='0+',
    fields=[
        F('rack_id', 'string', '0+', nullable='0+'),
        F('client_id', 'string', '0+'),
        F('client_host', 'string', '0+'),
        F('subscribed_topic_names', '[]string', '0+'),
])

ShareGroupMetadataKey = message('ShareGroupMetadataKey', 11, '11', flexible='none',
    fields=[
        F('group_id', 'string', '11'),
])

ShareGroupMetadataValue = message('ShareGroupMetadataValue', 11, '0', flexible='0+',
    fields=[
        F('epoch', 'int32', '0+'),
        F('metadata_hash', 'int64', '0+'),
])

ShareGroupTargetAssignmentMetadataKey = message('ShareGroupTargetAssignmentMetadataKey', 12, '12',
                                                flexible='none',
    fields=[
        F('group_id', 'string', '12'),
])

ShareGroupTargetAssignmentMetadataValue = message('ShareGroupTargetAssignmentMetadataValue', 12, '0',
                                                  flexible='0+',
    fields=[
        F('assignment_epoch', 'int32', '0+'),
        F('assignment_timestamp', 'int64', '0+', tag=0, tagged='0+', default=0),
])

ShareGroupTargetAssignmentMemberKey = message('ShareGroupTargetAssignmentMemberKey', 13, '13', flexible='none',
    fields=[
        F('group_id', 'string', '13'),
        F('member_id', 'string', '13'),
])

ShareGroupTargetAssignmentMemberValue = message('ShareGroupTargetAssignmentMemberValue', 13, '0', flexible='0+',
    fields=[
        F('topic_partitions', '[]TopicPartition', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]int32', '0+'),
        ]),
])

ShareGroupCurrentMemberAssignmentKey = message('ShareGroupCurrentMemberAssignmentKey', 14, '14',
                                               flexible='none',
    fields=[
        F('group_id', 'string', '14'),
        F('member_id', 'string', '14'),
])

ShareGroupCurrentMemberAssignmentValue = message('ShareGroupCurrentMemberAssignmentValue', 14, '0',
                                                 flexible='0+',
    common=[
        ('TopicPartitions', [
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]int32', '0+'),
        ]),
    ],
    fields=[
        F('member_epoch', 'int32', '0+'),
        F('previous_member_epoch', 'int32', '0+'),
        F('state', 'int8', '0+'),
        F('assigned_partitions', '[]TopicPartitions', '0+'),
])

ShareGroupStatePartitionMetadataKey = message('ShareGroupStatePartitionMetadataKey', 15, '15', flexible='none',
    fields=[
        F('group_id', 'string', '15'),
])

ShareGroupStatePartitionMetadataValue = message('ShareGroupStatePartitionMetadataValue', 15, '0', flexible='0+',
    common=[
        ('TopicPartitionsInfo', [
            F('topic_id', 'uuid', '0+'),
            F('topic_name', 'string', '0+'),
            F('partitions', '[]int32', '0+'),
        ]),
        ('TopicInfo', [
            F('topic_id', 'uuid', '0+'),
            F('topic_name', 'string', '0+'),
        ]),
    ],
    fields=[
        F('initializing_topics', '[]TopicPartitionsInfo', '0+'),
        F('initialized_topics', '[]TopicPartitionsInfo', '0+'),
        F('deleting_topics', '[]TopicInfo', '0+'),
])

# record type (the key's version) -> (key schema, value schema), for the KIP-932 records; part of
# the one table of record types (RECORD_SCHEMAS)
SHARE_GROUP_RECORDS = {
    10: (ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue),
    11: (ShareGroupMetadataKey, ShareGroupMetadataValue),
    12: (ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue),
    13: (ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue),
    14: (ShareGroupCurrentMemberAssignmentKey, ShareGroupCurrentMemberAssignmentValue),
    15: (ShareGroupStatePartitionMetadataKey, ShareGroupStatePartitionMetadataValue),
}
RECORD_SCHEMAS.update(SHARE_GROUP_RECORDS)
SHARE_GROUP_RECORD_TYPES = frozenset(SHARE_GROUP_RECORDS)                       # KIP-932: 10-15


# -- __share_group_state (KIP-932's share coordinator): record types 0 (snapshot) and 1 (update) ---------
# A share-partition's state (group, topic id, partition): a snapshot is the whole state, an update the
# state batches that changed since; a snapshot tombstone deletes it.

ShareSnapshotKey = message('ShareSnapshotKey', 0, '0', flexible='none',
    fields=[
        F('group_id', 'string', '0'),
        F('topic_id', 'uuid', '0'),
        F('partition', 'int32', '0'),
])

ShareSnapshotValue = message('ShareSnapshotValue', 0, '0', flexible='0+',
    fields=[
        F('snapshot_epoch', 'int32', '0+'),
        F('state_epoch', 'int32', '0+'),
        F('leader_epoch', 'int32', '0+'),
        F('start_offset', 'int64', '0+'),
        F('delivery_complete_count', 'int32', '0+', tag=0, tagged='0+', default=-1),
        F('create_timestamp', 'int64', '0+'),
        F('write_timestamp', 'int64', '0+'),
        F('state_batches', '[]StateBatch', '0+', fields=[
            F('first_offset', 'int64', '0+'),
            F('last_offset', 'int64', '0+'),
            F('delivery_state', 'int8', '0+'),
            F('delivery_count', 'int16', '0+'),
        ]),
])

ShareUpdateKey = message('ShareUpdateKey', 1, '1', flexible='none',
    fields=[
        F('group_id', 'string', '1'),
        F('topic_id', 'uuid', '1'),
        F('partition', 'int32', '1'),
])

ShareUpdateValue = message('ShareUpdateValue', 1, '0', flexible='0+',
    fields=[
        F('snapshot_epoch', 'int32', '0+'),
        F('leader_epoch', 'int32', '0+'),
        F('start_offset', 'int64', '0+'),
        F('delivery_complete_count', 'int32', '0+', tag=0, tagged='0+', default=-1),
        F('state_batches', '[]StateBatch', '0+', fields=[
            F('first_offset', 'int64', '0+'),
            F('last_offset', 'int64', '0+'),
            F('delivery_state', 'int8', '0+'),
            F('delivery_count', 'int16', '0+'),
        ]),
])

SHARE_STATE_RECORDS = {
    0: (ShareSnapshotKey, ShareSnapshotValue),
    1: (ShareUpdateKey, ShareUpdateValue),
}
