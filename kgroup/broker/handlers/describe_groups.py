"""DescribeGroups (15) v0-6: split across the shards that own the groups, with Kafka's state names
(Empty, PreparingRebalance, CompletingRebalance, Stable, Dead). A group the coordinator does not
have is answered Dead; from v6 also with GROUP_ID_NOT_FOUND and a message (KIP-1043,
GroupMetadataManager.describeGroups)."""
import copy

from ...coordinator import GroupCoordinatorShard as Shard
from ...coordinator.responses import describe_error_group
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_groups import DescribeGroupsResponse
from ..authorization import DESCRIBE, RT_GROUP, group_denied, operations
from ..authorized_operations import with_group_operations


def handle(broker, ctx, req, version):
    asked = version >= 3 and req.include_authorized_operations
    if broker.authorizer is not None:
        return _authorized(broker, ctx, req, version, asked)
    return broker.group_coordinator.execute_split(
        req, "groups", Shard.handle_describe_groups, version,
        lambda rs: with_group_operations(
            DescribeGroupsResponse(throttle_time_ms=0, groups=_not_found([g for r in rs for g in r.groups], version)),
            asked))


def _not_found(groups, version):
    """v6 (KIP-1043): a group the coordinator does not have is GROUP_ID_NOT_FOUND as well as Dead."""
    if version >= 6:
        for g in groups:
            if g.error_code == 0 and g.group_state == "Dead":
                g.error_code = int(ErrorCode.GROUP_ID_NOT_FOUND)
                g.error_message = g.error_message or f"Group {g.group_id} not found."
    return groups


def _authorized(broker, ctx, req, version, asked):
    """KafkaApis.handleDescribeGroupsRequest: DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED);
    the authorized operations from the ACLs."""
    denied = [g for g in req.groups if group_denied(broker, ctx, DESCRIBE, g)]
    order = {g: i for i, g in enumerate(req.groups)}

    def merge(groups):
        groups = _not_found(groups, version)
        groups += [describe_error_group(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in denied]
        groups.sort(key=lambda g: order.get(g.group_id, 0))
        if asked:
            for g in groups:
                if g.error_code == 0:
                    g.authorized_operations = operations(broker, ctx, RT_GROUP, g.group_id)
        return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)
    if len(denied) == len(req.groups):
        return merge([])
    sub = copy.copy(req)
    sub.groups = [g for g in req.groups if g not in denied]
    return broker.group_coordinator.execute_split(
        sub, "groups", Shard.handle_describe_groups, version, lambda rs: merge([g for r in rs for g in r.groups]))
