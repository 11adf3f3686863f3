"""CreatePartitions (API key 37): versions 0-3, flexible 2+."""
from ..schema import F, message

CreatePartitionsRequest = message('CreatePartitionsRequest', 37, '0-3', flexible='2+',
    fields=[
        F('topics', '[]CreatePartitionsTopic', '0+', fields=[
            F('name', 'string', '0+'),
            F('count', 'int32', '0+'),
            F('assignments', '[]CreatePartitionsAssignment', '0+', nullable='0+', fields=[
                F('broker_ids', '[]int32', '0+'),
            ]),
        ]),
        F('timeout_ms', 'int32', '0+'),
        F('validate_only', 'bool', '0+'),
])

CreatePartitionsResponse = message('CreatePartitionsResponse', 37, '0-3', flexible='2+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('results', '[]CreatePartitionsTopicResult', '0+', fields=[
            F('name', 'string', '0+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+', default="null"),
        ]),
])
