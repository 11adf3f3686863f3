"""An I/O error on the log directory, handled as Kafka does (LogDirFailureChannel and
ReplicaManager.handleLogDirFailure): the directory goes offline at the first failed write or
fsync, and with a single log directory the broker shuts down ("Shutdown broker because all log
dirs in ... have failed"; Kafka halts with exit code 1).

Until it has stopped: nothing more is written, read or acknowledged (the server closes a
connection that sends a request, as a halted broker would); the requests in flight are answered
with Kafka's error codes by their owners (a produce with KAFKA_STORAGE_ERROR, a group
coordinator write with NOT_COORDINATOR, as appendGroupMetadataErrorToResponseError maps it). A
log whose flush failed is truncated to what its last successful flush made durable, so records
that were reported failed are neither served after a restart nor mistaken for durable ones (a
committed offset reported failed is not returned by OffsetFetch). This is best effort on a
failing disk; the truncation does not need the fsync that failed.
"""
from __future__ import annotations

import logging

log = logging.getLogger("kgroup.broker")


def is_io_error(exc: BaseException) -> bool:
    """A disk I/O failure (EIO, ENOSPC, ...), possibly wrapped as KafkaStorageError; not a
    closed or deleted log (ValueError), nor a client's bad input."""
    while exc is not None:
        if isinstance(exc, OSError):
            return True
        exc = exc.__cause__
    return False


class LogDirFailure:
    __slots__ = ("data_dir", "offline", "on_offline", "_logs")

    def __init__(self, data_dir: str, logs):
        self.data_dir = data_dir
        self.offline = False
        self.on_offline = None      # fn() that stops the broker (set by the CLI); None: stay offline
        self._logs = logs           # the LogManager

    def failed(self, exc: BaseException, what: str, failed_logs=()) -> None:
        """An I/O error while ``what``: take the directory offline (once) and stop the broker."""
        for plog in failed_logs:
            self._drop_unflushed(plog)
        if self.offline:
            return
        self.offline = True
        log.error("Error while %s in dir %s: %s", what, self.data_dir, exc)
        log.error("Shutdown broker because all log dirs in %s have failed", self.data_dir)
        if self.on_offline is not None:
            self.on_offline()

    @staticmethod
    def _drop_unflushed(plog) -> None:
        try:
            durable = plog.recovery_point
            if plog.log_end_offset > durable:
                plog.truncate_to(durable)
                log.error("truncated %s to offset %d: what follows could not be made durable",
                          plog.directory, durable)
        except Exception as e:      # a closed log, or the disk refuses this too
            log.error("cannot truncate %s to its last durable offset: %s", plog.directory, e)
