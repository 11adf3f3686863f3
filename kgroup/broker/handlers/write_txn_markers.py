"""WriteTxnMarkers (27) v1-2 (v2 carries the transaction version): the path by which a transaction coordinator writes COMMIT/ABORT
control batches (the runtime calls the same ``write_markers`` directly, being on this node). A
marker of transaction version 2 must carry an epoch above the producer's (the coordinator bumped
it); an older or equal one is refused INVALID_PRODUCER_EPOCH, unless it repeats a marker already
written (ProducerAppendInfo.checkProducerEpoch).
Answered once the markers are fsynced. Unknown partitions answer UNKNOWN_TOPIC_OR_PARTITION."""
from ...protocol.errors import ErrorCode
from ...protocol.messages.write_txn_markers import WriteTxnMarkersResponse
from ...storage.txn_index import CorruptIndexError
from ..authorization import ALTER, CLUSTER_ACTION, CLUSTER_NAME, RT_CLUSTER, allowed
from ..coordinator_runtime import CoordinatorAppendError
from ..pending import PendingResponse

R = WriteTxnMarkersResponse.WritableTxnMarkerResult


def handle(broker, ctx, req, version):
    if broker.authorizer is not None and not allowed(broker, ctx, ALTER, RT_CLUSTER, CLUSTER_NAME) \
            and not allowed(broker, ctx, CLUSTER_ACTION, RT_CLUSTER, CLUSTER_NAME):   # KafkaApis: ALTER or CLUSTER_ACTION
        return _all_failed(req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    txn = broker.transaction_coordinator
    logs = set()
    results = []
    for m in req.markers:
        topics = []
        for t in m.topics:
            parts = []
            for p in t.partition_indexes:
                error = ErrorCode.NONE
                if not txn.partition_exists(t.name, p):
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    try:
                        logs |= txn.write_markers(m.producer_id, m.producer_epoch, m.transaction_result,
                                                  m.coordinator_epoch, ((t.name, p),),
                                                  m.transaction_version if version >= 2 else 0)
                    except CoordinatorAppendError as e:
                        if isinstance(e.cause, CorruptIndexError):
                            raise e.cause from None     # a broken index is the broker's failure
                        error = e.code
                parts.append(R.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
                    partition_index=p, error_code=error))
            topics.append(R.WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
        results.append(R(producer_id=m.producer_id, topics=topics))
    resp = WriteTxnMarkersResponse(markers=results)
    if not logs:
        return resp
    answered = PendingResponse()

    def flushed(f):
        if f.error is not None:
            for r in results:
                for t in r.topics:
                    for p in t.partitions:
                        if p.error_code == 0:
                            p.error_code = ErrorCode.KAFKA_STORAGE_ERROR
        answered.answer(resp)
    broker.data_path.wait_flushed(logs).listen(flushed)
    return answered


def _all_failed(req, code):
    R = WriteTxnMarkersResponse.WritableTxnMarkerResult
    T = R.WritableTxnMarkerTopicResult
    P = T.WritableTxnMarkerPartitionResult
    return WriteTxnMarkersResponse(markers=[R(producer_id=m.producer_id, topics=[
        T(name=t.name, partitions=[P(partition_index=p, error_code=code) for p in t.partition_indexes])
        for t in m.topics]) for m in req.markers])
