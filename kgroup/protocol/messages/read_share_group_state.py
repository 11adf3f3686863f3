"""ReadShareGroupState (API key 84): version 0, flexible 0+ (KIP-932, broker to share coordinator).

A share-partition's leader reads its durable state when it first serves the share-partition: the
state epoch, the start offset and the state batches (delivery state and count per offset range).
"""
from ..schema import F, message

ReadShareGroupStateRequest = message('ReadShareGroupStateRequest', 84, '0', flexible='0+',
    fields=[
        F('group_id', 'string', '0+'),
        F('topics', '[]ReadStateData', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]PartitionData', '0+', fields=[
                F('partition', 'int32', '0+'),
                F('leader_epoch', 'int32', '0+'),
            ]),
        ]),
])

ReadShareGroupStateResponse = message('ReadShareGroupStateResponse', 84, '0', flexible='0+',
    fields=[
        F('results', '[]ReadStateResult', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]PartitionResult', '0+', fields=[
                F('partition', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
                F('error_message', 'string', '0+', nullable='0+', default="null"),
                F('state_epoch', 'int32', '0+'),
                F('start_offset', 'int64', '0+'),
                F('state_batches', '[]StateBatch', '0+', fields=[
                    F('first_offset', 'int64', '0+'),
                    F('last_offset', 'int64', '0+'),
                    F('delivery_state', 'int8', '0+'),
                    F('delivery_count', 'int16', '0+'),
                ]),
            ]),
        ]),
])
