"""EndTxn (API key 26): versions 0-5, flexible 3+ (v5, KIP-890, returns the bumped epoch)."""
from ..schema import F, message

EndTxnRequest = message('EndTxnRequest', 26, '0-5', flexible='3+',
    fields=[
        F('transactional_id', 'string', '0+'),
        F('producer_id', 'int64', '0+'),
        F('producer_epoch', 'int16', '0+'),
        F('committed', 'bool', '0+'),
])

EndTxnResponse = message('EndTxnResponse', 26, '0-5', flexible='3+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('producer_id', 'int64', '5+', default=-1),
        F('producer_epoch', 'int16', '5+', default=-1),
])
