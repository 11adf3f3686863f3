"""ConsumerGroupDescribe (69) v0-1 (v1: each member's type, classic or consumer): split across the shards that own the groups (KIP-848)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse
from ...protocol.errors import ErrorCode
from ..authorized_operations import with_group_operations
from .consumer_group_heartbeat import consumer_protocol_enabled


def handle(broker, ctx, req, version):
    if not consumer_protocol_enabled(broker):     # group.version 0: the protocol is off
        code = int(ErrorCode.UNSUPPORTED_VERSION)
        return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[
            ConsumerGroupDescribeResponse.DescribedGroup(group_id=g, error_code=code,
                                                         error_message=ErrorCode.UNSUPPORTED_VERSION.message)
            for g in req.group_ids])
    return broker.group_coordinator.execute_split(
        req, "group_ids", Shard.handle_consumer_group_describe, version,
        lambda rs: with_group_operations(
            ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[g for r in rs for g in r.groups]),
            req.include_authorized_operations))
