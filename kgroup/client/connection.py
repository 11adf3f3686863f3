"""Broker connections and the client's view of the cluster (asyncio): Java's NetworkClient and
Metadata, cut down to what the consumer, producer and admin client need.

:class:`BrokerConnection` is one TCP connection: requests are pipelined (each gets the next
correlation id and a future; one reader task matches responses by correlation id, which Kafka
answers in order), ApiVersions is negotiated on connect (per API the version used is
min(our max, broker max); a broker that does not know our ApiVersions version answers
UNSUPPORTED_VERSION with a v0 body listing its range, and we retry at the highest common one).
A request that times out closes the connection, as Java's NetworkClient does, failing everything
in flight with :class:`KafkaConnectionError`.

:class:`KafkaClient` owns the connections (keyed by node id; the group coordinator gets its own
connection, like Java's ``Integer.MAX_VALUE - nodeId`` connection id, so JoinGroup never waits
behind a Fetch), the metadata cache (brokers, topics, partition leaders, topic ids), the choice of
the least-loaded node, and reconnect backoff.
"""
from __future__ import annotations

import asyncio
import logging
import random
import ssl
from typing import Iterable

from kgroup.clock import monotonic_ms
from kgroup.clock import now_ms as clock_now_ms
from kgroup.protocol.api import API_BY_KEY, ApiKey, encode_request, response_header_version
from kgroup.protocol.header_defs import ResponseHeader
from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kgroup.protocol.messages.metadata import MetadataRequest
from kgroup.protocol.primitives import INT32, DecodeError
from kgroup.protocol.schema import ZERO_UUID

from .errors import KafkaConnectionError, KafkaTimeoutError, SslAuthenticationError, UnsupportedVersionError
from .types import NodeInfo, PartitionInfo, TopicInfo

log = logging.getLogger("kgroup.client.connection")

SOFTWARE_NAME = "kgroup-python"
SOFTWARE_VERSION = "0.1.0"
MAX_FRAME = 100 * 1024 * 1024
# the stream reader's buffer limit: asyncio pauses reading above twice this, so with its 64 KiB
# default a 1 MB Fetch response paused and resumed the socket every 128 KiB
STREAM_LIMIT = 4 * 1024 * 1024

#: the highest version of each API this client speaks: every version our codec declares, but for
#: the versions that name topics by id only (Produce v13, OffsetCommit/OffsetFetch v10), which
#: this client's producer and committer do not build, and InitProducerId v6 (KIP-939, unstable)
CLIENT_MAX_VERSIONS: dict[int, int] = {key: api.request.VERSIONS[1] for key, api in API_BY_KEY.items()}
CLIENT_MAX_VERSIONS.update({ApiKey.INIT_PRODUCER_ID: 5})


# The client's timers run on monotonic time; record timestamps use the wall clock.
now_ms = monotonic_ms
wall_ms = clock_now_ms


def _decode_response(key: int, version: int, frame: bytes):
    buf = memoryview(frame)
    _, pos = ResponseHeader.decode(buf, response_header_version(key, version))
    return API_BY_KEY[key].response.decode(buf, version, pos)[0]


