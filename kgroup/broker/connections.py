"""What connections may cost the broker: Kafka's connection quotas, idle expiry and request
memory pool, for the one event loop (server.py asks; this module decides).

- ``max.connections`` / ``max.connections.per.ip`` (Kafka's ConnectionQuotas, defaults
  Int.MaxValue): a new connection over a limit is closed at once, with a WARNING at most once per
  ``_WARN_EVERY_S`` (Kafka logs each at INFO; a flood of them must not flood the log).
- File descriptors: at start the soft RLIMIT_NOFILE is raised to the hard limit (as Kafka's
  scripts and systemd units are expected to), and connections stop at the soft limit minus a
  reserve for the broker's own files (segments, indexes, checkpoints), so log housekeeping never
  sees "Too many open files" because clients took every descriptor; an ``accept()`` that fails
  anyway (descriptors taken by something else) is logged once per ``_WARN_EVERY_S``, without a
  traceback. Each connection is admitted as it is accepted (server.py's Listener), so refused
  ones never pile up while they wait to be closed.
- ``connections.max.idle.ms`` (default 10 minutes): as Kafka's Selector, a connection with no
  bytes read or written for that long is closed; one with an answer still owed (a parked
  JoinGroup or Fetch) is not idle.
- ``queued.max.request.bytes`` (Kafka's MemoryPool for requests being read; default -1, no
  pool): when set, the receive buffers of partly read large requests draw from one pool, and a
  connection that cannot get more memory stops being read (Kafka mutes it) until another
  request's buffer is handed to its handler (or its connection closes). A muted connection is
  not read, so it cannot see its peer close: idle expiry reclaims it, as in Kafka. Whatever the setting, a request's buffer grows
  with the bytes that actually arrive (never to its announced size at once), so a size prefix
  followed by silence costs nothing, and a stalled partial request is bounded by
  ``socket.request.max.bytes`` and reclaimed by idle expiry.
"""
from __future__ import annotations

import collections
import logging
import os
import time

log = logging.getLogger("kgroup.server")
_WARN_EVERY_S = 10.0
# Descriptors kept for the broker's own files: the log manager keeps at most all but
# _TRANSIENT_FILES of them open for segments and indexes (storage/open_files.py), the rest are
# for files opened briefly (checkpoints, producer snapshots, index reads, directory fsyncs).
_FD_RESERVE_MIN = 256
_FD_RESERVE_MAX = 4096
_TRANSIENT_FILES = 64


def own_files_reserve(soft_limit: int) -> int:
    """Descriptors kept for the broker's own files, never given to connections."""
    return max(_FD_RESERVE_MIN, min(soft_limit // 8, _FD_RESERVE_MAX))


def log_files_budget(soft_limit: int) -> int:
    """Segment and index descriptors the log manager may keep open (its OpenFiles capacity)."""
    return own_files_reserve(soft_limit) - _TRANSIENT_FILES


def raise_nofile_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; return the soft limit now in force."""
    try:
        import resource
    except ImportError:         # not POSIX
        return 1 << 30
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 30


def _open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 64


class RateLimitedWarning:
    """One WARNING per interval; the ones in between are counted and reported with the next."""

    __slots__ = ("interval", "last", "suppressed")

    def __init__(self, interval: float = _WARN_EVERY_S):
        self.interval = interval
        self.last = -1e18
        self.suppressed = 0

    def __call__(self, msg: str, *args) -> None:
        now = time.monotonic()
        if now - self.last < self.interval:
            self.suppressed += 1
            return
        if self.suppressed:
            msg += " (%d similar message(s) suppressed)"
            args += (self.suppressed,)
        self.last, self.suppressed = now, 0
        log.warning(msg, *args)


class RequestMemoryPool:
    """Kafka's SimpleMemoryPool for requests being read: ``capacity`` bytes (None: unbounded).
    A connection refused memory is paused and resumed, in order, as memory is released."""

    __slots__ = ("capacity", "available", "waiting")

    def __init__(self, capacity: int | None):
        self.capacity = capacity
        self.available = capacity
        self.waiting: collections.deque = collections.deque()

    def try_reserve(self, n: int) -> bool:
        if self.capacity is None:
            return True
        # As Kafka's non-strict pool: an allocation succeeds while any memory is left, so one
        # request larger than what remains is never starved forever.
        if self.available <= 0:
            return False
        self.available -= n
        return True

    def release(self, n: int) -> None:
        if self.capacity is None or n == 0:
            return
        self.available += n
        while self.waiting and self.available > 0:
            conn = self.waiting.popleft()
            conn.memory_available()

    def wait(self, conn) -> None:
        self.waiting.append(conn)

    def forget(self, conn) -> None:
        try:
            self.waiting.remove(conn)
        except ValueError:
            pass


class ConnectionQuotas:
    """Counts connections per broker and per peer address and enforces the limits above."""

    def __init__(self, config):
        self.max_connections = config["max.connections"]
        self.max_per_ip = config["max.connections.per.ip"]
        self.idle_ms = config["connections.max.idle.ms"]
        q = config["queued.max.request.bytes"]
        self.memory = RequestMemoryPool(q if q > 0 else None)
        self.per_ip: dict[str, int] = {}
        self.count = 0
        self.fd_limit = None            # connections allowed by descriptors, set by start()
        self.refused = 0
        self._warn = RateLimitedWarning()
        self._accept_warn = RateLimitedWarning()

    def start(self, log_files_open: int = 0) -> None:
        """``log_files_open``: descriptors the log manager holds now, part of the reserve."""
        soft = raise_nofile_limit()
        in_use = _open_descriptors() - log_files_open
        self.fd_limit = max(soft - in_use - own_files_reserve(soft), 1)
        log.info("file descriptor limit %d: at most %d connections (max.connections=%d)", soft,
                 min(self.fd_limit, self.max_connections), self.max_connections)

    def admit(self, host: str) -> str | None:
        """Count a new connection from ``host``; None if admitted, else why it is refused."""
        n = self.per_ip.get(host, 0)
        if n >= self.max_per_ip:
            reason = f"max.connections.per.ip={self.max_per_ip} reached for {host}"
        elif self.count >= self.max_connections:
            reason = f"max.connections={self.max_connections} reached"
        elif self.fd_limit is not None and self.count >= self.fd_limit:
            reason = (f"{self.count} connections: the rest of the file descriptor limit is kept for "
                      f"the broker's own files")
        else:
            self.per_ip[host] = n + 1
            self.count += 1
            return None
        self.refused += 1
        self._warn("refusing connection from %s: %s", host, reason)
        return reason

    def release(self, host: str) -> None:
        n = self.per_ip.get(host, 0) - 1
        if n <= 0:
            self.per_ip.pop(host, None)
        else:
            self.per_ip[host] = n
        self.count -= 1

    def accept_failed(self, exc: OSError) -> None:
        """Out of descriptors at accept() (taken by something other than connections): one line
        per interval, no traceback."""
        self._accept_warn("accept() failed: %s", exc)

    def expire_idle(self, connections, now: float) -> int:
        """Close connections idle for more than connections.max.idle.ms; return how many."""
        limit = now - self.idle_ms / 1000.0
        expired = [c for c in connections if c.last_active < limit and c.idle]
        for c in expired:
            c.expire_idle(self.idle_ms)
        return len(expired)
