"""DeleteShareGroupState (API key 86): version 0, flexible 0+ (KIP-932, broker to share coordinator).

Deleting a share group (or its offsets of a topic) deletes the share-partitions' durable state.
"""
from ..schema import F, message

DeleteShareGroupStateRequest = message('DeleteShareGroupStateRequest', 86, '0', flexible='0+',
    fields=[
        F('group_id', 'string', '0+'),
        F('topics', '[]DeleteStateData', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]PartitionData', '0+', fields=[
                F('partition', 'int32', '0+'),
            ]),
        ]),
])

DeleteShareGroupStateResponse = message('DeleteShareGroupStateResponse', 86, '0', flexible='0+',
    fields=[
        F('results', '[]DeleteStateResult', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]PartitionResult', '0+', fields=[
                F('partition', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
                F('error_message', 'string', '0+', nullable='0+', default="null"),
            ]),
        ]),
])
