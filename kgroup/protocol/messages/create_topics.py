"""CreateTopics (API key 19): versions 2-7 (0-1 removed by KIP-896), flexible 5+."""
from ..schema import F, message

CreateTopicsRequest = message('CreateTopicsRequest', 19, '2-7', flexible='5+',
    fields=[
        F('topics', '[]CreatableTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('num_partitions', 'int32', '0+'),
            F('replication_factor', 'int16', '0+'),
            F('assignments', '[]CreatableReplicaAssignment', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('broker_ids', '[]int32', '0+'),
            ]),
            F('configs', '[]CreatableTopicConfig', '0+', fields=[
                F('name', 'string', '0+'),
                F('value', 'string', '0+', nullable='0+'),
            ]),
        ]),
        F('timeout_ms', 'int32', '0+', default=60000),
        F('validate_only', 'bool', '1+', default=False),
])

CreateTopicsResponse = message('CreateTopicsResponse', 19, '2-7', flexible='5+',
    fields=[
        F('throttle_time_ms', 'int32', '2+'),
        F('topics', '[]CreatableTopicResult', '0+', fields=[
            F('name', 'string', '0+'),
            F('topic_id', 'uuid', '7+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '1+', nullable='0+'),
            F('topic_config_error_code', 'int16', '5+', tag=0, tagged='5+'),
            F('num_partitions', 'int32', '5+', default=-1),
            F('replication_factor', 'int16', '5+', default=-1),
            F('configs', '[]CreatableTopicConfigs', '5+', nullable='5+', fields=[
                F('name', 'string', '5+'),
                F('value', 'string', '5+', nullable='5+'),
                F('read_only', 'bool', '5+'),
                F('config_source', 'int8', '5+', default=-1),
                F('is_sensitive', 'bool', '5+'),
            ]),
        ]),
])
