"""The asyncio shell: accept connections, cut length-prefixed frames, decode, dispatch to the
API handlers, and write responses back in request order per connection.

Theory of operation, per connection:
- Bytes arrive in the broker's one receive buffer, shared by every connection
  (``asyncio.BufferedProtocol``), and whole frames are cut from it; only an unfinished frame's
  start is kept per connection, so an idle connection holds no buffer. A large frame is received
  straight into its own buffer, grown as its bytes arrive (never allocated at its announced
  size), never copied. The 4-byte size is checked against ``socket.request.max.bytes`` first: a
  larger (or negative) size closes the connection. Connection limits, idle expiry and the
  request memory pool (``queued.max.request.bytes``) are decided in ``connections.py``.
- Each frame is decoded (header, then body at the header's version) and handed to its handler.
  A handler returns a response object, ``None`` (nothing to send, e.g. Produce acks=0), or a
  PendingResponse answered later by a direct call (an OffsetCommit or acks=-1 Produce after its
  fsync, a parked JoinGroup or Fetch, a multi-group request gathered from several shards).
  Every response gets a slot in a FIFO; slots are written only from the head, so responses
  leave in request order even when a later request finishes first. Many requests may be in
  flight on one connection.
- Muting, as Kafka's socket server mutes a channel after each receive until its response is
  sent: a request parked by its handler (a PendingResponse not answered at once: a JoinGroup or
  SyncGroup waiting for its rebalance, a long-poll Fetch) mutes the connection. Its later frames
  are kept, undecoded and in order (reading pauses once they pass ``_MUTED_MAX_BYTES``), and
  dispatched only after its answer is written, so a Heartbeat or OffsetCommit pipelined behind
  a JoinGroup sees the new generation, as with Kafka. Requests answered at once cost nothing
  extra and keep being pipelined. So does a request whose answer waits only for the fsync of
  what it did (``PendingResponse.flush_only``: an OffsetCommit, an acks=-1 Produce, a group
  write): its records are appended and replayed (and below the high watermark) before the
  handler returns, so a later request observes exactly what it would observe behind the
  answer; Kafka, with one replica, answers such requests right after the append (its
  durability is replication, not fsync), so muting on kgroup's extra fsync would serialize
  what Kafka does not wait for at all. An acks=-1 Produce in a cluster waiting for its ISR is
  not muted either: Kafka mutes it, but its follower round trip is a fraction of a Python
  broker's, and muted, a connection's pipelined produce requests (librdkafka sends a new one
  every linger.ms while earlier ones wait) would each wait a whole replication round trip in
  turn, capping a producer at a few hundred requests a second per leader broker; appended at
  once, their waits overlap. The log and the answers' order are what muting gives.
- Bad input closes only that connection, with a WARNING naming the peer and the reason; the
  server itself never dies from client input. As in Kafka, a request for an API or version we do
  not serve closes the connection, except ApiVersions, which is answered with
  UNSUPPORTED_VERSION in the v0 layout so the client can retry lower (KIP-511).
"""
from __future__ import annotations

import asyncio
import collections
import errno
import logging
import socket
import struct

from ..protocol.api import API_BY_KEY, ApiKey, encode_response, parse_request, peek_key_version
from ..protocol.primitives import DecodeError
from ..protocol.schema import Message
from .handlers import HANDLER_BY_KEY_VERSION
from ..security.principal import ANONYMOUS
from .authentication import SaslGate
from .handlers.api_versions import unsupported_version_response
from .metrics import SAMPLE_EVERY as METRICS_SAMPLE_EVERY
from .pending import PendingResponse

log = logging.getLogger("kgroup.server")
_SIZE = struct.Struct(">i")
_CORR = struct.Struct(">i")
RECEIVE_BUFFER_SIZE = 256 * 1024    # the broker's one receive buffer, shared by all connections
_BIG = 64 * 1024
_MUTED_MAX_BYTES = 1024 * 1024  # frames kept behind a parked request before reading pauses
_EAGER = 1024 * 1024


