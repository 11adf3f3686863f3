"""The bytes embedded in JoinGroup/SyncGroup for protocol type "consumer" (each prefixed by an int16 version)."""
from .schema import F, message

ConsumerProtocolSubscription = message('ConsumerProtocolSubscription', None, '0-3', flexible='none',
    fields=[
        F('topics', '[]string', '0+'),
        F('user_data', 'bytes', '0+', nullable='0+', default="null"),
        F('owned_partitions', '[]TopicPartition', '1+', fields=[
            F('topic', 'string', '1+'),
            F('partitions', '[]int32', '1+'),
        ]),
        F('generation_id', 'int32', '2+', default=-1),
        F('rack_id', 'string', '3+', nullable='3+', default="null"),
])

ConsumerProtocolAssignment = message('ConsumerProtocolAssignment', None, '0-3', flexible='none',
    fields=[
        F('assigned_partitions', '[]TopicPartition', '0+', fields=[
            F('topic', 'string', '0+'),
            F('partitions', '[]int32', '0+'),
        ]),
        F('user_data', 'bytes', '0+', nullable='0+', default="null"),
])
