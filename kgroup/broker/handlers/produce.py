"""Produce (0) v3-13: magic-2 batches only (Kafka 4.0 dropped v0-2, KIP-896).

Topics must exist: as in Kafka, a produce never creates one (clients create through Metadata
with auto.create.topics.enable); unknown topics and partitions get UNKNOWN_TOPIC_OR_PARTITION.
v13 names topics by id (KIP-516): an unknown id gets UNKNOWN_TOPIC_ID, and the answer names the
topic by its id.

Per partition: exactly one batch (Kafka's ProduceRequest.validateRecords for v3+), validated and
appended as received; errors are per partition with Kafka's codes. acks=-1 waits for the group
commit fsync (see ``data_path``); acks=1 answers once written; acks=0 sends nothing back.

In a cluster (``replica_manager.enabled``) a partition is written only by its leader
(NOT_LEADER_OR_FOLLOWER otherwise, with KIP-951's CurrentLeader and NodeEndpoints from v10),
min.insync.replicas is checked against the partition's ISR, and an acks=-1 answer also waits
until the whole ISR has the records (``ReplicaManager.delayed_produce``, REQUEST_TIMED_OUT after
the request's timeout). A transactional batch whose transactional id's coordinator is on another
broker is verified (TV2: added) there, over the network, before the append
(``add_partitions_to_txn_manager.py``).
"""
from ...protocol.errors import ErrorCode
from ...protocol.messages.produce import ProduceResponse
from ...protocol.records import (BATCH_HEADER, Compression, InvalidRecordError, RecordBatchError,
                                 UnsupportedCompressionTypeError, iter_batches, read_batch_header)
from ...storage.errors import LogClosedError, LogError
from ..authorization import RT_TRANSACTIONAL_ID, WRITE, allowed, denied_topics, whole_request_error
from ..pending import PendingResponse

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse
RecordError = ProduceResponse.BatchIndexAndErrorMessage


