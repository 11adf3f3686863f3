"""AddPartitionsToTxn (24) v0-5 on the transactional id's shard of ``__transaction_state``.
v0-3 come from producers (one transaction); v4-5 (KIP-890) batch transactions, each going to
its own shard, the answers concatenated in shard order as Kafka's coordinator answers them."""
from ...protocol.messages.add_partitions_to_txn import AddPartitionsToTxnResponse
from ...transaction_coordinator import TransactionCoordinatorShard as Shard


def handle(broker, ctx, req, version):
    txn = broker.transaction_coordinator
    exists = txn.partition_exists
    if version < 4:
        return txn.run(req.v3_and_below_transactional_id, Shard.handle_add_partitions_to_txn, req, version, exists)
    return txn.execute_split(
        req, "transactions", Shard.handle_add_partitions_to_txn, version,
        lambda rs: AddPartitionsToTxnResponse(
            throttle_time_ms=0, error_code=next((r.error_code for r in rs if r.error_code), 0),
            results_by_transaction=[t for r in rs for t in r.results_by_transaction]),
        group_id_of=lambda t: t.transactional_id, extra=(exists,))
