"""The producer's transaction state (Java's TransactionManager), sans-IO.

The asyncio :class:`~kgroup.client.producer.Producer` sends the requests; this module owns the
state machine and decides what each answer means, so both are testable without a broker:

    UNINITIALIZED --init_transactions--> INITIALIZING --InitProducerId ok--> READY
    READY --begin_transaction--> IN_TRANSACTION --commit/abort--> COMMITTING / ABORTING --EndTxn ok--> READY
    any --abortable error--> ABORTABLE_ERROR --abort_transaction--> ABORTING --> READY
    any --fatal error (PRODUCER_FENCED, ...)--> FATAL_ERROR (only close() is left)

Error handling follows the Java client's request handlers: every answer is classified as
``OK``, ``RETRY`` (back off, send again), ``LOOKUP`` (find the coordinator again, then retry),
``ABORTABLE`` (the transaction must be aborted) or ``FATAL`` (the producer is unusable).
"""
from __future__ import annotations

import enum
from typing import NamedTuple

from kgroup.protocol.errors import ErrorCode, KafkaError

from .assignors import TopicPartition
from .errors import IllegalStateError

COORDINATOR_KEY_GROUP = 0
COORDINATOR_KEY_TRANSACTION = 1  # FindCoordinator key type for a transactional.id (KIP-98)

# Highest versions a transactional producer sends (AddPartitionsToTxn v4+ is broker-only). The
# KIP-890 part 2 versions (Produce v12, TxnOffsetCommit v5, EndTxn v5) are transaction version 2:
# used only when the broker finalizes transaction.version 2, as Java's TransactionManager does;
# otherwise the TV1 caps below apply (partitions added explicitly, the epoch kept).
TRANSACTIONAL_MAX_VERSIONS = {0: 13, 24: 3, 26: 5, 28: 5}
TV1_MAX_VERSIONS = {0: 11, 26: 4, 28: 4}
TV2_MIN_VERSIONS = {0: 12, 26: 5, 28: 5}


class State(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


class Outcome(enum.Enum):
    OK = "ok"
    RETRY = "retry"
    LOOKUP = "lookup"
    ABORTABLE = "abortable"
    FATAL = "fatal"


class ConsumerGroupMetadata(NamedTuple):
    """What ``send_offsets_to_transaction`` needs from the consumer (Java's
    ConsumerGroupMetadata): with generation and member id the group coordinator fences a
    zombie whose partitions were reassigned (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class ProducerFencedError(KafkaError):
    """Another producer with the same transactional.id initialised after this one (or this
    one's epoch is stale): fatal, the producer can only be closed."""

    def __init__(self, code: ErrorCode = ErrorCode.PRODUCER_FENCED, message: str | None = None):
        super().__init__(code, message or "There is a newer producer with the same transactionalId which fences "
                                          "the current one.")


class TransactionAbortableError(KafkaError):
    """The transaction cannot commit (a send or an offset commit failed): call
    ``abort_transaction()`` and start again (Java's abortable errors, KIP-1050)."""


_FENCED = {ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH}
_LOOKUP = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
_RETRY = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS}
_ABORTABLE = {ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.TRANSACTION_ABORTABLE}


def classify(api: str, error: ErrorCode) -> Outcome:
    """What an error in an answer to ``api`` (a transactional request) means, as the Java
    client's handlers decide (InitProducerIdHandler, AddPartitionsToTxnHandler,
    AddOffsetsToTxnHandler, TxnOffsetCommitHandler, EndTxnHandler, FindCoordinatorHandler)."""
    if error == ErrorCode.NONE:
        return Outcome.OK
    if error in _LOOKUP:
        return Outcome.LOOKUP
    if error in _RETRY:
        return Outcome.RETRY
    if error in _FENCED:
        return Outcome.FATAL
    if api == "FindCoordinator":
        if error == ErrorCode.GROUP_AUTHORIZATION_FAILED:
            return Outcome.ABORTABLE
        return Outcome.RETRY if error.retriable else Outcome.FATAL
    if api == "InitProducerId":
        return Outcome.FATAL
    if api == "AddPartitionsToTxn":
        if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,):
            return Outcome.RETRY
        if error in (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.OPERATION_NOT_ATTEMPTED) or error in _ABORTABLE:
            return Outcome.ABORTABLE
        return Outcome.FATAL
    if api == "AddOffsetsToTxn":
        if error == ErrorCode.GROUP_AUTHORIZATION_FAILED or error in _ABORTABLE:
            return Outcome.ABORTABLE
        return Outcome.FATAL
    if api == "TxnOffsetCommit":
        if error in (ErrorCode.REQUEST_TIMED_OUT,):
            return Outcome.LOOKUP
        if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,):
            return Outcome.RETRY
        # a rebalance fenced this member (KIP-447) or the group is not ours: abort and retry
        if error in (ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.FENCED_INSTANCE_ID, ErrorCode.UNKNOWN_MEMBER_ID,
                     ErrorCode.ILLEGAL_GENERATION) or error in _ABORTABLE:
            return Outcome.ABORTABLE
        return Outcome.FATAL
    if api == "EndTxn":
        if error in _ABORTABLE:
            return Outcome.ABORTABLE
        return Outcome.FATAL
    if api == "Produce":
        # a batch that failed for good makes the transaction abortable (it cannot commit
        # without the batch); a fenced epoch is fatal
        return Outcome.ABORTABLE
    raise ValueError(f"unknown transactional API {api}")


