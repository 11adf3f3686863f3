"""AlterPartitionReassignments (API key 45): versions 0-1, flexible 0+ (KIP-455; v1 adds
AllowReplicationFactorChange, KIP-860)."""
from ..schema import F, message

AlterPartitionReassignmentsRequest = message('AlterPartitionReassignmentsRequest', 45, '0-1', flexible='0+',
    fields=[
        F('timeout_ms', 'int32', '0+', default=60000),
        F('allow_replication_factor_change', 'bool', '1+', default=True),
        F('topics', '[]ReassignableTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]ReassignablePartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('replicas', '[]int32', '0+', nullable='0+', default="null"),
            ]),
        ]),
])

AlterPartitionReassignmentsResponse = message('AlterPartitionReassignmentsResponse', 45, '0-1', flexible='0+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('allow_replication_factor_change', 'bool', '1+', default=True),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('responses', '[]ReassignableTopicResponse', '0+', fields=[
            F('name', 'string', '0+'),
            F('partitions', '[]ReassignablePartitionResponse', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
                F('error_message', 'string', '0+', nullable='0+'),
            ]),
        ]),
])
