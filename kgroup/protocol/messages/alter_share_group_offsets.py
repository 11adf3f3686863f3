"""AlterShareGroupOffsets (API key 91): version 0, flexible 0+ (KIP-932).

Sets the start offset of an empty share group's share-partitions (the share coordinator
initializes their state at that offset).
"""
from ..schema import F, message

AlterShareGroupOffsetsRequest = message('AlterShareGroupOffsetsRequest', 91, '0', flexible='0+',
    fields=[
        F('group_id', 'string', '0+'),
        F('topics', '[]AlterShareGroupOffsetsRequestTopic', '0+', fields=[
            F('topic_name', 'string', '0+'),
            F('partitions', '[]AlterShareGroupOffsetsRequestPartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('start_offset', 'int64', '0+'),
            ]),
        ]),
])

AlterShareGroupOffsetsResponse = message('AlterShareGroupOffsetsResponse', 91, '0', flexible='0+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+', default="null"),
        F('responses', '[]AlterShareGroupOffsetsResponseTopic', '0+', fields=[
            F('topic_name', 'string', '0+'),
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]AlterShareGroupOffsetsResponsePartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
                F('error_message', 'string', '0+', nullable='0+', default="null"),
            ]),
        ]),
])
