"""Client-side exceptions, named after the Java client's.

Broker error codes arrive as :class:`kgroup.protocol.errors.KafkaError` (``.code`` is an
``ErrorCode``; ``.retriable`` tells whether the Java client would retry). The classes here add
the client's own failures: network trouble, timeouts, and the consumer-group exceptions whose
messages the Java client users know.
"""
from __future__ import annotations

from kgroup.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "CommitFailedError", "ErrorCode", "FencedInstanceIdError", "IllegalStateError", "KafkaConnectionError",
    "KafkaError", "KafkaTimeoutError", "NoOffsetForPartitionError", "OffsetOutOfRangeError",
    "RebalanceInProgressError", "RecordTooLargeError", "SslAuthenticationError", "UnsupportedVersionError",
    "is_retriable",
]


class KafkaConnectionError(ConnectionError):
    """The connection to a broker failed or was closed (Java's DisconnectException): retriable."""

    retriable = True


class SslAuthenticationError(KafkaConnectionError):
    """The TLS handshake failed (Java's SslAuthenticationException): the peer's certificate was
    not trusted or did not match its host, or the peer refused ours. A failed connection to
    callers that retry connections, told apart for those that report authentication failures."""


class KafkaTimeoutError(TimeoutError):
    """A request or an operation did not complete in time (Java's TimeoutException): retriable."""

    retriable = True


class UnsupportedVersionError(KafkaError):
    """No version of an API is supported by both this client and the broker."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.UNSUPPORTED_VERSION, message)


class CommitFailedError(KafkaError):
    """Java's CommitFailedException: the member is no longer part of the group (or its
    generation is stale), so its offsets cannot be committed."""

    DEFAULT = ("Commit cannot be completed since the group has already rebalanced and assigned the "
               "partitions to another member. This means that the time between subsequent calls to "
               "poll() was longer than the configured max.poll.interval.ms, which typically implies "
               "that the poll loop is spending too much time message processing. You can address this "
               "either by increasing max.poll.interval.ms or by reducing the maximum size of batches "
               "returned in poll() with max.poll.records.")

    def __init__(self, message: str | None = None, code: ErrorCode = ErrorCode.UNKNOWN_MEMBER_ID):
        super().__init__(code, message or self.DEFAULT)


class RebalanceInProgressError(KafkaError):
    """Java's RebalanceInProgressException raised by a commit during a rebalance."""

    def __init__(self, message: str | None = None):
        super().__init__(ErrorCode.REBALANCE_IN_PROGRESS, message)


class FencedInstanceIdError(KafkaError):
    """Another consumer with the same group.instance.id joined: this one is fenced for good."""

    def __init__(self, group_instance_id: str | None, where: str):
        super().__init__(ErrorCode.FENCED_INSTANCE_ID,
                         f"{where} failed: the group.instance.id {group_instance_id!r} has been fenced "
                         "by another consumer instance using the same group.instance.id "
                         "(FENCED_INSTANCE_ID); this consumer can no longer take part in the group")


class NoOffsetForPartitionError(KafkaError):
    """auto.offset.reset=none and a partition has no committed offset."""

    def __init__(self, partitions):
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE,
                         f"Undefined offset with no reset policy for partitions: {sorted(partitions)}")
        self.partitions = set(partitions)


class OffsetOutOfRangeError(KafkaError):
    """A fetch position is out of range and auto.offset.reset=none."""

    def __init__(self, offsets):
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE,
                         f"Fetch position out of range, no configured reset policy: {offsets}")
        self.offsets = dict(offsets)


class RecordTooLargeError(KafkaError):
    def __init__(self, message: str):
        super().__init__(ErrorCode.MESSAGE_TOO_LARGE, message)


class IllegalStateError(RuntimeError):
    """Java's IllegalStateException: an API used in the wrong state (e.g. poll with no subscription)."""


def is_retriable(error: BaseException | None) -> bool:
    if error is None:
        return False
    if isinstance(error, KafkaError):
        return error.code.retriable
    return bool(getattr(error, "retriable", False))
