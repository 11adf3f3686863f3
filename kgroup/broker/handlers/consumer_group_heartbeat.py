"""ConsumerGroupHeartbeat (68) v0-1: the consumer group protocol (KIP-848), handled by the group's
coordinator shard (kgroup.coordinator.consumer_group)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from ..authorization import (DESCRIBE, GROUP_AUTHORIZATION_FAILED, READ, TOPIC_AUTHORIZATION_FAILED, denied_topics,
                             group_denied)


def handle(broker, ctx, req, version):
    if broker.authorizer is not None:   # KafkaApis: READ on the group, DESCRIBE on every subscribed topic
        if group_denied(broker, ctx, READ, req.group_id):
            return ConsumerGroupHeartbeatResponse(error_code=GROUP_AUTHORIZATION_FAILED, member_epoch=-1)
        if req.subscribed_topic_names and denied_topics(broker, ctx, DESCRIBE, req.subscribed_topic_names):
            return ConsumerGroupHeartbeatResponse(error_code=TOPIC_AUTHORIZATION_FAILED, member_epoch=-1)
    host = "/" + ctx.client_host  # as Kafka prints it (InetAddress.toString)
    return broker.group_coordinator.execute(req.group_id, Shard.handle_consumer_group_heartbeat, req, version,
                                            ctx.client_id, host)
