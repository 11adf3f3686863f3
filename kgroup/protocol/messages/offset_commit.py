"""OffsetCommit (API key 8): versions 2-10 (0-1 removed by KIP-896; v10 names topics by id), flexible 8+."""
from ..schema import F, message

OffsetCommitRequest = message('OffsetCommitRequest', 8, '2-10', flexible='8+',
    fields=[
        F('group_id', 'string', '0+'),
        F('generation_id_or_member_epoch', 'int32', '1+', default=-1),
        F('member_id', 'string', '1+'),
        F('group_instance_id', 'string', '7+', nullable='7+', default="null"),
        F('retention_time_ms', 'int64', '2-4', default=-1),
        F('topics', '[]OffsetCommitRequestTopic', '0+', fields=[
            F('name', 'string', '0-9'),
            F('topic_id', 'uuid', '10+'),
            F('partitions', '[]OffsetCommitRequestPartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('committed_offset', 'int64', '0+'),
                F('committed_leader_epoch', 'int32', '6+', default=-1),
                F('committed_metadata', 'string', '0+', nullable='0+'),
            ]),
        ]),
])

OffsetCommitResponse = message('OffsetCommitResponse', 8, '2-10', flexible='8+',
    fields=[
        F('throttle_time_ms', 'int32', '3+'),
        F('topics', '[]OffsetCommitResponseTopic', '0+', fields=[
            F('name', 'string', '0-9'),
            F('topic_id', 'uuid', '10+'),
            F('partitions', '[]OffsetCommitResponsePartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
            ]),
        ]),
])
