"""TxnOffsetCommit (28) v0-5: a transactional producer's offsets for a group (KIP-98;
KIP-447's generation/member/instance fencing from v3), pending on the group's shard until the
transaction's marker. Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION, as KafkaApis
answers them (unknown_partitions.py); the rest go to the group coordinator.

Before the coordinator writes, the transaction is verified with the transaction coordinator, as
Kafka's runtime does (CoordinatorPartitionWriter.maybeStartTransactionVerification, with
``transaction.partition.verification.enable``): the group's ``__consumer_offsets`` partition must
be in the producer's ongoing transaction (AddOffsetsToTxn put it there) at its current producer
id and epoch. A refusal answers every partition: a stale or future epoch INVALID_PRODUCER_EPOCH,
an unknown producer INVALID_PRODUCER_ID_MAPPING, a partition not in the transaction
TRANSACTION_ABORTABLE (INVALID_TXN_STATE below v4, AddPartitionsToTxnManager); from v5 (transaction
version 2, no AddOffsetsToTxn) the partition is added to the transaction instead, then the offsets
are committed. In a cluster, a transaction coordinator on another broker is asked over the network
(``add_partitions_to_txn_manager.py``, AddPartitionsToTxn v4+). Below v2
COORDINATOR_LOAD_IN_PROGRESS is answered COORDINATOR_NOT_AVAILABLE, which clients before 2.0
expect (KafkaApis.handleTxnOffsetCommitRequest)."""
from ...coordinator.responses import txn_offset_commit_error_response
from ...protocol.errors import ErrorCode
from ...protocol.messages.txn_offset_commit import TxnOffsetCommitResponse
from ..authorization import (GROUP_AUTHORIZATION_FAILED, READ, RT_TRANSACTIONAL_ID, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                             WRITE, allowed, denied_topics, group_denied)
from ..metadata import OFFSETS_TOPIC
from ..pending import PendingResponse
from ..transaction_runtime import COMPLETION_WAIT_S
from .produce import chain, chain_value
from .unknown_partitions import commit_known_partitions

T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
P = T.TxnOffsetCommitResponsePartition

# CoordinatorOperationExceptionHelper.handleOperationException's translation of a failed step
_OPERATION_ERRORS = {ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
                     ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
                     ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
                     ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
                     ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR}


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
    verifying = broker.config["transaction.partition.verification.enable"]

    def commit(r, added=False, waited=False, verified=None):
        if r.topics and (verifying or version >= 5) and verified is None and broker.replica_manager.enabled:
            # the transactional id's coordinator is on another broker: asked over the network
            # (AddPartitionsToTxnManager; TV2 adds the partition there), then committed
            manager = broker.replica_manager.add_partitions_to_txn_manager
            coordinator = manager.remote_coordinator(r.transactional_id)
            if coordinator is not None:
                tp = (OFFSETS_TOPIC, broker.group_coordinator.shard_for(r.group_id))
                asked = manager.verify(coordinator, r.transactional_id, r.producer_id, r.producer_epoch, (tp,),
                                       add=version >= 5)
                return chain_value(asked, lambda errors: commit(r, True, True, errors[tp]))
        if version >= 5 and not waited and r.topics:
            # the producer's previous transaction is completing: its markers are being written
            # (Kafka answers CONCURRENT_TRANSACTIONS, which the producer retries; see
            # transaction_runtime.py)
            completing = broker.transaction_coordinator.completion(r.transactional_id, COMPLETION_WAIT_S)
            if completing is not None:
                return chain(completing, lambda: commit(r, added, waited=True))
        if r.topics and (verifying or version >= 5):
            error = _verify(broker, r, version, verified)
            if error == ErrorCode.TRANSACTION_ABORTABLE and version >= 5 and not added:
                return chain(_add_offsets_partition(broker, r), lambda: commit(r, added=True))
            if error and verifying:
                return txn_offset_commit_error_response(r, error)
        return broker.group_coordinator.execute_txn_offset_commit(r, version)
    answer = commit_known_partitions(broker.metadata, req, commit, T, P, denied)
    if version >= 2:
        return answer
    if type(answer) is PendingResponse:
        return answer.then(_not_loading)
    return _not_loading(answer)


def _verify(broker, req, version, verified=None) -> ErrorCode:
    """``verified``: the answer of a coordinator on another broker, else the local one's."""
    if verified is not None:
        error = ErrorCode(verified)
    else:
        tp = (OFFSETS_TOPIC, broker.group_coordinator.shard_for(req.group_id))
        error = ErrorCode(broker.transaction_coordinator.verify_partitions(
            req.transactional_id, req.producer_id, req.producer_epoch, (tp,))[tp])
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.TRANSACTION_ABORTABLE and version < 4:
        return ErrorCode.INVALID_TXN_STATE
    return _OPERATION_ERRORS.get(error, error)


def _add_offsets_partition(broker, req) -> PendingResponse:
    """The group's offsets partition added to the transaction as a broker adds it
    (AddPartitionsToTxn v5); answered once written or refused."""
    broker.group_coordinator.ensure_offsets_topic()     # the partition must exist to be added
    return broker.transaction_coordinator.add_partitions_as_broker(
        req.transactional_id, req.producer_id, req.producer_epoch,
        {OFFSETS_TOPIC: [broker.group_coordinator.shard_for(req.group_id)]})


def _not_loading(resp):
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                p.error_code = int(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return resp
