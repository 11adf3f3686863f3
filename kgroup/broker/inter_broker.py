"""Requests from this broker to the others (Kafka's NetworkClient under an InterBrokerSendThread,
one connection per destination): the transaction coordinator's WriteTxnMarkers to partition
leaders and a leader's AddPartitionsToTxn to a transactional id's coordinator. The replica
fetchers open their own connections the same way (``connect``), as Kafka's fetcher threads do.

Destinations are looked up through the replica manager (``endpoint``: the cluster wiring's
``broker_endpoint``); the connection speaks PLAINTEXT to the endpoint, as the fetchers do.
"""
from __future__ import annotations

import asyncio
import logging

from ..client.connection import BrokerConnection
from ..client.errors import KafkaConnectionError, KafkaTimeoutError
from ..protocol.api import ApiKey

log = logging.getLogger("kgroup.inter_broker")

# The inter-broker APIs at the versions a Kafka 4.3 broker sends them.
INTER_BROKER_MAX_VERSIONS = {ApiKey.ADD_PARTITIONS_TO_TXN: 5, ApiKey.WRITE_TXN_MARKERS: 2}
# Kafka's request.timeout.ms default, which its inter-broker send threads use
REQUEST_TIMEOUT_MS = 30_000
# What a failed exchange raises: the caller retries it (Kafka: a disconnected response).
SEND_ERRORS = (KafkaConnectionError, KafkaTimeoutError, OSError)


async def connect(rm, broker_id: int, client_id: str, request_timeout_ms: int) -> BrokerConnection:
    """A new connection from this broker to broker ``broker_id``; KafkaConnectionError when its
    endpoint is unknown (not alive) or it cannot be reached."""
    endpoint = rm.endpoint(broker_id)
    if endpoint is None:
        raise KafkaConnectionError(f"no endpoint known for broker {broker_id}")
    conn = BrokerConnection(endpoint[0], endpoint[1], node_id=broker_id, client_id=client_id,
                            request_timeout_ms=request_timeout_ms, max_versions=INTER_BROKER_MAX_VERSIONS)
    await conn.connect()
    return conn


class InterBrokerChannel:
    """One pipelined connection per destination broker, opened on first use and again after a
    failure; ``send`` raises one of SEND_ERRORS when the exchange failed."""

    def __init__(self, rm, client_id: str, request_timeout_ms: int):
        self.rm = rm
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Future] = {}

    async def _connection(self, broker_id: int) -> BrokerConnection:
        conn = self._connections.get(broker_id)
        if conn is not None and not conn.closed:
            return conn
        pending = self._connecting.get(broker_id)
        if pending is not None:         # one connect per destination; the others wait for it
            return await asyncio.shield(pending)
        fut = asyncio.get_running_loop().create_future()
        self._connecting[broker_id] = fut
        try:
            conn = await connect(self.rm, broker_id, self.client_id, self.request_timeout_ms)
        except BaseException as e:
            fut.set_exception(e if isinstance(e, Exception) else KafkaConnectionError(repr(e)))
            fut.exception()         # retrieved: a connect nobody else waited for is not logged
            raise
        finally:
            self._connecting.pop(broker_id, None)
        self._connections[broker_id] = conn
        fut.set_result(conn)
        return conn

    async def send(self, broker_id: int, body):
        """``body`` to broker ``broker_id`` at the highest version both sides support."""
        conn = await self._connection(broker_id)
        try:
            return await conn.send(body)
        except SEND_ERRORS:
            conn.close()
            if self._connections.get(broker_id) is conn:
                del self._connections[broker_id]
            raise

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
