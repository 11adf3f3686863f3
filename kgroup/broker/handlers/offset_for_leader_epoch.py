"""OffsetForLeaderEpoch (23) v2-4 (KIP-101, KIP-320): the end offset of a leader epoch, which a
consumer asks after a leader change to detect log truncation, and a follower to find where its log
diverges from its leader's.

The answer comes from the log's leader epoch cache (``leader-epoch-checkpoint``,
LeaderEpochFileCache.endOffsetFor): the latest epoch ends at the log end offset, an older one
where the next one starts, an unknown (newer, or -1) one is (-1, -1). A log whose cache is still
empty (one node, nothing appended since) has one epoch, the log's, since its start. A
``current_leader_epoch`` other than the partition's is refused as Kafka's Partition refuses it:
newer UNKNOWN_LEADER_EPOCH, older FENCED_LEADER_EPOCH. In a cluster only the partition's leader
answers (NOT_LEADER_OR_FOLLOWER)."""
from ...protocol.errors import ErrorCode
from ...protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochResponse
from ..authorization import CLUSTER_ACTION, CLUSTER_NAME, DESCRIBE, RT_CLUSTER, allowed, denied_topics

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = TopicResult.EpochEndOffset
UNDEFINED = -1


def end_offset_for(plog, requested: int) -> tuple[int, int]:
    """(epoch, end offset) as LeaderEpochFileCache.endOffsetFor answers."""
    cache = plog.leader_epoch_cache
    if cache:
        return cache.end_offset_for(requested, plog.log_end_offset)
    current = plog.leader_epoch
    if requested == UNDEFINED or requested > current:
        return UNDEFINED, UNDEFINED
    if requested == current:
        return current, plog.log_end_offset
    return requested, plog.log_start_offset


def handle(broker, ctx, req, version):
    # KafkaApis: CLUSTER_ACTION (a replica), else DESCRIBE on each topic (KIP-320's clients)
    denied = None if allowed(broker, ctx, CLUSTER_ACTION, RT_CLUSTER, CLUSTER_NAME) else \
        denied_topics(broker, ctx, DESCRIBE, (t.topic for t in req.topics))
    rm = broker.replica_manager
    topics = []
    for t in req.topics:
        if denied and t.topic in denied:
            topics.append(TopicResult(topic=t.topic, partitions=[EpochEndOffset(
                partition=p.partition, error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), leader_epoch=UNDEFINED,
                end_offset=UNDEFINED) for p in t.partitions]))
            continue
        topic = broker.metadata.get(t.topic)
        parts = []
        for p in t.partitions:
            out = EpochEndOffset(partition=p.partition, error_code=0, leader_epoch=UNDEFINED, end_offset=UNDEFINED)
            parts.append(out)
            plog = broker.data_path.log(t.topic, p.partition) \
                if topic is not None and 0 <= p.partition < topic.num_partitions else None
            if plog is None:
                out.error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif rm.enabled:
                part, error = rm.leader_partition(t.topic, p.partition, p.current_leader_epoch)
                if error is not None:
                    out.error_code = int(error)
                else:
                    out.leader_epoch, out.end_offset = end_offset_for(plog, p.leader_epoch)
            elif p.current_leader_epoch != UNDEFINED and p.current_leader_epoch > plog.leader_epoch:
                out.error_code = int(ErrorCode.UNKNOWN_LEADER_EPOCH)
            elif p.current_leader_epoch != UNDEFINED and p.current_leader_epoch < plog.leader_epoch:
                out.error_code = int(ErrorCode.FENCED_LEADER_EPOCH)
            else:
                out.leader_epoch, out.end_offset = end_offset_for(plog, p.leader_epoch)
        topics.append(TopicResult(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
