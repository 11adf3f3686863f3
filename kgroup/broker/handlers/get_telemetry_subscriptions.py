"""GetTelemetrySubscriptions (71) v0 (KIP-714): the metrics this client instance should push and
how often, from the CLIENT_METRICS subscriptions it matches (client_metrics.py); a client without
an instance id gets one; asking again before the push interval is THROTTLING_QUOTA_EXCEEDED."""
from ...clock import now_ms
from ...protocol.messages.get_telemetry_subscriptions import GetTelemetrySubscriptionsResponse
from ..client_metrics import ACCEPTED_COMPRESSION_TYPES, TELEMETRY_MAX_BYTES


def client_attributes(ctx) -> dict:
    """ClientMetricsInstanceMetadata: what a subscription's ``match`` selects on."""
    software = ctx.connection.client_software or (None, None)
    peer = ctx.connection.peer
    return {"client_id": ctx.client_id, "client_software_name": software[0],
            "client_software_version": software[1], "client_source_address": ctx.client_host,
            "client_source_port": peer.rsplit(":", 1)[1] if ":" in peer else None}


def handle(broker, ctx, req, version):
    error, inst = broker.metadata.client_metrics.get_subscriptions(req.client_instance_id, client_attributes(ctx),
                                                                   now_ms())
    if error:
        return GetTelemetrySubscriptionsResponse(throttle_time_ms=0, error_code=int(error),
                                                 client_instance_id=bytes(16), accepted_compression_types=[],
                                                 requested_metrics=[])
    return GetTelemetrySubscriptionsResponse(
        throttle_time_ms=0, error_code=0, client_instance_id=inst.instance_id, subscription_id=inst.subscription_id,
        accepted_compression_types=ACCEPTED_COMPRESSION_TYPES, push_interval_ms=inst.interval_ms,
        telemetry_max_bytes=TELEMETRY_MAX_BYTES, delta_temporality=True, requested_metrics=list(inst.metrics))
