"""DescribeGroups (15) v0-5: split across the shards that own the groups, with Kafka's state names (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead)."""
import copy

from ...protocol.messages.describe_groups import DescribeGroupsResponse


def handle(broker, ctx, req, version):
    def build(groups):
        sub = copy.copy(req)
        sub.groups = groups
        return sub

    return broker.group_coordinator.execute_many(
        req.groups, req.groups, build,
        lambda shard, sub, now, token: shard.handle_describe_groups(sub, version, now, token),
        lambda rs: DescribeGroupsResponse(throttle_time_ms=0, groups=[g for r in rs for g in r.groups]))
