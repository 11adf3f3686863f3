"""DescribeTransactions (API key 65): version 0, flexible (KIP-664, admin tools)."""
from ..schema import F, message

DescribeTransactionsRequest = message('DescribeTransactionsRequest', 65, '0', flexible='0+',
    fields=[
        F('transactional_ids', '[]string', '0+'),
])

DescribeTransactionsResponse = message('DescribeTransactionsResponse', 65, '0', flexible='0+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('transaction_states', '[]TransactionState', '0+', fields=[
            F('error_code', 'int16', '0+'),
            F('transactional_id', 'string', '0+'),
            F('transaction_state', 'string', '0+'),
            F('transaction_timeout_ms', 'int32', '0+'),
            F('transaction_start_time_ms', 'int64', '0+'),
            F('producer_id', 'int64', '0+'),
            F('producer_epoch', 'int16', '0+'),
            F('topics', '[]TopicData', '0+', fields=[
                F('topic', 'string', '0+'),
                F('partitions', '[]int32', '0+'),
            ]),
        ]),
])
