"""ShareAcknowledge (79) v1-2 (KIP-932; Kafka's KafkaApis.handleShareAcknowledgeRequest): the
acknowledgements of records the member holds, on its share session (epoch 0 is not allowed, -1
closes the session after them), answered once their state is durable."""
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.share_acknowledge import ShareAcknowledgeResponse
from ...share.share_session import FINAL_EPOCH, INITIAL_EPOCH
from ..authorization import GROUP_AUTHORIZATION_FAILED, READ, TOPIC_AUTHORIZATION_FAILED, denied_topics, group_denied
from ..pending import PendingResponse
from .share_fetch import leader_hint
from .share_group_heartbeat import share_groups_enabled

TopicResponse = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
PartitionData = TopicResponse.PartitionData


def _error(code, message=None):
    return ShareAcknowledgeResponse(error_code=int(code), error_message=message, responses=[], node_endpoints=[])


def handle(broker, ctx, req, version):
    if not share_groups_enabled(broker):
        return _error(ErrorCode.UNSUPPORTED_VERSION, ErrorCode.UNSUPPORTED_VERSION.message)
    spm = broker.share_partitions
    if broker.authorizer is not None:   # KafkaApis: READ on the group, READ on every topic it names
        if group_denied(broker, ctx, READ, req.group_id or ""):
            return _error(GROUP_AUTHORIZATION_FAILED)
        names = [t.name for t in (broker.metadata.by_id(x.topic_id) for x in req.topics) if t is not None]
        if names and denied_topics(broker, ctx, READ, names):
            return _error(TOPIC_AUTHORIZATION_FAILED)
    group_id, member_id, epoch = req.group_id, req.member_id, req.share_session_epoch
    if not group_id:
        return _error(ErrorCode.INVALID_GROUP_ID)
    if epoch == INITIAL_EPOCH:
        return _error(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
    try:
        session = spm.sessions.check(group_id, member_id, epoch)
    except KafkaError as e:
        return _error(e.code)
    if epoch != FINAL_EPOCH:
        spm.sessions.update(session, [], [])
    results = [(t.topic_id, p.partition_index,
                spm.acknowledge(group_id, member_id, t.topic_id, p.partition_index, p.acknowledgement_batches))
               for t in req.topics for p in t.partitions]
    lock_ms = spm.lock_duration_ms(group_id)

    def merge(_responses):
        if epoch == FINAL_EPOCH:
            spm.sessions.close(group_id, member_id)
            spm.release_session(group_id, member_id, list(session.partitions))
        by_topic: dict = {}
        endpoints: dict = {}
        for t, p, r in results:
            by_topic.setdefault(t, []).append(PartitionData(
                partition_index=p, error_code=int(r.response),
                current_leader=leader_hint(broker, t, p, PartitionData, endpoints)
                if r.response == ErrorCode.NOT_LEADER_OR_FOLLOWER
                else PartitionData.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)))
        return ShareAcknowledgeResponse(error_code=0, acquisition_lock_timeout_ms=lock_ms, node_endpoints=[
            ShareAcknowledgeResponse.NodeEndpoint(node_id=n, host=h, port=port, rack=rk)
            for n, (h, port, rk) in endpoints.items()],
                                        responses=[TopicResponse(topic_id=t, partitions=ps)
                                                   for t, ps in by_topic.items()])
    if not results:
        return merge([])
    return PendingResponse.gather([r for _, _, r in results], merge)
