"""DeleteGroups (42) v0-2: split across the shards that own the groups (NON_EMPTY_GROUP,
GROUP_ID_NOT_FOUND come from the shard). An empty share group's share-partition state is deleted
from the share coordinator first, then the group (Kafka's GroupCoordinatorService.deleteShareGroups)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.messages.delete_groups import DeleteGroupsResponse
from ..pending import PendingResponse


def handle(broker, ctx, req, version):
    req.groups_names = list(dict.fromkeys(req.groups_names))   # KafkaApis: duplicate group ids go first
    gc = broker.group_coordinator
    deletions = []
    for group_id in req.groups_names:
        shard = gc.shards.get(gc.shard_for(group_id))
        group = shard.share_group_manager.share_group(group_id) if shard is not None and shard.is_loaded else None
        if group is not None and group.is_empty() and group.initialized_partitions():
            deletions.append(broker.share_coordinator.delete(group_id, group.initialized_partitions()))
            broker.share_partitions.forget_group(group_id)
    pending = [d for d in deletions if not d.answered]
    if pending:
        return _after(pending, lambda: _delete(broker, req, version))
    return _delete(broker, req, version)


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


def _delete(broker, req, version):
    return broker.group_coordinator.execute_split(
        req, "groups_names", Shard.handle_delete_groups, version,
        lambda rs: DeleteGroupsResponse(throttle_time_ms=0, results=[g for r in rs for g in r.results]))