def handle(broker, ctx, req, version, _added=False, _waited=False, _verified=None):
    """Checks in Kafka's order: unknown topic/partition and ProduceRequest.validateRecords
    (KafkaApis), then acks, then the internal-topic check and the append (ReplicaManager).
    From v12 a transactional batch's partition not yet in its transaction is added to it first
    (KIP-890 part 2, transaction version 2: AddPartitionsToTxnManager's ADD_PARTITION), then the
    request is handled as if it had been added by the producer. While the producer's previous
    transaction completes (its markers), the request first waits for that, as Kafka's
    ReplicaManager retries the add on CONCURRENT_TRANSACTIONS (for up to 100 ms)."""
    by_id = version >= 13
    verify = req.transactional_id is not None and broker.config["transaction.partition.verification.enable"]
    if broker.control_topics and len(req.topic_data) == 1 and not by_id:
        # a query to an operations feature (ops.py), e.g. rebalance timelines, not a write
        answer_query = broker.control_topics.get(req.topic_data[0].name)
        if answer_query is not None:
            return answer_query(req)
    denied = None
    if broker.authorizer is not None:     # KafkaApis.handleProduceRequest: WRITE on the transactional id, topics
        if req.transactional_id is not None and not allowed(broker, ctx, WRITE, RT_TRANSACTIONAL_ID, req.transactional_id):
            return whole_request_error(broker, ctx, version, req, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        denied = denied_topics(broker, ctx, WRITE, _topic_names(broker, req, version))
    if req.transactional_id is None and _has_transactional_records(req):
        # KafkaApis: transactional records need a transactional id (authorized to write): the
        # whole request is refused, or a hanging transaction no coordinator knows would be left
        return _error_response(ctx, req, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if _verified is None and req.transactional_id is not None and (verify or version >= 12) \
            and broker.replica_manager.enabled:
        # the transactional id's coordinator is on another broker: asked over the network
        coordinator = broker.replica_manager.add_partitions_to_txn_manager.remote_coordinator(req.transactional_id)
        if coordinator is not None:
            asked = _verify_remotely(broker, coordinator, req, version)
            if asked is not None:
                return chain_value(asked, lambda errors: handle(broker, ctx, req, version, _verified=errors))
    # (with or without transaction.partition.verification.enable: TV2 producers never add themselves)
    if version >= 12 and not _added and _verified is None and req.transactional_id is not None:
        completing = None if _waited else broker.transaction_coordinator.completion(req.transactional_id)
        if completing is not None:
            return chain(completing, lambda: handle(broker, ctx, req, version, _waited=True))
        added = _add_partitions_implicitly(broker, req, version)
        if added is not None:
            return chain(added, lambda: handle(broker, ctx, req, version, _added=True))
    dp = broker.data_path
    rm = broker.replica_manager
    cluster = rm.enabled
    replicated = [] if cluster and req.acks == -1 else None     # acks=all waits for the ISR
    resp = ProduceResponse(responses=[], throttle_time_ms=0)
    written, to_flush = [], set()
    bad_acks = req.acks not in (-1, 0, 1)
    for td in req.topic_data:
        # As in Kafka, only Metadata creates topics: a produce to an unknown one is refused.
        if by_id:
            topic = broker.metadata.by_id(td.topic_id)
            tresp = TopicResponse(topic_id=td.topic_id, partition_responses=[])
            unknown = ErrorCode.UNKNOWN_TOPIC_ID if topic is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if topic is not None:
                td.name = topic.name
        else:
            topic = broker.metadata.get(td.name)
            tresp = TopicResponse(name=td.name, partition_responses=[])
            unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        resp.responses.append(tresp)
        for pd in td.partition_data:
            pr = PartitionResponse(index=pd.index, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
            tresp.partition_responses.append(pr)
            if denied and topic is not None and topic.name in denied:
                pr.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if topic is None or not 0 <= pd.index < topic.num_partitions:
                pr.error_code = unknown
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
            if verify:
                error = _verify_transaction(broker, req.transactional_id, td.name, pd, version, _verified)
                if error:
                    pr.error_code = error
                    continue
            plog = dp.log(td.name, pd.index)
            if cluster:
                part, error = rm.leader_partition(td.name, pd.index)
                if error is not None:
                    pr.error_code = error
                    if version >= 10:
                        _leader_hint(rm, td.name, pd.index, pr, resp)
                    continue
                min_isr = plog.config.min_insync_replicas
                if req.acks == -1 and len(part.isr) < min_isr:
                    # Partition.appendRecordsToLeader
                    pr.error_code = ErrorCode.NOT_ENOUGH_REPLICAS
                    pr.error_message = (f"The size of the current ISR Set({', '.join(map(str, part.isr))}) is "
                                        f"insufficient to satisfy the min.isr requirement of {min_isr} for "
                                        f"partition {td.name}-{pd.index}")
                    continue
            elif req.acks == -1 and plog.config.min_insync_replicas > 1:
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
            if cluster:
                rm.leader_appended(part)
                if replicated is not None:
                    replicated.append((part, result.last_offset + 1, min_isr, pr))
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
    if replicated:
        delayed = rm.delayed_produce(replicated, req.timeout_ms)
        # The records are appended and only the answer waits for the ISR: the connection's later
        # requests are not held behind it (flush_only, pending.py), so the waits of a client's
        # pipelined acks=all requests overlap instead of each costing a replication round trip.
        delayed.flush_only = True
        if to_flush:
            return PendingResponse.gather([_after_flush(dp.wait_flushed(to_flush), resp), delayed],
                                          lambda _: resp)
        return delayed.then(lambda _: resp)
    if req.acks == -1 and to_flush:
        return _after_flush(dp.wait_flushed(to_flush), resp)
    return resp


def _leader_hint(rm, topic, partition, pr, resp) -> None:
    """KIP-951: the leader this broker knows for a partition it does not lead, and its endpoint."""
    leader, epoch = rm.leader_hint(topic, partition)
    pr.current_leader = ProduceResponse.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
    endpoint = rm.endpoint(leader) if leader >= 0 else None
    if endpoint is not None and all(n.node_id != leader for n in resp.node_endpoints):
        resp.node_endpoints.append(ProduceResponse.NodeEndpoint(node_id=leader, host=endpoint[0], port=endpoint[1],
                                                                rack=endpoint[2]))


def _add_partitions_implicitly(broker, req, version):
    """The transaction's partitions this request writes to that are not in it yet, added through
    the transaction coordinator (AddPartitionsToTxn v5 as a broker sends it): a PendingResponse
    answered once they are (or once refused: the append's own verification then answers the
    partition), None when there is nothing to add."""
    txn = broker.transaction_coordinator
    wanted: dict[tuple[int, int], dict[str, list[int]]] = {}
    for tp, header in _transactional_batches(broker, req, version):
        error = txn.verify_partitions(req.transactional_id, header.producer_id, header.producer_epoch, (tp,))[tp]
        if error == ErrorCode.TRANSACTION_ABORTABLE:
            wanted.setdefault((header.producer_id, header.producer_epoch), {}).setdefault(tp[0], []).append(tp[1])
    if len(wanted) != 1:        # nothing to add, or batches of several producers: verified as they are
        return None
    (pid, epoch), topics = next(iter(wanted.items()))
    return txn.add_partitions_as_broker(req.transactional_id, pid, epoch, topics)


def _transactional_batches(broker, req, version):
    """((topic, partition), batch header) of each partition's transactional batch in ``req``
    (partitions of user topics that exist; the first batch's header speaks for the set)."""
    for td in req.topic_data:
        topic = broker.metadata.by_id(td.topic_id) if version >= 13 else broker.metadata.get(td.name)
        if topic is None or topic.is_internal:
            continue
        for pd in td.partition_data:
            if not 0 <= pd.index < topic.num_partitions or pd.records is None or len(pd.records) < BATCH_HEADER.size:
                continue
            header = read_batch_header(pd.records)
            if header.is_transactional:
                yield (topic.name, pd.index), header


def _verify_remotely(broker, coordinator: int, req, version):
    """The request's transactional batches verified (TV2, Produce v12+: added) by the
    transactional id's coordinator on broker ``coordinator`` (AddPartitionsToTxnManager): a
    PendingResponse answered with {(topic, partition): error}, None when nothing is transactional."""
    wanted: dict[tuple[int, int], list] = {}
    for tp, header in _transactional_batches(broker, req, version):
        wanted.setdefault((header.producer_id, header.producer_epoch), []).append(tp)
    if not wanted:
        return None
    manager = broker.replica_manager.add_partitions_to_txn_manager
    asked = [manager.verify(coordinator, req.transactional_id, pid, epoch, tps, add=version >= 12)
             for (pid, epoch), tps in wanted.items()]
    if len(asked) == 1:
        return asked[0]
    return PendingResponse.gather(asked, lambda answers: {tp: e for a in answers for tp, e in a.items()})


def chain_value(first: PendingResponse, then) -> PendingResponse:
    """The answer of ``then(value)`` (a response or a PendingResponse), ``value`` being what
    ``first`` was answered with."""
    return chain(first, lambda: then(first.response))


def chain(first: PendingResponse, then) -> PendingResponse:
    """The answer of ``then()`` (a response or a PendingResponse), run once ``first`` is answered."""
    out = PendingResponse()

    def run(answered):
        if answered.error is not None:
            out.fail(answered.error)
            return
        try:
            answer = then()
        except Exception as e:         # noqa: BLE001 - the request fails as a handler error would
            out.fail(e)
            return
        if type(answer) is PendingResponse:
            answer.then(to=out)
        else:
            out.answer(answer)
    first.listen(run)
    return out


def _topic_names(broker, req, version):
    """The request's topic names (v13 names them by id: those this broker knows)."""
    if version < 13:
        return [td.name for td in req.topic_data]
    return [t.name for td in req.topic_data if (t := broker.metadata.by_id(td.topic_id)) is not None]


def _has_transactional_records(req) -> bool:
    """RequestUtils.hasTransactionalRecords: a partition's first batch is transactional."""
    for td in req.topic_data:
        for pd in td.partition_data:
            # a batch too short to read is answered per partition later
            if pd.records is not None and len(pd.records) >= BATCH_HEADER.size \
                    and read_batch_header(pd.records).is_transactional:
                return True
    return False


def _error_response(ctx, req, version, code):
    """ProduceRequest.getErrorResponse: every partition answered ``code``; with acks=0 there is
    no response, so the connection is closed, as Kafka does."""
    if req.acks == 0:
        ctx.connection.close(f"{code.name} for a produce request with acks=0")
        return None
    return ProduceResponse(throttle_time_ms=0, responses=[
        TopicResponse(name=td.name, topic_id=td.topic_id, partition_responses=[
            PartitionResponse(index=pd.index, error_code=int(code), base_offset=-1, log_append_time_ms=-1,
                              log_start_offset=-1) for pd in td.partition_data])
        for td in req.topic_data])


def _after_flush(flushed, resp):
    """The response, answered once the appends are on disk; a failed flush fails the appended
    partitions with KAFKA_STORAGE_ERROR, or UNKNOWN_TOPIC_OR_PARTITION when the partition was
    deleted meanwhile (the request is answered, the connection stays)."""
    # flush_only: the records are appended and below the high watermark already, as Kafka's
    # acks=-1 answer with one replica; only the answer waits for the fsync (see pending.py).
    answered = PendingResponse(flush_only=True)

    def on_flushed(f):
        if f.error is not None:
            # a log closed meanwhile is a partition deleted, not a disk fault
            code = f.error.code if isinstance(f.error, LogClosedError) else ErrorCode.KAFKA_STORAGE_ERROR
            for t in resp.responses:
                for p in t.partition_responses:
                    if p.error_code == 0:
                        p.error_code = code
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
                                           ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                                           ErrorCode.NETWORK_EXCEPTION})


def _verify_transaction(broker, transactional_id, topic, pd, version, verified=None) -> int:
    """KIP-890 part 1 (transaction.partition.verification.enable, on in Kafka 4.0): a
    transactional batch is appended only to a partition of its producer's ongoing transaction;
    otherwise TRANSACTION_ABORTABLE, which clients older than Produce v11 know as
    INVALID_TXN_STATE. A stale epoch is the coordinator's PRODUCER_FENCED, sent as
    INVALID_PRODUCER_EPOCH as the log would."""
    header = read_batch_header(pd.records)
    if not header.is_transactional:
        return ErrorCode.NONE
    tp = (topic, pd.index)
    if verified is not None:        # answered by a coordinator on another broker
        error = verified.get(tp, ErrorCode.NETWORK_EXCEPTION)
    else:
        error = broker.transaction_coordinator.verify_partitions(
            transactional_id, header.producer_id, header.producer_epoch, (tp,))[tp]
    if error == ErrorCode.TRANSACTION_ABORTABLE and version < 11:
        return ErrorCode.INVALID_TXN_STATE
    if error == ErrorCode.CONCURRENT_TRANSACTIONS and version >= 12:
        # ReplicaManager keeps it for transaction version 2 (Produce v12+), where it is common
        # while the previous transaction completes
        return error
    if error in _RETRY_AS_NOT_ENOUGH_REPLICAS:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error
