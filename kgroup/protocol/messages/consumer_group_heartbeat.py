"""ConsumerGroupHeartbeat (API key 68): versions 0-1, flexible 0+ (KIP-848).

The one request of the consumer group protocol: it joins (member epoch 0), heartbeats, reports the
owned partitions and leaves (-1; -2 for a static member that will come back). Fields that did not
change since the last heartbeat are sent as null (-1 for the rebalance timeout). v1 adds the
broker-side regex subscription (KIP-848's RE2/J pattern).
"""
from ..schema import F, message

ConsumerGroupHeartbeatRequest = message('ConsumerGroupHeartbeatRequest', 68, '0-1', flexible='0+',
    fields=[
        F('group_id', 'string', '0+'),
        F('member_id', 'string', '0+'),
        F('member_epoch', 'int32', '0+'),
        F('instance_id', 'string', '0+', nullable='0+', default="null"),
        F('rack_id', 'string', '0+', nullable='0+', default="null"),
        F('rebalance_timeout_ms', 'int32', '0+', default=-1),
        F('subscribed_topic_names', '[]string', '0+', nullable='0+', default="null"),
        F('subscribed_topic_regex', 'string', '1+', nullable='1+', default="null"),
        F('server_assignor', 'string', '0+', nullable='0+', default="null"),
        F('topic_partitions', '[]TopicPartitions', '0+', nullable='0+', default="null", fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]int32', '0+'),
        ]),
])

ConsumerGroupHeartbeatResponse = message('ConsumerGroupHeartbeatResponse', 68, '0-1', flexible='0+',
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
