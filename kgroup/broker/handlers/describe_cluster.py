"""DescribeCluster (60) v0-2: this node is the whole cluster (broker and, for endpoint type 2,
the controller endpoint too); never fenced, so v2's include_fenced_brokers changes nothing.
In a cluster: every live broker (rack included) and the controller, from the metadata cache."""
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_cluster import DescribeClusterResponse
from ..authorization import CLUSTER_NAME, DESCRIBE, RT_CLUSTER, allowed
from ..authorized_operations import CLUSTER_OPERATIONS

Broker = DescribeClusterResponse.DescribeClusterBroker


def handle(broker, ctx, req, version):
    node = broker.config.node_id
    host, port = broker.advertised_listener(ctx.listener_name)
    if version >= 1 and req.endpoint_type not in (1, 2):
        return DescribeClusterResponse(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                                       error_message=f"Unsupported endpoint type {req.endpoint_type}",
                                       endpoint_type=req.endpoint_type, cluster_id=broker.metadata.cluster_id)
    brokers = [Broker(broker_id=node, host=host, port=port, rack=None, is_fenced=False)]
    controller = node
    if broker.cluster is not None:
        cache = broker.cluster.cache
        brokers = [Broker(broker_id=b, host=h, port=p, rack=r, is_fenced=False)
                   for b, h, p, r in cache.alive_brokers(ctx.listener_name)]
        controller = cache.controller_id if cache.controller_id is not None else -1
    return DescribeClusterResponse(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=req.endpoint_type,
        cluster_id=broker.metadata.cluster_id, controller_id=controller,
        brokers=brokers,
        cluster_authorized_operations=_cluster_operations(broker, ctx) if req.include_cluster_authorized_operations
        else -2147483648)


def _cluster_operations(broker, ctx) -> int:
    """AuthHelper.computeDescribeClusterResponse: the cluster's authorized operations if the
    principal may DESCRIBE the cluster, else none."""
    if broker.authorizer is None:
        return CLUSTER_OPERATIONS
    if not allowed(broker, ctx, DESCRIBE, RT_CLUSTER, CLUSTER_NAME):
        return 0
    return broker.authorizer.authorized_operations(ctx, RT_CLUSTER, CLUSTER_NAME)
