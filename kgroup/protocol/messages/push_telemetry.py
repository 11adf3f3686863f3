"""PushTelemetry (API key 72): version 0, flexible 0+ (KIP-714: a client's metrics, OTLP-encoded)."""
from ..schema import F, message

PushTelemetryRequest = message('PushTelemetryRequest', 72, '0', flexible='0+',
    fields=[
        F('client_instance_id', 'uuid', '0+'),
        F('subscription_id', 'int32', '0+'),
        F('terminating', 'bool', '0+'),
        F('compression_type', 'int8', '0+'),
        F('metrics', 'bytes', '0+'),
])

PushTelemetryResponse = message('PushTelemetryResponse', 72, '0', flexible='0+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
])
