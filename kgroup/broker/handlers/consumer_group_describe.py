"""ConsumerGroupDescribe (69) v0-1 (v1: each member's type, classic or consumer): split across the
shards that own the groups (KIP-848)."""
import copy

from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.errors import ErrorCode
from ...protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse
from ..authorization import DESCRIBE, GROUP_AUTHORIZATION_FAILED, RT_GROUP, group_denied, operations
from ..authorized_operations import with_group_operations
from .consumer_group_heartbeat import consumer_protocol_enabled


def handle(broker, ctx, req, version):
    if not consumer_protocol_enabled(broker):     # group.version 0: the protocol is off
        code = int(ErrorCode.UNSUPPORTED_VERSION)
        return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[
            ConsumerGroupDescribeResponse.DescribedGroup(group_id=g, error_code=code,
                                                         error_message=ErrorCode.UNSUPPORTED_VERSION.message)
            for g in req.group_ids])
    if broker.authorizer is not None:
        return _authorized(broker, ctx, req, version)
    return broker.group_coordinator.execute_split(
        req, "group_ids", Shard.handle_consumer_group_describe, version,
        lambda rs: with_group_operations(
            ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[g for r in rs for g in r.groups]),
            req.include_authorized_operations))


def _authorized(broker, ctx, req, version):
    """KafkaApis.handleConsumerGroupDescribe: DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED),
    the authorized operations from the ACLs."""
    G = ConsumerGroupDescribeResponse.DescribedGroup
    denied = [g for g in req.group_ids if group_denied(broker, ctx, DESCRIBE, g)]
    order = {g: i for i, g in enumerate(req.group_ids)}

    def merge(groups):
        groups += [G(error_code=GROUP_AUTHORIZATION_FAILED, group_id=g, group_state="", group_epoch=-1,
                     assignment_epoch=-1, assignor_name="", members=[]) for g in denied]
        groups.sort(key=lambda g: order.get(g.group_id, 0))
        if req.include_authorized_operations:
            for g in groups:
                if g.error_code == 0:
                    g.authorized_operations = operations(broker, ctx, RT_GROUP, g.group_id)
        return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)
    if len(denied) == len(req.group_ids):
        return merge([])
    sub = copy.copy(req)
    sub.group_ids = [g for g in req.group_ids if g not in denied]
    return broker.group_coordinator.execute_split(
        sub, "group_ids", Shard.handle_consumer_group_describe, version,
        lambda rs: merge([g for r in rs for g in r.groups]))
