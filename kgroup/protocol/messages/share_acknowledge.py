"""ShareAcknowledge (API key 79): versions 1-2, flexible 0+ (KIP-932).

Acknowledgements without a fetch (ACCEPT 1, RELEASE 2, REJECT 3, GAP 0; RENEW 4 from v2), on the
member's share session; epoch -1 closes the session.
"""
from ..schema import F, message

ShareAcknowledgeRequest = message('ShareAcknowledgeRequest', 79, '1-2', flexible='0+',
    fields=[
        F('group_id', 'string', '0+', nullable='0+', default="null"),
        F('member_id', 'string', '0+', nullable='0+'),
        F('share_session_epoch', 'int32', '0+'),
        F('is_renew_ack', 'bool', '2+', default=False),
        F('topics', '[]AcknowledgeTopic', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]AcknowledgePartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('acknowledgement_batches', '[]AcknowledgementBatch', '0+', fields=[
                    F('first_offset', 'int64', '0+'),
                    F('last_offset', 'int64', '0+'),
                    F('acknowledge_types', '[]int8', '0+'),
                ]),
            ]),
        ]),
])

ShareAcknowledgeResponse = message('ShareAcknowledgeResponse', 79, '1-2', flexible='0+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+', default="null"),
        F('acquisition_lock_timeout_ms', 'int32', '2+'),
        F('responses', '[]ShareAcknowledgeTopicResponse', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]PartitionData', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
                F('error_message', 'string', '0+', nullable='0+', default="null"),
                F('current_leader', 'LeaderIdAndEpoch', '0+', fields=[
                    F('leader_id', 'int32', '0+'),
                    F('leader_epoch', 'int32', '0+'),
                ]),
            ]),
        ]),
        F('node_endpoints', '[]NodeEndpoint', '0+', fields=[
            F('node_id', 'int32', '0+'),
            F('host', 'string', '0+'),
            F('port', 'int32', '0+'),
            F('rack', 'string', '0+', nullable='0+', default="null"),
        ]),
])
