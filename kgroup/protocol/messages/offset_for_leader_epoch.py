"""OffsetForLeaderEpoch (API key 23): versions 2-4, flexible 4+ (KIP-101/KIP-320: the end offset of a
leader epoch)."""
from ..schema import F, message

OffsetForLeaderEpochRequest = message('OffsetForLeaderEpochRequest', 23, '2-4', flexible='4+',
    fields=[
        F('replica_id', 'int32', '3+', default=-2),
        F('topics', '[]OffsetForLeaderTopic', '0+', fields=[
            F('topic', 'string', '0+'),
            F('partitions', '[]OffsetForLeaderPartition', '0+', fields=[
                F('partition', 'int32', '0+'),
                F('current_leader_epoch', 'int32', '2+', default=-1),
                F('leader_epoch', 'int32', '0+'),
            ]),
        ]),
])

OffsetForLeaderEpochResponse = message('OffsetForLeaderEpochResponse', 23, '2-4', flexible='4+',
    fields=[
        F('throttle_time_ms', 'int32', '2+'),
        F('topics', '[]OffsetForLeaderTopicResult', '0+', fields=[
            F('topic', 'string', '0+'),
            F('partitions', '[]EpochEndOffset', '0+', fields=[
                F('error_code', 'int16', '0+'),
                F('partition', 'int32', '0+'),
                F('leader_epoch', 'int32', '1+', default=-1),
                F('end_offset', 'int64', '0+', default=-1),
            ]),
        ]),
])
