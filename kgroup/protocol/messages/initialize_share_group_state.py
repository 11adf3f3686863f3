"""InitializeShareGroupState (API key 83): version 0, flexible 0+ (KIP-932, broker to share coordinator).

The group coordinator asks the share coordinator to create the state of share-partitions before
they are assigned: a state epoch and a start offset (-1: from share.auto.offset.reset) each.
"""
from ..schema import F, message

InitializeShareGroupStateRequest = message('InitializeShareGroupStateRequest', 83, '0', flexible='0+',
    fields=[
        F('group_id', 'string', '0+'),
        F('topics', '[]InitializeStateData', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]PartitionData', '0+', fields=[
                F('partition', 'int32', '0+'),
                F('state_epoch', 'int32', '0+'),
                F('start_offset', 'int64', '0+'),
            ]),
        ]),
])

InitializeShareGroupStateResponse = message('InitializeShareGroupStateResponse', 83, '0', flexible='0+',
    fields=[
        F('results', '[]InitializeStateResult', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]PartitionResult', '0+', fields=[
                F('partition', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
                F('error_message', 'string', '0+', nullable='0+', default="null"),
            ]),
        ]),
])
