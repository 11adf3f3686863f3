"""ShareGroupDescribe (77) v1: share groups as their coordinator shards see them, split by shard."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.messages.share_group_describe import ShareGroupDescribeResponse


def _merge(responses):
    out = ShareGroupDescribeResponse(groups=[])
    for r in responses:
        out.groups.extend(r.groups)
    return out


def handle(broker, ctx, req, version):
    return broker.group_coordinator.execute_split(req, "group_ids", Shard.handle_share_group_describe, version, _merge)
