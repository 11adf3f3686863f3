"""DeleteShareGroupOffsets (API key 92): version 0, flexible 0+ (KIP-932).

Deletes an empty share group's state for whole topics (the share coordinator deletes their
share-partitions' state).
"""
from ..schema import F, message

DeleteShareGroupOffsetsRequest = message('DeleteShareGroupOffsetsRequest', 92, '0', flexible='0+',
    fields=[
        F('group_id', 'string', '0+'),
        F('topics', '[]DeleteShareGroupOffsetsRequestTopic', '0+', fields=[
            F('topic_name', 'string', '0+'),
        ]),
])

DeleteShareGroupOffsetsResponse = message('DeleteShareGroupOffsetsResponse', 92, '0', flexible='0+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+', default="null"),
        F('responses', '[]DeleteShareGroupOffsetsResponseTopic', '0+', fields=[
            F('topic_name', 'string', '0+'),
            F('topic_id', 'uuid', '0+'),
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+', default="null"),
        ]),
])
