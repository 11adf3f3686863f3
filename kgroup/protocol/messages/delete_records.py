"""DeleteRecords (API key 21): versions 0-2, flexible 2+."""
from ..schema import F, message

DeleteRecordsRequest = message('DeleteRecordsRequest', 21, '0-2', flexible='2+',
    fields=[
        F('topics', '[]DeleteRecordsTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]DeleteRecordsPartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('offset', 'int64', '0+'),
            ]),
        ]),
        F('timeout_ms', 'int32', '0+'),
])

DeleteRecordsResponse = message('DeleteRecordsResponse', 21, '0-2', flexible='2+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('topics', '[]DeleteRecordsTopicResult', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]DeleteRecordsPartitionResult', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('low_watermark', 'int64', '0+'),
                F('error_code', 'int16', '0+'),
            ]),
        ]),
])