class BrokerConnection:
    """One connection to one broker with pipelined requests."""

    def __init__(self, host: str, port: int, *, node_id: int, client_id: str | None,
                 request_timeout_ms: int = 30000, connect_timeout_ms: int = 10000,
                 max_versions: dict[int, int] | None = None, security=None):
        self.host, self.port, self.node_id = host, port, node_id
        self.security = security        # client/security.py's ClientSecurity, or None: PLAINTEXT
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.max_versions = {**CLIENT_MAX_VERSIONS, **(max_versions or {})}
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self.finalized_features: dict[str, int] = {}     # from ApiVersions v3+ (KIP-584)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task | None = None
        self._pending: dict[int, tuple[asyncio.Future, int, int]] = {}
        self._correlation_id = 0
        self.closed = False
        self.close_reason: BaseException | None = None

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.host}:{self.port}>"

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def connect(self) -> "BrokerConnection":
        try:
            ctx = self.security.ssl_context if self.security is not None else None
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, ssl=ctx, limit=STREAM_LIMIT,
                                        server_hostname=self.host if ctx is not None else None),
                self.connect_timeout_ms / 1000)
        except ssl.SSLError as e:
            self.closed = True
            raise SslAuthenticationError(f"SSL handshake with node {self.node_id} at {self.host}:{self.port} "
                                         f"failed: {e}") from None
        except (OSError, asyncio.TimeoutError) as e:
            self.closed = True
            raise KafkaConnectionError(f"cannot connect to node {self.node_id} at {self.host}:{self.port}: {e!r}") from None
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())
        try:
            await self._negotiate()
            if self.security is not None and self.security.mechanism is not None:
                await self.security.authenticate(self)
        except BaseException:
            self.close()
            raise
        return self

    async def _negotiate(self) -> None:
        version = self.max_versions[ApiKey.API_VERSIONS]
        for _ in range(3):
            req = ApiVersionsRequest(client_software_name=SOFTWARE_NAME, client_software_version=SOFTWARE_VERSION)
            resp = await self.send(req, version=version)
            if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
                theirs = next((k.max_version for k in resp.api_keys if k.api_key == ApiKey.API_VERSIONS), 0)
                version = min(version, theirs)
                continue
            if resp.error_code:
                raise KafkaError(ErrorCode(resp.error_code), "ApiVersions failed")
            self.broker_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            self.finalized_features = {f.name: f.max_version_level for f in resp.finalized_features or ()}
            return
        raise UnsupportedVersionError(f"node {self.node_id} rejected every ApiVersions version")

    def api_version(self, api_key: int, max_version: int | None = None) -> int:
        """min(our max, broker max); ``max_version`` caps ours further (e.g. Fetch without topic ids)."""
        ours = self.max_versions[api_key]
        if max_version is not None:
            ours = min(ours, max_version)
        lo, hi = self.broker_versions.get(api_key, (None, None))
        if hi is None:
            raise UnsupportedVersionError(f"node {self.node_id} does not support API {ApiKey(api_key).name}")
        version = min(ours, hi)
        if version < max(lo, API_BY_KEY[api_key].request.VERSIONS[0]):
            raise UnsupportedVersionError(
                f"node {self.node_id} supports {ApiKey(api_key).name} v{lo}-{hi}, this client v0-{ours}")
        return version

    def supports(self, api_key: int) -> bool:
        return api_key in self.broker_versions

    async def send(self, body, *, version: int | None = None, max_version: int | None = None,
                   min_version: int | None = None, timeout_ms: int | None = None, expect_response: bool = True):
        """Send one request and await its response body (None when ``expect_response`` is false);
        ``min_version``: fail with UnsupportedVersionError below it (a field older versions lack)."""
        if self.closed:
            raise KafkaConnectionError(f"connection to node {self.node_id} is closed: {self.close_reason}")
        key = body.API_KEY
        if version is None:
            version = self.api_version(key, max_version)
        if min_version is not None and version < min_version:
            raise UnsupportedVersionError(f"node {self.node_id} supports {ApiKey(key).name} up to v{version}, "
                                          f"this request needs v{min_version}")
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        cid = self._correlation_id
        frame = encode_request(body, version, cid, self.client_id)
        fut = asyncio.get_running_loop().create_future()
        if expect_response:
            self._pending[cid] = (fut, key, version)
        try:
            self._writer.writelines(frame)
            await self._writer.drain()
        except (OSError, RuntimeError) as e:
            self.close(KafkaConnectionError(f"send to node {self.node_id} failed: {e!r}"))
            raise KafkaConnectionError(f"send to node {self.node_id} failed: {e!r}") from None
        if not expect_response:
            return None
        timeout = (timeout_ms or self.request_timeout_ms) / 1000
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            err = KafkaTimeoutError(f"{ApiKey(key).name} request to node {self.node_id} timed out after {timeout}s")
            self.close(err)
            raise err from None

    async def _read_loop(self) -> None:
        reader = self._reader
        try:
            while True:
                size = INT32.unpack(await reader.readexactly(4))[0]
                if size < 4 or size > MAX_FRAME:
                    raise KafkaConnectionError(f"invalid response size {size} from node {self.node_id}")
                frame = await reader.readexactly(size)
                cid = INT32.unpack_from(frame, 0)[0]
                entry = self._pending.pop(cid, None)
                if entry is None:
                    raise KafkaConnectionError(f"unexpected correlation id {cid} from node {self.node_id}")
                fut, key, version = entry
                try:
                    body = self._parse(key, version, frame)
                except DecodeError as e:
                    if not fut.done():
                        fut.set_exception(e)
                    raise KafkaConnectionError(f"cannot decode response from node {self.node_id}: {e}") from None
                if not fut.done():
                    fut.set_result(body)
        except asyncio.CancelledError:
            raise
        except (asyncio.IncompleteReadError, OSError) as e:
            self.close(KafkaConnectionError(f"connection to node {self.node_id} lost: {e!r}"))
        except KafkaConnectionError as e:
            self.close(e)

    @staticmethod
    def _parse(key: int, version: int, frame: bytes):
        """Decode a response; bytes after the body are ignored, as Java's readers do (librdkafka's
        mock broker appends some)."""
        if key == ApiKey.API_VERSIONS:
            for v in (version, 0):  # an UNSUPPORTED_VERSION answer is encoded as v0 by Kafka
                try:
                    return _decode_response(key, v, frame)
                except DecodeError:
                    pass
            # unreadable (librdkafka's mock answers newer versions oddly): retry at v0
            return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[])
        return _decode_response(key, version, frame)

    def close(self, reason: BaseException | None = None) -> None:
        if self.closed and not self._pending:
            return
        self.closed = True
        self.close_reason = reason
        if self._read_task is not None and self._read_task is not asyncio.current_task():
            self._read_task.cancel()
        if self._writer is not None:
            try:
                self._writer.close()
            except RuntimeError:  # event loop already closed
                pass
        pending, self._pending = self._pending, {}
        for fut, key, _ in pending.values():
            if not fut.done():
                fut.set_exception(KafkaConnectionError(
                    f"connection to node {self.node_id} closed before {ApiKey(key).name} was answered: {reason}"))
                fut.exception()  # whoever gave up waiting need not see it


