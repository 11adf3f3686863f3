"""TransactionCoordinatorShard: the pure, deterministic transaction coordinator of one
``__transaction_state`` partition (Kafka's TransactionCoordinator + TransactionStateManager).

Same design as the group coordinator (``kgroup.coordinator``): every handler takes a request and
``now_ms`` and returns a ``Result`` of records plus responses; the runtime appends the records
and calls ``commit`` (or ``abort`` when the append failed). State changes only by replaying
records, at load and on commit alike. Producer ids come from an injected allocator; timers are
named entries on an injected scheduler.

Markers. After a PrepareCommit/PrepareAbort record is written, the shard queues a ``TxnMarkers``
("write this COMMIT/ABORT marker to these partitions") that the runtime takes with
``drain_markers()``; it writes the markers (WriteTxnMarkers' path) and then calls
``complete_transaction``, which writes CompleteCommit/CompleteAbort. On load, every transaction
found in a Prepare state is queued again, as Kafka's loadTransactions does.

Transaction version: clients here use transactions V1 (EndTxn up to v4, the epoch is bumped only
by InitProducerId and by fencing); KIP-890's per-transaction epoch bump (EndTxn v5) is not
implemented.

Differences from Kafka that cannot be observed by a client: Kafka bumps the epoch in memory
before a fencing write and remembers a failed write (``hasFailedEpochFence``) so the next fence
does not bump again; here nothing changes before the write succeeds, which yields the same epoch.
A brand-new transactional id is not cached before its first write succeeds (Kafka caches it with
epoch -1), so a failed first write spends one producer id.
"""
from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import re2

from ..coordinator import Result, TimerQueue
from ..coordinator.result import coordinator_api
from ..coordinator.partitioner import group_partition
from ..coordinator.timer import (ABORT_TIMED_OUT_TRANSACTIONS_KEY, EXPIRE_TRANSACTIONAL_IDS_KEY,
                                 CoordinatorTimer)
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.add_offsets_to_txn import AddOffsetsToTxnResponse
from ..protocol.messages.add_partitions_to_txn import AddPartitionsToTxnResponse
from ..protocol.messages.describe_transactions import DescribeTransactionsResponse
from ..protocol.messages.end_txn import EndTxnResponse
from ..protocol.messages.init_producer_id import InitProducerIdResponse
from ..protocol.messages.list_transactions import ListTransactionsResponse
from ..protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from . import transaction_log_records as rec
from .config import TransactionCoordinatorConfig
from .metadata import (NO_PRODUCER_EPOCH, NO_PRODUCER_ID, SHORT_MAX, TransactionMetadata,
                       TransactionState, is_epoch_exhausted)

S = TransactionState
E = ErrorCode
GROUP_METADATA_TOPIC = "__consumer_offsets"


def transaction_partition(transactional_id: str, n: int = 50) -> int:
    """``Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions``."""
    return group_partition(transactional_id, n)


def append_error_to_response_error(error) -> ErrorCode:
    """TransactionStateManager.appendTransactionToLog's mapping of a failed append."""
    error = ErrorCode(error)
    if error in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS,
                 E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE
    if error in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if error in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
        return E.UNKNOWN_SERVER_ERROR
    return error


# Kafka's Topic.isInternal
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC, "__transaction_state", "__share_group_state"})

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False     # a refused pattern is the caller's error, not the broker's log


@functools.lru_cache(maxsize=64)
def transactional_id_pattern(pattern: str | None):
    """ListTransactions' transactional id pattern compiled as Kafka does (RE2/J, whole-id match);
    None when there is none. Raises KafkaError(INVALID_REGULAR_EXPRESSION) for a bad pattern."""
    if not pattern:
        return None
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as e:
        raise KafkaError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                         f"Transaction ID pattern `{pattern}` is not a valid regular expression: {e}.") from None


class TxnRecord(NamedTuple):
    key: bytes
    value: bytes | None
    transactional_id: str
    metadata: TransactionMetadata | None


class TxnMarkers(NamedTuple):
    """Write a COMMIT (``committed``) or ABORT control batch for ``producer_id``/``producer_epoch``
    to every partition in ``partitions`` (sorted (topic, partition) pairs; a group's
    ``__consumer_offsets`` partition is among them when offsets were added), then call
    ``complete_transaction``."""
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: tuple
    transaction_version: int = 0    # the transaction's (TransactionMetadata.clientTransactionVersion)

    def request(self) -> WriteTxnMarkersRequest:
        M = WriteTxnMarkersRequest.WritableTxnMarker
        by_topic: dict[str, list[int]] = {}
        for topic, partition in self.partitions:
            by_topic.setdefault(topic, []).append(partition)
        return WriteTxnMarkersRequest(markers=[M(
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            transaction_result=self.committed, coordinator_epoch=self.coordinator_epoch,
            transaction_version=self.transaction_version, topics=[M.WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()])])


