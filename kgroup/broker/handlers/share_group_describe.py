"""ShareGroupDescribe (77) v1: share groups as their coordinator shards see them, split by shard."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.messages.share_group_describe import ShareGroupDescribeResponse
from ..authorization import DESCRIBE, GROUP_AUTHORIZATION_FAILED, group_denied


def handle(broker, ctx, req, version):
    refused = []
    if broker.authorizer is not None:   # KafkaApis: DESCRIBE on each group
        D = ShareGroupDescribeResponse.DescribedGroup
        denied = [g for g in req.group_ids if group_denied(broker, ctx, DESCRIBE, g)]
        refused = [D(group_id=g, error_code=GROUP_AUTHORIZATION_FAILED) for g in denied]
        req.group_ids = [g for g in req.group_ids if g not in denied]
        if not req.group_ids:
            return ShareGroupDescribeResponse(groups=refused)
    return broker.group_coordinator.execute_split(
        req, "group_ids", Shard.handle_share_group_describe, version,
        lambda rs: ShareGroupDescribeResponse(groups=[g for r in rs for g in r.groups] + refused))
