"""DeleteGroups (42) v0-2: split across the shards that own the groups (NON_EMPTY_GROUP,
GROUP_ID_NOT_FOUND come from the shard). Share groups go first, as in Kafka's
GroupCoordinatorService.deleteGroups: an empty share group's share-partitions move to deleting and
their state is deleted by the share coordinator, then every group goes through the general
deletion; a share group whose state could not be deleted gets that error and stays
(broker/share_group_service.py)."""
from ...protocol.errors import ErrorCode
from ...protocol.messages.delete_groups import DeleteGroupsResponse
from .. import share_group_service
from ..authorization import DELETE, group_denied


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
    return share_group_service.delete_groups(broker, req, version, refused)
