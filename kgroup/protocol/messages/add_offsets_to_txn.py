"""AddOffsetsToTxn (API key 25): versions 0-4, flexible 3+."""
from ..schema import F, message

AddOffsetsToTxnRequest = message('AddOffsetsToTxnRequest', 25, '0-4', flexible='3+',
    fields=[
        F('transactional_id', 'string', '0+'),
        F('producer_id', 'int64', '0+'),
        F('producer_epoch', 'int16', '0+'),
        F('group_id', 'string', '0+'),
])

AddOffsetsToTxnResponse = message('AddOffsetsToTxnResponse', 25, '0-4', flexible='3+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
])
