"""ListTransactions (API key 66): versions 0-2, flexible (KIP-664; v1 adds KIP-994's duration,
v2 KIP-1152's transactional id pattern)."""
from ..schema import F, message

ListTransactionsRequest = message('ListTransactionsRequest', 66, '0-2', flexible='0+',
    fields=[
        F('state_filters', '[]string', '0+'),
        F('producer_id_filters', '[]int64', '0+'),
        F('duration_filter', 'int64', '1+', default=-1),
        F('transactional_id_pattern', 'string', '2+', nullable='2+', default="null"),
])

ListTransactionsResponse = message('ListTransactionsResponse', 66, '0-2', flexible='0+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('unknown_state_filters', '[]string', '0+'),
        F('transaction_states', '[]TransactionState', '0+', fields=[
            F('transactional_id', 'string', '0+'),
            F('producer_id', 'int64', '0+'),
            F('transaction_state', 'string', '0+'),
        ]),
])
