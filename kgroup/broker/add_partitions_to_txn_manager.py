"""A partition leader's questions to a transactional id's coordinator on another broker (Kafka's
AddPartitionsToTxnManager, KIP-890): before a transactional produce (Produce) or a transactional
offset commit (TxnOffsetCommit) is appended, the coordinator of its transactional id is asked
whether the partition is in the producer's ongoing transaction (AddPartitionsToTxn v4+
``verify_only``, transaction.partition.verification.enable) or, for transaction version 2
(Produce v12+, TxnOffsetCommit v5+), to add it.

Only for a coordinator led by another broker: on the coordinator's own broker (and on a single
node) the handlers ask the local transaction coordinator directly, with no request. Questions
asked in one event-loop turn are sent together, one AddPartitionsToTxn per destination broker
(several transactions in one request, each transactional id once, as Kafka batches them per
node). The answer is per partition: the coordinator's error code, NETWORK_EXCEPTION when the
exchange failed (the caller answers a retriable error), COORDINATOR_NOT_AVAILABLE when the
coordinator's broker is not known, and a refusal of the whole request (Kafka:
CLUSTER_AUTHORIZATION_FAILED becomes INVALID_TXN_STATE) for every partition.
"""
from __future__ import annotations

import asyncio
import logging

from ..protocol.errors import ErrorCode
from ..protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from .inter_broker import SEND_ERRORS
from .pending import PendingResponse

log = logging.getLogger("kgroup.add_partitions_to_txn")
TRANSACTION_STATE_TOPIC = "__transaction_state"
Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic


class AddPartitionsToTxnManager:
    def __init__(self, rm):
        self.rm = rm
        # destination broker -> [(transactional id, producer id, epoch, add, partitions, answer)]
        self._queued: dict[int, list] = {}
        self._send_scheduled = False

    def remote_coordinator(self, transactional_id: str) -> int | None:
        """The broker coordinating ``transactional_id`` when it is another one than this broker;
        None when this broker is (or may be: no leader known, the local coordinator then
        answers NOT_COORDINATOR itself), and always on a single node."""
        rm = self.rm
        if not rm.enabled:
            return None
        txn = rm.broker.transaction_coordinator
        leader = rm.partition_leader(TRANSACTION_STATE_TOPIC, txn.shard_for(transactional_id))
        if leader is None or leader == rm.broker_id:
            return None
        return leader

    def verify(self, coordinator_id: int, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions, add: bool) -> PendingResponse:
        """A PendingResponse answered with {(topic, partition): ErrorCode} once broker
        ``coordinator_id`` has checked (``add`` False) or added (``add`` True) ``partitions``."""
        answer = PendingResponse()
        self._queued.setdefault(coordinator_id, []).append(
            (transactional_id, producer_id, producer_epoch, add, tuple(partitions), answer))
        if not self._send_scheduled:
            self._send_scheduled = True
            asyncio.get_running_loop().call_soon(self._send_queued)
        return answer

    def _send_queued(self) -> None:
        self._send_scheduled = False
        queued, self._queued = self._queued, {}
        loop = asyncio.get_running_loop()
        for broker_id, entries in queued.items():
            # each transactional id once per request (the coordinator answers per id)
            requests: list[dict] = []
            for entry in entries:
                batch = next((r for r in requests if entry[0] not in r), None)
                if batch is None:
                    batch = {}
                    requests.append(batch)
                batch[entry[0]] = entry
            for batch in requests:
                loop.create_task(self._send(broker_id, list(batch.values())))

    async def _send(self, broker_id: int, entries: list) -> None:
        transactions = []
        for tid, pid, epoch, add, partitions, _ in entries:
            by_topic: dict[str, list[int]] = {}
            for topic, p in partitions:
                by_topic.setdefault(topic, []).append(p)
            transactions.append(Txn(transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=not add,
                                    topics=[Topic(name=t, partitions=ps) for t, ps in by_topic.items()]))
        try:
            resp = await self.rm.channel.send(broker_id, AddPartitionsToTxnRequest(transactions=transactions))
        except SEND_ERRORS as e:
            log.info("AddPartitionsToTxn to broker %d failed: %s", broker_id, e)
            code = ErrorCode.NETWORK_EXCEPTION if self.rm.endpoint(broker_id) is not None \
                else ErrorCode.COORDINATOR_NOT_AVAILABLE
            for *_, partitions, answer in entries:
                answer.answer({tp: code for tp in partitions})
            return
        except Exception:          # noqa: BLE001 - answered as a failed exchange, logged
            log.exception("AddPartitionsToTxn to broker %d failed", broker_id)
            for *_, partitions, answer in entries:
                answer.answer({tp: ErrorCode.NETWORK_EXCEPTION for tp in partitions})
            return
        if resp.error_code:
            code = ErrorCode.INVALID_TXN_STATE if resp.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED \
                else ErrorCode(resp.error_code)
            for *_, partitions, answer in entries:
                answer.answer({tp: code for tp in partitions})
            return
        results = {r.transactional_id: {(t.name, p.partition_index): ErrorCode(p.partition_error_code)
                                        for t in r.topic_results for p in t.results_by_partition}
                   for r in resp.results_by_transaction}
        for tid, *_, partitions, answer in entries:
            errors = results.get(tid)
            if errors is None:          # not answered: asked again by the client's retry
                answer.answer({tp: ErrorCode.NETWORK_EXCEPTION for tp in partitions})
            else:
                answer.answer({tp: errors.get(tp, ErrorCode.NONE) for tp in partitions})
