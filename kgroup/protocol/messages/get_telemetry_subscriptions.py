"""GetTelemetrySubscriptions (API key 71): version 0, flexible 0+ (KIP-714: the metrics a client should
push)."""
from ..schema import F, message

GetTelemetrySubscriptionsRequest = message('GetTelemetrySubscriptionsRequest', 71, '0', flexible='0+',
    fields=[
        F('client_instance_id', 'uuid', '0+'),
])

GetTelemetrySubscriptionsResponse = message('GetTelemetrySubscriptionsResponse', 71, '0', flexible='0+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('client_instance_id', 'uuid', '0+'),
        F('subscription_id', 'int32', '0+'),
        F('accepted_compression_types', '[]int8', '0+'),
        F('push_interval_ms', 'int32', '0+'),
        F('telemetry_max_bytes', 'int32', '0+'),
        F('delta_temporality', 'bool', '0+'),
        F('requested_metrics', '[]string', '0+'),
])
