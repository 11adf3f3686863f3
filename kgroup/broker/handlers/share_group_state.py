"""The share coordinator's APIs (KIP-932; Kafka's KafkaApis handlers of the ShareCoordinator):
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85) v0-1,
DeleteShareGroupState (86), ReadShareGroupStateSummary (87) v0-1, each split by share-partition
onto the ``__share_group_state`` partition that owns it (broker/share_coordinator_runtime.py)."""


def initialize(broker, ctx, req, version):
    return broker.share_coordinator.execute("initialize", req, version)


def read(broker, ctx, req, version):
    return broker.share_coordinator.execute("read", req, version)


def write(broker, ctx, req, version):
    return broker.share_coordinator.execute("write", req, version)


def delete(broker, ctx, req, version):
    return broker.share_coordinator.execute("delete", req, version)


def read_summary(broker, ctx, req, version):
    return broker.share_coordinator.execute("summary", req, version)
