"""EndTxn (26) v0-5: PrepareCommit/PrepareAbort written and fsynced, the markers appended, then
answered; the markers' fsync and CompleteCommit/CompleteAbort follow (``transaction_runtime``).
v5 (KIP-890 part 2, transaction version 2) bumps the producer epoch with every transaction and
answers the producer id and epoch to use next."""
from ...transaction_coordinator import TransactionCoordinatorShard as Shard


def handle(broker, ctx, req, version):
    return broker.transaction_coordinator.run(req.transactional_id, Shard.handle_end_txn, req, version)