def _fenced(error: ErrorCode, version: int, first_with_fenced: int) -> ErrorCode:
    """Clients older than KIP-588 do not know PRODUCER_FENCED: KafkaApis answers
    INVALID_PRODUCER_EPOCH below the version that introduced it."""
    if error == E.PRODUCER_FENCED and version < first_with_fenced:
        return E.INVALID_PRODUCER_EPOCH
    return error


def _init_pid_response(error, producer_id=NO_PRODUCER_ID, epoch=NO_PRODUCER_EPOCH, version=4):
    return InitProducerIdResponse(error_code=_fenced(error, version, 4), producer_id=producer_id,
                                  producer_epoch=epoch)


def _validate_init_producer_id(req, version: int, config):
    """TransactionCoordinator.handleInitProducerId's checks before the partition's state: a
    producer id and epoch both or neither (KIP-360), a non-empty id, a timeout within bounds."""
    expected_pid = getattr(req, "producer_id", NO_PRODUCER_ID) if version >= 3 else NO_PRODUCER_ID
    expected_epoch = getattr(req, "producer_epoch", NO_PRODUCER_EPOCH) if version >= 3 else NO_PRODUCER_EPOCH
    if (expected_pid == NO_PRODUCER_ID) != (expected_epoch == NO_PRODUCER_EPOCH) or not req.transactional_id:
        return _init_pid_response(E.INVALID_REQUEST, version=version)
    if not 0 < req.transaction_timeout_ms <= config.max_timeout_ms:
        return _init_pid_response(E.INVALID_TRANSACTION_TIMEOUT, version=version)
    return None


def _add_partitions_error(req, version: int, error) -> AddPartitionsToTxnResponse:
    """AddPartitionsToTxn answered with ``error`` for every partition it names."""
    R = AddPartitionsToTxnResponse

    def topic_results(topics) -> list:
        return [R.AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=[
            R.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=int(error))
            for p in t.partitions]) for t in topics]
    if version < 4:
        return R(results_by_topic_v3_and_below=topic_results(req.v3_and_below_topics))
    return R(results_by_transaction=[R.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                                topic_results=topic_results(txn.topics))
                                     for txn in req.transactions])


