"""DescribeGroups (15) v0-5: split across the shards that own the groups, with Kafka's state names (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.messages.describe_groups import DescribeGroupsResponse
from ..authorized_operations import with_group_operations


def handle(broker, ctx, req, version):
    asked = version >= 3 and req.include_authorized_operations
    return broker.group_coordinator.execute_split(
        req, "groups", Shard.handle_describe_groups, version,
        lambda rs: with_group_operations(
            DescribeGroupsResponse(throttle_time_ms=0, groups=[g for r in rs for g in r.groups]), asked))
