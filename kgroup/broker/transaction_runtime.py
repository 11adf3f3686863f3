"""The transaction coordinator service (``broker.transaction_coordinator``): routes transactional
requests to the ``__transaction_state`` partition that owns each transactional id and runs them
on the generic coordinator runtime (``coordinator_runtime.py``: loading, one RecordBatch per
operation, fsync before answering, timers), which hosts one ``TransactionCoordinatorShard`` per
partition. What is transaction-specific lives here: the COMMIT/ABORT markers.

Markers, in Kafka's order (TransactionCoordinator.endTransaction, TransactionMarkerChannelManager):
    PrepareCommit/PrepareAbort record appended -> fsync of __transaction_state
    -> one control batch per partition of the transaction (the group's __consumer_offsets
       partition included, through the group runtime), then EndTxn answered
    -> fsync of those partitions -> CompleteCommit/CompleteAbort record (complete_transaction).
The prepare record is durable before any marker exists, so a crash can never leave a marker
for a transaction the log does not know is ending; at load, every transaction still in a Prepare
state has its markers written again (a second identical marker is harmless: it ends nothing).
As Kafka, EndTxn is answered once the prepare record is durable; the markers are appended (so
visible to every later read) before the answer is sent, and made durable after it.

In a cluster the markers go to each partition's leader, over the network when it is another
broker (``txn_marker_channel.py``, Kafka's TransactionMarkerChannelManager), and the transaction
completes once every leader has them in its ISR.

Until the Complete record is written, Kafka answers CONCURRENT_TRANSACTIONS to a request for
that transactional id (the next transaction's AddPartitionsToTxn / AddOffsetsToTxn, an
InitProducerId), which clients retry after a backoff (librdkafka: 20 ms for AddPartitionsToTxn,
retry.backoff.ms, 100 ms, for AddOffsetsToTxn). Here such a request waits in the runtime
(``_completing``) and runs once the transaction completes, which is what the retry would get,
without the backoff; if the transaction has not completed within ``COMPLETION_WAIT_S`` (its
markers cannot be written), it is answered CONCURRENT_TRANSACTIONS as Kafka would answer it,
and the client retries. Requests waiting when the partition is unloaded get NOT_COORDINATOR.
Transaction version 2's first requests of the next transaction (Produce v12, TxnOffsetCommit v5,
which add their partitions themselves) wait the same way (``completion``) before adding them.
The shard itself still answers CONCURRENT_TRANSACTIONS in a Prepare state
(the runtime does not ask it then).
"""
from __future__ import annotations

import asyncio
import logging
import os

from ..protocol.errors import ErrorCode
from ..transaction_coordinator import (TransactionCoordinatorConfig, TransactionCoordinatorShard,
                                       transaction_partition)
from ..protocol.records import build_end_txn_marker_batch
from .coordinator_runtime import (CoordinatorAppendError, CoordinatorRuntime, answer_flushed, append_records,
                                  split_by_partition)
from .features import TRANSACTION_VERSION
from .metadata import OFFSETS_TOPIC
from .pending import PendingResponse

log = logging.getLogger("kgroup.transaction_coordinator")
TRANSACTION_STATE_TOPIC = "__transaction_state"
MARKER_RETRY_S = 0.1        # a marker that could not be written is retried (Kafka retries until it is)
# How long a request waits for its transaction to complete before it is answered
# CONCURRENT_TRANSACTIONS (what Kafka answers at once; clients retry it after a backoff)
COMPLETION_WAIT_S = 1.0
# How long a TV2 produce waits for its producer's previous transaction to complete before its
# partition is added (Kafka's ReplicaManager retries CONCURRENT_TRANSACTIONS for
# add.partitions.to.txn.retry.backoff.max.ms, default 100 ms, then answers it)
PRODUCE_COMPLETION_WAIT_S = 0.1
_DURABLE = PendingResponse(flush_only=True)     # an answered flush wait: nothing to wait for


