"""WriteShareGroupState (API key 85): versions 0-1, flexible 0+ (KIP-932, broker to share coordinator).

A share-partition's leader writes what changed in its state: the start offset and the state batches
whose delivery state or count moved; v1 adds the count of records whose delivery is complete.
"""
from ..schema import F, message

WriteShareGroupStateRequest = message('WriteShareGroupStateRequest', 85, '0-1', flexible='0+',
    fields=[
        F('group_id', 'string', '0+'),
        F('topics', '[]WriteStateData', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]PartitionData', '0+', fields=[
                F('partition', 'int32', '0+'),
                F('state_epoch', 'int32', '0+'),
                F('leader_epoch', 'int32', '0+'),
                F('start_offset', 'int64', '0+'),
                F('delivery_complete_count', 'int32', '1+', default=-1),
                F('state_batches', '[]StateBatch', '0+', fields=[
                    F('first_offset', 'int64', '0+'),
                    F('last_offset', 'int64', '0+'),
                    F('delivery_state', 'int8', '0+'),
                    F('delivery_count', 'int16', '0+'),
                ]),
            ]),
        ]),
])

WriteShareGroupStateResponse = message('WriteShareGroupStateResponse', 85, '0-1', flexible='0+',
    fields=[
        F('results', '[]WriteStateResult', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]PartitionResult', '0+', fields=[
                F('partition', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
                F('error_message', 'string', '0+', nullable='0+', default="null"),
            ]),
        ]),
])
