"""DeleteTopics (API key 20): versions 1-6 (0 removed by KIP-896), flexible 4+."""
from ..schema import F, message

DeleteTopicsRequest = message('DeleteTopicsRequest', 20, '1-6', flexible='4+',
    fields=[
        F('topics', '[]DeleteTopicState', '6+', fields=[
            F('name', 'string', '6+', nullable='6+', default="null"),
            F('topic_id', 'uuid', '6+'),
        ]),
        F('topic_names', '[]string', '0-5'),
        F('timeout_ms', 'int32', '0+'),
])

DeleteTopicsResponse = message('DeleteTopicsResponse', 20, '1-6', flexible='4+',
    fields=[
        F('throttle_time_ms', 'int32', '1+'),
        F('responses', '[]DeletableTopicResult', '0+', fields=[
            F('name', 'string', '0+', nullable='6+'),
            F('topic_id', 'uuid', '6+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '5+', nullable='5+', default="null"),
        ]),
])
