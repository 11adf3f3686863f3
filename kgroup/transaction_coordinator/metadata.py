"""Transaction states and per-transactional-id metadata (Kafka's TransactionMetadata.scala).

The durable fields are exactly what a TransactionLogValue carries; ``last_producer_epoch`` is
not in the log (Kafka reads it back as -1 too), so it is kept beside the durable image and only
matters for a KIP-360 InitProducerId retry on the same coordinator.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767


class TransactionState(enum.IntEnum):
    """Ids are the ``transaction_status`` byte of TransactionLogValue; names are what
    DescribeTransactions/ListTransactions report."""
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> "TransactionState | None":
        return _BY_NAME.get(name)

    @property
    def is_expiration_allowed(self) -> bool:
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                        TransactionState.COMPLETE_ABORT)


S = TransactionState
_NAMES = {S.EMPTY: "Empty", S.ONGOING: "Ongoing", S.PREPARE_COMMIT: "PrepareCommit",
          S.PREPARE_ABORT: "PrepareAbort", S.COMPLETE_COMMIT: "CompleteCommit",
          S.COMPLETE_ABORT: "CompleteAbort", S.DEAD: "Dead", S.PREPARE_EPOCH_FENCE: "PrepareEpochFence"}
_BY_NAME = {v: k for k, v in _NAMES.items()}

# Kafka's validPreviousStates, per target state.
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    # transaction version 2 also aborts with no transaction open (an epoch bump)
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransition(Exception):
    """A transition Kafka's TransactionMetadata refuses (a coordinator bug, never a client error)."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Epoch Short.MaxValue is kept back so the coordinator can always fence (TransactionMetadata)."""
    return epoch >= SHORT_MAX - 1


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 0
    state: TransactionState = S.EMPTY
    partitions: frozenset = frozenset()      # {(topic, partition)}
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    client_transaction_version: int = 0
    # Not durable (see the module doc).
    last_producer_epoch: int = field(default=NO_PRODUCER_EPOCH, compare=False)
    # Set when the write of a fence under transaction version 1 failed: ``producer_epoch`` is then
    # the fenced epoch, kept in memory only (TransactionMetadata.hasFailedEpochFence), and this the
    # epoch in the log. The next record written supersedes both.
    epoch_before_failed_fence: int = field(default=NO_PRODUCER_EPOCH, compare=False)

    @property
    def pending_transition_in_progress(self) -> bool:
        """Markers are being written: Kafka holds pendingState = Complete* from the moment the
        Prepare* record is written until the Complete* record is; every handler here runs to
        completion, so that is the only transition that stays pending between requests."""
        return self.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)

    @property
    def has_failed_epoch_fence(self) -> bool:
        return self.epoch_before_failed_fence != NO_PRODUCER_EPOCH

    def durable(self) -> tuple:
        epoch = self.epoch_before_failed_fence if self.has_failed_epoch_fence else self.producer_epoch
        return (self.producer_id, self.previous_producer_id, self.next_producer_id,
                epoch, self.txn_timeout_ms, self.state, self.partitions,
                self.txn_start_timestamp, self.txn_last_update_timestamp,
                self.client_transaction_version)

    def transit(self, state: TransactionState, *, now_ms: int, **changes) -> "TransactionMetadata":
        """The metadata after a transition to ``state`` (Kafka's prepareTransitionTo plus the
        checks of completeTransitionTo), as a new object; ``self`` is not changed. As in Kafka,
        the previous producer id becomes the current one unless ``changes`` says otherwise."""
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name}")
        if not changes.keys() <= _FIELDS:
            raise TypeError(f"unknown TransactionMetadata fields {sorted(changes.keys() - _FIELDS)}")
        # A field-for-field copy without the generated __init__ (one per coordinator record).
        new = object.__new__(TransactionMetadata)
        d = new.__dict__
        d.update(self.__dict__)
        d["previous_producer_id"] = self.producer_id
        d["epoch_before_failed_fence"] = NO_PRODUCER_EPOCH     # what is written is the epoch
        d.update(changes)
        new.state = state
        new.txn_last_update_timestamp = now_ms
        if new.producer_id < 0:
            raise IllegalTransition(f"illegal producer id {new.producer_id}")
        if state is not S.DEAD and new.producer_epoch < 0:
            raise IllegalTransition(f"illegal producer epoch {new.producer_epoch}")
        if state is S.EMPTY and (new.partitions or new.txn_start_timestamp != -1):
            raise IllegalTransition("an Empty transaction has no partitions and no start time")
        if state is S.ONGOING and not self.partitions <= new.partitions:
            raise IllegalTransition("adding partitions cannot remove any")
        if state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and new.partitions != self.partitions:
            raise IllegalTransition("ending a transaction keeps its partitions")
        return new


_FIELDS = frozenset(f.name for f in fields(TransactionMetadata))
