"""DeleteGroups (42) v0-2: split across the shards that own the groups (NON_EMPTY_GROUP,
GROUP_ID_NOT_FOUND come from the shard)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.messages.delete_groups import DeleteGroupsResponse


def handle(broker, ctx, req, version):
    req.groups_names = list(dict.fromkeys(req.groups_names))   # KafkaApis: duplicate group ids go first
    return broker.group_coordinator.execute_split(
        req, "groups_names", Shard.handle_delete_groups, version,
        lambda rs: DeleteGroupsResponse(throttle_time_ms=0, results=[g for r in rs for g in r.results]))
