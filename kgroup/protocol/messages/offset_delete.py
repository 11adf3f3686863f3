"""OffsetDelete (API key 47): versions 0, flexible none."""
from ..schema import F, message

OffsetDeleteRequest = message('OffsetDeleteRequest', 47, '0', flexible='none',
    fields=[
        F('group_id', 'string', '0+'),
        F('topics', '[]OffsetDeleteRequestTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]OffsetDeleteRequestPartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
            ]),
        ]),
])

OffsetDeleteResponse = message('OffsetDeleteResponse', 47, '0', flexible='none',
    fields=[
        F('error_code', 'int16', '0+'),
        F('throttle_time_ms', 'int32', '0+'),
        F('topics', '[]OffsetDeleteResponseTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]OffsetDeleteResponsePartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
            ]),
        ]),
])
