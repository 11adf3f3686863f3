"""Request header v1-2 (v0 served only ControlledShutdown v0, gone from Kafka 4) and response
header v0-1 (the ApiVersions response always uses v0)."""
from .schema import F, message

RequestHeader = message('RequestHeader', None, '1-2', flexible='2+',
    fields=[
        F('request_api_key', 'int16', '0+'),
        F('request_api_version', 'int16', '0+'),
        F('correlation_id', 'int32', '0+'),
        F('client_id', 'string', '1+', nullable='1+', flexible='none'),
])

ResponseHeader = message('ResponseHeader', None, '0-1', flexible='1+',
    fields=[
        F('correlation_id', 'int32', '0+'),
])
