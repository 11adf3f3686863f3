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
    written: dict[tuple, tuple] = {}    # (topic, partition) -> (its log, its partition result)
    cluster = broker.replica_manager.enabled
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
                        appended = txn.write_markers(m.producer_id, m.producer_epoch, m.transaction_result,
                                                     m.coordinator_epoch, ((t.name, p),),
                                                     m.transaction_version if version >= 2 else 0)
                    except CoordinatorAppendError as e:
                        if isinstance(e.cause, CorruptIndexError):
                            raise e.cause from None     # a broken index is the broker's failure
                        error = e.code
                    else:
                        logs |= appended
                result = R.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
                    partition_index=p, error_code=error)
                parts.append(result)
                if cluster and error == ErrorCode.NONE and appended:
                    written.setdefault((t.name, p), (next(iter(appended)), []))[1].append(result)
            topics.append(R.WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
        results.append(R(producer_id=m.producer_id, topics=topics))
    resp = WriteTxnMarkersResponse(markers=results)
    if not logs:
        return resp
    if cluster:
        return _after_replicated(broker, resp, written)
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


def _after_replicated(broker, resp, written):
    """In a cluster the markers are appended with acks=all (KafkaApis' WriteTxnMarkers append):
    each partition is answered once on disk and in its ISR, or with the error that stopped it
    (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR: the coordinator retries)."""
    if not written:
        return resp
    rm = broker.replica_manager
    timeout_ms = broker.config["offsets.commit.timeout.ms"]
    answered = PendingResponse()
    waiting = len(written)

    def settled(f, answers):
        nonlocal waiting
        if f.error is not None:
            code = getattr(f.error, "code", None)
            for a in answers:
                a.error_code = int(code) if code else int(ErrorCode.KAFKA_STORAGE_ERROR)
        waiting -= 1
        if not waiting:
            answered.answer(resp)
    for tp, (plog, answers) in written.items():
        rm.after_replicated(tp, plog, broker.data_path.wait_flushed({plog}), timeout_ms).listen(
            lambda f, answers=answers: settled(f, answers))
    return answered
