"""Exceptions the partition log raises: KafkaErrors, each with the Kafka error code (``code``) a
produce, fetch or ListOffsets response should carry.

Record-format errors (CORRUPT_MESSAGE, INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE) come from
``kgroup.protocol.records`` and are re-exported here so callers can catch one family.
"""
from __future__ import annotations

from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.records import (  # noqa: F401  (re-exported)
    CorruptRecordError,
    InvalidRecordError,
    RecordBatchError,
    UnsupportedCompressionTypeError,
)


class LogError(KafkaError):
    def __init__(self, message: str = "", record_errors=()):
        super().__init__(None, message)
        self.record_errors = list(record_errors)


class OffsetOutOfRangeError(LogError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE


class RecordTooLargeError(LogError):
    """A batch larger than max.message.bytes."""
    code = ErrorCode.MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(LogError):
    """An append larger than segment.bytes."""
    code = ErrorCode.RECORD_LIST_TOO_LARGE


class InvalidTimestampError(LogError):
    code = ErrorCode.INVALID_TIMESTAMP


class OutOfOrderSequenceError(LogError):
    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(LogError):
    code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(LogError):
    code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(LogError):
    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class KafkaStorageError(LogError):
    code = ErrorCode.KAFKA_STORAGE_ERROR


class LogClosedError(LogError, ValueError):
    """The log was closed: its partition deleted (or the broker stopping). Not a disk fault: a
    write that met it is answered as Kafka answers a partition it no longer hosts."""
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