class TransactionManager:
    """Transaction state of one producer: the state, the partitions added to the transaction
    (and those still to be added), whether anything was added (EndTxn is only needed then)."""

    def __init__(self, transactional_id: str, transaction_timeout_ms: int):
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.state = State.UNINITIALIZED
        self.partitions_in_transaction: set[TopicPartition] = set()
        self.new_partitions: set[TopicPartition] = set()
        self.offsets_added = False
        self.last_error: KafkaError | None = None
        # KIP-890 part 2, decided at each begin_transaction (Java's isTransactionV2Enabled): the
        # broker adds partitions itself and EndTxn bumps the epoch
        self.transaction_v2 = False

    # --- checks before an operation ------------------------------------------------------------

    def _raise_if_error(self) -> None:
        if self.state == State.FATAL_ERROR:
            raise self.last_error
        if self.state == State.ABORTABLE_ERROR:
            raise TransactionAbortableError(self.last_error.code, "Cannot execute transactional method because we "
                                            f"are in an error state: {self.last_error}")

    def _require(self, *states: State, action: str) -> None:
        if self.state not in states:
            raise IllegalStateError(f"TransactionalId {self.transactional_id}: Invalid transition attempted from "
                                    f"state {self.state.name} ({action})")

    def begin_init(self) -> None:
        if self.state == State.FATAL_ERROR:
            raise self.last_error
        self._require(State.UNINITIALIZED, State.INITIALIZING, action="initTransactions")
        self.state = State.INITIALIZING

    def init_done(self) -> None:
        self.state = State.READY

    def begin_transaction(self) -> None:
        self._raise_if_error()
        if self.state == State.UNINITIALIZED:
            raise IllegalStateError("Cannot call beginTransaction before completing a call to initTransactions "
                                    "when transactions are enabled.")
        self._require(State.READY, action="beginTransaction")
        self.state = State.IN_TRANSACTION

    def check_send(self) -> None:
        """Java's failIfNotReadyForSend."""
        self._raise_if_error()
        if self.state in (State.UNINITIALIZED, State.INITIALIZING):
            raise IllegalStateError("Cannot perform a 'send' before completing a call to initTransactions when "
                                    "transactions are enabled.")
        if self.state != State.IN_TRANSACTION:
            raise IllegalStateError(f"Cannot call send in state {self.state.name}")

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        if tp not in self.partitions_in_transaction:
            self.new_partitions.add(tp)

    def check_send_offsets(self) -> None:
        self._raise_if_error()
        self._require(State.IN_TRANSACTION, action="sendOffsetsToTransaction")

    def begin_commit(self) -> None:
        self._raise_if_error()
        self._require(State.IN_TRANSACTION, State.COMMITTING_TRANSACTION, action="commitTransaction")
        self.state = State.COMMITTING_TRANSACTION

    def begin_abort(self) -> None:
        if self.state == State.FATAL_ERROR:
            raise self.last_error
        self._require(State.IN_TRANSACTION, State.ABORTABLE_ERROR, State.ABORTING_TRANSACTION,
                      State.COMMITTING_TRANSACTION, action="abortTransaction")
        self.state = State.ABORTING_TRANSACTION

    @property
    def transaction_started(self) -> bool:
        """Did the coordinator hear of this transaction (so EndTxn must be sent)?"""
        return bool(self.partitions_in_transaction) or self.offsets_added

    def partitions_added(self, partitions) -> None:
        self.partitions_in_transaction.update(partitions)
        self.new_partitions.difference_update(partitions)

    def complete(self) -> None:
        """EndTxn succeeded (or was not needed): ready for the next transaction."""
        self.partitions_in_transaction.clear()
        self.new_partitions.clear()
        self.offsets_added = False
        self.last_error = None
        self.state = State.READY

    # --- errors --------------------------------------------------------------------------------

    def abortable_error(self, error: KafkaError) -> None:
        if self.state == State.FATAL_ERROR:
            return
        if self.state != State.ABORTING_TRANSACTION:  # an abort in progress stays an abort
            self.state = State.ABORTABLE_ERROR
        self.last_error = error

    def fatal_error(self, error: KafkaError) -> KafkaError:
        if error.code in _FENCED and not isinstance(error, ProducerFencedError):
            error = ProducerFencedError(error.code)
        self.state = State.FATAL_ERROR
        self.last_error = error
        return error

    def on_error(self, api: str, error: ErrorCode, message: str | None = None) -> Outcome:
        """Classify an error and record abortable/fatal ones; returns the outcome."""
        outcome = classify(api, error)
        if outcome == Outcome.FATAL:
            self.fatal_error(KafkaError(error, message or f"{api} failed: {error.name}"))
        elif outcome == Outcome.ABORTABLE:
            self.abortable_error(KafkaError(error, message or f"{api} failed: {error.name}"))
        return outcome
