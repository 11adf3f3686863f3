"""The transaction coordinator's markers in a cluster (Kafka's TransactionMarkerChannelManager and
TransactionMarkerRequestCompletionHandler): each COMMIT/ABORT marker goes to its partition's
leader, the group's ``__consumer_offsets`` partition included.

For each prepared transaction, every partition's leader is looked up
(``ReplicaManager.partition_leader``). The partitions this broker leads (or whose leader is not
known: the local append then fails and is retried) are appended here at once, as on a single
node, one append per partition for all the transactions of the loop turn; each is done once on
disk and in its ISR. The others are queued per destination broker and sent at the end of the
loop turn, one WriteTxnMarkers per broker for every transaction queued for it; the leader
answers once its ISR has them. Per partition:
  NONE                                  done
  INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED
                                        the transaction's markers are given up (a newer epoch of
                                        the producer or of the coordinator took over)
  anything else, or a lost connection   sent again after MARKER_RETRY_S, to the leader looked up
                                        again (NOT_LEADER_OR_FOLLOWER after a leadership change:
                                        the new leader)
A partition that no longer exists is dropped (Kafka drops markers for deleted partitions). Once
every partition of a transaction has its marker, the transaction completes
(CompleteCommit/CompleteAbort, ``TransactionRuntime._markers_flushed``). Markers of a
``__transaction_state`` partition this broker stops leading are given up: its new leader writes
them again when it loads the Prepare record.
"""
from __future__ import annotations

import asyncio
import logging

from ..protocol.errors import ErrorCode
from ..protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from .coordinator_runtime import CoordinatorAppendError
from .pending import PendingResponse
from .transaction_runtime import MARKER_RETRY_S

log = logging.getLogger("kgroup.transaction_coordinator")
_GIVE_UP = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
Marker = WriteTxnMarkersRequest.WritableTxnMarker


class PendingMarkers:
    """One transaction's markers until each of its partitions has one."""
    __slots__ = ("shard", "marker", "remaining", "given_up")

    def __init__(self, shard, marker):
        self.shard = shard
        self.marker = marker
        self.remaining = set(marker.partitions)
        self.given_up = False


