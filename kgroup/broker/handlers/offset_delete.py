"""OffsetDelete (47): handled by the group's coordinator shard (kgroup.coordinator); partitions
of unknown topics, or beyond a topic's partition count, are answered UNKNOWN_TOPIC_OR_PARTITION
here first and merged with the coordinator's answer (KafkaApis, OffsetDeleteResponse.Builder)."""
import copy
from ..authorization import DELETE, READ, denied_topics, group_denied

from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.errors import ErrorCode
from ...protocol.messages.offset_delete import OffsetDeleteResponse
from ..pending import PendingResponse

RT = OffsetDeleteResponse.OffsetDeleteResponseTopic
RP = RT.OffsetDeleteResponsePartition


def handle(broker, ctx, req, version):
    md = broker.metadata
    denied = None
    if broker.authorizer is not None:   # KafkaApis.handleOffsetDeleteRequest: DELETE group, READ topics
        if group_denied(broker, ctx, DELETE, req.group_id):
            return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
        denied = denied_topics(broker, ctx, READ, (t.name for t in req.topics))
    unknown, valid = [], []
    for t in req.topics:
        if denied and t.name in denied:
            unknown.append(RT(name=t.name, partitions=[RP(partition_index=p.partition_index,
                                                         error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                                                      for p in t.partitions]))
            continue
        topic = md.get(t.name)
        good = [] if topic is None else [p for p in t.partitions if 0 <= p.partition_index < topic.num_partitions]
        bad = [p.partition_index for p in t.partitions if p not in good]
        if bad:
            unknown.append(RT(name=t.name, partitions=[RP(partition_index=i,
                                                         error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                                                      for i in bad]))
        if good:
            sub_topic = copy.copy(t)
            sub_topic.partitions = good
            valid.append(sub_topic)
    if not unknown:
        return broker.group_coordinator.execute(req.group_id, Shard.handle_offset_delete, req, version)
    sub = copy.copy(req)
    sub.topics = valid
    answer = broker.group_coordinator.execute(req.group_id, Shard.handle_offset_delete, sub, version)
    if not isinstance(answer, PendingResponse):
        return _merge(unknown, answer)
    return PendingResponse.gather([answer], lambda rs: _merge(unknown, rs[0]))


def _merge(unknown, resp):
    if resp.error_code:
        return resp        # a group-level error replaces everything
    topics = list(unknown)
    by_name = {t.name: t for t in topics}
    for t in resp.topics:
        if t.name in by_name:
            by_name[t.name].partitions.extend(t.partitions)
        else:
            topics.append(t)
    return OffsetDeleteResponse(error_code=0, throttle_time_ms=resp.throttle_time_ms, topics=topics)
