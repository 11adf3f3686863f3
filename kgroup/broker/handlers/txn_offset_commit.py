"""TxnOffsetCommit (28) v0-4: a transactional producer's offsets for a group (KIP-98;
KIP-447's generation/member/instance fencing from v3), pending on the group's shard until the
transaction's marker. Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION, as KafkaApis
answers them (unknown_partitions.py); the rest go to the group coordinator."""
from ...protocol.messages.txn_offset_commit import TxnOffsetCommitResponse
from ..authorization import (GROUP_AUTHORIZATION_FAILED, READ, RT_TRANSACTIONAL_ID, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                             WRITE, allowed, denied_topics, group_denied)
from .unknown_partitions import commit_known_partitions

T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
P = T.TxnOffsetCommitResponsePartition


def handle(broker, ctx, req, version):
    denied = None
    if broker.authorizer is not None:   # KafkaApis: WRITE transactional id, READ group, READ topics
        code = None
        if not allowed(broker, ctx, WRITE, RT_TRANSACTIONAL_ID, req.transactional_id):
            code = TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif group_denied(broker, ctx, READ, req.group_id):
            code = GROUP_AUTHORIZATION_FAILED
        if code is not None:
            return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
                T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=code) for p in t.partitions])
                for t in req.topics])
        denied = denied_topics(broker, ctx, READ, (t.name for t in req.topics))
    return commit_known_partitions(
        broker.metadata, req, lambda r: broker.group_coordinator.execute_txn_offset_commit(r, version), T, P, denied)
