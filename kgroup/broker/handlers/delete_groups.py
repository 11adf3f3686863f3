"""DeleteGroups (42) v0-2: split across the shards that own the groups (NON_EMPTY_GROUP,
GROUP_ID_NOT_FOUND come from the shard). An empty share group's share-partition state is deleted
from the share coordinator first, then the group (Kafka's GroupCoordinatorService.deleteShareGroups)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.errors import ErrorCode
from ...protocol.messages.delete_groups import DeleteGroupsResponse
from ..authorization import DELETE, group_denied
from ..pending import PendingResponse


def handle(broker, ctx, req, version):
    req.groups_names = list(dict.fromkeys(req.groups_names))   # KafkaApis: duplicate group ids go first
    refused = []
    if broker.authorizer is not None:   # KafkaApis.handleDeleteGroupsRequest: DELETE on each group
        denied = [g for g in req.groups_names if group_denied(broker, ctx, DELETE, g)]
        if denied:
            R = DeleteGroupsResponse.DeletableGroupResult
            refused = [R(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in denied]
            req.groups_names = [g for g in req.groups_names if g not in denied]
            if not req.groups_names:
                return DeleteGroupsResponse(throttle_time_ms=0, results=refused)
    pending = [d for d in _delete_share_state(broker, req.groups_names) if not d.answered]
    if pending:
        return _after(pending, lambda: _delete(broker, req, version, refused))
    return _delete(broker, req, version, refused)


def _delete_share_state(broker, group_ids) -> list[PendingResponse]:
    gc = broker.group_coordinator
    deletions = []
    for group_id in group_ids:
        shard = gc.shards.get(gc.shard_for(group_id))
        group = shard.share_group_manager.share_group(group_id) if shard is not None and shard.is_loaded else None
        if group is not None and group.is_empty() and group.initialized_partitions():
            deletions.append(broker.share_coordinator.delete(group_id, group.initialized_partitions()))
            broker.share_partitions.forget_group(group_id)
    return deletions


def _after(parts, fn):
    out = PendingResponse()

    def go(_):
        answer = fn()
        if type(answer) is PendingResponse:
            answer.listen(lambda a: out.fail(a.error) if a.error is not None else out.answer(a.response))
        else:
            out.answer(answer)
    PendingResponse.gather(parts, lambda _: None).listen(go)
    return out


def _delete(broker, req, version, refused):
    return broker.group_coordinator.execute_split(
        req, "groups_names", Shard.handle_delete_groups, version,
        lambda rs: DeleteGroupsResponse(throttle_time_ms=0, results=[g for r in rs for g in r.results] + refused))
