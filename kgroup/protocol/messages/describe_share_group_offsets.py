"""DescribeShareGroupOffsets (API key 90): versions 0-1, flexible 0+ (KIP-932; v1 adds Lag, KIP-1226).

The start offset, leader epoch and (v1) lag of a share group's share-partitions: the named topics'
partitions, or (null topics) every share-partition the group has state for.
"""
from ..schema import F, message

DescribeShareGroupOffsetsRequest = message('DescribeShareGroupOffsetsRequest', 90, '0-1', flexible='0+',
    fields=[
        F('groups', '[]DescribeShareGroupOffsetsRequestGroup', '0+', fields=[
            F('group_id', 'string', '0+'),
            F('topics', '[]DescribeShareGroupOffsetsRequestTopic', '0+', nullable='0+', fields=[
                F('topic_name', 'string', '0+'),
                F('partitions', '[]int32', '0+'),
            ]),
        ]),
])

DescribeShareGroupOffsetsResponse = message('DescribeShareGroupOffsetsResponse', 90, '0-1', flexible='0+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('groups', '[]DescribeShareGroupOffsetsResponseGroup', '0+', fields=[
            F('group_id', 'string', '0+'),
            F('topics', '[]DescribeShareGroupOffsetsResponseTopic', '0+', fields=[
                F('topic_name', 'string', '0+'),
                F('topic_id', 'uuid', '0+'),
                F('partitions', '[]DescribeShareGroupOffsetsResponsePartition', '0+', fields=[
                    F('partition_index', 'int32', '0+'),
                    F('start_offset', 'int64', '0+'),
                    F('leader_epoch', 'int32', '0+'),
                    F('lag', 'int64', '1+', default=-1),
                    F('error_code', 'int16', '0+'),
                    F('error_message', 'string', '0+', nullable='0+', default="null"),
                ]),
            ]),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+', default="null"),
        ]),
])
