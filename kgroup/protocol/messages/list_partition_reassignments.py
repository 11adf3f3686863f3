"""ListPartitionReassignments (API key 46): version 0, flexible 0+ (KIP-455)."""
from ..schema import F, message

ListPartitionReassignmentsRequest = message('ListPartitionReassignmentsRequest', 46, '0', flexible='0+',
    fields=[
        F('timeout_ms', 'int32', '0+', default=60000),
        F('topics', '[]ListPartitionReassignmentsTopics', '0+', nullable='0+', default="null", fields=[
            F('name', 'string', '0+'),
            F('partition_indexes', '[]int32', '0+'),
        ]),
])

ListPartitionReassignmentsResponse = message('ListPartitionReassignmentsResponse', 46, '0', flexible='0+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('topics', '[]OngoingTopicReassignment', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]OngoingPartitionReassignment', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('replicas', '[]int32', '0+'),
                F('adding_replicas', '[]int32', '0+'),
                F('removing_replicas', '[]int32', '0+'),
            ]),
        ]),
])
