"""The coordinator runtime (Kafka's ``CoordinatorRuntime`` in coordinator-common): one generic
host for the shards of a coordinator's compacted topic, whatever the coordinator. The group
coordinator (``group_runtime.py``) and the transaction coordinator (``transaction_runtime.py``)
are small adapters around one instance each; every shard implements the same interface:

    replay(key, value, offset) / replay_transactional(producer_id, key, value, offset) /
    replay_end_transaction_marker(producer_id, committed)            loading and replay
    on_loaded(now_ms) -> Result        on_unloaded(now_ms) -> [(token, response)]
    handle_xxx(req, version, now_ms, token, ...) -> Result           (declared with coordinator_api)
    commit(result, producer_id=None) -> [(token, response)]   abort(result, error) -> [...]
    poll_timers(now_ms) -> iterator of Result    next_deadline()    scheduler.pushes    is_loaded
    update_last_written_offset(offset)  update_last_committed_offset(offset)   (optional: a shard
                                        that reads at its partition's committed offset)

Partitions (Kafka's CoordinatorContext): ``load(p, epoch)`` replays the partition's log in the
background (requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS) and makes it active; ``unload(p,
epoch)`` drops it (requests get NOT_COORDINATOR, parked ones are answered NOT_COORDINATOR, timers
stop); a partition whose log does not load is FAILED and answers NOT_COORDINATOR. An epoch is kept
per hosted partition: a load or unload carrying an older epoch than the hosted one is ignored, and
a load at a newer epoch of a partition loading or loaded only moves the epoch (the same leader,
whose ISR the controller changed: nothing to replay).
Whether a request may run is decided here, once, from the partition's state (``result.gate``,
with the handler's declared error form and request checks), never by the shard.

Flow of one operation (one asyncio task owns every shard, so the core needs no locks):
    token = PendingResponse(); result = handle(shard, req, version, now_ms, token)
    -> records appended as one RecordBatch (``append_records``: the one append path, one failure
       policy) -> shard.commit(result) replays them (or shard.abort when the append failed)
    -> answers that follow a write wait for the group-commit fsync, then answer their tokens.
An answer to a token calls the server directly; a closed connection's answer is dropped there.

Held writes: consecutive operations whose results hold only offset-commit records (and no
post-write steps) are not written one by one; they are held and written together, as one
RecordBatch, at the end of the event-loop iteration (or before any other operation on that
partition runs, or once the batch is large), then each is committed (or aborted) in order,
exactly as if written alone.

Timers: each active partition has at most one loop timer, armed for its shard's earliest
deadline and re-armed only when an earlier deadline appears (a heartbeat, which pushes a deadline
later, costs no timer work). When it fires, each due timer runs as its own operation: its
records are written and replayed before the next one runs, so every expiry is computed on the
state the previous one left.

Committed offsets (Kafka's lastWrittenOffset / lastCommittedOffset): a shard that has them is told,
after each append, the appended batch's last offset and the partition's high watermark, and again
whenever the high watermark moves (``high_watermark_moved``; on one node it is the log end after
each append, so nothing is ever uncommitted). Its reads see only committed records; a result with
``wait_committed`` (a write with no records) is answered once the partition's high watermark has
reached its log end, through the same wait for the ISR as a write's answer.
"""
from __future__ import annotations

import asyncio
import copy
import enum
import logging
import time
from typing import Callable

from ..coordinator import CoordinatorLoadError
from ..coordinator.result import append_error_to_response_error, gate
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records import Record, build_batch, build_end_txn_marker_batch
from ..storage.errors import KafkaStorageError
from ..storage.producer_state import AppendOrigin
from ..transaction_coordinator.transaction_log_records import TransactionLogDecodeError
from .log_dir_failure import is_io_error
from .offsets_loader import load_steps
from .pending import PendingResponse

