"""ConsumerGroupHeartbeat (68) v0-1: the consumer group protocol (KIP-848), handled by the group's
coordinator shard (kgroup.coordinator.consumer_group). With ``group.version`` finalized below 1
the protocol is off: UNSUPPORTED_VERSION (KafkaApis.isConsumerGroupProtocolEnabled)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.errors import ErrorCode
from ...protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from ..authorization import (DESCRIBE, GROUP_AUTHORIZATION_FAILED, READ, TOPIC_AUTHORIZATION_FAILED, denied_topics,
                             group_denied)
from ..features import GROUP_VERSION


def consumer_protocol_enabled(broker) -> bool:
    return broker.metadata.features.level(GROUP_VERSION) >= 1


def handle(broker, ctx, req, version):
    if not consumer_protocol_enabled(broker):
        return ConsumerGroupHeartbeatResponse(error_code=int(ErrorCode.UNSUPPORTED_VERSION),
                                              error_message=ErrorCode.UNSUPPORTED_VERSION.message)
    if broker.authorizer is not None:   # KafkaApis: READ on the group, DESCRIBE on every subscribed topic
        if group_denied(broker, ctx, READ, req.group_id):
            return ConsumerGroupHeartbeatResponse(error_code=GROUP_AUTHORIZATION_FAILED, member_epoch=-1)
        if req.subscribed_topic_names and denied_topics(broker, ctx, DESCRIBE, req.subscribed_topic_names):
            return ConsumerGroupHeartbeatResponse(error_code=TOPIC_AUTHORIZATION_FAILED, member_epoch=-1)
    host = "/" + ctx.client_host  # as Kafka prints it (InetAddress.toString)
    return broker.group_coordinator.execute(req.group_id, Shard.handle_consumer_group_heartbeat, req, version,
                                            ctx.client_id, host)
