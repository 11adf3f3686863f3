"""ListGroups (16) v0-5: every shard's groups (states filter v4, types filter v5)."""
from ...coordinator import merge_list_groups


def handle(broker, ctx, req, version):
    return broker.group_coordinator.execute_all(
        lambda shard, now, token: shard.handle_list_groups(req, version, now, token), merge_list_groups)
