"""TxnOffsetCommit (API key 28): versions 0-5, flexible 3+ (v3+: KIP-447 group fencing; v5: KIP-890's
transaction version 2)."""
from ..schema import F, message

TxnOffsetCommitRequest = message('TxnOffsetCommitRequest', 28, '0-5', flexible='3+',
    fields=[
        F('transactional_id', 'string', '0+'),
        F('group_id', 'string', '0+'),
        F('producer_id', 'int64', '0+'),
        F('producer_epoch', 'int16', '0+'),
        F('generation_id', 'int32', '3+', default=-1),
        F('member_id', 'string', '3+', default=''),
        F('group_instance_id', 'string', '3+', nullable='3+', default="null"),
        F('topics', '[]TxnOffsetCommitRequestTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]TxnOffsetCommitRequestPartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('committed_offset', 'int64', '0+'),
                F('committed_leader_epoch', 'int32', '2+', default=-1),
                F('committed_metadata', 'string', '0+', nullable='0+'),
            ]),
        ]),
])

TxnOffsetCommitResponse = message('TxnOffsetCommitResponse', 28, '0-5', flexible='3+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('topics', '[]TxnOffsetCommitResponseTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]TxnOffsetCommitResponsePartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
            ]),
        ]),
])
