"""ListConfigResources (74) v0-1 (KIP-1142; v0 was ListClientMetricsResources, KIP-714): the
resources that have configs. v0 lists CLIENT_METRICS resources only, v1 those of the asked types
(all five when none is asked): groups with config overrides, client metrics subscriptions, this
broker (BROKER and BROKER_LOGGER) and every topic; a type it does not know makes the whole answer
UNSUPPORTED_VERSION (KafkaApis.handleListConfigResources)."""
from ...protocol.errors import ErrorCode
from ...protocol.messages.list_config_resources import ListConfigResourcesResponse
from ..authorization import CLUSTER_NAME, DESCRIBE_CONFIGS, RT_CLUSTER, allowed

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
Resource = ListConfigResourcesResponse.ConfigResource


def handle(broker, ctx, req, version):
    if not allowed(broker, ctx, DESCRIBE_CONFIGS, RT_CLUSTER, CLUSTER_NAME):     # KafkaApis: CLUSTER DESCRIBE_CONFIGS
        return ListConfigResourcesResponse(throttle_time_ms=0, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                                           config_resources=[])
    supported = (CLIENT_METRICS,) if version == 0 else (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)
    types = (req.resource_types if version >= 1 else []) or list(supported)
    if any(t not in supported for t in types):
        return ListConfigResourcesResponse(throttle_time_ms=0, error_code=int(ErrorCode.UNSUPPORTED_VERSION),
                                           config_resources=[])
    out = []
    if GROUP in types:
        out += [Resource(resource_name=g, resource_type=GROUP) for g in broker.metadata.group_configs]
    if CLIENT_METRICS in types:
        out += [Resource(resource_name=n, resource_type=CLIENT_METRICS)
                for n in sorted(broker.metadata.client_metrics.subscriptions)]
    node = str(broker.config.node_id)
    if BROKER_LOGGER in types:
        out.append(Resource(resource_name=node, resource_type=BROKER_LOGGER))
    if BROKER in types:
        out.append(Resource(resource_name=node, resource_type=BROKER))
    if TOPIC in types:
        out += [Resource(resource_name=t, resource_type=TOPIC) for t in broker.metadata.topics]
    return ListConfigResourcesResponse(throttle_time_ms=0, error_code=0, config_resources=out)
