"""What a coordinator operation hands back to the runtime: records to append, responses to send.

Flow (one shard, one operation at a time)::

    result = shard.handle_xxx(request, version, now_ms, token, ...)   # or shard.poll_timers(now_ms)
    if result.records:
        try:
            plog.append(build_batch([Record(key=r.key, value=r.value) for r in result.records]))
        except LogError as e:                    # nothing was written
            to_send = shard.abort(result, e.code)
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

from typing import Callable

from ..protocol.errors import ErrorCode
from .coordinator_records import OFFSET_COMMIT


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


def coordinator_api(error, validate=None):
    """Declare a shard handler's error form and request checks, read by the runtime:
    ``error(req, version, code)`` answers the whole request with ``code`` (the partition is
    loading, not hosted, or failed); ``validate(req, version, config)`` returns the answer to a
    request the coordinator service refuses before any shard sees it (Kafka's
    GroupCoordinatorService checks), or None."""
    def declare(handler):
        handler.error_response = error
        handler.validate = validate
        return handler
    return declare


def gate(handler, req, version: int, config, state_error):
    """What the runtime answers instead of running ``handler``: the request's validation answer,
    else ``state_error`` (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR; None when the partition
    is active) in the API's error form, else None: run it."""
    validate = handler.validate
    if validate is not None:
        refused = validate(req, version, config)
        if refused is not None:
            return refused
    if state_error is not None:
        return handler.error_response(req, version, state_error)
    return None


class Result:
    """Records plus responses of one operation: what a handler builds and the runtime reads.

    ``now_ms``   the operation's time (the records' timestamp).
    ``records``  the coordinator records to append, in order (``coordinator_records.CoordinatorRecord``:
                 ``key``/``value`` bytes in Kafka's exact format plus their decoded form).
    ``wait_committed`` answer only once the partition's last written offset is committed.
    ``timer_key`` the key of the timer whose operation built it (set by the shard's ``poll_timers``
                 only, never on a request's: read it with ``getattr(result, "timer_key", None)``),
                 so what watches the written records (rebalance timelines) can tell a session
                 timeout from a rebalance timeout.
    Everything else goes through methods: ``committed``/``aborted`` are what the shard's
    ``commit``/``abort`` send; ``is_plain_offset_commit`` says whether it may be batched.
    """

    __slots__ = ("now_ms", "records", "_answers", "_on_failure", "_on_commit", "_on_abort", "timer_key",
                 "wait_committed")
    timer_key: object

    def __init__(self, now_ms: int = 0):
        self.now_ms = now_ms
        self.records: list = []            # coordinator_records.CoordinatorRecord (or the transaction log's)
        self._answers: list[tuple] = []     # (token, response), in reply order
        # {index in _answers: fn(error) -> response}, once there is one
        self._on_failure: dict[int, Callable] | None = None
        # fn(Result) -> None, after replay; fn(Result, ErrorCode) -> None (lists once there is one)
        self._on_commit: list[Callable] | tuple[()] = ()
        self._on_abort: list[Callable] | tuple[()] = ()
        # a write with no records (OffsetFetch with require_stable): answered once everything the
        # partition has written is committed (Kafka's deferred events, keyed by the last written offset)
        self.wait_committed = False

    # -- building ---------------------------------------------------------------------------
    def add_record(self, record) -> None:
        self.records.append(record)

    def reply(self, token, response, on_failure=None) -> None:
        """Answer ``token``. ``on_failure(error) -> response`` replaces the answer if the write
        fails; without it the answer is sent either way (e.g. a member fenced meanwhile)."""
        self._answers.append((token, response))
        if on_failure is not None:
            if self._on_failure is None:
                self._on_failure = {}
            self._on_failure[len(self._answers) - 1] = on_failure

    def reply_count(self) -> int:
        return len(self._answers)

    def set_failure(self, token, on_failure, start: int = 0) -> bool:
        """Give the replies to ``token`` (from index ``start``) a failure form; True if any."""
        found = False
        for i in range(start, len(self._answers)):
            t = self._answers[i][0]
            if t is token or t == token:
                found = True
                if self._on_failure is None:
                    self._on_failure = {}
                self._on_failure.setdefault(i, on_failure)
        return found

    def on_commit(self, fn) -> None:
        if isinstance(self._on_commit, list):
            self._on_commit.append(fn)
        else:
            self._on_commit = [fn]

    def on_abort(self, fn) -> None:
        if isinstance(self._on_abort, list):
            self._on_abort.append(fn)
        else:
            self._on_abort = [fn]

    # -- reading ----------------------------------------------------------------------------
    def is_plain_offset_commit(self) -> bool:
        """Only offset-commit records and no post-write steps: the runtime may write it in one
        batch with its neighbours (replaying offset commits never changes group membership)."""
        if self._on_commit or self._on_abort or not self.records:
            return False
        for r in self.records:
            if r.record_type != OFFSET_COMMIT or r.value is None:
                return False
        return True

    def committed(self, now_ms: int) -> list:
        """What to send once the records are replayed: (token, response) of every reply, then
        those of the post-write steps, which run now (the list is the Result's own)."""
        answers = self._answers
        if not self._on_commit:
            return answers
        extra = Result(now_ms)
        for fn in self._on_commit:
            fn(extra)
        return answers + extra._answers

    def aborted(self, error: ErrorCode, now_ms: int) -> list:
        """What to send after a failed write (``error`` already mapped): every reply, in its
        failure form where it has one, then what undoing the operation sends (newest first)."""
        failures = self._on_failure or {}
        out = [(t, failures[i](error) if i in failures else r) for i, (t, r) in enumerate(self._answers)]
        if self._on_abort:
            extra = Result(now_ms)
            for fn in reversed(self._on_abort):
                fn(extra, error)
            out += extra._answers
        return out

    def failure_responses(self, error: ErrorCode) -> list:
        """(token, failure form of its reply) for each reply that has one (``error`` already
        mapped): what to send when the records were written but could not be made durable."""
        failures = self._on_failure or {}
        return [(t, failures[i](error)) for i, (t, _) in enumerate(self._answers) if i in failures]

    @property
    def responses(self) -> list:
        """(token, response) of every reply, for inspection (a copy)."""
        return list(self._answers)

    def __repr__(self) -> str:
        return f"Result(records={len(self.records)}, responses={len(self._answers)})"
