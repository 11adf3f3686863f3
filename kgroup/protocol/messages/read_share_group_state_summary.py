"""ReadShareGroupStateSummary (API key 87): versions 0-1, flexible 0+ (KIP-932, broker to share
coordinator).

What DescribeShareGroupOffsets needs of a share-partition: its start offset and epochs, and (v1)
how many of its records are delivered completely (for the lag).
"""
from ..schema import F, message

ReadShareGroupStateSummaryRequest = message('ReadShareGroupStateSummaryRequest', 87, '0-1', flexible='0+',
    fields=[
        F('group_id', 'string', '0+'),
        F('topics', '[]ReadStateSummaryData', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]PartitionData', '0+', fields=[
                F('partition', 'int32', '0+'),
                F('leader_epoch', 'int32', '0+'),
            ]),
        ]),
])

ReadShareGroupStateSummaryResponse = message('ReadShareGroupStateSummaryResponse', 87, '0-1', flexible='0+',
    fields=[
        F('results', '[]ReadStateSummaryResult', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]PartitionResult', '0+', fields=[
                F('partition', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
                F('error_message', 'string', '0+', nullable='0+', default="null"),
                F('state_epoch', 'int32', '0+'),
                F('leader_epoch', 'int32', '0+'),
                F('start_offset', 'int64', '0+'),
                F('delivery_complete_count', 'int32', '1+', default=-1),
            ]),
        ]),
])
