"""ConsumerGroupDescribe (69) v0-1 (v1: each member's type, classic or consumer): split across the shards that own the groups (KIP-848)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse
from ..authorized_operations import with_group_operations


def handle(broker, ctx, req, version):
    return broker.group_coordinator.execute_split(
        req, "group_ids", Shard.handle_consumer_group_describe, version,
        lambda rs: with_group_operations(
            ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[g for r in rs for g in r.groups]),
            req.include_authorized_operations))
