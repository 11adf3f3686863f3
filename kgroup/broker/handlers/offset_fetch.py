"""OffsetFetch (9) v0-9: one group (v0-7) or many (v8+, split across the shards that own them
and answered in request order)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.messages.offset_fetch import OffsetFetchResponse


def handle(broker, ctx, req, version):
    if version < 8:
        return broker.group_coordinator.execute(req.group_id, Shard.handle_offset_fetch, req, version)
    return broker.group_coordinator.execute_split(
        req, "groups", Shard.handle_offset_fetch, version,
        lambda rs: OffsetFetchResponse(throttle_time_ms=0, groups=[g for r in rs for g in r.groups]),
        group_id_of=lambda g: g.group_id)