log = logging.getLogger("kgroup.coordinator_runtime")
LOAD_SLICE_S = 0.005            # replay at most this long before letting requests in
MAX_HELD_BYTES = 512 * 1024     # a held batch of offset commits is written once this large


class CoordinatorState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"


class CoordinatorAppendError(KafkaError):
    """A coordinator write did not reach its log; ``code`` is what the failure means to a client
    before the shard maps it (Kafka's appendGroupMetadataErrorToResponseError), ``cause`` what
    the log raised."""

    def __init__(self, code: ErrorCode, cause: BaseException):
        super().__init__(code, f"{code.name}: {cause}")
        self.cause = cause


def append_records(broker, topic: str, partition: int, batch, transaction_version: int = 0) -> object:
    """The one append path of every coordinator write (group records, TxnOffsetCommit batches,
    transaction markers) and its one failure policy: nothing is written once the log directory is
    offline (KAFKA_STORAGE_ERROR), a partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION, a
    storage or record error keeps its own code, a disk I/O error is KAFKA_STORAGE_ERROR and takes
    the log directory offline (``data_path.append_failed``), anything else is
    UNKNOWN_SERVER_ERROR. Returns the log."""
    plog = None
    try:
        if broker.log_dir_failure.offline:
            raise KafkaStorageError("the log directory is offline")
        plog = broker.data_path.log(topic, partition)
        if plog is None:
            raise LookupError(f"{topic}-{partition} does not exist")
        rm = broker.replica_manager
        if rm.enabled:      # in a cluster only the partition's leader writes it
            part, error = rm.leader_partition(topic, partition)
            if error is not None:
                raise KafkaError(error, f"this broker does not lead {topic}-{partition}")
            plog.append(batch, origin=AppendOrigin.COORDINATOR, transaction_version=transaction_version)
            rm.leader_appended(part)
            return plog
        plog.append(batch, origin=AppendOrigin.COORDINATOR, transaction_version=transaction_version)
        return plog
    except Exception as e:      # nothing was written
        broker.data_path.append_failed(e, plog)
        if isinstance(e, KafkaError):
            code = ErrorCode(e.code)
            log.warning("write to %s-%d failed: %s", topic, partition, e)
        elif is_io_error(e):        # Kafka's KafkaStorageException
            code = ErrorCode.KAFKA_STORAGE_ERROR
            log.warning("write to %s-%d failed: %s", topic, partition, e)
        elif isinstance(e, LookupError):
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            log.warning("write to %s-%d failed: %s", topic, partition, e)
        else:
            code = ErrorCode.UNKNOWN_SERVER_ERROR
            log.exception("write to %s-%d failed", topic, partition)
        raise CoordinatorAppendError(code, e) from e


def split_by_partition(req, field: str, partition_of, key_of=None) -> list:
    """[(partition, sub-request)] for a request naming many coordinator keys: the items of
    ``req.<field>`` (keys, or entries whose ``key_of(item)`` is one) grouped by their owning
    partition in order of first mention, request order within a partition, each group in a copy
    of ``req`` (as Kafka's coordinator services split such requests)."""
    by_partition: dict[int, list] = {}
    for item in getattr(req, field):
        by_partition.setdefault(partition_of(item if key_of is None else key_of(item)), []).append(item)
    parts = []
    for p, items in by_partition.items():
        sub = copy.copy(req)
        setattr(sub, field, items)
        parts.append((p, sub))
    return parts


class _HeldWrites:
    """A partition's plain offset-commit results held to be written as one batch."""

    __slots__ = ("results", "size", "records", "limit")

    def __init__(self, limit: int):
        self.results: list = []
        self.size = 0               # estimated bytes of their records
        self.records = 0            # how many (each an offset commit)
        self.limit = limit


class _ArmedTimer:
    """A partition's loop timer: armed for ``deadline``, when the scheduler had made ``pushes``
    heap pushes (no push since then: no deadline can have become earlier)."""

    __slots__ = ("deadline", "handle", "pushes")

    def __init__(self, deadline: int, handle: asyncio.TimerHandle, pushes: int):
        self.deadline = deadline
        self.handle = handle
        self.pushes = pushes


