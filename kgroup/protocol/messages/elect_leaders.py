"""ElectLeaders (API key 43): versions 0-2, flexible 2+ (KIP-183 preferred, KIP-460 unclean)."""
from ..schema import F, message

ElectLeadersRequest = message('ElectLeadersRequest', 43, '0-2', flexible='2+',
    fields=[
        F('election_type', 'int8', '1+'),
        F('topic_partitions', '[]TopicPartitions', '0+', nullable='0+', fields=[
            F('topic', 'string', '0+'),
            F('partitions', '[]int32', '0+'),
        ]),
        F('timeout_ms', 'int32', '0+', default=60000),
])

ElectLeadersResponse = message('ElectLeadersResponse', 43, '0-2', flexible='2+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '1+'),
        F('replica_election_results', '[]ReplicaElectionResult', '0+', fields=[
            F('topic', 'string', '0+'),
            F('partition_result', '[]PartitionResult', '0+', fields=[
                F('partition_id', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
                F('error_message', 'string', '0+', nullable='0+'),
            ]),
        ]),
])
