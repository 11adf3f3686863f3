"""Produce (0) v3-11: magic-2 batches only (Kafka 4.0 dropped v0-2, KIP-896).

Topics must exist: as in Kafka, a produce never creates one (clients create through Metadata
with auto.create.topics.enable); unknown topics and partitions get UNKNOWN_TOPIC_OR_PARTITION.

Per partition: exactly one batch (Kafka's ProduceRequest.validateRecords for v3+), validated and
appended as received; errors are per partition with Kafka's codes. acks=-1 waits for the group
commit fsync (see ``data_path``); acks=1 answers once written; acks=0 sends nothing back.
"""
from ...protocol.errors import ErrorCode
from ...protocol.messages.produce import ProduceResponse
from ...protocol.records import (Compression, InvalidRecordError, RecordBatchError,
                                 UnsupportedCompressionTypeError, iter_batches, read_batch_header)
from ...storage.errors import LogError
from ..authorization import RT_TRANSACTIONAL_ID, WRITE, allowed, denied_topics, whole_request_error
from ..pending import PendingResponse

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse
RecordError = ProduceResponse.BatchIndexAndErrorMessage


def handle(broker, ctx, req, version):
    """Checks in Kafka's order: unknown topic/partition and ProduceRequest.validateRecords
    (KafkaApis), then acks, then the internal-topic check and the append (ReplicaManager)."""
    if broker.control_topics and len(req.topic_data) == 1:
        # a query to an operations feature (ops.py), e.g. rebalance timelines, not a write
        answer_query = broker.control_topics.get(req.topic_data[0].name)
        if answer_query is not None:
            return answer_query(req)
    denied = None
    if broker.authorizer is not None:     # KafkaApis.handleProduceRequest: WRITE on the transactional id, topics
        if req.transactional_id is not None and not allowed(broker, ctx, WRITE, RT_TRANSACTIONAL_ID, req.transactional_id):
            return whole_request_error(broker, ctx, version, req, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        denied = denied_topics(broker, ctx, WRITE, (td.name for td in req.topic_data))
    dp = broker.data_path
    resp = ProduceResponse(responses=[], throttle_time_ms=0)
    written, to_flush = [], set()
    bad_acks = req.acks not in (-1, 0, 1)
    for td in req.topic_data:
        tresp = TopicResponse(name=td.name, partition_responses=[])
        resp.responses.append(tresp)
        # As in Kafka, only Metadata creates topics: a produce to an unknown one is refused.
        topic = broker.metadata.get(td.name)
        for pd in td.partition_data:
            pr = PartitionResponse(index=pd.index, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
            tresp.partition_responses.append(pr)
            if topic is None or not 0 <= pd.index < topic.num_partitions or denied:
                if denied and td.name in denied:
                    pr.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                if topic is None or not 0 <= pd.index < topic.num_partitions:
                    pr.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
            try:
                _check_one_batch(pd.records, version)
            except RecordBatchError as e:
                pr.error_code = e.error_code
                pr.error_message = str(e)
                continue
            if bad_acks:
                pr.error_code = ErrorCode.INVALID_REQUIRED_ACKS
                continue
            if topic.is_internal:
                pr.error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
                pr.error_message = f"Cannot append to internal topic {topic.name}"
                continue
            if req.transactional_id is not None:
                error = _verify_transaction(broker, req.transactional_id, td.name, pd, version)
                if error:
                    pr.error_code = error
                    continue
            plog = dp.log(td.name, pd.index)
            if req.acks == -1 and plog.config.min_insync_replicas > 1:
                # Partition.appendRecordsToLeader: this node is the whole ISR
                pr.error_code = ErrorCode.NOT_ENOUGH_REPLICAS
                pr.error_message = (f"The size of the current ISR Set({broker.config.node_id}) is insufficient to "
                                    f"satisfy the min.isr requirement of {plog.config.min_insync_replicas} for "
                                    f"partition {td.name}-{pd.index}")
                continue
            try:
                result = plog.append(pd.records)
            except (LogError, RecordBatchError) as e:
                dp.append_failed(e, plog)       # a disk I/O error takes the log directory offline
                pr.error_code = e.error_code
                pr.error_message = str(e)
                pr.record_errors = [RecordError(batch_index=i, batch_index_error_message=m)
                                    for i, m in e.record_errors]
                continue
            pr.error_code = 0
            pr.base_offset = result.base_offset
            pr.log_append_time_ms = result.log_append_time
            pr.log_start_offset = result.log_start_offset
            # A duplicate is acknowledged with the original's offsets, and at acks=-1 only once
            # the original is on disk too (it may still await its group commit, or have been
            # written with acks=1).
            to_flush.add(plog)
            if not result.duplicate:
                written.append((td.name, pd.index))
    for topic_name, partition in written:
        dp.appended(topic_name, partition)
    if req.acks == 0:
        if any(p.error_code for t in resp.responses for p in t.partition_responses):
            # Kafka closes the connection when an acks=0 produce fails, the only way to tell
            # the producer (which then refreshes its metadata).
            ctx.connection.close("error in a produce request with acks=0")
        return None
    if req.acks == -1 and to_flush:
        return _after_flush(dp.wait_flushed(to_flush), resp)
    return resp


def _after_flush(flushed, resp):
    """The response, answered once the appends are on disk; a failed flush fails the appended
    partitions with KAFKA_STORAGE_ERROR (the request is answered, the connection stays)."""
    # flush_only: the records are appended and below the high watermark already, as Kafka's
    # acks=-1 answer with one replica; only the answer waits for the fsync (see pending.py).
    answered = PendingResponse(flush_only=True)

    def on_flushed(f):
        if f.error is not None:
            for t in resp.responses:
                for p in t.partition_responses:
                    if p.error_code == 0:
                        p.error_code = ErrorCode.KAFKA_STORAGE_ERROR
                        p.base_offset = -1
        answered.answer(resp)
    flushed.listen(on_flushed)
    return answered


def _check_one_batch(records, version):
    """Kafka's ProduceRequest.validateRecords (v3+); magic 0/1 is rejected by iter_batches."""
    if records is None or len(records) == 0:
        raise InvalidRecordError(f"Produce requests with version {version} must have at least one record batch "
                                 "per partition")
    batches = iter_batches(memoryview(records))
    first = next(batches, None)
    if first is None:
        raise InvalidRecordError(f"Produce requests with version {version} must have at least one record batch "
                                 "per partition")
    if version < 7 and first[1].compression == Compression.ZSTD:
        raise UnsupportedCompressionTypeError(f"Produce requests with version {version} are not allowed to use "
                                              "ZStandard compression")
    if next(batches, None) is not None:
        raise InvalidRecordError(f"Produce requests with version {version} are only allowed to contain exactly one "
                                 "record batch per partition")


# Verification failures a producer must retry are answered NOT_ENOUGH_REPLICAS, which every
# client retries without a metadata refresh (Kafka's ReplicaManager does the same).
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                           ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})


def _verify_transaction(broker, transactional_id, topic, pd, version) -> int:
    """KIP-890 part 1 (transaction.partition.verification.enable, on in Kafka 4.0): a
    transactional batch is appended only to a partition of its producer's ongoing transaction;
    otherwise TRANSACTION_ABORTABLE, which clients older than Produce v11 know as
    INVALID_TXN_STATE. A stale epoch is the coordinator's PRODUCER_FENCED, sent as
    INVALID_PRODUCER_EPOCH as the log would."""
    header = read_batch_header(pd.records)
    if not header.is_transactional:
        return ErrorCode.NONE
    tp = (topic, pd.index)
    error = broker.transaction_coordinator.verify_partitions(
        transactional_id, header.producer_id, header.producer_epoch, (tp,))[tp]
    if error == ErrorCode.TRANSACTION_ABORTABLE and version < 11:
        return ErrorCode.INVALID_TXN_STATE
    if error in _RETRY_AS_NOT_ENOUGH_REPLICAS:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error
