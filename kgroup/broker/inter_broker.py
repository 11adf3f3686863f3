"""Requests from this broker to the others (Kafka's NetworkClient under an InterBrokerSendThread,
one connection per destination): the transaction coordinator's WriteTxnMarkers to partition
leaders and a leader's AddPartitionsToTxn to a transactional id's coordinator. Every
broker-to-broker connection is opened by ``connect``: the replica fetchers' (as Kafka's fetcher
threads, each its own), this module's channel and the share-state persister's.

Destinations are looked up through the replica manager (``endpoint``: the cluster wiring's
``broker_endpoint``, the address on the inter-broker listener). The connection speaks that
listener's security protocol with the broker's own client credentials (``client_security``),
as Kafka's ChannelBuilders.clientChannelBuilder builds them for inter-broker use.
"""
from __future__ import annotations

import asyncio
import logging

from ..client.connection import BrokerConnection
from ..client.errors import KafkaConnectionError, KafkaTimeoutError, SslAuthenticationError
from ..protocol.api import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from .config import BrokerConfig, ConfigError

log = logging.getLogger("kgroup.inter_broker")

# The inter-broker APIs at the versions a Kafka 4.3 broker sends them.
INTER_BROKER_MAX_VERSIONS = {ApiKey.ADD_PARTITIONS_TO_TXN: 5, ApiKey.WRITE_TXN_MARKERS: 2}
# Kafka's request.timeout.ms default, which its inter-broker send threads use
REQUEST_TIMEOUT_MS = 30_000
# What a failed exchange raises: the caller retries it (Kafka: a disconnected response).
SEND_ERRORS = (KafkaConnectionError, KafkaTimeoutError, OSError)
# The client side of TLS a broker takes from its listener's ssl.* keys (SslFactory in client mode).
_SSL_CLIENT_KEYS = ("ssl.truststore.location", "ssl.truststore.certificates", "ssl.keystore.location",
                    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.password",
                    "ssl.key.password", "ssl.endpoint.identification.algorithm")
_CLIENT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")     # client/security.py's
_AUTHENTICATION_ERRORS = (ErrorCode.SASL_AUTHENTICATION_FAILED, ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                          ErrorCode.ILLEGAL_SASL_STATE)


class InterBrokerAuthenticationError(KafkaConnectionError):
    """The other broker refused this broker's TLS handshake or SASL login (Kafka's
    AuthenticationException on an inter-broker connection): the connection counts as failed and
    is tried again after the caller's backoff, as Kafka's senders do."""


def client_properties(config: BrokerConfig) -> dict[str, str] | None:
    """The Java-client keys of this broker's outgoing connections, resolved as Kafka resolves
    them for inter-broker use: the inter-broker listener's protocol; its ``ssl.*`` keys with
    ``listener.name.<l>.ssl.*`` overrides (the truststore verifies the peer, the keystore answers
    a peer that requires client certificates); ``sasl.mechanism.inter.broker.protocol`` with the
    ``username`` and ``password`` of the JAAS config the listener's server side reads,
    ``listener.name.<l>.<mechanism>.sasl.jaas.config`` (JaasContext.loadServerContext; a broker-wide
    ``sasl.jaas.config`` is ignored there, as Kafka warns). None for PLAINTEXT."""
    listener, protocol = config.inter_broker_listener()
    if protocol == "PLAINTEXT":
        return None
    props: dict[str, str] = {"security.protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        for key in _SSL_CLIENT_KEYS:
            v = config.for_listener(listener, key)
            if v is not None:
                props[key] = v
    if protocol.startswith("SASL_"):
        mechanism = config["sasl.mechanism.inter.broker.protocol"].strip().upper()
        if mechanism not in _CLIENT_MECHANISMS:
            raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism} is not supported: kgroup's "
                              f"brokers log in to each other with {', '.join(_CLIENT_MECHANISMS)}")
        props["sasl.mechanism"] = mechanism
        jaas = config.for_listener(listener, "sasl.jaas.config", mechanism)
        where = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        if not jaas:
            raise ConfigError(f"Could not find a 'KafkaServer' or '{where}' entry with the username and "
                              f"password this broker logs in with to the others (sasl.mechanism.inter.broker."
                              f"protocol={mechanism})")
        from ..security.jaas import login_options
        try:
            options = login_options(jaas)
        except ValueError as e:
            raise ConfigError(f"{where}: {e}") from None
        if "username" not in options or "password" not in options:
            raise ConfigError(f"{where} must give username and password: the credentials this broker logs "
                              f"in with to the other brokers (sasl.mechanism.inter.broker.protocol={mechanism})")
        props["sasl.jaas.config"] = jaas
    return props


def client_security(config: BrokerConfig):
    """client/security.py's ClientSecurity for ``client_properties``, or None (PLAINTEXT)."""
    props = client_properties(config)
    if props is None:
        return None
    from ..client.security import ClientSecurity
    listener = config.inter_broker_listener()[0]
    try:
        security = ClientSecurity(props)
    except (ValueError, OSError) as e:        # a mechanism the client lacks, an unreadable store
        raise ConfigError(f"inter-broker listener {listener}: {e}") from None
    if security.ssl_context is not None:      # the listener's TLS versions and suites, both ways
        from .tls import apply_protocols_and_ciphers
        apply_protocols_and_ciphers(security.ssl_context, lambda key: config.for_listener(listener, key))
    return security


async def connect(rm, broker_id: int, client_id: str, request_timeout_ms: int) -> BrokerConnection:
    """A new connection from this broker to broker ``broker_id`` on the inter-broker listener,
    authenticated as this broker; KafkaConnectionError when its endpoint is unknown (not alive)
    or it cannot be reached, InterBrokerAuthenticationError when it refuses this broker."""
    endpoint = rm.endpoint(broker_id)
    if endpoint is None:
        raise KafkaConnectionError(f"no endpoint known for broker {broker_id}")
    conn = BrokerConnection(endpoint[0], endpoint[1], node_id=broker_id, client_id=client_id,
                            request_timeout_ms=request_timeout_ms, max_versions=INTER_BROKER_MAX_VERSIONS,
                            security=rm.broker.security.inter_broker_client)
    try:
        await conn.connect()
    except (SslAuthenticationError, KafkaError) as e:
        if isinstance(e, KafkaError) and e.code not in _AUTHENTICATION_ERRORS:
            raise
        # NetworkClient's message for an AuthenticationException on connect
        reason = str(e)
        log.error("[%s] Connection to node %d (%s:%d) failed authentication due to: %s", client_id, broker_id,
                  endpoint[0], endpoint[1], reason)
        raise InterBrokerAuthenticationError(f"authentication to broker {broker_id} failed: {reason}") from None
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