class CoordinatorRuntime:
    """Hosts the shards of one coordinator topic. ``new_shard(p, epoch)`` makes a shard;
    ``config`` is what handlers' request checks read; ``after_commit(shard, plog, out,
    results)`` (optional) takes over answering once records are appended and replayed (the
    transaction coordinator's markers); ``on_unloaded(p)`` (optional) answers what an adapter
    parked for the partition."""

    def __init__(self, broker, *, topic: str, config, new_shard: Callable, load_buffer_size: int,
                 after_commit: Callable | None = None, on_unloaded: Callable | None = None):
        self.broker = broker
        self.now_ms = broker.clock.now_ms      # the broker's clock (time travel moves it)
        self.topic = topic
        self.config = config
        self._new_shard = new_shard
        self.load_buffer_size = load_buffer_size
        self._after_commit = after_commit or self.answer_when_flushed
        self._on_unloaded = on_unloaded
        self.shards: dict = {}                          # partition -> its shard (loading or active)
        self.states: dict[int, CoordinatorState] = {}   # partition -> its state
        self.epochs: dict[int, int] = {}                # partition -> the epoch it was loaded with
        self._load_queue: list[int] = []
        self._loader: asyncio.Task | None = None
        self._timers: dict[int, _ArmedTimer] = {}
        self._held: dict[int, _HeldWrites] = {}
        self._held_flush_scheduled = False
        self.partition_load_ms: dict[int, float] = {}  # partition -> its load time (metrics)
        self.write_observer = None      # fn(results, offset_commits) after their records are appended
        # fn(shard or None) after an operation changed what a shard shows (committed, timers
        # fired; None: the topics changed): what the test waits are woken by (test_control.py)
        self.state_observer = None

    # -- partitions: load and unload ----------------------------------------------------------------
    def state_error(self, p: int) -> ErrorCode | None:
        """None when ``p`` is active here, else what a request for it is answered."""
        state = self.states.get(p)
        if state is CoordinatorState.ACTIVE:
            return None
        if state is CoordinatorState.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def is_active(self, p: int) -> bool:
        return self.states.get(p) is CoordinatorState.ACTIVE

    def active_shards(self) -> list:
        return [s for p, s in self.shards.items() if self.states.get(p) is CoordinatorState.ACTIVE]

    def load(self, p: int, epoch: int = 0) -> None:
        """Host partition ``p`` (becoming its leader at ``epoch``): its log is replayed in the
        background, in the order partitions were asked for, then it answers requests."""
        current = self.epochs.get(p)
        if current is not None:
            failed = self.states.get(p) is CoordinatorState.FAILED
            if epoch <= current and not failed:
                return      # already hosted at this epoch (or a newer one)
            if not failed:
                # the same leadership at a newer epoch (the controller changed the ISR): loading
                # or loaded, it goes on; only the epoch moves (CoordinatorRuntime.scheduleLoadOperation)
                self.epochs[p] = epoch
                return
            self.unload(p)
        self.shards[p] = self._new_shard(p, epoch)
        self.states[p] = CoordinatorState.LOADING
        self.epochs[p] = epoch
        self._load_queue.append(p)
        if self._loader is None or self._loader.done():
            self._loader = asyncio.get_running_loop().create_task(self._load_queued())

    def load_empty(self, p: int, epoch: int = 0) -> None:
        """Host a partition whose log was just created empty: active at once."""
        if p in self.shards:
            self.unload(p)
        shard = self.shards[p] = self._new_shard(p, epoch)
        self.epochs[p] = epoch
        self.states[p] = CoordinatorState.ACTIVE
        self.run(shard, shard.on_loaded(self.now_ms()))

    def unload(self, p: int, epoch: int | None = None) -> None:
        """Stop hosting ``p`` (it moved to another broker, or was deleted). An unload with an
        epoch older than the hosted one is ignored (Kafka's scheduleUnloadOperation)."""
        current = self.epochs.get(p)
        if current is None or (epoch is not None and epoch < current):
            return
        state = self.states.pop(p)
        shard = self.shards.pop(p)
        del self.epochs[p]
        if p in self._load_queue:
            self._load_queue.remove(p)
        armed = self._timers.pop(p, None)
        if armed is not None:
            armed.handle.cancel()
        if state is CoordinatorState.ACTIVE:
            self._write_held(p, shard)
            for token, response in shard.on_unloaded(self.now_ms()):
                token.answer(response)
        if self._on_unloaded is not None:
            self._on_unloaded(p)
        log.info("unloaded %s-%d (epoch %s)", self.topic, p, current)

    async def _load_queued(self) -> None:
        started, loaded = time.monotonic(), 0
        while self._load_queue:
            p = self._load_queue.pop(0)
            shard = self.shards[p]
            if await self._load_one(p, shard):
                loaded += 1
            await asyncio.sleep(0)
        if loaded:
            log.info("loaded %d partition(s) of %s in %.2f s", loaded, self.topic, time.monotonic() - started)

    async def _load_one(self, p: int, shard) -> bool:
        clock = time.monotonic
        shard_started = clock()
        plog = self.broker.data_path.log(self.topic, p)
        if plog is not None:
            self._committed_offset_moved(shard, plog)
        slice_end = clock() + LOAD_SLICE_S
        try:
            if plog is not None:
                for _ in load_steps(shard, plog, self.load_buffer_size):      # offsets_loader.py
                    if clock() >= slice_end:
                        await asyncio.sleep(0)
                        slice_end = clock() + LOAD_SLICE_S
                        if self.shards.get(p) is not shard:
                            return False        # unloaded (or reloaded) meanwhile
        except (CoordinatorLoadError, TransactionLogDecodeError) as e:
            # Kafka's runtime: the partition goes FAILED and answers NOT_COORDINATOR; the
            # others still load
            log.error("cannot load %s-%d: %s", self.topic, p, e)
            if self.shards.get(p) is shard:
                self.states[p] = CoordinatorState.FAILED
            return False
        if self.shards.get(p) is not shard:
            return False
        self.states[p] = CoordinatorState.ACTIVE
        self.run(shard, shard.on_loaded(self.now_ms()))
        self.partition_load_ms[p] = (clock() - shard_started) * 1000  # (includes yields to requests)
        return True

    # -- operations ---------------------------------------------------------------------------------
    def execute(self, p: int, handle, req, version: int, *extra, may_hold: bool = False):
        """Run ``handle(shard, req, version, now_ms, token, *extra)`` (a shard's declared
        handler, unbound) on partition ``p`` if it is active. Returns the response when the
        operation answered at once, else the token (a PendingResponse). ``may_hold``: the result
        may wait in the partition's held batch (see the module docstring)."""
        state_error = self.state_error(p)
        refused = gate(handle, req, version, self.config, state_error)
        if refused is not None:
            return refused
        shard = self.shards[p]
        token = PendingResponse()
        if not may_hold and p in self._held:
            self._write_held(p, shard)
        if self.run(shard, handle(shard, req, version, self.now_ms(), token, *extra), may_hold):
            token.flush_only = True     # held to be written: it waits only for its write and fsync
        return token.response if token.answered else token

    def execute_parts(self, parts, handle, version: int, merge, *extra):
        """A request split by partition: ``parts`` is [(partition, sub-request)]; each runs as
        ``execute`` would, and ``merge(responses)`` combines the answers in that order."""
        tokens = []
        for p, sub in parts:
            answer = self.execute(p, handle, sub, version, *extra)
            if type(answer) is not PendingResponse:
                token = PendingResponse()
                token.answer(answer)
                answer = token
            tokens.append(answer)
        return PendingResponse.gather(tokens, merge)

    def run(self, shard, result, may_hold: bool = False) -> bool:
        """Write (or hold) and commit ``result``; True when it was held, to be written later."""
        held = False
        if not result.records:      # nothing to write: commit at once (no replay, just answers)
            if result.wait_committed:
                if shard.partition in self._held:      # what it must wait for is written first
                    self._write_held(shard.partition, shard)
                self._answer_when_committed(shard, shard.commit(result), result)
            else:
                self._after_commit(shard, None, shard.commit(result), (result,))
        elif may_hold and result.is_plain_offset_commit():
            self._hold(shard, result)
            held = True
        else:
            if shard.partition in self._held:     # what is held goes first: the log keeps the shard's order
                self._write_held(shard.partition, shard)
            self._write(shard, [result])
        self._reschedule(shard)
        if self.state_observer is not None:
            self.state_observer(shard)
        return held

    # -- writing ------------------------------------------------------------------------------------
    def _hold(self, shard, result) -> None:
        p = shard.partition
        held = self._held.get(p)
        if held is None:
            # written before it nears the log's max.message.bytes: each commit alone might fit
            plog = self.broker.data_path.log(self.topic, p)
            limit = MAX_HELD_BYTES if plog is None else min(MAX_HELD_BYTES, plog.config.max_message_bytes // 2)
            held = self._held[p] = _HeldWrites(limit)
        held.results.append(result)
        held.records += len(result.records)
        for r in result.records:
            held.size += len(r.key) + len(r.value) + 16   # offset commits: never tombstones
        if held.size >= held.limit:
            self._write_held(p, shard)
        elif not self._held_flush_scheduled:
            self._held_flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._write_all_held)

    def _write_all_held(self) -> None:
        self._held_flush_scheduled = False
        for p in list(self._held):
            self._write_held(p, self.shards[p])

    def _write_held(self, p: int, shard) -> None:
        held = self._held.pop(p, None)
        if held is not None:
            self._write(shard, held.results, held.records)
            if self.state_observer is not None:
                self.state_observer(shard)

    def write_held(self, p: int) -> None:
        """Write what ``p`` holds now (before something that must follow it in the log)."""
        if p in self._held:
            self._write_held(p, self.shards[p])

    def _write(self, shard, results: list, offset_commits: int = 0) -> None:
        """Append the records of ``results`` as one batch, then commit (or abort) each in order.
        ``offset_commits``: their number of records when every one is an offset commit (held
        commits), passed to the write observer so it need not look at them."""
        batch = build_batch([Record(key=r.key, value=r.value, timestamp=res.now_ms)
                             for res in results for r in res.records])
        try:
            plog = append_records(self.broker, self.topic, shard.partition, batch)
        except CoordinatorAppendError as e:     # nothing was written: every operation fails, nothing changes
            for res in results:
                for token, response in shard.abort(res, e.code):
                    token.answer(response)
            return
        if self.write_observer is not None:     # broker metrics count what was written (metrics.py)
            self.write_observer(results, offset_commits)
        self._appended(shard, plog)
        out = []
        for res in results:
            out.extend(shard.commit(res))
        self._after_commit(shard, plog, out, results)

    def write_transactional(self, p: int, result, producer_id: int, producer_epoch: int):
        """``result``'s records as a transactional batch of the producer (TxnOffsetCommit), then
        replayed as that producer's pending records; answered after the fsync. Returns what the
        handler returns: the response, or the pending token."""
        shard = self.shards[p]
        self._write_held(p, shard)
        if not result.records:
            out = shard.commit(result)
        else:
            batch = build_batch([Record(key=r.key, value=r.value, timestamp=result.now_ms) for r in result.records],
                                producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True)
            try:
                plog = append_records(self.broker, self.topic, p, batch)
            except CoordinatorAppendError as e:
                out = shard.abort(result, e.code)
            else:
                self._appended(shard, plog)
                # Appended and replayed (pending in the shard): the answers wait only for the fsync,
                # so the connection's later requests (the transaction's Produce requests, which
                # librdkafka sends on the same connection) are not held behind them.
                self.answer_when_flushed(shard, plog, shard.commit(result, producer_id), [result])
                out = ()
        for token, response in out:
            token.answer(response)
        self._reschedule(shard)

    def write_markers(self, p: int, markers: list, transaction_version: int = 0):
        """COMMIT/ABORT control batches of transactions on this runtime's partition ``p``, one per
        ``(producer_id, producer_epoch, committed, coordinator_epoch)``, in one append, then
        replayed by the shard (a producer's pending records settle). What ``p`` holds is written
        first, so the log keeps the order in which the shard saw it. Returns the log to fsync;
        raises CoordinatorAppendError. ``transaction_version``: the markers' (WriteTxnMarkers v2)."""
        shard = self.shards.get(p)
        if shard is not None:
            self._write_held(p, shard)
        now = self.now_ms()
        plog = append_records(self.broker, self.topic, p, b"".join(
            build_end_txn_marker_batch(pid, epoch, committed, coordinator_epoch, now)
            for pid, epoch, committed, coordinator_epoch in markers), transaction_version)
        if shard is not None and self.is_active(p):
            self._appended(shard, plog)
            for pid, _, committed, _ in markers:
                shard.replay_end_transaction_marker(pid, committed)
            if self.state_observer is not None:
                self.state_observer(shard)
        return plog

    def answer_when_flushed(self, shard, plog, out: list, results) -> None:
        """The records of ``results`` are appended and replayed: answer ``out`` once they are on
        disk (if the fsync fails, each operation's failure form); at once when nothing was
        written (``plog`` None)."""
        if plog is None:
            for token, response in out:
                token.answer(response)
            return
        for token, _ in out:
            # Replayed, so visible to every later request: these answers wait only for the
            # fsync. (A parked JoinGroup/SyncGroup answered here had muted its connection
            # when it parked; the server reads this flag only when a handler returns.)
            token.flush_only = True
        if out:
            flushed = self.broker.data_path.wait_flushed({plog})
            rm = self.broker.replica_manager
            if rm.enabled:      # and, in a cluster, once the partition's ISR has them
                flushed = rm.after_replicated((self.topic, shard.partition), plog, flushed,
                                              self.broker.config["offsets.commit.timeout.ms"])
            flushed.listen(lambda flushed: answer_flushed(out, flushed, results))

    # -- committed offsets ---------------------------------------------------------------------------
    def _appended(self, shard, plog) -> None:
        """Records were appended to ``shard``'s partition: it replays them at the batch's last
        offset, and learns the high watermark (an ISR of one, or one node: the log end)."""
        written = getattr(shard, "update_last_written_offset", None)
        if written is not None:
            self._committed_offset_moved(shard, plog)
            written(plog.log_end_offset - 1)

    @staticmethod
    def _committed_offset_moved(shard, plog) -> None:
        update = getattr(shard, "update_last_committed_offset", None)
        if update is not None and plog.high_watermark != shard.last_committed_offset:
            update(plog.high_watermark)

    def high_watermark_moved(self, p: int) -> None:
        """The high watermark of partition ``p`` moved (the replica manager's news): its shard,
        loading or active, reads at the new committed offset."""
        shard = self.shards.get(p)
        if shard is None:
            return
        plog = self.broker.data_path.log(self.topic, p)
        if plog is not None:
            self._committed_offset_moved(shard, plog)

    def _answer_when_committed(self, shard, out: list, result) -> None:
        """Answer ``out`` once everything the partition has written is committed (Kafka's
        deferred event of a write with no records); at once when it already is. Waits as a
        write's answer waits for the ISR (``after_replicated``, ``offsets.commit.timeout.ms``);
        if that fails, the result's failure form."""
        plog = self.broker.data_path.log(self.topic, shard.partition)
        rm = self.broker.replica_manager
        if plog is None or not rm.enabled or plog.high_watermark >= plog.log_end_offset:
            for token, response in out:
                token.answer(response)
            return
        written = PendingResponse(flush_only=True)
        written.answer(None)        # nothing of its own to fsync
        committed = rm.after_replicated((self.topic, shard.partition), plog, written,
                                        self.broker.config["offsets.commit.timeout.ms"])
        committed.listen(lambda committed: answer_flushed(out, committed, (result,)))

    # -- timers -------------------------------------------------------------------------------------
    def _reschedule(self, shard) -> None:
        p = shard.partition
        armed = self._timers.get(p)
        pushes = shard.scheduler.pushes
        if armed is not None and armed.pushes == pushes:
            return          # no deadline was added or moved earlier since it was armed (a heartbeat)
        deadline = shard.next_deadline()
        if deadline is None:
            return
        if armed is not None:
            if armed.deadline <= deadline:
                armed.pushes = pushes
                return
            armed.handle.cancel()
        loop = asyncio.get_running_loop()
        # +1 ms: a timer must not fire before its millisecond deadline, or it would spin
        delay = max(0.0, (deadline - self.now_ms() + 1) / 1000.0)
        self._timers[p] = _ArmedTimer(deadline, loop.call_later(delay, self._fire, shard), pushes)

    def _fire(self, shard) -> None:
        p = shard.partition
        self._timers.pop(p, None)
        if self.shards.get(p) is not shard or not self.is_active(p):
            return
        self._write_held(p, shard)
        now = self.now_ms()
        for result in shard.poll_timers(now):
            self.run(shard, result)
        self._reschedule(shard)

    def fire_due_timers(self, rearm: bool = True) -> int | None:
        """Run every active partition's timers that are due now (the clock may have jumped) and,
        with ``rearm``, re-arm each partition's loop timer from the clock's time (one armed before
        the jump would fire late); returns the earliest deadline still scheduled, or None. Time
        travel (test_control.py) steps from one deadline to the next with ``rearm`` False (no
        loop timer can fire during the jump), then calls it once with ``rearm``."""
        earliest = None
        now = self.now_ms()
        for shard in self.active_shards():
            if rearm:
                armed = self._timers.pop(shard.partition, None)
                if armed is not None:
                    armed.handle.cancel()
                self._fire(shard)
            else:
                deadline = shard.next_deadline()
                if deadline is not None and deadline <= now:
                    self._write_held(shard.partition, shard)
                    for result in shard.poll_timers(now):
                        self.run(shard, result)
            deadline = shard.next_deadline()
            if deadline is not None and (earliest is None or deadline < earliest):
                earliest = deadline
        return earliest

    def close(self) -> None:
        for armed in self._timers.values():
            armed.handle.cancel()
        self._timers.clear()
        self._write_all_held()
        if self._loader is not None:
            self._loader.cancel()


def answer_flushed(out, flushed, results=()) -> None:
    """Answer ``out`` now that the fsync of their records ended: with each response, or (the
    records are not durable) each operation's failure form, as for a failed append (a storage
    error maps to NOT_COORDINATOR), else its response's error form; an answer with neither fails
    and its connection closes."""
    failed = flushed.error
    if failed is None:
        for token, response in out:
            token.answer(response)
        return
    error = append_error_to_response_error(ErrorCode.KAFKA_STORAGE_ERROR)
    failure = {id(t): r for res in results for t, r in res.failure_responses(error)}
    for token, response in out:
        r = failure.get(id(token))
        if r is None and hasattr(response, "error_code"):
            # an answer made after the write (e.g. the SyncGroup replies a leader's assignment
            # releases): its request's error form, as Kafka answers every operation of a failed
            # write with the mapped error (appendGroupMetadataErrorToResponseError)
            r = type(response)(error_code=error)
        if r is None:
            token.fail(failed)
        else:
            token.answer(r)
