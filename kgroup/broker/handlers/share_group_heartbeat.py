"""ShareGroupHeartbeat (76) v1: share group membership (KIP-932), handled by the group's coordinator
shard (kgroup.coordinator.share_group). After the heartbeat's records are written, the
share-partitions it marked initializing are initialized through the share coordinator, and the
answer goes back to the group's shard (Kafka's GroupCoordinatorService.persisterInitialize). A
member leaving the group keeps its share session: its final ShareAcknowledge (or its connection
closing) releases what it holds, as in Kafka."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...coordinator.share_group.manager import ShareStateInitialized
from ...protocol.errors import ErrorCode
from ...protocol.messages.share_group_heartbeat import ShareGroupHeartbeatResponse
from ..features import SHARE_VERSION
from ..authorization import (DESCRIBE, GROUP_AUTHORIZATION_FAILED, READ, TOPIC_AUTHORIZATION_FAILED, denied_topics,
                             group_denied)


def share_groups_enabled(broker) -> bool:
    """KafkaApis.isShareGroupProtocolEnabled: ``share.version`` finalized at 1 or above."""
    return broker.metadata.features.level(SHARE_VERSION) >= 1


def handle(broker, ctx, req, version):
    if not share_groups_enabled(broker):
        return ShareGroupHeartbeatResponse(error_code=int(ErrorCode.UNSUPPORTED_VERSION),
                                           error_message=ErrorCode.UNSUPPORTED_VERSION.message)
    if broker.authorizer is not None:   # KafkaApis: READ on the group, DESCRIBE on every subscribed topic
        if group_denied(broker, ctx, READ, req.group_id):
            return ShareGroupHeartbeatResponse(error_code=GROUP_AUTHORIZATION_FAILED)
        if req.subscribed_topic_names and denied_topics(broker, ctx, DESCRIBE, req.subscribed_topic_names):
            return ShareGroupHeartbeatResponse(error_code=TOPIC_AUTHORIZATION_FAILED)
    host = "/" + ctx.client_host  # as Kafka prints it (InetAddress.toString)
    gc = broker.group_coordinator
    answer = gc.execute(req.group_id, Shard.handle_share_group_heartbeat, req, version, ctx.client_id, host)
    shard = gc.shards.get(gc.shard_for(req.group_id)) if req.group_id else None
    if shard is not None:
        for init in shard.share_group_manager.drain_initializations():
            initialize(broker, init)
    return answer


def initialize(broker, init) -> None:
    """InitializeShareGroupState for ``init`` (a share_group.manager.InitializeShareGroupState);
    the group's shard learns which partitions succeeded."""
    pending = broker.share_coordinator.initialize(init.group_id, init.topics, init.group_epoch)

    def done(answered):
        ok, failed = {}, {}
        if answered.error is not None:
            failed = dict(init.topics)
        else:
            for t in answered.response.results:
                for p in t.partitions:
                    (ok if p.error_code == ErrorCode.NONE else failed).setdefault(t.topic_id, set()).add(p.partition)
        gc = broker.group_coordinator
        for topics, succeeded in ((ok, True), (failed, False)):
            if topics:
                gc.execute(init.group_id, Shard.handle_initialize_share_group_state,
                           ShareStateInitialized(init.group_id, {t: frozenset(p) for t, p in topics.items()},
                                                 succeeded), 0)
    pending.listen(done)
