"""EndTxn (26) v0-5: PrepareCommit/PrepareAbort written and fsynced, the markers appended, then
answered; the markers' fsync and CompleteCommit/CompleteAbort follow (``transaction_runtime``).
v5 (KIP-890 part 2, transaction version 2) bumps the producer epoch with every transaction and
answers the producer id and epoch to use next."""
from ...transaction_coordinator import TransactionCoordinatorShard as Shard

from ...protocol.messages.end_txn import EndTxnResponse
from ..authorization import RT_TRANSACTIONAL_ID, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, WRITE, allowed


def handle(broker, ctx, req, version):
    if broker.authorizer is not None and not allowed(broker, ctx, WRITE, RT_TRANSACTIONAL_ID, req.transactional_id):
        return EndTxnResponse(throttle_time_ms=0, error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED)   # KafkaApis
    return broker.transaction_coordinator.run(req.transactional_id, Shard.handle_end_txn, req, version)