class TransactionCoordinatorShard:
    def __init__(self, partition: int = 0, config: TransactionCoordinatorConfig | None = None,
                 scheduler=None, producer_id_allocator: Callable[[], int] | None = None,
                 coordinator_epoch: int = 0, transaction_version: Callable[[], int] | None = None):
        self.partition = partition
        # the broker's finalized transaction.version (the coordinator's own aborts use it)
        self.transaction_version: Callable[[], int] = transaction_version or (lambda: 0)
        self.config = config or TransactionCoordinatorConfig()
        self.scheduler = scheduler if scheduler is not None else TimerQueue()
        self.timer = CoordinatorTimer(self.scheduler)
        self.allocate_producer_id = producer_id_allocator
        self.coordinator_epoch = coordinator_epoch
        self.transactions: dict[str, TransactionMetadata] = {}
        self.is_loaded = False
        self.skipped_records = 0
        self._markers: list[TxnMarkers] = []
        # Set by time travel (the broker's test control) to the jump's target: no request arrives
        # during a jump, so the abort scans before the first Ongoing transaction's deadline would
        # do nothing and are skipped, keeping the scan's phase (kgroup.broker.test_control).
        self.time_travel_target_ms: int | None = None

    # == loading ==================================================================================
    def replay(self, key, value, offset=None) -> None:
        """Apply one record read from the log. Unknown key versions are skipped; a record that
        does not decode raises TransactionLogDecodeError naming the offset."""
        try:
            tid = rec.decode_key(key)
            if tid is None:
                self.skipped_records += 1
                return
            metadata = rec.decode_value(tid, value)
        except rec.TransactionLogDecodeError as e:
            raise rec.TransactionLogDecodeError(
                f"__transaction_state-{self.partition} at offset {offset}: {e}") from None
        self._apply(tid, metadata)

    def replay_transactional(self, producer_id: int, key, value, offset=None) -> None:
        """A record of a transactional batch: the transaction log's records mean the same
        whoever wrote them."""
        self.replay(key, value, offset)

    def replay_end_transaction_marker(self, producer_id: int, committed: bool, offset=None) -> None:
        """A COMMIT/ABORT control record in the transaction log settles nothing here."""

    def _apply(self, tid: str, metadata: TransactionMetadata | None) -> None:
        """The only mutator of durable state; used at load time and on commit."""
        if metadata is None:
            self.transactions.pop(tid, None)
            return
        old = self.transactions.get(tid)
        # a field-for-field copy, as TransactionMetadata.transit makes it (no generated __init__)
        m = object.__new__(TransactionMetadata)
        m.__dict__.update(metadata.__dict__)
        # last_producer_epoch is not in the log: it survives only in this process.
        m.last_producer_epoch = old.last_producer_epoch if old is not None else NO_PRODUCER_EPOCH
        self.transactions[tid] = m

    def on_loaded(self, now_ms: int) -> Result:
        """Start answering; re-send the markers of every transaction found in a Prepare state."""
        res = self._begin(now_ms)
        self.is_loaded = True
        for m in sorted(self.transactions.values(), key=lambda m: m.transactional_id):
            if m.pending_transition_in_progress:
                self._queue_markers(res, m)
        self.timer.schedule(ABORT_TIMED_OUT_TRANSACTIONS_KEY, self.config.abort_timed_out_transactions_interval_ms,
                            self._abort_timed_out_transactions)
        self.timer.schedule(EXPIRE_TRANSACTIONAL_IDS_KEY,
                            self.config.remove_expired_transactional_ids_interval_ms,
                            self._expire_transactional_ids)
        return res

    def on_unloaded(self, now_ms: int) -> list:
        """The partition moves away: timers stop, state is dropped; nothing here is parked."""
        self.is_loaded = False
        self.timer.cancel(ABORT_TIMED_OUT_TRANSACTIONS_KEY)
        self.timer.cancel(EXPIRE_TRANSACTIONAL_IDS_KEY)
        self._markers.clear()
        self.transactions.clear()
        return []

    # == write protocol ===========================================================================
    def commit(self, result: Result, now_ms: int | None = None) -> list:
        """The records of ``result`` are in the log: replay them and return the responses."""
        now = self.timer.now = result.now_ms if now_ms is None else now_ms
        for r in result.records:
            self._apply(r.transactional_id, r.metadata)
        return result.committed(now)

    def abort(self, result: Result, error=E.KAFKA_STORAGE_ERROR, now_ms: int | None = None) -> list:
        """Appending ``result.records`` failed: nothing changes; the failure forms are sent."""
        now = self.timer.now = result.now_ms if now_ms is None else now_ms
        return result.aborted(append_error_to_response_error(error), now)

    def drain_markers(self) -> list[TxnMarkers]:
        out, self._markers = self._markers, []
        return out

    def _begin(self, now_ms: int) -> Result:
        self.timer.now = now_ms
        return Result(now_ms)

    def _write(self, res: Result, new: TransactionMetadata) -> None:
        res.add_record(TxnRecord(rec.key_bytes(new.transactional_id), rec.value_bytes(new),
                                 new.transactional_id, new))

    def _queue_markers(self, res: Result, m: TransactionMetadata) -> None:
        markers = TxnMarkers(m.transactional_id, m.producer_id, m.producer_epoch,
                             m.state is S.PREPARE_COMMIT, self.coordinator_epoch,
                             tuple(sorted(m.partitions)), m.client_transaction_version)
        res.on_commit(lambda _extra: self._markers.append(markers))

    def _set_last_epoch(self, res: Result, tid: str, epoch: int) -> None:
        def apply(_extra):
            m = self.transactions.get(tid)
            if m is not None:
                m.last_producer_epoch = epoch
        res.on_commit(apply)

    def _new_producer_id(self) -> int:
        if self.allocate_producer_id is None:
            raise KafkaError(E.COORDINATOR_NOT_AVAILABLE, "no producer id allocator")
        return self.allocate_producer_id()

    # == InitProducerId ===========================================================================
    @coordinator_api(error=lambda req, version, e: _init_pid_response(e, version=version),
                     validate=lambda req, version, config: _validate_init_producer_id(req, version, config))
    def handle_init_producer_id(self, req, version: int, now_ms: int, token) -> Result:
        """InitProducerId with a transactional id (the null-id idempotent case is not ours)."""
        res = self._begin(now_ms)
        tid, timeout = req.transactional_id, req.transaction_timeout_ms
        if tid is None:
            raise ValueError("InitProducerId without a transactional id is the idempotent path, not a shard's")
        expected_pid = getattr(req, "producer_id", NO_PRODUCER_ID) if version >= 3 else NO_PRODUCER_ID
        expected_epoch = getattr(req, "producer_epoch", NO_PRODUCER_EPOCH) if version >= 3 else NO_PRODUCER_EPOCH

        def answer(error, pid=NO_PRODUCER_ID, epoch=NO_PRODUCER_EPOCH):
            res.reply(token, _init_pid_response(error, pid, epoch, version),
                      lambda err: _init_pid_response(err, version=version))
            return res

        refused = _validate_init_producer_id(req, version, self.config)
        if refused is not None:
            return answer(E(refused.error_code))
        expected = None if expected_pid == NO_PRODUCER_ID else (expected_pid, expected_epoch)
        m = self.transactions.get(tid)
        try:
            if m is None:
                m = TransactionMetadata(tid, self._new_producer_id(), txn_timeout_ms=timeout,
                                        txn_last_update_timestamp=now_ms)
            if m.pending_transition_in_progress:
                return answer(E.CONCURRENT_TRANSACTIONS)
            # KIP-360: a producer id in the request must be this id's current one (or the previous
            # one, for a retry after a rotation), unless the id was just created.
            if expected is not None and not (
                    m.producer_epoch == NO_PRODUCER_EPOCH or expected[0] == m.producer_id
                    or (expected[0] == m.previous_producer_id and is_epoch_exhausted(expected[1]))):
                return answer(E.PRODUCER_FENCED)
            if m.state is S.ONGOING:
                # Fence the older producer: abort its transaction with a bumped epoch that is never
                # returned; the client retries and gets the epoch bumped once more.
                self._fence_and_abort(res, m, now_ms)
                res.reply(token, _init_pid_response(E.CONCURRENT_TRANSACTIONS, version=version),
                          lambda err: _init_pid_response(err, version=version))
                return res
            if m.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                raise AssertionError(f"transactional id {tid} in state {m.state.kafka_name}")
            if is_epoch_exhausted(m.producer_epoch) and (expected is None or expected[1] == m.producer_epoch):
                # Rotation: a new producer id, epoch 0 (TransactionMetadata.prepareProducerIdRotation).
                new = m.transit(S.EMPTY, now_ms=now_ms, producer_id=self._new_producer_id(),
                                previous_producer_id=m.producer_id, producer_epoch=0,
                                txn_timeout_ms=timeout, partitions=frozenset(), txn_start_timestamp=-1)
                last_epoch = m.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
            else:
                bumped = m.producer_epoch + 1
                if expected is None:
                    epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
                elif m.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == m.producer_epoch:
                    epoch, last_epoch = bumped, m.producer_epoch      # KIP-360 recovery
                elif expected[1] == m.last_producer_epoch:
                    epoch, last_epoch = m.producer_epoch, m.last_producer_epoch   # a retry
                else:
                    return answer(E.PRODUCER_FENCED)
                new = m.transit(S.EMPTY, now_ms=now_ms, producer_epoch=epoch, txn_timeout_ms=timeout,
                                partitions=frozenset(), txn_start_timestamp=-1,
                                previous_producer_id=m.producer_id)
        except KafkaError as e:
            return answer(e.code)
        self._write(res, new)
        self._set_last_epoch(res, tid, last_epoch)
        return answer(E.NONE, new.producer_id, new.producer_epoch)

    def _fence_and_abort(self, res: Result, m: TransactionMetadata, now_ms: int) -> None:
        """Ongoing -> (PrepareEpochFence) -> PrepareAbort with the epoch bumped, markers queued:
        one record, as Kafka writes it. PrepareEpochFence is Kafka's in-memory pending state of
        this one step (prepareFenceProducerEpoch), never written. The coordinator aborts with the
        broker's finalized transaction version, not the client's (abortTimedOutTransactions and
        handleInitProducerId): under version 2 the transaction becomes one and the abort bumps
        the epoch as any version 2 abort does, the epoch before it the last epoch (its markers
        checked as such, the next producer id taking over when the epoch is exhausted); a failed
        write changes nothing. Under version 1 the abort carries the fenced epoch with no last
        epoch, and the fenced epoch is set before the write (endTransactionWithTV1), so when the
        write fails it stays in memory: the fenced producer stays fenced, and the next fence
        uses the same epoch instead of bumping again (hasFailedEpochFence)."""
        if self.transaction_version() >= 2:
            self._prepare_end_v2(res, m, S.PREPARE_ABORT, now_ms)
            return
        # prepareFenceProducerEpoch: never past Short.MaxValue (Kafka logs that as a bug)
        bumped = m.producer_epoch if m.has_failed_epoch_fence or m.producer_epoch == SHORT_MAX \
            else m.producer_epoch + 1
        fence = m.transit(S.PREPARE_EPOCH_FENCE, now_ms=m.txn_last_update_timestamp, producer_epoch=bumped)
        new = fence.transit(S.PREPARE_ABORT, now_ms=now_ms, client_transaction_version=0)
        self._write(res, new)
        self._set_last_epoch(res, m.transactional_id, NO_PRODUCER_EPOCH)
        self._queue_markers(res, new)
        tid = m.transactional_id

        def keep_fenced_epoch(_extra, _error) -> None:
            live = self.transactions.get(tid)
            if live is m and m.state is S.ONGOING:
                if not m.has_failed_epoch_fence:
                    m.epoch_before_failed_fence = m.producer_epoch
                m.producer_epoch, m.last_producer_epoch = bumped, NO_PRODUCER_EPOCH
        res.on_abort(keep_fenced_epoch)

    # == AddPartitionsToTxn / AddOffsetsToTxn =====================================================
    def _producers_transaction(self, tid, pid, epoch, pending_first: bool = False):
        """The checks AddPartitionsToTxn and EndTxn begin with (Kafka repeats them in each
        handler): (the producer's transaction metadata, None), or (None, the error to answer).
        AddPartitionsToTxn checks a pending transition first (``pending_first``: under TV2 the
        producer may already use the id still pending), EndTxn v0-4 after the id and epoch."""
        if not tid:
            return None, E.INVALID_REQUEST
        m = self.transactions.get(tid)
        if pending_first and m is not None and m.pending_transition_in_progress:
            return None, E.CONCURRENT_TRANSACTIONS
        if m is None or m.producer_id != pid:
            return None, E.INVALID_PRODUCER_ID_MAPPING
        if m.producer_epoch != epoch:
            return None, E.PRODUCER_FENCED
        if m.pending_transition_in_progress:
            return None, E.CONCURRENT_TRANSACTIONS
        return m, None

    def _add_partitions(self, res, tid, pid, epoch, partitions: frozenset, now_ms,
                        transaction_version: int = 0) -> ErrorCode:
        """Kafka's handleAddPartitionsToTransaction: the error to answer, records written to res.
        ``transaction_version`` 2: a broker adding a TV2 producer's partition (AddPartitionsToTxn
        v4+, from Produce v12 or TxnOffsetCommit v5), recorded with the transaction (0 from a
        client's AddPartitionsToTxn v0-3 or AddOffsetsToTxn)."""
        m, error = self._producers_transaction(tid, pid, epoch, pending_first=True)
        if m is None:
            return error
        if m.state is S.ONGOING and partitions <= m.partitions:
            return E.NONE      # already in the transaction: nothing to write
        start = now_ms if m.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) else m.txn_start_timestamp
        # prepareAddPartitions records the client's transaction version with the transaction
        self._write(res, m.transit(S.ONGOING, now_ms=now_ms, partitions=m.partitions | partitions,
                                   txn_start_timestamp=start, client_transaction_version=transaction_version))
        return E.NONE

    @coordinator_api(error=lambda req, version, e: _add_partitions_error(req, version, e))
    def handle_add_partitions_to_txn(self, req, version: int, now_ms: int, token,
                                     partition_exists: Callable[[str, int], bool] | None = None) -> Result:
        """Versions 0-3 come from clients (one transaction); 4+ (KIP-890) from brokers, batching
        transactions, each either added or, with ``verify_only``, checked (verify_partitions).
        ``partition_exists`` is the broker's metadata check: an unknown partition fails its whole
        transaction, the other partitions answering OPERATION_NOT_ATTEMPTED (KafkaApis)."""
        res = self._begin(now_ms)
        R = AddPartitionsToTxnResponse

        def topic_results(errors: dict) -> list:
            by_topic: dict = {}
            for (t, p), err in errors.items():
                by_topic.setdefault(t, []).append(R.AddPartitionsToTxnPartitionResult(
                    partition_index=p, partition_error_code=_fenced(err, version, 2)))
            return [R.AddPartitionsToTxnTopicResult(name=t, results_by_partition=ps) for t, ps in by_topic.items()]

        def one(tid, pid, epoch, topics, verify_only=False) -> tuple[dict, bool]:
            """(errors by partition, whether records were written for it)."""
            wanted = [(t.name, p) for t in topics for p in t.partitions]
            # A client (v0-3) may not add an internal topic's partition: Kafka's write
            # authorization leaves internal topics out (TOPIC_AUTHORIZATION_FAILED).
            refused = {tp for tp in wanted if version < 4 and tp[0] in INTERNAL_TOPICS}
            unknown = {tp for tp in wanted if partition_exists is not None and not partition_exists(*tp)}
            if refused or unknown:
                return {tp: E.TOPIC_AUTHORIZATION_FAILED if tp in refused else
                        E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else E.OPERATION_NOT_ATTEMPTED
                        for tp in wanted}, False
            if verify_only:
                return self.verify_partitions(tid, pid, epoch, wanted), False
            written = len(res.records)
            error = self._add_partitions(res, tid, pid, epoch, frozenset(wanted), now_ms, 2 if version >= 4 else 0)
            return {tp: error for tp in wanted}, len(res.records) > written

        if version < 4:
            errors, wrote = one(req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                req.v3_and_below_producer_epoch, req.v3_and_below_topics)
            res.reply(token, R(results_by_topic_v3_and_below=topic_results(errors)),
                      (lambda err: R(results_by_topic_v3_and_below=topic_results(dict.fromkeys(errors, err))))
                      if wrote else None)
            return res
        answers = []            # (transactional id, errors, wrote)
        for txn in req.transactions:
            errors, wrote = one(txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
                                txn.verify_only)
            answers.append((txn.transactional_id, errors, wrote))

        def response(append_error=None) -> AddPartitionsToTxnResponse:
            return R(results_by_transaction=[R.AddPartitionsToTxnResult(
                transactional_id=tid, topic_results=topic_results(
                    dict.fromkeys(errors, append_error) if wrote and append_error is not None else errors))
                for tid, errors, wrote in answers])
        res.reply(token, response(), response)
        return res

    @coordinator_api(error=lambda req, version, e: AddOffsetsToTxnResponse(error_code=int(e)),
                     validate=lambda req, version, config: None if req.transactional_id else
                     AddOffsetsToTxnResponse(error_code=int(E.INVALID_REQUEST)))
    def handle_add_offsets_to_txn(self, req, version: int, now_ms: int, token) -> Result:
        """Adds the group's ``__consumer_offsets`` partition, so the commit/abort marker goes there
        too and the group's pending transactional offsets settle with the transaction."""
        res = self._begin(now_ms)
        tp = (GROUP_METADATA_TOPIC, group_partition(req.group_id, self.config.offsets_num_partitions))
        error = self._add_partitions(res, req.transactional_id, req.producer_id, req.producer_epoch,
                                     frozenset((tp,)), now_ms)
        res.reply(token, AddOffsetsToTxnResponse(error_code=_fenced(error, version, 2)),
                  lambda err: AddOffsetsToTxnResponse(error_code=err))
        return res

    def verify_partitions(self, tid: str, pid: int, epoch: int, partitions) -> dict:
        """Kafka's handleVerifyPartitionsInTransaction (AddPartitionsToTxn v4 verify_only, KIP-890
        part 1): per partition, NONE if it is in the ongoing transaction."""
        if not tid:
            return {tp: E.INVALID_REQUEST for tp in partitions}
        m = self.transactions.get(tid)
        if m is None:
            return {tp: E.INVALID_PRODUCER_ID_MAPPING for tp in partitions}
        error = None
        if m.producer_id != pid:
            error = E.INVALID_PRODUCER_ID_MAPPING
        elif m.producer_epoch != epoch:
            error = E.PRODUCER_FENCED
        elif m.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            error = E.CONCURRENT_TRANSACTIONS
        if error is not None:
            return {tp: error for tp in partitions}
        return {tp: E.NONE if tp in m.partitions else E.TRANSACTION_ABORTABLE for tp in partitions}

    # == EndTxn ===================================================================================
    @coordinator_api(error=lambda req, version, e: EndTxnResponse(error_code=int(e)),
                     validate=lambda req, version, config: None if req.transactional_id else
                     EndTxnResponse(error_code=int(E.INVALID_REQUEST)))
    def handle_end_txn(self, req, version: int, now_ms: int, token) -> Result:
        res = self._begin(now_ms)

        def response(err, pid=NO_PRODUCER_ID, epoch=NO_PRODUCER_EPOCH):
            return EndTxnResponse(error_code=_fenced(err, version, 2), producer_id=pid, producer_epoch=epoch)

        if version >= 5:
            error, pid, epoch = self._end_txn_v2(res, req.transactional_id, req.producer_id, req.producer_epoch,
                                                 req.committed, now_ms)
            res.reply(token, response(error, pid, epoch), lambda err: response(err))
            return res
        error = self._end_txn(res, req.transactional_id, req.producer_id, req.producer_epoch,
                              req.committed, now_ms)
        res.reply(token, response(error), lambda err: response(err))
        return res

    def _end_txn_v2(self, res, tid, pid, epoch, committed: bool, now_ms) -> tuple[ErrorCode, int, int]:
        """Kafka's endTransaction for transaction version 2 (KIP-890 part 2, EndTxn v5): every
        transaction ends with the producer epoch bumped (a new producer id at epoch 0 once the
        epoch is exhausted), the markers carry the bumped epoch, and the answer gives the client
        its id and epoch for the next transaction. A retry of an EndTxn that went through (the
        epoch just before the current one, or the producer id rotated away) gets the same answer;
        an abort with no transaction open (Empty, or after a completed one) still bumps the epoch."""
        m = self.transactions.get(tid) if tid else None
        if m is None:
            return (E.INVALID_REQUEST if not tid else E.INVALID_PRODUCER_ID_MAPPING), NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if m.pending_transition_in_progress:
            # checked first: the markers of the previous EndTxn are being written
            return E.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        retry_on_overflow = (m.previous_producer_id == pid and epoch == SHORT_MAX - 1 and m.producer_epoch == 0)
        retry_on_bump = m.producer_epoch == epoch + 1
        if m.producer_id != pid and not retry_on_overflow:
            return E.INVALID_PRODUCER_ID_MAPPING, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        state = m.state
        if state in (S.ONGOING, S.EMPTY):
            valid = epoch == m.producer_epoch
        else:       # CompleteCommit / CompleteAbort
            valid = retry_on_bump or retry_on_overflow or epoch == m.producer_epoch
        if not valid:
            return E.PRODUCER_FENCED, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        retry = retry_on_bump or retry_on_overflow
        if state is S.ONGOING:
            return self._prepare_end_v2(res, m, S.PREPARE_COMMIT if committed else S.PREPARE_ABORT, now_ms)
        done = S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT
        if retry and state is done:
            return E.NONE, m.producer_id, m.producer_epoch
        if committed or retry:
            return E.INVALID_TXN_STATE, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        return self._prepare_end_v2(res, m, S.PREPARE_ABORT, now_ms, no_partition_added=True)

    def _prepare_end_v2(self, res, m: TransactionMetadata, state: TransactionState, now_ms: int,
                        no_partition_added: bool = False) -> tuple[ErrorCode, int, int]:
        """TransactionMetadata.prepareAbortOrCommit under transaction version 2: the epoch bumped
        (the next producer id allocated when the current epoch is exhausted; the bump itself may
        still reach Short.MaxValue), the last epoch the one before (an InitProducerId naming it is
        a retry), the markers queued; answers the id and epoch to use next."""
        nxt = self._new_producer_id() if is_epoch_exhausted(m.producer_epoch) else NO_PRODUCER_ID
        bumped = m.producer_epoch if m.producer_epoch == SHORT_MAX else m.producer_epoch + 1
        new = m.transit(state, now_ms=now_ms, producer_epoch=bumped, next_producer_id=nxt,
                        client_transaction_version=2,
                        txn_start_timestamp=now_ms if no_partition_added else m.txn_start_timestamp)
        self._write(res, new)
        self._set_last_epoch(res, m.transactional_id, m.producer_epoch)
        self._queue_markers(res, new)
        return E.NONE, (nxt if nxt != NO_PRODUCER_ID else m.producer_id), (0 if nxt != NO_PRODUCER_ID else bumped)

    def _end_txn(self, res, tid, pid, epoch, committed: bool, now_ms) -> ErrorCode:
        """Kafka's endTransaction for a client (transactions V1)."""
        m, error = self._producers_transaction(tid, pid, epoch)
        if m is None:
            return error
        if m.state is S.ONGOING:
            new = m.transit(S.PREPARE_COMMIT if committed else S.PREPARE_ABORT, now_ms=now_ms,
                            client_transaction_version=0)
            self._write(res, new)
            self._queue_markers(res, new)
            return E.NONE
        if m.state is S.COMPLETE_COMMIT and committed or m.state is S.COMPLETE_ABORT and not committed:
            return E.NONE      # a retry of an EndTxn that completed
        return E.INVALID_TXN_STATE

    def complete_transaction(self, markers: TxnMarkers, now_ms: int) -> Result:
        """Every marker of ``markers`` is written: PrepareCommit/PrepareAbort -> Complete*.
        Nothing is written if the transaction moved on meanwhile (another load, an expiry)."""
        res = self._begin(now_ms)
        m = self.transactions.get(markers.transactional_id)
        want = S.PREPARE_COMMIT if markers.committed else S.PREPARE_ABORT
        if (m is not None and m.state is want and m.producer_id == markers.producer_id
                and m.producer_epoch == markers.producer_epoch):
            rotation = {}
            if m.next_producer_id != NO_PRODUCER_ID:   # TV2's epoch was exhausted: the next id takes over
                rotation = dict(producer_id=m.next_producer_id, previous_producer_id=m.producer_id,
                                producer_epoch=0, next_producer_id=NO_PRODUCER_ID)
            self._write(res, m.transit(S.COMPLETE_COMMIT if markers.committed else S.COMPLETE_ABORT,
                                       now_ms=now_ms, partitions=frozenset(), **rotation))
        return res

    # == admin ====================================================================================
    @coordinator_api(error=lambda req, version, e: DescribeTransactionsResponse(transaction_states=[
        DescribeTransactionsResponse.TransactionState(transactional_id=tid, error_code=int(e if tid else E.INVALID_REQUEST))
        for tid in req.transactional_ids]))
    def handle_describe_transactions(self, req, version: int, now_ms: int, token) -> Result:
        """The transactional ids of this shard (the runtime splits a request by partition)."""
        res = self._begin(now_ms)
        T = DescribeTransactionsResponse.TransactionState
        out = []
        for tid in req.transactional_ids:
            st = T(transactional_id=tid)
            m = self.transactions.get(tid)
            if not tid:
                st.error_code = E.INVALID_REQUEST
            elif m is None:
                st.error_code = E.TRANSACTIONAL_ID_NOT_FOUND
            else:
                by_topic: dict = {}
                for t, p in sorted(m.partitions):
                    by_topic.setdefault(t, []).append(p)
                st.producer_id, st.producer_epoch = m.producer_id, m.producer_epoch
                st.transaction_state = m.state.kafka_name
                st.transaction_timeout_ms = m.txn_timeout_ms
                st.transaction_start_time_ms = m.txn_start_timestamp
                st.topics = [T.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]
            out.append(st)
        res.reply(token, DescribeTransactionsResponse(transaction_states=out))
        return res

    @coordinator_api(error=lambda req, version, e: ListTransactionsResponse(error_code=int(e)))
    def handle_list_transactions(self, req, version: int, now_ms: int, token) -> Result:
        """This shard's part of ListTransactions (the runtime merges the shards' answers)."""
        res = self._begin(now_ms)
        R = ListTransactionsResponse
        states, unknown = set(), []
        for name in req.state_filters:
            s = TransactionState.from_name(name)
            if s is None:
                unknown.append(name)
            else:
                states.add(s)
        pids = set(req.producer_id_filters)
        duration = req.duration_filter if version >= 1 else -1
        # v2 (KIP-1152): an RE2 pattern the whole id must match (the handler refuses a bad one)
        pattern = transactional_id_pattern(req.transactional_id_pattern if version >= 2 else None)
        out = []
        for m in sorted(self.transactions.values(), key=lambda m: m.transactional_id):
            if m.state is S.DEAD:       # transient: on its way out (TransactionStateManager)
                continue
            if pids and m.producer_id not in pids:
                continue
            if req.state_filters and m.state not in states:
                continue
            if duration >= 0 and now_ms - m.txn_start_timestamp <= duration:
                continue
            if pattern is not None and pattern.fullmatch(m.transactional_id) is None:
                continue
            out.append(R.TransactionState(transactional_id=m.transactional_id, producer_id=m.producer_id,
                                          transaction_state=m.state.kafka_name))
        res.reply(token, R(unknown_state_filters=unknown, transaction_states=out))
        return res

    # == timers ===================================================================================
    def poll_timers(self, now_ms: int):
        """One Result per due timer, each written and replayed before the next runs."""
        for _key, op in self.timer.pop_expired(now_ms):
            res = self._begin(now_ms)
            op(res)
            yield res

    def next_deadline(self) -> int | None:
        nd = getattr(self.scheduler, "next_deadline", None)
        return nd() if nd else None

    def _abort_timed_out_transactions(self, res: Result) -> None:
        """Every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``: an Ongoing
        transaction older than its timeout is aborted with the producer's epoch bumped (fenced),
        as TransactionCoordinator.abortTimedOutTransactions does."""
        now = self.timer.now
        for tid in sorted(self.transactions):
            m = self.transactions[tid]
            if m.state is S.ONGOING and m.txn_start_timestamp + m.txn_timeout_ms < now:
                self._fence_and_abort(res, m, now)
        interval = self.config.abort_timed_out_transactions_interval_ms
        self.timer.schedule(ABORT_TIMED_OUT_TRANSACTIONS_KEY, interval * self._abort_scans_to_skip(now, interval),
                            self._abort_timed_out_transactions)

    def _abort_scans_to_skip(self, now: int, interval: int) -> int:
        """How many scan intervals ahead the next abort scan goes: one, except during time travel,
        where it is the first scan past the earliest Ongoing transaction's deadline or past the
        jump's target (the scans between would find nothing to abort)."""
        target = self.time_travel_target_ms
        if target is None:
            return 1
        first = min((m.txn_start_timestamp + m.txn_timeout_ms for m in self.transactions.values()
                     if m.state is S.ONGOING), default=target)
        return max(1, (min(first, target) - now) // interval + 1)

    def _expire_transactional_ids(self, res: Result) -> None:
        """Every ``transaction.remove.expired.transaction.cleanup.interval.ms``: a transactional id
        idle (Empty/CompleteCommit/CompleteAbort) for ``transactional.id.expiration.ms`` goes Dead
        and is tombstoned."""
        now = self.timer.now
        for tid in sorted(self.transactions):
            m = self.transactions[tid]
            if (m.state.is_expiration_allowed
                    and m.txn_last_update_timestamp <= now - self.config.transactional_id_expiration_ms):
                m.transit(S.DEAD, now_ms=now)          # checks the transition is legal
                res.add_record(TxnRecord(rec.key_bytes(tid), None, tid, None))
        self.timer.schedule(EXPIRE_TRANSACTIONAL_IDS_KEY,
                            self.config.remove_expired_transactional_ids_interval_ms,
                            self._expire_transactional_ids)

    # == inspection ===============================================================================
    def durable_state(self) -> dict:
        """What the log says: each transactional id's last TransactionLogValue."""
        return {tid: m.durable() for tid, m in self.transactions.items()}
