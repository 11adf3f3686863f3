"""ListGroups (16) v0-5: every shard's groups (states filter v4, types filter v5)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...coordinator import merge_list_groups
from ..authorization import CLUSTER_NAME, DESCRIBE, RT_CLUSTER, RT_GROUP, allowed


def handle(broker, ctx, req, version):
    if broker.authorizer is not None and not allowed(broker, ctx, DESCRIBE, RT_CLUSTER, CLUSTER_NAME):
        # KafkaApis.handleListGroupsRequest: without DESCRIBE on the cluster, only the groups
        # the principal may DESCRIBE
        def merge(rs):
            resp = merge_list_groups(rs)
            resp.groups = [g for g in resp.groups if allowed(broker, ctx, DESCRIBE, RT_GROUP, g.group_id)]
            return resp
        return broker.group_coordinator.execute_split(req, None, Shard.handle_list_groups, version, merge)
    return broker.group_coordinator.execute_split(req, None, Shard.handle_list_groups, version, merge_list_groups)