class _Waiter:
    """A request (``handle`` None: a bare wait of ``completion``) parked behind a completing
    transaction, with the timer that gives up on it."""
    __slots__ = ("handle", "req", "version", "extra", "token", "timer")

    def __init__(self, handle, req, version, extra, token: PendingResponse):
        self.handle, self.req, self.version, self.extra, self.token = handle, req, version, extra, token
        self.timer: asyncio.TimerHandle | None = None

    def stop_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
_DURABLE.answer(None)


class TransactionRuntime:
    topic = TRANSACTION_STATE_TOPIC

    def __init__(self, broker):
        self.broker = broker
        self.config = TransactionCoordinatorConfig.from_props(broker.config.values)
        self.num_partitions = broker.config["transaction.state.log.num.partitions"]
        self.runtime = CoordinatorRuntime(
            broker, topic=self.topic, config=self.config, new_shard=self._new_shard,
            load_buffer_size=broker.config["transaction.state.log.load.buffer.size"],
            after_commit=self._after_commit, on_unloaded=self._on_unloaded)
        # Fault injection for the crash tests (KGROUP_TEST_HOLD_MARKERS=1): the broker stops just
        # before writing markers, the Prepare record fsynced and EndTxn answered (as Kafka answers
        # it before its markers); a SIGKILL then is a crash between EndTxn and the markers.
        self.hold_markers = os.environ.get("KGROUP_TEST_HOLD_MARKERS") == "1"
        # transactional id -> requests waiting for its markers and Complete record (see above)
        self._completing: dict[str, list] = {}
        self._to_mark: list = []        # (shard, markers, answers) prepared in this loop turn
        self._marking_scheduled = False
        self._marker_channel = None     # txn_marker_channel.py, in a cluster

    @property
    def shards(self) -> dict:
        return self.runtime.shards

    def _new_shard(self, p: int, epoch: int) -> TransactionCoordinatorShard:
        features = self.broker.metadata.features
        return TransactionCoordinatorShard(p, self.config, coordinator_epoch=epoch,
                                           producer_id_allocator=self.broker.data_path.producer_ids.allocate,
                                           transaction_version=lambda: features.level(TRANSACTION_VERSION))

    # -- topic and partitions -----------------------------------------------------------------------
    def start(self) -> None:
        """Start loading an existing ``__transaction_state`` in the background."""
        topic = self.broker.metadata.get(self.topic)
        if topic is not None:
            self.num_partitions = topic.num_partitions
            if self.broker.replica_manager.enabled:
                return      # in a cluster: loaded by the partitions this broker leads (replica_manager)
            for p in range(topic.num_partitions):
                self.runtime.load(p)

    def ensure_topic(self) -> None:
        """Create ``__transaction_state`` on first use (compacted, as Kafka creates it)."""
        if self.broker.metadata.get(self.topic) is not None:
            return
        if self.broker.cluster is not None:     # created in ZooKeeper; loaded where it is led
            self.broker.cluster.create_internal_topic(self.topic, self.num_partitions, {
                "cleanup.policy": "compact", "segment.bytes": str(self.broker.config["transaction.state.log.segment.bytes"])}, "transaction.state.log.replication.factor")
            return
        self.broker.create_topic(self.topic, self.num_partitions, 1, {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.broker.config["transaction.state.log.segment.bytes"])})
        for p in range(self.num_partitions):
            self.runtime.load_empty(p)

    def load_partition(self, p: int, epoch: int = 0) -> None:
        self.runtime.load(p, epoch)

    def unload_partition(self, p: int, epoch: int | None = None) -> None:
        self.runtime.unload(p, epoch)

    def _on_unloaded(self, p: int) -> None:
        """Requests waiting for a transaction of the unloaded partition get NOT_COORDINATOR."""
        for tid in [t for t in self._completing if self.shard_for(t) == p]:
            for w in self._completing.pop(tid):
                w.stop_timer()
                w.token.answer(None if w.handle is None else
                               w.handle.error_response(w.req, w.version, ErrorCode.NOT_COORDINATOR))

    def shard_for(self, transactional_id: str) -> int:
        return transaction_partition(transactional_id, self.num_partitions)

    # -- operations ---------------------------------------------------------------------------------
    def run(self, transactional_id: str, handle, req, version: int, *extra):
        """``handle(shard, req, version, now_ms, token, *extra)`` on the transactional id's
        partition; while that id's markers are being written, once its transaction completes."""
        waiting = self._completing.get(transactional_id)
        if waiting is not None:
            return self._wait(transactional_id, waiting, COMPLETION_WAIT_S, handle, req, version, extra)
        self.ensure_topic()
        return self.runtime.execute(self.shard_for(transactional_id), handle, req, version, *extra)

    def completion(self, transactional_id: str, max_wait_s: float = PRODUCE_COMPLETION_WAIT_S):
        """None when no transaction of ``transactional_id`` is completing; else a PendingResponse
        answered (with None) once it has completed, or after ``max_wait_s``, or when its
        partition is unloaded, whichever comes first (a TV2 produce waits for it, as Kafka's
        ReplicaManager retries the implicit add on CONCURRENT_TRANSACTIONS)."""
        waiting = self._completing.get(transactional_id)
        if waiting is None:
            return None
        return self._wait(transactional_id, waiting, max_wait_s, None, None, None, ())

    def _wait(self, transactional_id: str, waiting: list, max_wait_s: float, handle, req, version, extra
              ) -> PendingResponse:
        w = _Waiter(handle, req, version, extra, PendingResponse())
        waiting.append(w)
        w.timer = self.broker.loop.call_later(max_wait_s, self._give_up, transactional_id, w)
        return w.token

    def execute_split(self, req, field: str | None, handle, version: int, merge, group_id_of=None, extra=()):
        """A request naming several transactional ids (``req.<field>``, or entries whose
        ``group_id_of(item)`` is one), split by partition; ``field`` None: every partition."""
        self.ensure_topic()
        if field is None:
            parts = [(p, req) for p in self.runtime.shards]
        else:
            parts = split_by_partition(req, field, self.shard_for, group_id_of)
        return self.runtime.execute_parts(parts, handle, version, merge, *extra)

    def _give_up(self, transactional_id: str, w: "_Waiter") -> None:
        """The transaction did not complete in time (its markers do not land): the waiting
        request gets CONCURRENT_TRANSACTIONS, as Kafka answers it at once, and the client retries."""
        waiting = self._completing.get(transactional_id)
        if waiting is not None and w in waiting:
            waiting.remove(w)
            w.token.answer(None if w.handle is None else
                           w.handle.error_response(w.req, w.version, ErrorCode.CONCURRENT_TRANSACTIONS))

    def _resume(self, transactional_id: str, error=None) -> None:
        """The transaction of ``transactional_id`` completed (or ``error``: never will, the log
        directory failed): run the requests that waited for it, in arrival order."""
        for w in self._completing.pop(transactional_id, ()):
            w.stop_timer()          # resumed: its give-up must not stay queued on the loop
            handle, req, version, extra, token = w.handle, w.req, w.version, w.extra, w.token
            if handle is None:      # a wait for the completion only (``completion``)
                token.answer(None)
                continue
            if error is not None:
                token.fail(error)
                continue
            try:
                answer = self.run(transactional_id, handle, req, version, *extra)
            except Exception as e:          # a handler's error closes the connection, as the server's
                log.exception("deferred request for %s failed", transactional_id)
                token.fail(e)
                continue
            if type(answer) is PendingResponse:
                answer.then(to=token)
            else:
                token.answer(answer)

    def add_partitions_as_broker(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                 topics: dict[str, list[int]]) -> PendingResponse:
        """``topics``' partitions added to the producer's transaction as a partition leader adds
        them for transaction version 2 (AddPartitionsToTxn v5, not verify-only): a
        PendingResponse answered with the AddPartitionsToTxnResponse once written or refused."""
        from ..protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest as R
        add = R(transactions=[R.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=False, topics=[R.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()])])
        answer = self.run(transactional_id, TransactionCoordinatorShard.handle_add_partitions_to_txn, add, 5,
                          self.partition_exists)
        if type(answer) is PendingResponse:
            return answer
        done = PendingResponse()
        done.answer(answer)
        return done

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions) -> dict:
        """KIP-890 part 1's check of a transactional produce (AddPartitionsToTxn verify_only)."""
        self.ensure_topic()
        p = self.shard_for(transactional_id)
        state_error = self.runtime.state_error(p)
        if state_error is not None:
            return {tp: state_error for tp in partitions}
        return self.runtime.shards[p].verify_partitions(transactional_id, producer_id, producer_epoch, partitions)

    # -- the marker path ----------------------------------------------------------------------------
    def _after_commit(self, shard, plog, out: list, results) -> None:
        """After every operation: the markers of transactions it prepared are written once its
        Prepare records are on disk (``plog`` None: nothing was written, as when a loaded
        partition queues the markers of transactions found in a Prepare state)."""
        markers = self._drain_markers(shard)
        if not markers:
            self.runtime.answer_when_flushed(shard, plog, out, results)
            return
        if plog is None:
            for token, response in out:
                token.answer(response)
            out = []
            plog = self.broker.data_path.log(self.topic, shard.partition)
        flushed = self.broker.data_path.wait_flushed({plog})
        rm = self.broker.replica_manager
        if rm.enabled:      # in a cluster the Prepare records reach the ISR before any marker is written
            flushed = rm.after_replicated((self.topic, shard.partition), plog, flushed,
                                          self.broker.config["offsets.commit.timeout.ms"])
        flushed.listen(lambda flushed: self._prepared(shard, markers, out, flushed))

    def _drain_markers(self, shard) -> list:
        markers = shard.drain_markers()
        for m in markers:       # from now until complete, requests for these ids wait
            self._completing.setdefault(m.transactional_id, [])
        return markers

    def _prepared(self, shard, markers, out, flushed) -> None:
        """The Prepare records are on disk: the markers are written at the end of this loop
        turn, with those of every other transaction prepared in it."""
        if flushed.error is not None:
            for token, _ in out:
                token.fail(flushed.error)
            for m in markers:
                self._resume(m.transactional_id, flushed.error)
            return
        if self.hold_markers:
            log.warning("holding the markers of %s (test hook)", [m.transactional_id for m in markers])
            answer_flushed(out, flushed)
            return
        self._to_mark.append((shard, markers, out))
        if not self._marking_scheduled:
            self._marking_scheduled = True
            self.broker.loop.call_soon(self._write_prepared_markers)

    def _write_prepared_markers(self) -> None:
        """Write the markers of the transactions prepared in this loop turn: one append per
        partition (the transactions of a group commit usually share their data partitions),
        answer their EndTxn, then make the markers durable before completing each."""
        self._marking_scheduled = False
        prepared, self._to_mark = self._to_mark, []
        if self.broker.replica_manager.enabled:     # in a cluster: to each partition's leader
            if self._marker_channel is None:
                from .txn_marker_channel import TransactionMarkerChannel
                self._marker_channel = TransactionMarkerChannel(self)
            self._marker_channel.send(prepared)
            return
        by_partition: dict[tuple, list] = {}     # (topic, partition, transaction version) -> markers
        for _, markers, _ in prepared:
            for m in markers:
                for topic, p in m.partitions:
                    by_partition.setdefault((topic, p, m.transaction_version), []).append(m)
        logs_of: dict[int, set] = {}        # id(marker) -> the logs holding its control batches
        failed: set[int] = set()
        for (topic, p, tv), ms in by_partition.items():
            # One append for all; if it fails, one each, so a marker the log refuses does not
            # hold back the others.
            for group in ([ms] if len(ms) == 1 else [ms, *([m] for m in ms)]):
                try:
                    plog = self.append_markers(topic, p, [(m.producer_id, m.producer_epoch, m.committed,
                                                            m.coordinator_epoch) for m in group], tv)
                except CoordinatorAppendError as e:
                    if len(group) == 1:
                        log.warning("writing the marker of %s to %s-%d failed (%s): retrying",
                                    group[0].transactional_id, topic, p, e)
                        failed.add(id(group[0]))
                    continue
                if plog is not None:
                    for m in group:
                        logs_of.setdefault(id(m), set()).add(plog)
                if group is ms:
                    break
        loop = self.broker.loop
        for shard, markers, out in prepared:
            written = []
            for m in markers:
                if id(m) in failed:     # all its markers again later (a repeated marker ends nothing)
                    loop.call_later(MARKER_RETRY_S, lambda m=m, shard=shard: self._prepared(shard, [m], [], _DURABLE))
                else:
                    written.append(m)
            # The Prepare records are durable and the markers appended (visible to any later
            # read): answered, as Kafka answers EndTxn once the prepare record is written.
            for token, response in out:
                token.answer(response)
            logs = set().union(*(logs_of.get(id(m), ()) for m in written))
            if not logs:
                self._markers_flushed(shard, written, _DURABLE)
            else:
                self.broker.data_path.wait_flushed(logs).listen(
                    lambda f, shard=shard, written=written: self._markers_flushed(shard, written, f))

    def _markers_flushed(self, shard, markers, flushed) -> None:
        if flushed.error is not None:       # not durable: the transactions stay in Prepare
            for m in markers:
                self._resume(m.transactional_id, flushed.error)
            return
        rt = self.runtime
        for m in markers:
            if rt.is_active(shard.partition) and rt.shards.get(shard.partition) is shard:
                rt.run(shard, shard.complete_transaction(m, self.runtime.now_ms()))
            self._resume(m.transactional_id)

    def markers_written(self, shard, marker) -> None:
        """Every partition of ``marker``'s transaction has its marker, on disk and replicated
        (txn_marker_channel.py): the transaction completes."""
        self._markers_flushed(shard, [marker], _DURABLE)

    def write_markers(self, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                      partitions, transaction_version: int = 0) -> set:
        """WriteTxnMarkers' work for one marker: a COMMIT/ABORT control batch appended to each
        of ``partitions`` ((topic, partition) pairs); a deleted partition is skipped (Kafka
        drops markers for partitions that no longer exist). Returns the logs to fsync."""
        logs = set()
        for topic, p in partitions:
            plog = self.append_markers(topic, p, [(producer_id, producer_epoch, committed, coordinator_epoch)],
                                        transaction_version)
            if plog is not None:
                logs.add(plog)
        return logs

    def append_markers(self, topic: str, p: int, markers: list, transaction_version: int = 0):
        """One append of a control batch per ``(producer_id, producer_epoch, committed,
        coordinator_epoch)`` to ``topic``-``p`` (through the group coordinator for
        ``__consumer_offsets``, whose shard settles the producers' pending offsets). Returns
        the log, or None for a partition that no longer exists (Kafka drops markers for partitions
        that no longer exist); raises CoordinatorAppendError. ``transaction_version``: the one the
        transactions ran with, which sets how the partition checks the markers' epoch."""
        if topic == OFFSETS_TOPIC:
            return self.broker.group_coordinator.write_txn_markers(p, markers, transaction_version)
        if not self.partition_exists(topic, p):
            return None
        now = self.runtime.now_ms()
        plog = append_records(self.broker, topic, p, b"".join(
            build_end_txn_marker_batch(pid, epoch, committed, coordinator_epoch, now)
            for pid, epoch, committed, coordinator_epoch in markers), transaction_version)
        self.broker.data_path.appended(topic, p)       # the LSO moved: wake read_committed fetches
        return plog

    def partition_exists(self, topic: str, partition: int) -> bool:
        t = self.broker.metadata.get(topic)
        return t is not None and 0 <= partition < t.num_partitions

    def fire_due_timers(self, rearm: bool = True) -> int | None:
        return self.runtime.fire_due_timers(rearm)

    def close(self) -> None:
        self.runtime.close()
