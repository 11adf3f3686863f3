"""One small handler per API: take the decoded request, call the broker core once, build the
response. ``HANDLERS`` is also the advertised ApiVersions table: an API is listed here only when
it works end to end, with exactly the versions it handles.
"""
from __future__ import annotations

from ...protocol.api import ApiKey
from . import api_versions, create_topics, delete_topics, describe_cluster, describe_configs, metadata

# api key -> (handler, min version, max version)
HANDLERS = {
    ApiKey.API_VERSIONS: (api_versions.handle, 0, 4),
    ApiKey.METADATA: (metadata.handle, 0, 12),
    ApiKey.CREATE_TOPICS: (create_topics.handle, 0, 7),
    ApiKey.DELETE_TOPICS: (delete_topics.handle, 0, 6),
    ApiKey.DESCRIBE_CONFIGS: (describe_configs.handle, 0, 4),
    ApiKey.DESCRIBE_CLUSTER: (describe_cluster.handle, 0, 1),
}


def advertised() -> list[tuple[int, int, int]]:
    return sorted((int(k), lo, hi) for k, (_, lo, hi) in HANDLERS.items())


def is_supported(api_key: int, version: int) -> bool:
    entry = HANDLERS.get(api_key)
    return entry is not None and entry[1] <= version <= entry[2]
