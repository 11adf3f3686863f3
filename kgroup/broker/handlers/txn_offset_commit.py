"""TxnOffsetCommit (28) v0-4: a transactional producer's offsets for a group (KIP-98;
KIP-447's generation/member/instance fencing from v3), pending on the group's shard until the
transaction's marker. Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION, as KafkaApis
answers them (unknown_partitions.py); the rest go to the group coordinator."""
from ...protocol.messages.txn_offset_commit import TxnOffsetCommitResponse
from .unknown_partitions import commit_known_partitions

T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
P = T.TxnOffsetCommitResponsePartition


def handle(broker, ctx, req, version):
    return commit_known_partitions(
        broker.metadata, req, lambda r: broker.group_coordinator.execute_txn_offset_commit(r, version), T, P)
