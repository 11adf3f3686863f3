"""DeleteGroups (42) v0-2: split across the shards that own the groups (NON_EMPTY_GROUP,
GROUP_ID_NOT_FOUND come from the shard)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.errors import ErrorCode
from ...protocol.messages.delete_groups import DeleteGroupsResponse
from ..authorization import DELETE, group_denied


def handle(broker, ctx, req, version):
    req.groups_names = list(dict.fromkeys(req.groups_names))   # KafkaApis: duplicate group ids go first
    if broker.authorizer is not None:   # KafkaApis.handleDeleteGroupsRequest: DELETE on each group
        denied = [g for g in req.groups_names if group_denied(broker, ctx, DELETE, g)]
        if denied:
            R = DeleteGroupsResponse.DeletableGroupResult
            refused = [R(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in denied]
            req.groups_names = [g for g in req.groups_names if g not in denied]
            if not req.groups_names:
                return DeleteGroupsResponse(throttle_time_ms=0, results=refused)
            return broker.group_coordinator.execute_split(
                req, "groups_names", Shard.handle_delete_groups, version,
                lambda rs: DeleteGroupsResponse(throttle_time_ms=0, results=[g for r in rs for g in r.results] + refused))
    return broker.group_coordinator.execute_split(
        req, "groups_names", Shard.handle_delete_groups, version,
        lambda rs: DeleteGroupsResponse(throttle_time_ms=0, results=[g for r in rs for g in r.results]))
