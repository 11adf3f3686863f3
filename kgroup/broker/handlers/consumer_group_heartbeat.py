"""ConsumerGroupHeartbeat (68) v0-1: the consumer group protocol (KIP-848), handled by the group's
coordinator shard (kgroup.coordinator.consumer_group)."""
from ...coordinator import GroupCoordinatorShard as Shard


def handle(broker, ctx, req, version):
    host = "/" + ctx.client_host  # as Kafka prints it (InetAddress.toString)
    return broker.group_coordinator.execute(req.group_id, Shard.handle_consumer_group_heartbeat, req, version,
                                            ctx.client_id, host)
