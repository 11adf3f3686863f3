"""InitProducerId (22) v0-5. Without a transactional id (idempotent producers): a fresh producer
id (never reused across restarts) with epoch 0. With one: the transaction coordinator's shard
for it (epoch bump, fencing, KIP-360 recovery). A producer id without an epoch, or an epoch
without a producer id, is INVALID_REQUEST before either (KafkaApis.handleInitProducerIdRequest)."""
from ...protocol.errors import ErrorCode
from ...protocol.messages.init_producer_id import InitProducerIdResponse
from ...transaction_coordinator import TransactionCoordinatorShard as Shard
from ..authorization import (CLUSTER_AUTHORIZATION_FAILED, CLUSTER_NAME, IDEMPOTENT_WRITE, RT_CLUSTER, RT_TOPIC,
                             RT_TRANSACTIONAL_ID, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, WRITE, allowed)

NO_PRODUCER_ID, NO_PRODUCER_EPOCH = -1, -1


def handle(broker, ctx, req, version):
    if broker.authorizer is not None:   # KafkaApis.handleInitProducerIdRequest
        if req.transactional_id is not None:
            if not allowed(broker, ctx, WRITE, RT_TRANSACTIONAL_ID, req.transactional_id):
                return InitProducerIdResponse(throttle_time_ms=0, error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                              producer_id=-1, producer_epoch=-1)
        elif not allowed(broker, ctx, IDEMPOTENT_WRITE, RT_CLUSTER, CLUSTER_NAME) and \
                not broker.authorizer.authorize_by_resource_type(ctx, WRITE, RT_TOPIC):
            return InitProducerIdResponse(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
                                          producer_id=-1, producer_epoch=-1)
    if (req.producer_id == NO_PRODUCER_ID) != (req.producer_epoch == NO_PRODUCER_EPOCH):
        return InitProducerIdResponse(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST),
                                      producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)
    if req.transactional_id is not None:
        return broker.transaction_coordinator.run(req.transactional_id, Shard.handle_init_producer_id,
                                                  req, version)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0,
                                  producer_id=broker.data_path.producer_ids.allocate(), producer_epoch=0)
