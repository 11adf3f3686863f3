"""Metadata (API key 3): versions 0-13, flexible 9+ (v13: a top-level error code)."""
from ..schema import F, message

MetadataRequest = message('MetadataRequest', 3, '0-13', flexible='9+',
    fields=[
        F('topics', '[]MetadataRequestTopic', '0+', nullable='1+', fields=[
            F('topic_id', 'uuid', '10+'),
            F('name', 'string', '0+', nullable='10+'),
        ]),
        F('allow_auto_topic_creation', 'bool', '4+', default=True),
        F('include_cluster_authorized_operations', 'bool', '8-10'),
        F('include_topic_authorized_operations', 'bool', '8+'),
])

MetadataResponse = message('MetadataResponse', 3, '0-13', flexible='9+',
    fields=[
        F('throttle_time_ms', 'int32', '3+'),
        F('brokers', '[]MetadataResponseBroker', '0+', fields=[
            F('node_id', 'int32', '0+'),
            F('host', 'string', '0+'),
            F('port', 'int32', '0+'),
            F('rack', 'string', '1+', nullable='1+', default="null"),
        ]),
        F('cluster_id', 'string', '2+', nullable='2+', default="null"),
        F('controller_id', 'int32', '1+', default=-1),
        F('topics', '[]MetadataResponseTopic', '0+', fields=[
            F('error_code', 'int16', '0+'),
            F('name', 'string', '0+', nullable='12+'),
            F('topic_id', 'uuid', '10+'),
            F('is_internal', 'bool', '1+', default=False),
            F('partitions', '[]MetadataResponsePartition', '0+', fields=[
                F('error_code', 'int16', '0+'),
                F('partition_index', 'int32', '0+'),
                F('leader_id', 'int32', '0+'),
                F('leader_epoch', 'int32', '7+', default=-1),
                F('replica_nodes', '[]int32', '0+'),
                F('isr_nodes', '[]int32', '0+'),
                F('offline_replicas', '[]int32', '5+'),
            ]),
            F('topic_authorized_operations', 'int32', '8+', default=-2147483648),
        ]),
        F('cluster_authorized_operations', 'int32', '8-10', default=-2147483648),
        F('error_code', 'int16', '13+'),
])
