"""The share coordinator's persister calls in a cluster (Kafka's DefaultStatePersister and
PersisterStateManager): a share-partition's state lives in the ``__share_group_state`` partition
that owns its key (group:topicId:partition), served by that partition's leader. A part owned by a
partition this broker leads runs on the local runtime; any other is sent to its leader as the
same request (Initialize/Read/Write/DeleteShareGroupState, ReadShareGroupStateSummary) over a
broker-to-broker connection (inter_broker.py's ``connect``: the inter-broker listener, as this
broker), one per leader. NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, or a lost connection: the leader is looked up again in the
metadata cache and the part retried with exponential backoff until the request timeout, as
PersisterStateManager's handlers retry after a new FindCoordinator."""
from __future__ import annotations

import asyncio
import logging
import time

from ..client.connection import BrokerConnection
from ..client.errors import KafkaConnectionError, KafkaTimeoutError
from ..protocol.errors import ErrorCode
from .inter_broker import connect
from ..share_coordinator.shard import (delete_answer, initialize_answer, read_answer, summary_answer,
                                       write_answer)

log = logging.getLogger("kgroup.share")

RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})
_ERROR_ANSWERS = {"initialize": initialize_answer, "read": read_answer, "write": write_answer,
                  "delete": delete_answer, "summary": summary_answer}
BACKOFF_MS, BACKOFF_MAX_MS = 50, 2000       # PersisterStateManager's exponential backoff, shortened


class SharePersister:
    def __init__(self, broker, runtime, timeout_ms: int = 30000):
        self.broker = broker
        self.runtime = runtime
        self.timeout_ms = timeout_ms
        self._connections: dict[int, BrokerConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    def call(self, api: str, req, version: int):
        """The merged answer of every part of ``req`` (a PendingResponse)."""
        parts = self.runtime.split(req)

        async def run():
            answers = await asyncio.gather(*(self._part(api, p, sub, version) for p, sub in parts))
            return self.runtime.merge(api, answers)
        return self.broker.cluster.answer_later(run())

    def _leader(self, p: int) -> int | None:
        cache = self.broker.cluster.cache
        if not cache.is_ready(self.runtime.topic):
            self.runtime.ensure_topic()
            return None
        return cache.leader(self.runtime.topic, p)

    async def _part(self, api: str, p: int, sub, version: int):
        deadline = time.monotonic() + self.timeout_ms / 1000
        delay = BACKOFF_MS
        while True:
            leader = self._leader(p)
            answer = None
            try:
                if leader == self.broker.config.node_id:
                    answer = await self._local(api, sub, version)
                elif leader is not None:
                    answer = await self._remote(leader, sub, version)
            except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
                log.info("share state %s at broker %s failed: %s", api, leader, e)
                self._drop(leader)
            code = (ErrorCode.COORDINATOR_NOT_AVAILABLE if answer is None
                    else ErrorCode(answer.results[0].partitions[0].error_code))
            if code not in RETRIABLE:
                return answer
            if time.monotonic() + delay / 1000 >= deadline:
                t = sub.topics[0]
                return answer if answer is not None else _ERROR_ANSWERS[api](t.topic_id, t.partitions[0].partition, code)
            await asyncio.sleep(delay / 1000)
            delay = min(delay * 2, BACKOFF_MAX_MS)

    async def _local(self, api: str, sub, version: int):
        from .pending import PendingResponse
        answer = self.runtime.execute(api, sub, version)
        if type(answer) is not PendingResponse:
            return answer
        fut = asyncio.get_running_loop().create_future()

        def done(answered):
            if not fut.done():
                fut.set_result(answered)
        answer.listen(done)
        answered = await fut
        if answered.error is not None:
            t = sub.topics[0]
            return _ERROR_ANSWERS[api](t.topic_id, t.partitions[0].partition, ErrorCode.UNKNOWN_SERVER_ERROR)
        return answered.response

    async def _remote(self, leader: int, sub, version: int):
        async with self._locks.setdefault(leader, asyncio.Lock()):     # one connection per leader
            conn = self._connections.get(leader)
            if conn is None or conn.closed:
                rm = self.broker.replica_manager
                if rm.endpoint(leader) is None:
                    return None
                conn = await connect(rm, leader, f"broker-{self.broker.config.node_id}-share-persister",
                                     self.timeout_ms)
                self._connections[leader] = conn
        return await conn.send(sub, version=version)

    def _drop(self, leader: int | None) -> None:
        conn = self._connections.pop(leader, None) if leader is not None else None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
