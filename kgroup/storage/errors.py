"""Exceptions the partition log raises, each carrying the Kafka error code a produce, fetch or
ListOffsets response should carry (``error_code``/``error_name``).

Record-format errors (CORRUPT_MESSAGE, INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE) come from
``kgroup.protocol.records`` and are re-exported here so callers can catch one family.
"""
from __future__ import annotations

from kgroup.protocol.records import (  # noqa: F401  (re-exported)
    CorruptRecordError,
    InvalidRecordError,
    RecordBatchError,
    UnsupportedCompressionTypeError,
)


class LogError(Exception):
    error_code = -1
    error_name = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str = "", record_errors=()):
        super().__init__(message)
        self.record_errors = list(record_errors)


class OffsetOutOfRangeError(LogError):
    error_code = 1
    error_name = "OFFSET_OUT_OF_RANGE"


class RecordTooLargeError(LogError):
    """A batch larger than max.message.bytes."""
    error_code = 10
    error_name = "MESSAGE_TOO_LARGE"


class RecordBatchTooLargeError(LogError):
    """An append larger than segment.bytes."""
    error_code = 18
    error_name = "RECORD_LIST_TOO_LARGE"


class InvalidTimestampError(LogError):
    error_code = 32
    error_name = "INVALID_TIMESTAMP"


class OutOfOrderSequenceError(LogError):
    error_code = 45
    error_name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(LogError):
    error_code = 47
    error_name = "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(LogError):
    error_code = 48
    error_name = "INVALID_TXN_STATE"


class TransactionCoordinatorFencedError(LogError):
    error_code = 52
    error_name = "TRANSACTION_COORDINATOR_FENCED"


class KafkaStorageError(LogError):
    error_code = 56
    error_name = "KAFKA_STORAGE_ERROR"


class UnknownProducerIdError(LogError):
    """Kept for completeness: Kafka 4.0 no longer raises it on the produce path (a producer
    without state may write any sequence), and neither does this log."""
    error_code = 59
    error_name = "UNKNOWN_PRODUCER_ID"