def _write(transport, pieces):
    """Write a response's pieces. Python 3.11's ``writelines`` joins (copies) everything, so a
    large piece (a record set read from a segment) is written on its own and small ones joined."""
    if max(map(len, pieces)) < 65536:      # the common case, without a Python loop per piece
        transport.write(b"".join(pieces))
        return
    small = []
    for p in pieces:
        if len(p) < 65536:
            small.append(p)
            continue
        if small:
            transport.write(b"".join(small))
            small = []
        transport.write(p)
    if small:
        transport.write(b"".join(small))


class Listener:
    """The listening socket, accepted here rather than by ``loop.create_server``: asyncio accepts
    up to its backlog per tick and a protocol can refuse a connection only ticks later, so a flood
    over the connection limits held hundreds of already-refused descriptors and ``accept()`` ran
    out of them. Here each connection is admitted (``connections.py``) the moment it is accepted,
    and one refused is closed before the next is accepted."""

    def __init__(self, broker, host: str, port: int, backlog: int, spec=None):
        self.broker = broker
        self.spec = spec            # config.ListenerSpec: name, security protocol (None: PLAINTEXT)
        self.name = spec.name if spec is not None else "PLAINTEXT"
        security = broker.security if spec is not None else None
        # TLS context and principal builder (SSL, SASL_SSL); SASL mechanisms (SASL_*).
        self.ssl_context = security.ssl_contexts.get(self.name) if security else None
        self.principal_builder = security.principal_builders.get(self.name) if security else None
        self.sasl = security.sasl.get(self.name) if security else None
        self.loop = broker.loop
        self.backlog = backlog
        self.sock = socket.create_server((host, port), backlog=backlog)  # SO_REUSEADDR on POSIX
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self._retry: asyncio.TimerHandle | None = None
        self.loop.add_reader(self.sock.fileno(), self._accept)

    def _accept(self) -> None:
        quotas = self.broker.quotas
        for _ in range(self.backlog):
            try:
                conn, addr = self.sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    raise
                # Descriptors taken by something else: stop accepting for a second (the
                # listening socket stays readable, so the loop would spin on it).
                quotas.accept_failed(exc)
                self.loop.remove_reader(self.sock.fileno())
                self._retry = self.loop.call_later(1.0, self._resume)
                return
            if quotas.admit(addr[0]) is not None:
                conn.close()
                continue
            conn.setblocking(False)
            # asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP, and one accepted
            # from socket.create_server's listener has proto 0: without it, Nagle holds a small
            # response behind the unacknowledged one before it (~40 ms with delayed ACKs).
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.loop.create_task(self._serve(conn, addr[0]))

    async def _serve(self, conn: socket.socket, host: str) -> None:
        try:
            await self.loop.connect_accepted_socket(lambda: KafkaConnection(self.broker, self), conn,
                                                    ssl=self.ssl_context)
        except Exception:         # e.g. the peer reset it first: admitted, never served
            conn.close()
            self.broker.quotas.release(host)

    def _resume(self) -> None:
        self._retry = None
        self.loop.add_reader(self.sock.fileno(), self._accept)

    def close(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
        else:
            self.loop.remove_reader(self.sock.fileno())
        self.sock.close()


class RequestContext:
    """What a handler may know about the request beyond its body."""

    __slots__ = ("connection", "header", "api_version")

    def __init__(self, connection, header, api_version):
        self.connection = connection
        self.header = header
        self.api_version = api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def client_host(self) -> str:
        return self.connection.peer_host

    @property
    def principal(self):
        """The authenticated KafkaPrincipal (User:ANONYMOUS on PLAINTEXT, as Kafka)."""
        return self.connection.principal

    @property
    def listener_name(self) -> str | None:
        listener = self.connection.listener
        return listener.name if listener is not None else None


class _Slot:
    """A response's place in its connection's FIFO: the encoded ``pieces`` once known, or the
    ``pending`` response it waits for, with what encoding that answer needs."""

    __slots__ = ("pieces", "pending", "api_key", "api_version", "correlation_id")

    def __init__(self, pieces, pending, api_key, api_version, correlation_id):
        self.pieces = pieces
        self.pending = pending      # None once answered: the slot may be written
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class KafkaConnection(asyncio.BufferedProtocol):
    # An idle connection holds no receive buffer of its own (the loop's reads land in the
    # broker's shared one): its cost is this object, the transport and the socket
    # (docs/benchmarks.md, "Footprint": bytes per idle connection).
    __slots__ = ("broker", "transport", "partial", "big", "big_filled", "big_size", "big_reserved", "slots", "out",
                 "send_scheduled", "peer", "peer_host", "client_software", "closed", "max_frame",
                 "last_active", "admitted", "waiting_memory", "muted", "muted_frames", "muted_bytes",
                 "reading_paused", "request_counts", "listener", "principal", "gate", "__weakref__")

    def __init__(self, broker, listener=None):
        self.broker = broker
        self.listener = listener    # the Listener that accepted it (None in some tests)
        self.principal = ANONYMOUS
        # SASL authentication (authentication.py's SaslGate) while it is under way or its
        # session can expire; None otherwise, the one test the usual path pays.
        self.gate = None
        self.transport = None
        self.partial = None     # the unread start of a frame (a small bytearray), or None
        self.big = None         # a large frame being received straight into its own buffer,
        self.big_filled = 0     # grown as its bytes arrive, up to its announced big_size
        self.big_size = 0
        self.big_reserved = 0   # of it, bytes drawn from the request memory pool
        self.slots: collections.deque = collections.deque()
        self.out: list = []  # response pieces due, written at the end of the current read
        self.send_scheduled = False  # a write of ``out`` is due later in this loop iteration
        self.peer = "?"
        self.peer_host = ""
        self.client_software = None
        self.closed = False
        self.max_frame = broker.config["socket.request.max.bytes"]
        self.muted = False      # a parked request's answer is not written yet: frames wait
        self.muted_frames: collections.deque = collections.deque()  # frames received meanwhile
        self.muted_bytes = 0
        self.reading_paused = 0     # bit 1: by the write buffer, 2: by muted frames, 4: by the memory pool
        self.last_active = 0.0
        self.admitted = False
        self.waiting_memory = False
        # Metrics alone (ops.py): BrokerMetrics.recent, the request counts kept inline below.
        self.request_counts = broker.request_counts

    # -- connection lifecycle -------------------------------------------------------------------
    def connection_made(self, transport):
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.peer_host = peer[0]
            self.peer = f"{peer[0]}:{peer[1]}"
        self.admitted = True        # by the Listener, which counted it in the quotas
        listener = self.listener
        if listener is not None:
            if listener.principal_builder is not None:
                try:
                    self.principal = listener.principal_builder.principal(transport.get_extra_info("ssl_object"))
                except ValueError as e:     # no ssl.principal.mapping.rules rule applies
                    log.warning("closing connection from %s: %s", self.peer, e)
                    self.closed = True
                    transport.close()
            if listener.sasl is not None:
                self.gate = SaslGate(listener.sasl)
        transport.set_write_buffer_limits(high=16 * 1024 * 1024)
        self.last_active = self.broker.loop.time()
        self.broker.connections.add(self)

    def connection_lost(self, exc):
        self.closed = True
        if not self.admitted:
            return
        self.admitted = False
        quotas = self.broker.quotas
        quotas.release(self.peer_host)
        self.broker.connections.discard(self)
        self.muted_frames.clear()
        self._drop_big()
        if self.waiting_memory:
            quotas.memory.forget(self)
        for slot in self.slots:
            if slot.pending is not None:
                slot.pending.stop_listening()
        self.slots.clear()
        share = getattr(self.broker, "share_partitions", None)
        if share is not None and share.sessions.sessions:
            share.on_connection_closed(self)        # its share sessions close, their records are released

    # Backpressure: while the client does not read its responses (the transport's write buffer is
    # above its high-water mark), stop reading its requests.
    def pause_writing(self):
        self._pause_reading(1)

    def resume_writing(self):
        self._resume_reading(1)

    def _pause_reading(self, reason: int):
        if not self.closed:
            if not self.reading_paused:
                self.transport.pause_reading()
            self.reading_paused |= reason

    def _resume_reading(self, reason: int):
        if not self.closed and self.reading_paused & reason:
            self.reading_paused &= ~reason
            if not self.reading_paused:
                self.transport.resume_reading()

    def close(self, reason: str):
        """Close this connection, logging why (e.g. a failed acks=0 produce, as Kafka does)."""
        self._abort(reason)

    def _abort(self, reason: str):
        self._send()  # answers already due go out first
        log.warning("closing connection from %s: %s", self.peer, reason)
        self.closed = True
        self.transport.close()

    def close_after_failed_authentication(self, reason: str):
        """As Kafka's Selector with connection.failed.authentication.delay.ms: the error answer
        goes out, nothing more is read, and the connection closes after the delay."""
        self._send()
        if self.closed:
            return
        self.gate = None
        self.muted = True           # later frames are kept (bounded by reading paused), never run
        self._pause_reading(2)
        delay = self.broker.config["connection.failed.authentication.delay.ms"] / 1000.0
        if delay <= 0:
            self._abort(reason)
            return
        self.broker.loop.call_later(delay, lambda: None if self.closed else self._abort(reason))

    def expire_idle(self, idle_ms):
        # Kafka's Selector closes expired connections quietly (DEBUG); so do we.
        log.debug("closing connection from %s: idle for more than connections.max.idle.ms=%d",
                  self.peer, idle_ms)
        self.closed = True
        self.transport.close()

    @property
    def idle(self) -> bool:
        return not self.slots and not self.muted_frames

    # -- framing --------------------------------------------------------------------------------
    # BufferedProtocol. The loop reads into the broker's one shared receive buffer (the loop
    # calls get_buffer, recv_into and buffer_updated back to back, so one buffer serves every
    # connection); whole frames are cut (copied) out of it, and only the start of an unfinished
    # frame is kept per connection. A frame larger than _BIG is received straight into a
    # bytearray of its own, grown (doubling) as its bytes arrive, never allocated at its
    # announced size up front, and handed to the handler as is (no copy; writable, so the log
    # patches offsets in place).
    def get_buffer(self, sizehint):
        if self.big is not None:
            return memoryview(self.big)[self.big_filled:]
        return self.broker.receive_buffer

    def buffer_updated(self, nbytes):
        # Every response ready by the end of this read leaves in one write (one send syscall
        # for a burst of pipelined requests instead of one each).
        self.last_active = self.broker.loop.time()
        try:
            self._read(nbytes)
        finally:
            self._send()

    def _read(self, nbytes):
        if self.big is not None:
            self.big_filled += nbytes
            if self.big_filled == self.big_size:
                frame = self.big
                self._drop_big()
                self._handle_frame(frame)
            elif self.big_filled == len(self.big):
                self._grow_big()
            return
        shared = self.broker.receive_buffer_bytes
        if self.partial is not None:
            self.partial += memoryview(shared)[:nbytes]
            buf, end = self.partial, len(self.partial)
        else:
            buf, end = shared, nbytes
        pos = 0
        while end - pos >= 4 and not self.closed:
            size, = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > self.max_frame:
                self._abort(f"frame of {size} bytes exceeds socket.request.max.bytes={self.max_frame}"
                            if size > 0 else f"invalid frame size {size}")
                return
            if end - pos - 4 >= size:
                frame = bytes(buf[pos + 4:pos + 4 + size])
                pos += 4 + size
                self._handle_frame(frame)
                continue
            if size > _BIG:
                have = end - pos - 4
                self.big_size = size
                self.big = bytearray(buf[pos + 4:end])
                self.big_filled = have
                self.partial = None
                self._grow_big()
                return
            break
        if self.closed or pos == end:
            self.partial = None
        else:
            self.partial = buf[pos:end]     # a bytearray slice: a copy

    def _grow_big(self):
        """Make room for the next bytes of the large frame: double its buffer (at least _BIG,
        at most its announced size), from the request memory pool when one is configured."""
        cur = len(self.big)
        # A frame whose bytes arrive in bulk (>= _BIG already here) gets at least _EAGER at once,
        # so a 1 MiB produce batch is copied once, not once per doubling; one that trickles in (a
        # size prefix and silence) costs _BIG.
        new = min(self.big_size, max(2 * cur, _EAGER) if cur >= _BIG else _BIG)
        pool = self.broker.quotas.memory
        if not pool.try_reserve(new - cur):
            # Kafka mutes a channel the pool cannot serve until memory is released.
            self.waiting_memory = True
            self._pause_reading(4)
            pool.wait(self)
            return
        self.big_reserved += new - cur
        # A new buffer, not a resize: the loop may still hold a view of the old one.
        big = bytearray(new)
        big[:cur] = self.big
        self.big = big

    def memory_available(self):
        self.waiting_memory = False
        self.last_active = self.broker.loop.time()     # time spent muted is not the client's idleness
        if self.closed or self.big is None:
            return
        self._grow_big()
        if not self.waiting_memory:
            self._resume_reading(4)

    def _drop_big(self):
        if self.big is not None:
            # Its first bytes came out of the shared buffer; only the growth was reserved.
            self.broker.quotas.memory.release(self.big_reserved)
            self.big = None
            self.big_filled = self.big_size = self.big_reserved = 0

    # -- dispatch -------------------------------------------------------------------------------
    def _keep_while_muted(self, frame):
        """A frame behind a parked request: kept as received (a small one is a bytes copy, a
        large one its own buffer), dispatched once the connection is unmuted."""
        self.muted_frames.append(frame)
        self.muted_bytes += len(frame)
        if self.muted_bytes >= _MUTED_MAX_BYTES:
            self._pause_reading(2)  # Kafka's muted channel reads nothing at all

    def _mute(self):
        self.muted = True

    def _unmute(self):
        """The parked request's answer is written: dispatch the frames kept meanwhile, in
        order, until one parks again."""
        self.muted = False
        frames = self.muted_frames
        while frames and not self.muted and not self.closed:
            frame = frames.popleft()
            self.muted_bytes -= len(frame)
            self._handle_frame(frame)
        if self.muted_bytes < _MUTED_MAX_BYTES:
            self._resume_reading(2)
        self._send()

    def _handle_frame(self, frame):
        if self.muted:      # behind a parked request (one attribute test on the fast path)
            self._keep_while_muted(frame)
            return
        # A small frame is bytes, decoded as is (cheaper to index and slice than a view); a large
        # one is its own bytearray, decoded through a view so its record sets are never copied.
        if self.broker.log_dir_failure.offline:
            # Shutting down after a log directory failure (log_dir_failure.py): as a halted
            # Kafka broker, take no more requests.
            self._abort("the log directory is offline: the broker is shutting down")
            return
        view = frame if type(frame) is bytes else memoryview(frame)
        gate = self.gate
        if gate is not None and gate.intercept(self, view):    # SASL (authentication.py)
            return
        try:
            key_version = peek_key_version(view)
        except DecodeError as e:
            self._abort(str(e))
            return
        api_key, version = key_version
        handler = HANDLER_BY_KEY_VERSION.get(key_version)
        if handler is None:
            self._unsupported(frame, api_key, version)
            return
        try:
            header, body = parse_request(view, key_version)
        except DecodeError as e:
            self._abort(f"cannot decode api key {api_key} v{version}: {e}")
            return
        try:
            counts = self.request_counts
            if counts is None:
                hook = self.broker.request_hook  # metrics, fault injection (ops.py): None unless enabled
                if hook is None:
                    result = handler(self.broker, RequestContext(self, header, version), body, version)
                else:
                    result = hook(handler, self.broker, RequestContext(self, header, version), body, version)
            # -- metrics alone (ops.py): counted here, without a call layer ---------------------------
            else:
                recent = counts[api_key]        # small ints only: no allocation (metrics.py)
                n = recent[version] + 1
                if n < METRICS_SAMPLE_EVERY:    # neither sampled for timing nor a kind metrics watch
                    recent[version] = n
                    result = handler(self.broker, RequestContext(self, header, version), body, version)
                else:
                    result = self.broker.metrics.dispatch_sampled(
                        handler, self.broker, RequestContext(self, header, version), body, version)
            # -- end metrics alone -------------------------------------------------------------------
        except Exception:
            log.exception("handler for api key %d v%d failed (request from %s)", api_key, version, self.peer)
            self._abort("internal error while handling the request")
            return
        if isinstance(result, Message):      # answered at once: the common case
            pieces = encode_response(api_key, version, header.correlation_id, result)
            if not self.slots:
                self.out += pieces
            else:
                self.slots.append(_Slot(pieces, None, api_key, version, header.correlation_id))
        elif type(result) is PendingResponse:   # answered later, by a direct call
            slot = _Slot(None, result, api_key, version, header.correlation_id)
            self.slots.append(slot)
            if not (result.answered or result.flush_only):
                self._mute()    # parked: later frames wait for its answer (see the docstring)
            result.listen(lambda p, s=slot: self._complete(s, p))
        elif result is not None:
            log.error("handler for api key %d v%d returned %r", api_key, version, type(result))
            self._abort("internal error while handling the request")

    def _unsupported(self, frame: bytes, api_key: int, version: int):
        if api_key == ApiKey.API_VERSIONS and len(frame) >= 8:
            correlation_id, = _CORR.unpack_from(frame, 4)
            self._queue_ready([unsupported_version_response(correlation_id)], api_key, version, correlation_id)
        else:
            # Kafka's Processor.parseRequestHeader throws UnsupportedVersionException /
            # InvalidRequestException here, which closes the connection.
            name = API_BY_KEY[api_key].request.__name__[:-7] if api_key in API_BY_KEY else "unknown"
            self._abort(f"UNSUPPORTED_VERSION: request for api key {api_key} ({name}) version {version}")

    def _queue_ready(self, pieces, api_key, version, correlation_id):
        if not self.slots:
            self.out += pieces
        else:
            self.slots.append(_Slot(pieces, None, api_key, version, correlation_id))

    def send_direct(self, pieces):
        """A response built outside the handlers (SASL authentication), in request order."""
        self._queue_ready(pieces, 0, 0, 0)

    def _send(self):
        if self.out and not self.closed:
            out, self.out = self.out, []
            _write(self.transport, out)

    def _complete(self, slot, pending):
        if self.closed:
            return
        exc = pending.error
        if exc is not None:
            log.error("request api key %d from %s failed", slot.api_key, self.peer, exc_info=exc)
            self._abort("internal error while handling the request")
            return
        result = pending.response
        try:
            slot.pieces = ([] if result is None else
                           encode_response(slot.api_key, slot.api_version, slot.correlation_id, result))
        except Exception:
            log.exception("cannot encode the response to api key %d v%d (request from %s)", slot.api_key,
                          slot.api_version, self.peer)
            self._abort("internal error while handling the request")
            return
        slot.pending = None
        self._flush()
        # One write for every answer completed in this loop iteration (a group commit's fsync
        # answers many pipelined requests at once), not one write each.
        if self.out and not self.send_scheduled:
            self.send_scheduled = True
            self.broker.loop.call_soon(self._send_due)
        if self.muted and not self.slots:
            # The parked request (always the last slot: nothing is dispatched behind it) is
            # answered and due to be written first. Later frames are dispatched from the loop,
            # not from inside whatever answered it (a coordinator operation in progress).
            self.broker.loop.call_soon(self._unmute_due)

    def _send_due(self):
        self.send_scheduled = False
        self._send()

    def _unmute_due(self):
        if self.muted and not self.slots and not self.closed:
            self._unmute()

    def _flush(self):
        slots = self.slots
        while slots and slots[0].pending is None:
            self.out += slots.popleft().pieces
