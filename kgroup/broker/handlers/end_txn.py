"""EndTxn (26) v0-4: PrepareCommit/PrepareAbort written and fsynced, the markers appended, then
answered; the markers' fsync and CompleteCommit/CompleteAbort follow (``transaction_runtime``).
v5 (KIP-890's epoch bump per transaction) is not served."""
from ...transaction_coordinator import TransactionCoordinatorShard as Shard


def handle(broker, ctx, req, version):
    return broker.transaction_coordinator.run(req.transactional_id, Shard.handle_end_txn, req, version)
