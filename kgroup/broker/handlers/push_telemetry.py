"""PushTelemetry (72) v0 (KIP-714): a client instance's metrics (OTLP, compressed as it chose),
kept per instance for the metrics endpoint, after ClientMetricsManager's checks
(client_metrics.py)."""
from ...clock import now_ms
from ...protocol.messages.push_telemetry import PushTelemetryResponse
from .get_telemetry_subscriptions import client_attributes


def handle(broker, ctx, req, version):
    error = broker.metadata.client_metrics.push(req, client_attributes(ctx), now_ms())
    return PushTelemetryResponse(throttle_time_ms=0, error_code=int(error))
