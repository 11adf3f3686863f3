"""DeleteGroups (42) v0-2: split across the shards that own the groups (NON_EMPTY_GROUP,
GROUP_ID_NOT_FOUND come from the shard)."""
import copy

from ...protocol.messages.delete_groups import DeleteGroupsResponse


def handle(broker, ctx, req, version):
    def build(groups):
        sub = copy.copy(req)
        sub.groups_names = groups
        return sub

    names = list(dict.fromkeys(req.groups_names))   # KafkaApis: duplicate group ids are removed first
    return broker.groups.execute_many(
        names, names, build,
        lambda shard, sub, now, token: shard.handle_delete_groups(sub, version, now, token),
        lambda rs: DeleteGroupsResponse(throttle_time_ms=0, results=[g for r in rs for g in r.results]))
