"""InitProducerId (22) v0-5 for idempotent producers: a fresh producer id (never reused across
restarts) with epoch 0. Transactional ids need a transaction coordinator, which this broker does
not run yet: they get NOT_COORDINATOR, as from a broker that does not own the transactional id."""
from ...protocol.errors import ErrorCode
from ...protocol.messages.init_producer_id import InitProducerIdResponse


def handle(broker, ctx, req, version):
    if req.transactional_id is not None:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NOT_COORDINATOR,
                                      producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0,
                                  producer_id=broker.data_path.producer_ids.allocate(), producer_epoch=0)
