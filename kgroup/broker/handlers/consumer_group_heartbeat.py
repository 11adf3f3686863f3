"""ConsumerGroupHeartbeat (68) v0-1: the consumer group protocol (KIP-848), handled by the group's
coordinator shard (kgroup.coordinator.consumer_group). With ``group.version`` finalized below 1
the protocol is off: UNSUPPORTED_VERSION (KafkaApis.isConsumerGroupProtocolEnabled)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.errors import ErrorCode
from ...protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from ..features import GROUP_VERSION


def consumer_protocol_enabled(broker) -> bool:
    return broker.metadata.features.level(GROUP_VERSION) >= 1


def handle(broker, ctx, req, version):
    if not consumer_protocol_enabled(broker):
        return ConsumerGroupHeartbeatResponse(error_code=int(ErrorCode.UNSUPPORTED_VERSION),
                                              error_message=ErrorCode.UNSUPPORTED_VERSION.message)
    host = "/" + ctx.client_host  # as Kafka prints it (InetAddress.toString)
    return broker.group_coordinator.execute(req.group_id, Shard.handle_consumer_group_heartbeat, req, version,
                                            ctx.client_id, host)
