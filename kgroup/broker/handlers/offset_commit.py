"""OffsetCommit (8) v0-9: partitions of topics this broker does not have get
UNKNOWN_TOPIC_OR_PARTITION (Kafka's KafkaApis check); the rest go to the group's shard."""
import copy

from ...protocol.errors import ErrorCode
from ...protocol.messages.offset_commit import OffsetCommitResponse

TopicResponse = OffsetCommitResponse.OffsetCommitResponseTopic
PartitionResponse = OffsetCommitResponse.OffsetCommitResponsePartition


def handle(broker, ctx, req, version):
    md = broker.metadata
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
        return broker.groups.execute(req.group_id, lambda shard, now, token: shard.handle_offset_commit(
            req, version, now, token))
    sub = copy.copy(req)
    sub.topics = known
    fut = broker.groups.execute(req.group_id, lambda shard, now, token: shard.handle_offset_commit(
        sub, version, now, token))
    return _with_unknown(fut, unknown)


async def _with_unknown(fut, unknown):
    resp = await fut
    for name, partitions in unknown:
        tr = next((t for t in resp.topics if t.name == name), None)
        if tr is None:
            tr = TopicResponse(name=name, partitions=[])
            resp.topics.append(tr)
        tr.partitions.extend(PartitionResponse(partition_index=p, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                             for p in partitions)
    return resp
