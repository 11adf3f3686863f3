"""ShareGroupHeartbeat (API key 76): version 1, flexible 0+ (KIP-932).

A share group member joins (member epoch 0, with its subscription), heartbeats and leaves (-1).
Unchanged fields are sent as null. The coordinator answers with the member's epoch and, when it
changed or the request was full, its assignment: with share groups a partition may be assigned to
several members at once.
"""
from ..schema import F, message

ShareGroupHeartbeatRequest = message('ShareGroupHeartbeatRequest', 76, '1', flexible='0+',
    fields=[
        F('group_id', 'string', '0+'),
        F('member_id', 'string', '0+'),
        F('member_epoch', 'int32', '0+'),
        F('rack_id', 'string', '0+', nullable='0+', default="null"),
        F('subscribed_topic_names', '[]string', '0+', nullable='0+', default="null"),
])

ShareGroupHeartbeatResponse = message('ShareGroupHeartbeatResponse', 76, '1', flexible='0+',
    common=[
        ('TopicPartitions', [
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]int32', '0+'),
        ]),
    ],
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+', default="null"),
        F('member_id', 'string', '0+', nullable='0+', default="null"),
        F('member_epoch', 'int32', '0+'),
        F('heartbeat_interval_ms', 'int32', '0+'),
        F('assignment', 'Assignment', '0+', nullable='0+', default="null", fields=[
            F('topic_partitions', '[]TopicPartitions', '0+'),
        ]),
])
