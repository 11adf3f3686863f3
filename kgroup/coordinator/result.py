"""What a coordinator operation hands back to the runtime: records to append, responses to send.

Flow (one shard, one operation at a time)::

    result = shard.handle_xxx(request, version, now_ms, token, ...)   # or shard.poll_timers(now_ms)
    if result.records:
        try:
            log.append(result.records)              # list of (key_bytes, value_bytes | None)
        except AppendFailure as e:
            to_send = shard.abort(result, e.error_code)
        else:
            to_send = shard.commit(result)
    else:
        to_send = shard.commit(result)           # cheap; no records to replay
    for token, response in to_send: ...

``commit`` must be called (or ``abort``) before the next operation on the same shard. It replays
the records (the only way durable state changes) and runs the post-write steps (for example the
SyncGroup propagation of the leader's assignment), returning every response to send: the
answer to this request if it is not parked, plus answers to parked JoinGroup/SyncGroup requests
of other members, each paired with the opaque token the runtime gave when it parked them.
``abort`` changes no durable state; it maps the append error as Kafka does
(``append_error_to_response_error``) and returns the error responses instead.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode


def append_error_to_response_error(error: ErrorCode) -> ErrorCode:
    """Kafka's GroupMetadataManager.appendGroupMetadataErrorToResponseError (also what the
    coordinator service does to a failed write of any operation)."""
    error = ErrorCode(error)
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                 ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


class Result:
    """Records plus responses of one operation.

    ``records``   list of (key_bytes, value_bytes | None) in Kafka's exact format, append order.
    ``responses`` list of (token, response) sent after a successful write (inspection helper;
                  the authoritative list is what ``commit``/``abort`` return).
    """

    __slots__ = ("now_ms", "_records", "_replies", "_on_commit", "_on_abort")

    def __init__(self, now_ms: int = 0):
        self.now_ms = now_ms
        self._records = []          # kgroup.coordinator.coordinator_records.Record
        self._replies = []          # (token, response, on_failure | None)
        self._on_commit = ()        # fn(Result) -> None, after replay (a list once there is one)
        self._on_abort = ()         # fn(Result, ErrorCode) -> None

    # -- building ---------------------------------------------------------------------------
    def add_record(self, record) -> None:
        self._records.append(record)

    def reply(self, token, response, on_failure=None) -> None:
        """Answer ``token``. ``on_failure(error) -> response`` replaces the answer if the write
        fails; without it the answer is sent either way (e.g. a member fenced meanwhile)."""
        self._replies.append((token, response, on_failure))

    def set_failure(self, token, on_failure, start: int = 0) -> bool:
        """Give the replies to ``token`` (from index ``start``) a failure form; True if any."""
        found = False
        for i in range(start, len(self._replies)):
            t, resp, f = self._replies[i]
            if t is token or t == token:
                found = True
                if f is None:
                    self._replies[i] = (t, resp, on_failure)
        return found

    def on_commit(self, fn) -> None:
        if self._on_commit:
            self._on_commit.append(fn)
        else:
            self._on_commit = [fn]

    def on_abort(self, fn) -> None:
        if self._on_abort:
            self._on_abort.append(fn)
        else:
            self._on_abort = [fn]

    def merge(self, other: "Result") -> "Result":
        self._records.extend(other._records)
        self._replies.extend(other._replies)
        self._on_commit = [*self._on_commit, *other._on_commit]
        self._on_abort = [*self._on_abort, *other._on_abort]
        return self

    # -- reading ----------------------------------------------------------------------------
    @property
    def records(self) -> list[tuple[bytes, bytes | None]]:
        return [(r.key, r.value) for r in self._records]

    @property
    def decoded_records(self):
        return list(self._records)

    @property
    def responses(self) -> list:
        return [(t, r) for t, r, _ in self._replies]

    def __repr__(self) -> str:
        return f"Result(records={len(self._records)}, responses={len(self._replies)})"
