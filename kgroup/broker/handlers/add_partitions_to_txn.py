"""AddPartitionsToTxn (24) v0-5 on the transactional id's shard of ``__transaction_state``.
v0-3 come from producers (one transaction); v4-5 (KIP-890) batch transactions, each going to
its own shard, the answers concatenated in shard order as Kafka's coordinator answers them."""
from ...protocol.messages.add_partitions_to_txn import AddPartitionsToTxnResponse
from ...transaction_coordinator import TransactionCoordinatorShard as Shard

from ...protocol.errors import ErrorCode
from ..authorization import (CLUSTER_ACTION, CLUSTER_AUTHORIZATION_FAILED, CLUSTER_NAME, RT_CLUSTER,
                             RT_TRANSACTIONAL_ID, TOPIC_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                             WRITE, allowed, denied_topics)
from ..metadata import INTERNAL_TOPICS


def handle(broker, ctx, req, version):
    txn = broker.transaction_coordinator
    exists = txn.partition_exists
    if broker.authorizer is not None:
        refused = _authorize(broker, ctx, req, version)
        if refused is not None:
            return refused
    if version < 4:
        return txn.run(req.v3_and_below_transactional_id, Shard.handle_add_partitions_to_txn, req, version, exists)
    return txn.execute_split(
        req, "transactions", Shard.handle_add_partitions_to_txn, version,
        lambda rs: AddPartitionsToTxnResponse(
            throttle_time_ms=0, error_code=next((r.error_code for r in rs if r.error_code), 0),
            results_by_transaction=[t for r in rs for t in r.results_by_transaction]),
        group_id_of=lambda t: t.transactional_id, extra=(exists,))


def _authorize(broker, ctx, req, version):
    """KafkaApis.handleAddPartitionsToTxnRequest: v4+ (from brokers) CLUSTER_ACTION; v0-3 WRITE on
    the transactional id, then WRITE on each topic (the others then OPERATION_NOT_ATTEMPTED)."""
    R = AddPartitionsToTxnResponse
    T, P = R.AddPartitionsToTxnTopicResult, R.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult
    if version >= 4:
        if allowed(broker, ctx, CLUSTER_ACTION, RT_CLUSTER, CLUSTER_NAME):
            return None
        return R(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[])

    def answer(code_of):
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=[
            T(name=t.name, results_by_partition=[P(partition_index=p, partition_error_code=code_of(t.name))
                                                 for p in t.partitions]) for t in req.v3_and_below_topics])
    if not allowed(broker, ctx, WRITE, RT_TRANSACTIONAL_ID, req.v3_and_below_transactional_id):
        return answer(lambda name: TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    denied = denied_topics(broker, ctx, WRITE, (t.name for t in req.v3_and_below_topics
                                                if t.name not in INTERNAL_TOPICS))
    if not denied:
        return None
    return answer(lambda name: TOPIC_AUTHORIZATION_FAILED if name in denied else ErrorCode.OPERATION_NOT_ATTEMPTED)
