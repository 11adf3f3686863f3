"""DescribeGroups (15) v0-5: split across the shards that own the groups, with Kafka's state names (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.messages.describe_groups import DescribeGroupsResponse


def handle(broker, ctx, req, version):
    return broker.group_coordinator.execute_split(
        req, "groups", Shard.handle_describe_groups, version,
        lambda rs: DescribeGroupsResponse(throttle_time_ms=0, groups=[g for r in rs for g in r.groups]))
