"""AddPartitionsToTxn (API key 24): versions 0-5, flexible 3+.

v4+ (KIP-890) batches several transactions per request and is sent only by brokers verifying a
produce (``verify_only``); clients send v0-3 with one transactional id."""
from ..schema import F, message

AddPartitionsToTxnRequest = message('AddPartitionsToTxnRequest', 24, '0-5', flexible='3+',
    common=[
        ('AddPartitionsToTxnTopic', [
            F('name', 'string', '0+'),
            F('partitions', '[]int32', '0+'),
        ]),
    ],
    fields=[
        F('transactions', '[]AddPartitionsToTxnTransaction', '4+', fields=[
            F('transactional_id', 'string', '4+'),
            F('producer_id', 'int64', '4+'),
            F('producer_epoch', 'int16', '4+'),
            F('verify_only', 'bool', '4+', default=False),
            F('topics', '[]AddPartitionsToTxnTopic', '4+'),
        ]),
        F('v3_and_below_transactional_id', 'string', '0-3'),
        F('v3_and_below_producer_id', 'int64', '0-3'),
        F('v3_and_below_producer_epoch', 'int16', '0-3'),
        F('v3_and_below_topics', '[]AddPartitionsToTxnTopic', '0-3'),
])

AddPartitionsToTxnResponse = message('AddPartitionsToTxnResponse', 24, '0-5', flexible='3+',
    common=[
        # the partition result first: a common struct is built before its users
        ('AddPartitionsToTxnPartitionResult', [
            F('partition_index', 'int32', '0+'),
            F('partition_error_code', 'int16', '0+'),
        ]),
        ('AddPartitionsToTxnTopicResult', [
            F('name', 'string', '0+'),
            F('results_by_partition', '[]AddPartitionsToTxnPartitionResult', '0+'),
        ]),
    ],
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '4+'),
        F('results_by_transaction', '[]AddPartitionsToTxnResult', '4+', fields=[
            F('transactional_id', 'string', '4+'),
            F('topic_results', '[]AddPartitionsToTxnTopicResult', '4+'),
        ]),
        F('results_by_topic_v3_and_below', '[]AddPartitionsToTxnTopicResult', '0-3'),
])
