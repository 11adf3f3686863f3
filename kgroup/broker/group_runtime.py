"""The coordinator runtime: drives the pure GroupCoordinatorShards (one per ``__consumer_offsets``
partition) from the event loop — loading, writing their records, timers, answering.

Flow of one operation (one asyncio task owns every shard, so the core needs no locks):
    token = PendingResponse(); result = shard.handle_xxx(req, version, now_ms, token)   (or poll_timers)
    records -> one RecordBatch appended to the shard's partition log (synchronously)
    -> shard.commit(result) (or shard.abort on a failed append) -> [(token, response)]
    -> responses that follow a write wait for the group-commit fsync, then answer their tokens.
A token is the request's handle, a PendingResponse (kgroup.broker.pending). When the operation
answers it at once with nothing to write (Heartbeat, OffsetFetch, Describe..., most errors) the
handler returns the response itself; otherwise it returns the token, which the server listens
to. A parked JoinGroup/SyncGroup token is answered by whichever later operation completes it.
Answering a token calls the server directly (no asyncio future per request); the answer to a
closed connection is dropped by the server.

Batched offset commits: consecutive OffsetCommits on one shard whose results hold only
offset-commit records (and no post-write steps) are not written one by one. They are held and
written together, as one RecordBatch, at the end of the event-loop iteration (or earlier, before
any other operation on that shard runs, or when the batch grows large); then each is committed
(or aborted) in order, exactly as if it had been written alone. This keeps the commit/abort
contract: an OffsetCommit's validation reads only group membership, which replaying offset
commits never changes (the one exception, a commit that creates a group, is never held behind).

Timers: each shard has at most one loop timer, armed for its earliest deadline; it is re-armed
only when a deadline earlier than the armed one appears (a timer that fires early polls nothing
and re-arms), so a heartbeat, which pushes a deadline later, costs no timer work.

Loading: at start-up every partition of ``__consumer_offsets`` is replayed through
``shard.replay``, yielding to the loop every few milliseconds so requests keep being answered;
until a shard is loaded its groups' requests get COORDINATOR_LOAD_IN_PROGRESS (from the shard).
"""
from __future__ import annotations

import asyncio
import copy
import logging
import time

from ..coordinator import CoordinatorLoadError, GroupCoordinatorConfig, GroupCoordinatorShard, group_partition
from ..coordinator.result import append_error_to_response_error
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records import (ControlRecordType, Record, build_batch, build_end_txn_marker_batch,
                               control_record_type, decode_records)
from ..storage.errors import KafkaStorageError
from ..storage.producer_state import AppendOrigin
from ..coordinator.consumer_group.group import TopicMetadata
from . import group_configs
from .metadata import OFFSETS_TOPIC
from .offsets_loader import load_steps
from .pending import PendingResponse

log = logging.getLogger("kgroup.coordinator")
LOAD_SLICE_S = 0.005            # replay at most this long before letting requests in
MAX_HELD_BYTES = 512 * 1024     # a held batch of offset commits is written once this large


class _HeldCommits:
    """A shard's offset-commit results held to be written as one batch."""

    __slots__ = ("results", "size", "limit", "records")

    def __init__(self, limit: int):
        self.results: list = []
        self.size = 0               # estimated bytes of their records
        self.records = 0            # how many (each an offset commit)
        self.limit = limit          # written once this large


class _ArmedTimer:
    """A shard's loop timer: armed for ``deadline``, when the scheduler had made ``pushes``
    heap pushes (no push since then: no deadline can have become earlier)."""

    __slots__ = ("deadline", "handle", "pushes")

    def __init__(self, deadline: int, handle: asyncio.TimerHandle, pushes: int):
        self.deadline = deadline
        self.handle = handle
        self.pushes = pushes


