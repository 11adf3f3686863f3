"""TxnOffsetCommit (28) v0-4: a transactional producer's offsets for a group (KIP-98;
KIP-447's generation/member/instance fencing from v3), pending on the group's shard until the
transaction's marker. Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION, as KafkaApis
answers them; the rest go to the group coordinator."""
import copy

from ...protocol.errors import ErrorCode
from ...protocol.messages.txn_offset_commit import TxnOffsetCommitResponse
from ..pending import PendingResponse

T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
P = T.TxnOffsetCommitResponsePartition


def handle(broker, ctx, req, version):
    md = broker.metadata
    unknown, known = [], []
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
        return broker.group_coordinator.execute_txn_offset_commit(req, version)
    sub = copy.copy(req)
    sub.topics = known
    answer = broker.group_coordinator.execute_txn_offset_commit(sub, version)
    if type(answer) is PendingResponse:
        return PendingResponse.gather([answer], lambda rs: _with_unknown(rs[0], unknown))
    return _with_unknown(answer, unknown)


def _with_unknown(resp, unknown):
    for name, partitions in unknown:
        resp.topics.append(T(name=name, partitions=[
            P(partition_index=p, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for p in partitions]))
    return resp
