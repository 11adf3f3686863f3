"""ApiVersions (18) v0-4: the versions this broker handles end to end (KIP-35, KIP-511).

v3+ requests carry the client's software name and version (KIP-511), recorded on the connection
for logs; v3+ answers list the features this broker supports and the finalized levels with their
epoch (KIP-584, features.py): a supported feature whose lowest level is 0 only from v4 (older
clients cannot read it, KAFKA-17492), a finalized feature only at a level above 0. An unsupported ApiVersions version is answered by the server itself in the v0 layout
(see ``unsupported_version_response``) so the client can retry at a version we know.
"""
from ...protocol.errors import ErrorCode
from ...protocol.messages.api_versions import ApiVersionsResponse
from ..features import SUPPORTED

ApiVersion = ApiVersionsResponse.ApiVersion
Supported = ApiVersionsResponse.SupportedFeatureKey
_TELEMETRY_APIS = (71, 72)          # GetTelemetrySubscriptions, PushTelemetry
Finalized = ApiVersionsResponse.FinalizedFeatureKey


def handle(broker, ctx, req, version):
    from . import advertised  # the table lives next to the handlers
    entries = advertised()
    if broker.config["metrics.listener"] is None:
        # Kafka offers the client metrics APIs only with a telemetry exporter: here, the listener
        entries = [e for e in entries if e[0] not in _TELEMETRY_APIS]
    if version >= 3:
        ctx.connection.client_software = (req.client_software_name, req.client_software_version)
        if not _valid_software_field(req.client_software_name) or \
                not _valid_software_field(req.client_software_version):
            return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST, api_keys=_keys(entries))
    resp = ApiVersionsResponse(error_code=0, api_keys=_keys(entries), throttle_time_ms=0)
    if version >= 3:
        features = broker.metadata.features
        resp.supported_features = [Supported(name=n, min_version=lo, max_version=hi)
                                   for n, (lo, hi) in sorted(SUPPORTED.items()) if version >= 4 or lo > 0]
        resp.finalized_features_epoch = features.epoch
        resp.finalized_features = [Finalized(name=n, max_version_level=v, min_version_level=v)
                                   for n, v in sorted(features.finalized.items()) if v != 0]
    return resp


def _keys(entries):
    return [ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, lo, hi in entries]


def _valid_software_field(s: str) -> bool:
    # Kafka's ApiVersionsRequest.isValid: [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
    import re
    return bool(re.fullmatch(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?", s))


def unsupported_version_response(correlation_id: int) -> bytes:
    """The answer to an ApiVersions request at a version we do not know: error 35 in the v0 body
    (int16 error, array of entries; no throttle, no tags) with response header v0, listing at least
    ApiVersions itself so the client can pick a version."""
    from . import advertised
    from ...protocol.api import ApiKey, encode_response
    entries = [e for e in advertised() if e[0] == ApiKey.API_VERSIONS]
    body = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_keys(entries))
    return b"".join(encode_response(ApiKey.API_VERSIONS, 0, correlation_id, body))
