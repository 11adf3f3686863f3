"""OffsetFetch (9) v0-9: one group (v0-7) or many (v8+, split across the shards that own them
and answered in request order)."""
import copy

from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.messages.offset_fetch import OffsetFetchResponse


def handle(broker, ctx, req, version):
    if version < 8:
        return broker.group_coordinator.execute(req.group_id, Shard.handle_offset_fetch, req, version)

    def build(groups):
        sub = copy.copy(req)
        sub.groups = groups
        return sub

    def merge(responses):
        return OffsetFetchResponse(throttle_time_ms=0, groups=[g for r in responses for g in r.groups])

    return broker.group_coordinator.execute_many(
        [g.group_id for g in req.groups], req.groups, build,
        lambda shard, sub, now, token: shard.handle_offset_fetch(sub, version, now, token), merge)
