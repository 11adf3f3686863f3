"""InitProducerId (API key 22): versions 0-6, flexible 2+ (v6, KIP-939's two-phase commit, is unstable in Kafka 4.3)."""
from ..schema import F, message

InitProducerIdRequest = message('InitProducerIdRequest', 22, '0-6', flexible='2+',
    fields=[
        F('transactional_id', 'string', '0+', nullable='0+'),
        F('transaction_timeout_ms', 'int32', '0+'),
        F('producer_id', 'int64', '3+', default=-1),
        F('producer_epoch', 'int16', '3+', default=-1),
        F('enable2_pc', 'bool', '6+', default=False),
        F('keep_prepared_txn', 'bool', '6+', default=False),
])

InitProducerIdResponse = message('InitProducerIdResponse', 22, '0-6', flexible='2+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('producer_id', 'int64', '0+', default=-1),
        F('producer_epoch', 'int16', '0+'),
        F('ongoing_txn_producer_id', 'int64', '6+', default=-1),
        F('ongoing_txn_producer_epoch', 'int16', '6+', default=-1),
])
