"""InitProducerId (22) v0-5. Without a transactional id (idempotent producers): a fresh producer
id (never reused across restarts) with epoch 0. With one: the transaction coordinator's shard
for it (epoch bump, fencing, KIP-360 recovery)."""
from ...protocol.messages.init_producer_id import InitProducerIdResponse
from ...transaction_coordinator import TransactionCoordinatorShard as Shard


def handle(broker, ctx, req, version):
    if req.transactional_id is not None:
        return broker.transaction_coordinator.run(req.transactional_id, Shard.handle_init_producer_id,
                                                  req, version)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0,
                                  producer_id=broker.data_path.producer_ids.allocate(), producer_epoch=0)
