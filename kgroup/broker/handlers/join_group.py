"""JoinGroup (11) v0-9: handled by the group's coordinator shard (kgroup.coordinator)."""
from ...coordinator import GroupCoordinatorShard as Shard


def handle(broker, ctx, req, version):
    host = "/" + ctx.client_host  # Kafka prints the member's host as InetAddress.toString does
    return broker.group_coordinator.execute(req.group_id, Shard.handle_join_group, req, version, ctx.client_id, host)
