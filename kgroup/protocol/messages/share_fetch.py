"""ShareFetch (API key 78): versions 1-2, flexible 0+ (KIP-932).

A share consumer fetches through its share session (epoch 0 opens it, -1 closes it) and
piggy-backs acknowledgements of what it got before. Each partition answers the record batches as
stored plus the AcquiredRecords ranges (with their delivery counts) that are the member's to
process; the client drops the records outside them. v2 adds the acquire mode and renew
acknowledgements (KIP-1222).
"""
from ..schema import F, message

ShareFetchRequest = message('ShareFetchRequest', 78, '1-2', flexible='0+',
    fields=[
        F('group_id', 'string', '0+', nullable='0+', default="null"),
        F('member_id', 'string', '0+', nullable='0+'),
        F('share_session_epoch', 'int32', '0+'),
        F('max_wait_ms', 'int32', '0+'),
        F('min_bytes', 'int32', '0+'),
        F('max_bytes', 'int32', '0+', default=0x7fffffff),
        F('max_records', 'int32', '1+'),
        F('batch_size', 'int32', '1+'),
        F('share_acquire_mode', 'int8', '2+', default=0),
        F('is_renew_ack', 'bool', '2+', default=False),
        F('topics', '[]FetchTopic', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]FetchPartition', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('partition_max_bytes', 'int32', '0'),
                F('acknowledgement_batches', '[]AcknowledgementBatch', '0+', fields=[
                    F('first_offset', 'int64', '0+'),
                    F('last_offset', 'int64', '0+'),
                    F('acknowledge_types', '[]int8', '0+'),
                ]),
            ]),
        ]),
        F('forgotten_topics_data', '[]ForgottenTopic', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]int32', '0+'),
        ]),
])

ShareFetchResponse = message('ShareFetchResponse', 78, '1-2', flexible='0+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+', default="null"),
        F('acquisition_lock_timeout_ms', 'int32', '1+'),
        F('responses', '[]ShareFetchableTopicResponse', '0+', fields=[
            F('topic_id', 'uuid', '0+'),
            F('partitions', '[]PartitionData', '0+', fields=[
                F('partition_index', 'int32', '0+'),
                F('error_code', 'int16', '0+'),
                F('error_message', 'string', '0+', nullable='0+', default="null"),
                F('acknowledge_error_code', 'int16', '0+'),
                F('acknowledge_error_message', 'string', '0+', nullable='0+', default="null"),
                F('current_leader', 'LeaderIdAndEpoch', '0+', fields=[
                    F('leader_id', 'int32', '0+'),
                    F('leader_epoch', 'int32', '0+'),
                ]),
                F('records', 'records', '0+', nullable='0'),
                F('acquired_records', '[]AcquiredRecords', '0+', fields=[
                    F('first_offset', 'int64', '0+'),
                    F('last_offset', 'int64', '0+'),
                    F('delivery_count', 'int16', '0+'),
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
