"""AddOffsetsToTxn (25) v0-4: adds the group's ``__consumer_offsets`` partition to the
transaction, on the transactional id's shard."""
from ...transaction_coordinator import TransactionCoordinatorShard as Shard

from ...protocol.messages.add_offsets_to_txn import AddOffsetsToTxnResponse
from ..authorization import (GROUP_AUTHORIZATION_FAILED, READ, RT_TRANSACTIONAL_ID, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                             WRITE, allowed, group_denied)


def handle(broker, ctx, req, version):
    if broker.authorizer is not None:   # KafkaApis: WRITE on the transactional id, READ on the group
        if not allowed(broker, ctx, WRITE, RT_TRANSACTIONAL_ID, req.transactional_id):
            return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if group_denied(broker, ctx, READ, req.group_id):
            return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=GROUP_AUTHORIZATION_FAILED)
    return broker.transaction_coordinator.run(req.transactional_id, Shard.handle_add_offsets_to_txn, req, version)
