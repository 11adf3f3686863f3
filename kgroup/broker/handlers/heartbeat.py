"""Heartbeat (12): handled by the group's coordinator shard (kgroup.coordinator)."""
from ...coordinator import GroupCoordinatorShard as Shard


def handle(broker, ctx, req, version):
    return broker.group_coordinator.execute(req.group_id, Shard.handle_heartbeat, req, version)
