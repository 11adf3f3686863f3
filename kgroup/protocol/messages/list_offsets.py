"""ListOffsets (API key 2): versions 1-11 (0 removed by KIP-896), flexible 6+."""
from ..schema import F, message

ListOffsetsRequest = message('ListOffsetsRequest', 2, '1-11', flexible='6+',
    fields=[
        F('replica_id', 'int32', '0+'),
        F('isolation_level', 'int8', '2+'),
        F('topics', '[]ListOffsetsTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]ListOffsetsPartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('current_leader_epoch', 'int32', '4+', default=-1),
                F('timestamp', 'int64', '0+'),
            ]),
        ]),
        F('timeout_ms', 'int32', '10+'),
])

ListOffsetsResponse = message('ListOffsetsResponse', 2, '1-11', flexible='6+',
    fields=[
        F('throttle_time_ms', 'int32', '2+'),
        F('topics', '[]ListOffsetsTopicResponse', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]ListOffsetsPartitionResponse', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
                F('timestamp', 'int64', '1+', default=-1),
                F('offset', 'int64', '1+', default=-1),
                F('leader_epoch', 'int32', '4+', default=-1),
            ]),
        ]),
])
