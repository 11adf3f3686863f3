"""AddOffsetsToTxn (25) v0-4: adds the group's ``__consumer_offsets`` partition to the
transaction, on the transactional id's shard."""
from ...transaction_coordinator import TransactionCoordinatorShard as Shard


def handle(broker, ctx, req, version):
    return broker.transaction_coordinator.run(req.transactional_id, Shard.handle_add_offsets_to_txn, req, version)
