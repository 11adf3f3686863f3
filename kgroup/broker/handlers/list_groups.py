"""ListGroups (16) v0-5: every shard's groups (states filter v4, types filter v5)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...coordinator import merge_list_groups


def handle(broker, ctx, req, version):
    return broker.group_coordinator.execute_split(req, None, Shard.handle_list_groups, version, merge_list_groups)