class TransactionMarkerChannel:
    def __init__(self, txn_runtime):
        self.txn = txn_runtime
        self.broker = txn_runtime.broker
        self.rm = self.broker.replica_manager
        self._queued: dict[int, list] = {}     # destination broker -> [(PendingMarkers, (topic, p))]
        self._send_scheduled = False

    def send(self, prepared: list) -> None:
        """The markers of the transactions prepared in this loop turn (``[(shard, markers,
        out)]``): the local ones appended now, then ``out`` (their EndTxn) answered, the others
        queued for their leaders."""
        self.route([(pm, tp) for shard, markers, _ in prepared for m in markers
                    for pm in (PendingMarkers(shard, m),) for tp in m.partitions])
        for _, _, out in prepared:
            for token, response in out:
                token.answer(response)

    def route(self, items) -> None:
        """``items``: (PendingMarkers, (topic, partition)) to write, each to its leader now."""
        local: dict[tuple, list] = {}
        for pm, tp in items:
            if not self._current(pm):
                continue
            if not self.txn.partition_exists(*tp):
                self._done(pm, tp)
                continue
            leader = self.rm.partition_leader(*tp)
            if leader is None or leader == self.rm.broker_id:
                local.setdefault(tp, []).append(pm)
            else:
                self._queued.setdefault(leader, []).append((pm, tp))
        for tp, pms in local.items():
            self._append_local(tp, pms)
        if self._queued and not self._send_scheduled:
            self._send_scheduled = True
            asyncio.get_running_loop().call_soon(self._send_queued)

    def _current(self, pm: PendingMarkers) -> bool:
        """The transaction is still this coordinator's to complete."""
        rt = self.txn.runtime
        p = pm.shard.partition
        return not pm.given_up and rt.is_active(p) and rt.shards.get(p) is pm.shard

    def _done(self, pm: PendingMarkers, tp) -> None:
        pm.remaining.discard(tp)
        if not pm.remaining and self._current(pm):
            pm.given_up = True      # finished: nothing more to send for it
            self.txn.markers_written(pm.shard, pm.marker)

    def _retry(self, items) -> None:
        if items:
            asyncio.get_running_loop().call_later(MARKER_RETRY_S, self.route, items)

    # -- partitions this broker leads --------------------------------------------------------
    def _append_local(self, tp, pms: list) -> None:
        """One append for all, else one each (a marker the log refuses does not hold back the
        others); each done once on disk and in the partition's ISR."""
        by_version: dict[int, list] = {}     # one control batch per transaction version
        for pm in pms:
            by_version.setdefault(pm.marker.transaction_version, []).append(pm)
        if len(by_version) > 1:
            for same in by_version.values():
                self._append_local(tp, same)
            return
        groups = [pms] if len(pms) == 1 else [pms, *([pm] for pm in pms)]
        for group in groups:
            try:
                plog = self.txn.append_markers(tp[0], tp[1], [
                    (pm.marker.producer_id, pm.marker.producer_epoch, pm.marker.committed,
                     pm.marker.coordinator_epoch) for pm in group], pms[0].marker.transaction_version)
            except CoordinatorAppendError as e:
                if len(group) == 1:
                    log.info("writing the marker of %s to %s-%d failed (%s): retrying",
                             group[0].marker.transactional_id, tp[0], tp[1], e)
                    self._retry([(group[0], tp)])
                continue
            if plog is None:        # the partition no longer exists
                for pm in group:
                    self._done(pm, tp)
            else:
                self._when_replicated(tp, plog, group)
            if group is pms:
                break

    def _when_replicated(self, tp, plog, pms: list) -> None:
        flushed = self.broker.data_path.wait_flushed({plog})
        replicated: PendingResponse = self.rm.after_replicated(
            tp, plog, flushed, self.broker.config["offsets.commit.timeout.ms"])

        def settled(f):
            if f.error is not None:
                log.info("the markers in %s-%d did not reach its ISR (%s): retrying", tp[0], tp[1], f.error)
                self._retry([(pm, tp) for pm in pms])
                return
            for pm in pms:
                self._done(pm, tp)
        replicated.listen(settled)

    # -- partitions other brokers lead -------------------------------------------------------
    def _send_queued(self) -> None:
        self._send_scheduled = False
        queued, self._queued = self._queued, {}
        loop = asyncio.get_running_loop()
        for broker_id, items in queued.items():
            # one WritableTxnMarker per transaction, each producer id once per request
            requests: list[dict] = []
            for pm, tp in items:
                pid = pm.marker.producer_id
                batch = next((r for r in requests if pid not in r or r[pid][0] is pm), None)
                if batch is None:
                    batch = {}
                    requests.append(batch)
                batch.setdefault(pid, (pm, []))[1].append(tp)
            for batch in requests:
                loop.create_task(self._send(broker_id, list(batch.values())))

    async def _send(self, broker_id: int, entries: list) -> None:
        markers = []
        for pm, tps in entries:
            by_topic: dict[str, list[int]] = {}
            for topic, p in tps:
                by_topic.setdefault(topic, []).append(p)
            m = pm.marker
            markers.append(Marker(producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                                  transaction_result=m.committed, coordinator_epoch=m.coordinator_epoch,
                                  transaction_version=m.transaction_version,
                                  topics=[Marker.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                                          for t, ps in by_topic.items()]))
        try:
            resp = await self.rm.channel.send(broker_id, WriteTxnMarkersRequest(markers=markers))
        except Exception as e:       # noqa: BLE001 - SEND_ERRORS or any other failure: retried
            log.info("WriteTxnMarkers to broker %d failed (%s): retrying", broker_id, e)
            self._retry([(pm, tp) for pm, tps in entries for tp in tps])
            return
        by_pid = {r.producer_id: {(t.name, p.partition_index): ErrorCode(p.error_code)
                                  for t in r.topics for p in t.partitions} for r in resp.markers}
        again = []
        for pm, tps in entries:
            errors = by_pid.get(pm.marker.producer_id, {})
            for tp in tps:
                error = errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
                if error == ErrorCode.NONE:
                    self._done(pm, tp)
                elif error in _GIVE_UP:
                    log.info("the markers of %s are given up: %s from broker %d for %s-%d",
                             pm.marker.transactional_id, error.name, broker_id, *tp)
                    pm.given_up = True
                else:
                    log.info("the marker of %s for %s-%d failed on broker %d (%s): retrying",
                             pm.marker.transactional_id, tp[0], tp[1], broker_id, error.name)
                    again.append((pm, tp))
        self._retry(again)
