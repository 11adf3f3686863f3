"""ApiVersions (18) v0-4: the versions this broker handles end to end (KIP-35, KIP-511).

v3+ requests carry the client's software name and version (KIP-511), recorded on the connection
for logs. v3+ answers list the share groups feature (KIP-932's ``share.version``): supported 0-1
(listed from v4 only, as Kafka lists a feature whose lowest level is 0, KAFKA-17492) and finalized
at 1, because this broker serves share groups. An unsupported ApiVersions version is answered by the server itself in the v0 layout
(see ``unsupported_version_response``) so the client can retry at a version we know.
"""
from ...protocol.errors import ErrorCode
from ...protocol.messages.api_versions import ApiVersionsResponse

ApiVersion = ApiVersionsResponse.ApiVersion
SHARE_VERSION = "share.version"
SHARE_VERSION_SUPPORTED = (0, 1)
SHARE_VERSION_FINALIZED = 1


def handle(broker, ctx, req, version):
    from . import advertised  # the table lives next to the handlers
    if version >= 3:
        ctx.connection.client_software = (req.client_software_name, req.client_software_version)
        if not _valid_software_field(req.client_software_name) or \
                not _valid_software_field(req.client_software_version):
            return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST,
                                       api_keys=_keys(advertised()))
    resp = ApiVersionsResponse(error_code=0, api_keys=_keys(advertised()), throttle_time_ms=0)
    if version >= 3:
        if version >= 4:
            resp.supported_features = [ApiVersionsResponse.SupportedFeatureKey(
                name=SHARE_VERSION, min_version=SHARE_VERSION_SUPPORTED[0], max_version=SHARE_VERSION_SUPPORTED[1])]
        resp.finalized_features_epoch = 0
        resp.finalized_features = [ApiVersionsResponse.FinalizedFeatureKey(
            name=SHARE_VERSION, max_version_level=SHARE_VERSION_FINALIZED, min_version_level=SHARE_VERSION_FINALIZED)]
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
