"""The transaction coordinator runtime (``broker.transaction_coordinator``): drives the pure
``TransactionCoordinatorShard``s, one per ``__transaction_state`` partition, with the group
runtime's machinery (``GroupRuntime``: loading with COORDINATOR_LOAD_IN_PROGRESS meanwhile,
one RecordBatch per operation, fsync before answering, one loop timer per shard), plus the
COMMIT/ABORT markers.

Markers, in Kafka's order (TransactionCoordinator.endTransaction, TransactionMarkerChannelManager):
    PrepareCommit/PrepareAbort record appended -> fsync of __transaction_state
    -> one control batch per partition of the transaction (the group's __consumer_offsets
       partition included, through the group runtime) -> fsync of those partitions
    -> CompleteCommit/CompleteAbort record (complete_transaction) -> EndTxn answered.
The prepare record is durable before any marker exists, so a crash can never leave a marker
for a transaction the log does not know is ending; at load, every transaction still in a Prepare
state has its markers written again (a second identical marker is harmless: it ends nothing).
Kafka answers EndTxn once the prepare record is written and sends markers afterwards (clients
then retry on CONCURRENT_TRANSACTIONS); here the markers follow within two fsyncs, so EndTxn is
answered once they are on disk, which no client can tell apart but saves it the retries.
"""
from __future__ import annotations

import asyncio
import logging
import os

from ..clock import now_ms
from ..protocol.records import build_end_txn_marker_batch
from ..storage.producer_state import AppendOrigin
from ..transaction_coordinator import (TransactionCoordinatorConfig, TransactionCoordinatorShard,
                                       transaction_partition)
from .group_runtime import GroupRuntime
from .metadata import OFFSETS_TOPIC

log = logging.getLogger("kgroup.transaction_coordinator")
TRANSACTION_STATE_TOPIC = "__transaction_state"
MARKER_RETRY_S = 0.1        # a marker that could not be written is retried (Kafka retries until it is)


class TransactionRuntime(GroupRuntime):
    topic = TRANSACTION_STATE_TOPIC
    load_buffer_size_key = "transaction.state.log.load.buffer.size"

    def __init__(self, broker):
        super().__init__(broker)
        self.config = TransactionCoordinatorConfig.from_props(broker.config.values)
        self.num_partitions = broker.config["transaction.state.log.num.partitions"]
        self.markers_written = 0        # control batches appended (for tests and stats)
        # Fault injection for the crash tests (KGROUP_TEST_HOLD_MARKERS=1): the broker stops just
        # before writing markers, the Prepare record fsynced and EndTxn answered (as Kafka answers
        # it before its markers); a SIGKILL then is a crash between EndTxn and the markers.
        self.hold_markers = os.environ.get("KGROUP_TEST_HOLD_MARKERS") == "1"

    def _new_shard(self, p: int) -> TransactionCoordinatorShard:
        return TransactionCoordinatorShard(p, self.config,
                                           producer_id_allocator=self.broker.data_path.producer_ids.allocate)

    def _topic_configs(self) -> dict[str, str]:
        cfg = self.broker.config
        return {"cleanup.policy": "compact", "segment.bytes": str(cfg["transaction.state.log.segment.bytes"])}

    # ensure_offsets_topic is the group runtime's name for "create the topic on first use"
    ensure_topic = GroupRuntime.ensure_offsets_topic

    def shard_for(self, transactional_id: str) -> int:
        return transaction_partition(transactional_id, self.num_partitions)

    def shard_of(self, transactional_id: str) -> TransactionCoordinatorShard:
        self.ensure_topic()
        return self.shards[self.shard_for(transactional_id)]

    # -- operations -----------------------------------------------------------------------------
    def run(self, transactional_id: str, handle, req, version: int, *extra):
        """``handle(shard, req, version, now_ms, token, *extra)`` on the transactional id's shard."""
        return self.execute(transactional_id, handle, req, version, *extra)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions) -> dict:
        """KIP-890 part 1's check of a transactional produce (AddPartitionsToTxn verify_only)."""
        return self.shard_of(transactional_id).verify_partitions(transactional_id, producer_id,
                                                                  producer_epoch, partitions)

    # -- the marker path ----------------------------------------------------------------------
    def _run(self, shard, result, may_hold: bool = False) -> None:
        super()._run(shard, result, may_hold)
        # Markers queued without a record (a partition loaded with transactions in a Prepare state)
        markers = shard.drain_markers()
        if markers:
            plog = self.broker.data_path.log(self.topic, shard.partition)
            self.broker.data_path.wait_flushed({plog}).listen(
                lambda flushed: self._prepared(shard, markers, [], flushed))

    def _after_commit(self, shard, plog, out: list, results: list) -> None:
        markers = shard.drain_markers()
        if not markers:
            super()._after_commit(shard, plog, out, results)
            return
        self.broker.data_path.wait_flushed({plog}).listen(
            lambda flushed: self._prepared(shard, markers, out, flushed))

    def _prepared(self, shard, markers, out, flushed) -> None:
        """The Prepare records are on disk: write the markers."""
        if flushed.error is not None:
            for token, _ in out:
                token.fail(flushed.error)
            return
        if self.hold_markers:
            log.warning("holding the markers of %s (test hook)", [m.transactional_id for m in markers])
            self._answer_flushed(out, flushed)
            return
        logs = set()
        written = []
        for m in markers:
            try:
                logs.update(self.write_markers(m.producer_id, m.producer_epoch, m.committed,
                                               m.coordinator_epoch, m.partitions))
                written.append(m)
            except Exception as e:
                log.warning("writing the markers of %s failed (%s): retrying", m.transactional_id, e)
                asyncio.get_running_loop().call_later(
                    MARKER_RETRY_S, lambda m=m: self._prepared(shard, [m], [], flushed))
        if not logs:
            self._markers_flushed(shard, written, out, flushed)
            return
        self.broker.data_path.wait_flushed(logs).listen(
            lambda f: self._markers_flushed(shard, written, out, f))

    def _markers_flushed(self, shard, markers, out, flushed) -> None:
        if flushed.error is not None:       # not durable: the transactions stay in Prepare
            for token, _ in out:
                token.fail(flushed.error)
            return
        for m in markers:
            if shard.is_loaded and self.shards.get(shard.partition) is shard:
                self._run(shard, shard.complete_transaction(m, now_ms()))
        for token, response in out:
            token.answer(response)

    def write_markers(self, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                      partitions) -> set:
        """WriteTxnMarkers' work for one marker: a COMMIT/ABORT control batch appended to each
        of ``partitions`` ((topic, partition) pairs); a deleted partition is skipped (Kafka
        drops markers for partitions that no longer exist). Returns the logs to fsync."""
        dp = self.broker.data_path
        logs = set()
        for topic, p in partitions:
            if topic == OFFSETS_TOPIC:
                plog = self.broker.group_coordinator.write_txn_marker(
                    p, producer_id, producer_epoch, committed, coordinator_epoch)
            else:
                plog = dp.log(topic, p)
                if plog is None:
                    continue
                plog.append(build_end_txn_marker_batch(producer_id, producer_epoch, committed,
                                                       coordinator_epoch, now_ms()),
                            origin=AppendOrigin.COORDINATOR)
                dp.appended(topic, p)       # the LSO moved: wake read_committed fetches
            if plog is not None:
                logs.add(plog)
                self.markers_written += 1
        return logs

    def partition_exists(self, topic: str, partition: int) -> bool:
        t = self.broker.metadata.get(topic)
        return t is not None and 0 <= partition < t.num_partitions