class GroupRuntime:
    """Drives the shards of one compacted coordinator topic. The group coordinator's by default;
    ``TransactionRuntime`` (``transaction_runtime.py``) drives ``__transaction_state`` with the
    same loading, writing, fsync and timers by overriding ``topic``, ``_new_shard``,
    ``_topic_configs`` and ``_after_commit``."""

    topic = OFFSETS_TOPIC
    load_buffer_size_key = "offsets.load.buffer.size"

    def __init__(self, broker):
        self.broker = broker
        self.now_ms = broker.clock.now_ms      # the broker's clock (time travel moves it)
        self.config = GroupCoordinatorConfig.from_props(broker.config.values)
        self.num_partitions = broker.config["offsets.topic.num.partitions"]
        self.shards: dict[int, GroupCoordinatorShard] = {}
        self._timers: dict[int, _ArmedTimer] = {}     # partition -> its loop timer
        self._held: dict[int, _HeldCommits] = {}      # partition -> offset commits held
        self._held_flush_scheduled = False
        self._load_task: asyncio.Task | None = None
        self._partition_of: dict[str, int] = {}    # group id -> partition (Java hash), a cache
        self.partition_load_ms: dict[int, float] = {}  # partition -> its load time (metrics)
        self._topic_image: dict | None = None       # name -> TopicMetadata, for consumer groups
        self._topics_version = -1
        # group id -> its GROUP config overrides, read by the shards' consumer groups (Kafka's
        # GroupConfigManager); one dict shared by every shard, updated in place
        self.group_configs: dict[str, dict[str, int]] = group_configs.overrides(broker)
        self.write_observer = None      # fn(results) after their records are appended (metrics), or None
        # fn(shard or None) after an operation changed what a shard shows (committed, timers
        # fired; None: the topics changed): what the test waits are woken by (test_control.py)
        self.state_observer = None

    # -- topic and shards -----------------------------------------------------------------------
    def start(self) -> None:
        """Start loading an existing ``__consumer_offsets`` in the background."""
        topic = self.broker.metadata.get(self.topic)
        if topic is not None:
            self.num_partitions = topic.num_partitions
            self._partition_of.clear()
            for p in range(topic.num_partitions):
                self.shards[p] = self._new_shard(p)
            self._load_task = asyncio.get_running_loop().create_task(self._load_all())

    def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` on first use (compacted, as Kafka creates it)."""
        if self.broker.metadata.get(self.topic) is not None:
            return
        self.broker.create_topic(self.topic, self.num_partitions, 1, self._topic_configs())
        now = self.now_ms()
        for p in range(self.num_partitions):
            shard = self.shards[p] = self._new_shard(p)
            self._run(shard, shard.on_loaded(now))

    def _new_shard(self, p: int):
        return GroupCoordinatorShard(p, self.config, topics=self.topic_image, topics_version=self.topics_version,
                                     group_configs=self.group_configs)

    def _topic_configs(self) -> dict[str, str]:
        return {"cleanup.policy": "compact",
                "segment.bytes": str(self.broker.config["offsets.topic.segment.bytes"])}

    def shard_for(self, group_id: str) -> int:
        p = self._partition_of.get(group_id)
        if p is None:
            if len(self._partition_of) >= 100_000:
                self._partition_of.clear()
            p = self._partition_of[group_id] = group_partition(group_id, self.num_partitions)
        return p

    async def _load_all(self) -> None:
        started = time.monotonic()
        clock = time.monotonic
        for p, shard in sorted(self.shards.items()):
            shard_started = clock()
            plog = self.broker.data_path.log(self.topic, p)
            slice_end = clock() + LOAD_SLICE_S
            try:
                for _ in load_steps(shard, plog, self._replay_transactional,     # offsets_loader.py
                                    self.broker.config[self.load_buffer_size_key]):
                    if clock() >= slice_end:
                        await asyncio.sleep(0)
                        slice_end = clock() + LOAD_SLICE_S
            except CoordinatorLoadError as e:
                log.error("cannot load %s: %s", f"{self.topic}-{p}", e)
                raise
            self._run(shard, shard.on_loaded(self.now_ms()))
            self.partition_load_ms[p] = (clock() - shard_started) * 1000  # (includes yields to requests)
            await asyncio.sleep(0)
        log.info("loaded %d partition(s) of %s in %.2f s", len(self.shards), self.topic,
                 time.monotonic() - started)

    def on_group_configs_changed(self, group_id: str) -> None:
        """AlterConfigs changed a group's configs: its consumer group answers the new heartbeat
        interval and restarts sessions with the new timeout from each member's next heartbeat on
        (Kafka's GroupConfigManager.updateGroupConfig; a running session keeps its deadline)."""
        values = group_configs.group_overrides(self.broker, group_id)
        if values:
            self.group_configs[group_id] = values
        else:
            self.group_configs.pop(group_id, None)

    # -- topic metadata, as consumer-protocol groups see it (KIP-848) --------------------------------
    def topic_image(self) -> dict:
        """The metadata image the shards' consumer groups read: every non-internal topic as a
        TopicMetadata (a cache, rebuilt after a topic change)."""
        image = self._topic_image
        if image is None:
            image = self._topic_image = {
                t.name: TopicMetadata(t.topic_id, t.name, t.num_partitions)
                for t in self.broker.metadata.topics.values() if not t.is_internal}
        return image

    def topics_version(self) -> int:
        """The version of the topic image that last changed the topics (-1: none since start), as
        Kafka's lastMetadataImageWithNewTopics: a regex resolved against an older image is resolved
        again. Wall-clock ms, so versions persisted in regex records (16) stay comparable across
        restarts."""
        return self._topics_version

    def on_topics_changed(self) -> None:
        """The broker created or deleted a topic: consumer groups subscribed to it (by name or
        regex) get a new group epoch (Kafka's onNewMetadataImage)."""
        self._topic_image = None
        self._topics_version = max(self._topics_version + 1, self.now_ms())
        for p, shard in self.shards.items():
            if shard.is_loaded and shard.consumer_group_manager.consumer_groups():
                self._write_held(p)
                self._run(shard, shard.handle_topics_changed(self.now_ms()))
        if self.state_observer is not None:
            self.state_observer(None)

    # -- operations -----------------------------------------------------------------------------
    def execute(self, group_id: str, handle, req, version: int, *extra, offset_commit: bool = False):
        """Run ``handle(shard, req, version, now_ms, token, *extra) -> Result`` (a shard's
        ``handle_xxx``, unbound) on the group's shard. Returns the response when the operation
        answered at once, else the token (a PendingResponse). ``offset_commit``: the op is an
        OffsetCommit, whose records may be held and batched with its neighbours'."""
        if self.topic not in self.broker.metadata.topics:
            self.ensure_offsets_topic()
        token = PendingResponse()
        p = self._partition_of.get(group_id)
        if p is None:
            p = self.shard_for(group_id)
        shard = self.shards[p]
        if p in self._held and not (offset_commit and group_id in shard.groups):
            self._write_held(p)
        if self._run(shard, handle(shard, req, version, self.now_ms(), token, *extra), may_hold=offset_commit):
            token.flush_only = True     # held to be written: it waits only for its write and fsync
        return token.response if token.answered else token

    def execute_split(self, req, field: str | None, handle, version: int, merge, group_id_of=None):
        """A multi-group request, the one way they are split by shard: the items of
        ``req.<field>`` (group ids, or entries whose ``group_id_of(item)`` is one) go to their
        owning shards, in request order; each shard runs ``handle(shard, sub, version, now_ms,
        token)`` (a shard's ``handle_xxx``, unbound) on a copy of ``req`` holding its items, and
        ``merge(responses)`` combines the answers, grouped by shard as Kafka combines them. With
        ``field`` None (ListGroups) every shard runs ``req`` itself. Returns the merged response
        when every shard answered at once, else a PendingResponse."""
        self.ensure_offsets_topic()
        if field is None:
            parts = [(p, req) for p in self.shards]
        else:
            by_partition: dict[int, list] = {}
            for item in getattr(req, field):
                gid = item if group_id_of is None else group_id_of(item)
                by_partition.setdefault(self.shard_for(gid), []).append(item)
            parts = []
            for p, items in by_partition.items():
                sub = copy.copy(req)
                setattr(sub, field, items)
                parts.append((p, sub))
        tokens = []
        for p, sub in parts:
            token = PendingResponse()
            self._write_held(p)
            shard = self.shards[p]
            self._run(shard, handle(shard, sub, version, self.now_ms(), token))
            tokens.append(token)
        return PendingResponse.gather(tokens, merge)

    def _run(self, shard: GroupCoordinatorShard, result, may_hold: bool = False) -> bool:
        """Write (or hold) and commit ``result``; True when it was held, to be written later."""
        held = False
        if not result.records:      # nothing to write: commit at once (no replay, just answers)
            for token, response in shard.commit(result):
                token.answer(response)
        elif may_hold and result.is_plain_offset_commit():
            self._hold(shard.partition, result)
            held = True
        else:
            self._write(shard, [result])
        self._reschedule(shard)
        if self.state_observer is not None:
            self.state_observer(shard)
        return held

    # -- writing ------------------------------------------------------------------------------
    def _hold(self, p: int, result) -> None:
        held = self._held.get(p)
        if held is None:
            # written before it nears the log's max.message.bytes: each commit alone might fit
            plog = self.broker.data_path.log(self.topic, p)
            limit = MAX_HELD_BYTES if plog is None else min(MAX_HELD_BYTES, plog.config.max_message_bytes // 2)
            held = self._held[p] = _HeldCommits(limit)
        held.results.append(result)
        held.records += len(result.records)
        for r in result.records:
            held.size += len(r.key) + len(r.value) + 16   # offset commits: never tombstones
        if held.size >= held.limit:
            self._write_held(p)
        elif not self._held_flush_scheduled:
            self._held_flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._write_all_held)

    def _write_all_held(self) -> None:
        self._held_flush_scheduled = False
        for p in list(self._held):
            self._write_held(p)

    def _write_held(self, p: int) -> None:
        held = self._held.pop(p, None)
        if held is not None:
            self._write(self.shards[p], held.results, held.records)
            if self.state_observer is not None:
                self.state_observer(self.shards[p])

    def _write(self, shard: GroupCoordinatorShard, results: list, offset_commits: int = 0) -> None:
        """Append the records of ``results`` as one batch, then commit (or abort) each in order.
        ``offset_commits``: their number of records when every one is an offset commit (held
        commits), passed to the write observer (``fn(results, offset_commits)``) so it need not
        look at them."""
        plog = None
        try:
            if self.broker.log_dir_failure.offline:     # shutting down: nothing more is written
                raise KafkaStorageError("the log directory is offline")
            plog = self.broker.data_path.log(self.topic, shard.partition)
            if plog is None:
                raise LookupError(f"{self.topic}-{shard.partition} does not exist")
            batch = build_batch([Record(key=r.key, value=r.value, timestamp=res.now_ms)
                                 for res in results for r in res.records])
            plog.append(batch, origin=AppendOrigin.COORDINATOR)
        except Exception as e:     # nothing was written: every operation fails, nothing changes
            self.broker.data_path.append_failed(e, plog)    # a disk I/O error: the directory goes offline
            if isinstance(e, KafkaError):      # a storage or record-format error: its code
                error = e.code
                log.warning("write to %s-%d failed: %s", self.topic, shard.partition, e)
            elif isinstance(e, LookupError):
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                log.warning("write to %s-%d failed: %s", self.topic, shard.partition, e)
            else:
                error = ErrorCode.UNKNOWN_SERVER_ERROR
                log.exception("write to %s-%d failed", self.topic, shard.partition)
            for res in results:
                for token, response in shard.abort(res, error):
                    token.answer(response)
            return
        if self.write_observer is not None:     # broker metrics count what was written (metrics.py)
            self.write_observer(results, offset_commits)
        out = []
        for res in results:
            out.extend(shard.commit(res))
        self._after_commit(shard, plog, out, results)

    def _after_commit(self, shard, plog, out: list, results: list) -> None:
        """The records of ``results`` are appended and replayed: answer ``out`` once they are on
        disk (if the fsync fails, each operation's failure form)."""
        for token, _ in out:
            # Replayed, so visible to every later request: these answers wait only for the
            # fsync. (A parked JoinGroup/SyncGroup answered here had muted its connection
            # when it parked; the server reads this flag only when a handler returns.)
            token.flush_only = True
        if out:
            self.broker.data_path.wait_flushed({plog}).listen(
                lambda flushed: self._answer_flushed(out, flushed, results))

    @staticmethod
    def _answer_flushed(out, flushed, results=()) -> None:
        failed = flushed.error
        if failed is not None:
            # Not durable: each operation's failure form, as for a failed append (a storage
            # error maps to NOT_COORDINATOR); what has none fails and its connection closes.
            error = append_error_to_response_error(ErrorCode.KAFKA_STORAGE_ERROR)
            failure = {id(t): r for res in results for t, r in res.failure_responses(error)}
            for token, response in out:
                r = failure.get(id(token))
                if r is None:
                    token.fail(failed)
                else:
                    token.answer(r)
        else:
            for token, response in out:
                token.answer(response)

    # -- transactions: TxnOffsetCommit and markers ---------------------------------------------
    def execute_txn_offset_commit(self, req, version: int):
        """TxnOffsetCommit on the group's shard: its records are written as a transactional
        batch of the request's producer (as Kafka's coordinator runtime writes them), which the
        shard replays as pending offsets (``commit`` with the producer id) until the marker."""
        self.ensure_offsets_topic()
        p = self.shard_for(req.group_id)
        self._write_held(p)
        shard = self.shards[p]
        token = PendingResponse()
        result = shard.handle_txn_offset_commit(req, version, self.now_ms(), token)
        if not result.records:
            out = shard.commit(result)
        else:
            try:
                plog = self.broker.data_path.log(OFFSETS_TOPIC, p)
                plog.append(build_batch([Record(key=r.key, value=r.value, timestamp=result.now_ms)
                                         for r in result.records],
                                        producer_id=req.producer_id, producer_epoch=req.producer_epoch,
                                        is_transactional=True), origin=AppendOrigin.COORDINATOR)
            except Exception as e:
                log.warning("write to %s-%d failed: %s", OFFSETS_TOPIC, p, e)
                error = e.code if isinstance(e, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
                out = shard.abort(result, error)
            else:
                written = shard.commit(result, req.producer_id)
                # Appended and replayed (pending in the shard): the answer waits only for the
                # fsync, so the connection's later requests (the transaction's Produce requests,
                # which librdkafka sends on the same connection) are not held behind it.
                token.flush_only = True
                self.broker.data_path.wait_flushed({plog}).listen(
                    lambda flushed: self._answer_flushed(written, flushed))
                out = ()
        for t, response in out:
            t.answer(response)
        self._reschedule(shard)
        return token.response if token.answered else token

    @staticmethod
    def _replay_transactional(shard, header, batch) -> None:
        """Load: a transactional batch holds pending offsets of its producer, or is the
        producer's COMMIT/ABORT marker."""
        records = decode_records(batch, header)
        if header.is_control:
            for r in records:
                kind = control_record_type(r.key)
                if kind in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                    shard.replay_end_transaction_marker(header.producer_id, kind == ControlRecordType.COMMIT)
            return
        for r in records:
            if r.key is not None:
                shard.replay_transactional(header.producer_id, r.key, r.value, r.offset)

    def write_txn_markers(self, p: int, markers: list):
        """Transactions' COMMIT/ABORT control batches on ``__consumer_offsets``-``p``, one per
        ``(producer_id, producer_epoch, committed, coordinator_epoch)``, in one append (the
        transaction coordinator's marker path, WriteTxnMarkers), then replayed by the shard: the
        producers' pending offsets settle. Held offset commits go first, so the log keeps the
        order in which the shard saw them. Returns the log to fsync."""
        self.ensure_offsets_topic()
        self._write_held(p)
        plog = self.broker.data_path.log(OFFSETS_TOPIC, p)
        now = self.now_ms()
        plog.append(b"".join(build_end_txn_marker_batch(pid, epoch, committed, coordinator_epoch, now)
                             for pid, epoch, committed, coordinator_epoch in markers),
                    origin=AppendOrigin.COORDINATOR)
        shard = self.shards[p]
        for pid, _, committed, _ in markers:
            shard.replay_end_transaction_marker(pid, committed)
        if self.state_observer is not None:
            self.state_observer(shard)
        return plog

    # -- timers ---------------------------------------------------------------------------------
    def _reschedule(self, shard: GroupCoordinatorShard) -> None:
        armed = self._timers.get(shard.partition)
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
        self._timers[shard.partition] = _ArmedTimer(deadline, loop.call_later(delay, self._fire, shard), pushes)

    def _fire(self, shard: GroupCoordinatorShard) -> None:
        self._timers.pop(shard.partition, None)
        p = shard.partition
        if p in self._held:
            self._write_held(p)
        self._run(shard, shard.poll_timers(self.now_ms()))

    def fire_due_timers(self, rearm: bool = True) -> int | None:
        """Run every loaded shard's timers due at the clock's time now, each shard's in
        deadline order (time travel: test_control.py moves the clock, then calls this), and,
        with ``rearm``, re-arm every shard's loop timer from the clock's time (one armed before
        the clock moved would fire late). Returns the earliest deadline still scheduled on any
        shard, or None."""
        now = self.now_ms()
        earliest = None
        for p, shard in list(self.shards.items()):
            if rearm:
                armed = self._timers.pop(p, None)
                if armed is not None:
                    armed.handle.cancel()
            if not shard.is_loaded:
                continue
            deadline = shard.next_deadline()
            if deadline is not None and deadline <= now:
                if p in self._held:
                    self._write_held(p)
                self._run(shard, shard.poll_timers(now))
                deadline = shard.next_deadline()
            elif rearm:
                self._reschedule(shard)
            if deadline is not None and (earliest is None or deadline < earliest):
                earliest = deadline
        return earliest

    def close(self) -> None:
        for armed in self._timers.values():
            armed.handle.cancel()
        self._timers.clear()
        self._write_all_held()
        if self._load_task is not None:
            self._load_task.cancel()
