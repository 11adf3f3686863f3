"""OffsetCommit (8) v0-9: partitions of topics this broker does not have get
UNKNOWN_TOPIC_OR_PARTITION (Kafka's KafkaApis check); the rest go to the group's shard, whose
runtime may batch consecutive commits into one write (``GroupRuntime.execute(offset_commit=True)``)."""
import copy

from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.errors import ErrorCode
from ...protocol.messages.offset_commit import OffsetCommitResponse
from ..pending import PendingResponse

TopicResponse = OffsetCommitResponse.OffsetCommitResponseTopic
PartitionResponse = OffsetCommitResponse.OffsetCommitResponsePartition


def handle(broker, ctx, req, version):
    md = broker.metadata
    coordinator = broker.group_coordinator
    if _all_known(md, req.topics):
        return coordinator.execute(req.group_id, Shard.handle_offset_commit, req, version, offset_commit=True)
    unknown = []
    known = []
    for t in req.topics:
        topic = md.get(t.name)
        bad = [p.partition_index for p in t.partitions
               if topic is None or not 0 <= p.partition_index < topic.num_partitions]
        if bad:
            unknown.append((t.name, bad))
            t = copy.copy(t)
            t.partitions = [p for p in t.partitions if p.partition_index not in bad]
        if t.partitions:
            known.append(t)
    if not unknown:
        return coordinator.execute(req.group_id, Shard.handle_offset_commit, req, version, offset_commit=True)
    sub = copy.copy(req)
    sub.topics = known
    answer = coordinator.execute(req.group_id, Shard.handle_offset_commit, sub, version, offset_commit=True)
    if type(answer) is PendingResponse:
        return PendingResponse.gather([answer], lambda responses: _with_unknown(responses[0], unknown))
    return _with_unknown(answer, unknown)


def _all_known(md, topics) -> bool:
    for t in topics:
        topic = md.get(t.name)
        if topic is None:
            return False
        n = topic.num_partitions
        for p in t.partitions:
            if not 0 <= p.partition_index < n:
                return False
    return True


def _with_unknown(resp, unknown):
    for name, partitions in unknown:
        tr = next((t for t in resp.topics if t.name == name), None)
        if tr is None:
            tr = TopicResponse(name=name, partitions=[])
            resp.topics.append(tr)
        tr.partitions.extend(PartitionResponse(partition_index=p, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                             for p in partitions)
    return resp
