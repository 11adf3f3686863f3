"""The share coordinator's APIs (KIP-932; Kafka's KafkaApis handlers of the ShareCoordinator):
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85) v0-1,
DeleteShareGroupState (86), ReadShareGroupStateSummary (87) v0-1, each split by share-partition
onto the ``__share_group_state`` partition that owns it (broker/share_coordinator_runtime.py).
They are inter-broker APIs: with an authorizer they need CLUSTER_ACTION on the cluster."""
from ..authorization import CLUSTER_ACTION, CLUSTER_AUTHORIZATION_FAILED, CLUSTER_NAME, RT_CLUSTER, allowed, \
    whole_request_error


def _run(api, broker, ctx, req, version):
    if broker.authorizer is not None and not allowed(broker, ctx, CLUSTER_ACTION, RT_CLUSTER, CLUSTER_NAME):
        return whole_request_error(broker, ctx, version, req, CLUSTER_AUTHORIZATION_FAILED)
    return broker.share_coordinator.execute(api, req, version)


def initialize(broker, ctx, req, version):
    return _run("initialize", broker, ctx, req, version)


def read(broker, ctx, req, version):
    return _run("read", broker, ctx, req, version)


def write(broker, ctx, req, version):
    return _run("write", broker, ctx, req, version)


def delete(broker, ctx, req, version):
    return _run("delete", broker, ctx, req, version)


def read_summary(broker, ctx, req, version):
    return _run("summary", broker, ctx, req, version)