class KafkaClient:
    """Connections, metadata and node selection shared by one consumer, producer or admin client."""

    def __init__(self, config, *, max_versions: dict[int, int] | None = None):
        self.config = config
        self.client_id = config["client.id"]
        self.request_timeout_ms = config["request.timeout.ms"]
        self.max_versions = max_versions
        self.bootstrap = [NodeInfo(-(i + 1), *self._split(s)) for i, s in enumerate(config["bootstrap.servers"])]
        self.nodes: dict[int, NodeInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.topic_names: dict[bytes, str] = {}
        self.cluster_id: str | None = None
        self.unauthorized_topics: set[str] = set()
        self.controller_id = -1
        self.last_refresh_ms = -1
        self._conns: dict[tuple[str, int], BrokerConnection] = {}
        self._connecting: dict[tuple[str, int], asyncio.Future] = {}
        self._failures: dict[tuple[str, int], tuple[int, int]] = {}  # key -> (attempts, retry at)
        self._metadata_lock = asyncio.Lock()
        self.closed = False
        from .security import ClientSecurity
        security = ClientSecurity(config)
        self.security = security if security.enabled else None

    @staticmethod
    def _split(server: str) -> tuple[str, int]:
        host, _, port = server.strip().rpartition(":")
        return host.strip("[]"), int(port)

    # --- connections -------------------------------------------------------------------------

    def node(self, node_id: int) -> NodeInfo | None:
        if node_id < 0:
            return next((n for n in self.bootstrap if n.node_id == node_id), None)
        return self.nodes.get(node_id)

    def in_backoff(self, node_id: int, group: str = "default") -> bool:
        f = self._failures.get((group, node_id))
        return f is not None and now_ms() < f[1]

    async def connection(self, node_id: int, group: str = "default", node: NodeInfo | None = None) -> BrokerConnection:
        """The open connection to a node, connecting if needed (one attempt at a time per node)."""
        if self.closed:
            raise KafkaConnectionError("client closed")
        key = (group, node_id)
        conn = self._conns.get(key)
        if conn is not None and not conn.closed:
            return conn
        waiting = self._connecting.get(key)
        if waiting is not None:
            return await asyncio.shield(waiting)
        if self.in_backoff(node_id, group):
            raise KafkaConnectionError(f"node {node_id} is in reconnect backoff")
        node = node or self.node(node_id)
        if node is None:
            raise KafkaConnectionError(f"unknown node {node_id}")
        fut = asyncio.get_running_loop().create_future()
        self._connecting[key] = fut
        try:
            conn = BrokerConnection(node.host, node.port, node_id=node_id, client_id=self.client_id,
                                    request_timeout_ms=self.request_timeout_ms,
                                    connect_timeout_ms=self.config["socket.connection.setup.timeout.ms"],
                                    max_versions=self.max_versions, security=self.security)
            await conn.connect()
        except BaseException as e:
            attempts = self._failures.get(key, (0, 0))[0]
            base, cap = self.config["reconnect.backoff.ms"], self.config["reconnect.backoff.max.ms"]
            delay = min(cap, base * 2 ** attempts) * random.uniform(0.8, 1.2)
            self._failures[key] = (attempts + 1, now_ms() + int(delay))
            fut.set_exception(e)
            fut.exception()  # mark retrieved
            raise
        else:
            self._failures.pop(key, None)
            self._conns[key] = conn
            fut.set_result(conn)
            return conn
        finally:
            self._connecting.pop(key, None)

    def disconnect(self, node_id: int, group: str = "default", reason: str = "disconnect requested") -> None:
        conn = self._conns.pop((group, node_id), None)
        if conn is not None:
            conn.close(KafkaConnectionError(reason))

    async def send(self, node_id: int, body, *, group: str = "default", node: NodeInfo | None = None, **kw):
        conn = await self.connection(node_id, group, node)
        return await conn.send(body, **kw)

    def least_loaded_node(self) -> int:
        """Java's leastLoadedNode: a connected node with the fewest in-flight requests, else a
        node we may connect to now; random start so load spreads over equal candidates."""
        candidates = list(self.nodes) or [n.node_id for n in self.bootstrap]
        random.shuffle(candidates)
        best, best_load = None, None
        for node_id in candidates:
            conn = self._conns.get(("default", node_id))
            if conn is not None and not conn.closed:
                if conn.in_flight == 0:
                    return node_id
                if best_load is None or conn.in_flight < best_load:
                    best, best_load = node_id, conn.in_flight
        if best is not None:
            return best
        ready = [n for n in candidates if not self.in_backoff(n)]
        if ready:
            return ready[0]
        if self.nodes:  # every known broker is failing: fall back to the bootstrap list
            return random.choice([n.node_id for n in self.bootstrap])
        return candidates[0]

    async def send_any(self, body, **kw):
        """Send to the least-loaded node, trying other nodes when a connection fails."""
        tried: set[int] = set()
        last: BaseException | None = None
        for _ in range(max(2, len(self.nodes) + len(self.bootstrap))):
            node_id = self.least_loaded_node()
            if node_id in tried:
                others = [n for n in (list(self.nodes) + [b.node_id for b in self.bootstrap]) if n not in tried]
                if not others:
                    break
                node_id = others[0]
            tried.add(node_id)
            try:
                return await self.send(node_id, body, **kw)
            except KafkaConnectionError as e:
                last = e
        raise last or KafkaConnectionError("no broker available")

    # --- metadata ----------------------------------------------------------------------------

    async def refresh_metadata(self, topics: Iterable[str] | None = (), *, allow_auto_topic_creation: bool = False):
        """Fetch metadata for these topics (None: every topic) and merge it into the cache."""
        names = None if topics is None else sorted(set(topics))
        req = MetadataRequest(
            topics=None if names is None else [MetadataRequest.MetadataRequestTopic(name=n, topic_id=ZERO_UUID)
                                               for n in names],
            allow_auto_topic_creation=allow_auto_topic_creation)
        async with self._metadata_lock:
            resp = await self.send_any(req)
            self._apply_metadata(resp, full=names is None)
        return resp

    def _apply_metadata(self, resp, full: bool) -> None:
        if resp.brokers:
            self.nodes = {b.node_id: NodeInfo(b.node_id, b.host, b.port, b.rack) for b in resp.brokers}
            for key in [k for k in self._conns if k[1] >= 0 and k[1] not in self.nodes and k[0] == "default"]:
                self.disconnect(key[1], key[0], "broker left the cluster")
        self.cluster_id = resp.cluster_id
        self.controller_id = resp.controller_id
        seen = set()
        # Java's Metadata.unauthorizedTopics: the topics the last answer refused
        self.unauthorized_topics = {t.name for t in resp.topics
                                    if t.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and t.name is not None}
        for t in resp.topics:
            if t.name is None:
                continue
            seen.add(t.name)
            if t.error_code and t.error_code != ErrorCode.LEADER_NOT_AVAILABLE and not t.partitions:
                self.topics.pop(t.name, None)
                if t.error_code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION):
                    log.warning("metadata error for topic %s: %s", t.name, ErrorCode(t.error_code).name)
                continue
            parts = {p.partition_index: PartitionInfo(t.name, p.partition_index, p.leader_id, p.leader_epoch,
                                                      tuple(p.replica_nodes), tuple(p.isr_nodes),
                                                      tuple(p.offline_replicas), p.error_code)
                     for p in t.partitions}
            self.topics[t.name] = TopicInfo(t.name, t.topic_id, t.is_internal, parts, t.error_code)
            if t.topic_id != ZERO_UUID:
                self.topic_names[t.topic_id] = t.name
        if full:
            for name in [n for n in self.topics if n not in seen]:
                del self.topics[name]
        self.last_refresh_ms = now_ms()

    def partition_count(self, topic: str) -> int | None:
        t = self.topics.get(topic)
        return len(t.partitions) if t is not None else None

    def leader_for(self, topic: str, partition: int) -> int:
        t = self.topics.get(topic)
        if t is None:
            return -1
        p = t.partitions.get(partition)
        return -1 if p is None else p.leader

    def available_partitions(self, topic: str) -> list[int]:
        t = self.topics.get(topic)
        if t is None:
            return []
        return sorted(p.partition for p in t.partitions.values() if p.leader >= 0 and p.leader in self.nodes)

    async def close(self) -> None:
        self.closed = True
        for conn in list(self._conns.values()):
            conn.close(KafkaConnectionError("client closed"))
        self._conns.clear()
        await asyncio.sleep(0)
