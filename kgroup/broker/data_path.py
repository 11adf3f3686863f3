"""The data path around the partition logs (Kafka's ReplicaManager, one node): appends with the
durability policy, reads, parked fetches, producer id allocation.

Durability (what is on disk when a produce is acknowledged):
- acks=-1 (all): the batch is fsynced before the response is sent. Appends waiting for an fsync are
  grouped: the first one schedules a flush for the end of the current event-loop iteration, so every
  produce request that arrived in that iteration shares one fsync per partition (group commit).
  When a round covers several logs, one ``syncfs`` of the data directory's filesystem replaces
  their fsyncs (kgroup.storage.fs): one journal commit instead of one per log. It runs on a sync
  thread while the loop goes on; appends meanwhile form the next round, started when it ends
  (so at most one sync is in flight, and each log records only what the sync covered).
- acks=1: the batch is written to the log file (the OS page cache) before the response; it reaches
  the disk at the next group commit, at ``flush.messages`` / ``flush.ms`` (Kafka's defaults: never),
  or at a clean shutdown. A machine crash (not a process crash) can lose it, as with Kafka.
- acks=0: no response; otherwise as acks=1.

Parked fetches are data (docs/architecture.md, rule 6: one way to answer later): a ``FetchWaiter`` registered
on every partition it reads; an append to one of them re-evaluates it, and its timer answers it
at ``max_wait_ms``.
"""
from __future__ import annotations

import asyncio
import logging
import os
import struct
import threading
import time

from ..clock import now_ms
from ..storage.config import LogConfig
from ..storage.errors import LogClosedError
from ..storage.fs import syncfs, syncfs_available
from ..storage.manager import LogManager
from .config import BrokerConfig
from .log_dir_failure import is_io_error
from .pending import PendingResponse

log = logging.getLogger("kgroup.data_path")

PRODUCER_ID_BLOCK = 1000
# From this many logs in one group commit, one syncfs is cheaper than their fsyncs (one journal
# commit instead of one per log; docs/benchmarks.md, "Data path", has the figures).
SYNCFS_MIN_LOGS = 2


def log_config_from_broker(config: BrokerConfig) -> LogConfig:
    """Broker-level defaults (log.*) as a LogConfig; topics override them with their configs."""
    v = config.values
    props = {k: v[k] for k in ("log.segment.bytes", "log.retention.bytes", "log.cleanup.policy",
                               "log.cleaner.delete.retention.ms", "log.index.interval.bytes",
                               "log.flush.interval.messages", "message.max.bytes",
                               "log.message.timestamp.type", "producer.id.expiration.ms",
                               "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
                               "log.cleaner.min.cleanable.ratio", "log.message.timestamp.before.max.ms",
                               "log.message.timestamp.after.max.ms", "log.index.size.max.bytes",
                               "min.insync.replicas", "compression.type")
             if v.get(k) is not None}
    props["log.retention.ms"] = config.retention_ms
    props["log.roll.ms"] = config.roll_ms
    if v["log.flush.interval.ms"] is not None:
        props["log.flush.interval.ms"] = v["log.flush.interval.ms"]
    return LogConfig.from_props(props)


def _sync_filesystem(fd: int) -> None:
    """syncfs of the filesystem holding the descriptor ``fd`` (runs on the sync thread)."""
    syncfs(fd)


class _SyncThread:
    """The one thread that runs ``syncfs`` of the data directory's filesystem, one sync at a
    time, and hands the outcome back to the event loop (``done(error or None)``, called on the
    loop). A bare thread and a lock rather than ``run_in_executor``: the executor's two futures,
    work item and locks per sync cost more than the hand-off itself, and a busy broker starts a
    sync per group commit. The directory stays open: an open and a close per sync cost two more
    system calls, each a taking of the GIL back from the busy loop thread. A descriptor kept open
    also reports every writeback error since the previous sync (syncfs compares the filesystem's
    error sequence with the one the descriptor last saw; a new one starts from the current)."""

    def __init__(self, loop, directory: str):
        self._loop = loop
        self._directory = directory
        self._go = threading.Lock()
        self._go.acquire()          # released once per sync to start
        self._done = None
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="kgroup-syncfs", daemon=True)
        self._thread.start()

    def start(self, done) -> None:
        self._done = done
        self._go.release()

    def stop(self) -> None:
        """Stop the thread once the sync in flight (or just started) is done."""
        self._stopping = True
        try:
            self._go.release()
        except RuntimeError:    # already released: a sync just started; the thread stops after it
            pass
        self._thread.join()

    def _run(self) -> None:
        fd = -1
        try:
            while True:
                self._go.acquire()
                done, self._done = self._done, None
                if done is None:    # woken by stop()
                    return
                error = None
                try:
                    if fd < 0:
                        fd = os.open(self._directory, os.O_RDONLY)
                    _sync_filesystem(fd)
                except Exception as e:  # noqa: BLE001 - handed to the loop, which fsyncs log by log
                    error = e
                try:
                    self._loop.call_soon_threadsafe(done, error)
                except RuntimeError:    # the loop is closed (shutdown): nobody waits any more
                    return
                if self._stopping:
                    return
        finally:
            if fd >= 0:
                os.close(fd)


class ProducerIdManager:
    """Producer ids that never repeat across restarts: blocks of ids are reserved by persisting the
    next block's start (fsynced) before any id of the current block is handed out."""

    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, "producer-id-block")
        self.next_id = 0
        self.block_end = 0
        if os.path.exists(self.path):
            with open(self.path, "rb") as f:
                self.next_id = self.block_end = struct.unpack(">q", f.read(8))[0]

    def allocate(self) -> int:
        if self.next_id >= self.block_end:
            end = self.next_id + PRODUCER_ID_BLOCK
            tmp = self.path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(struct.pack(">q", end))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            self.block_end = end
        pid = self.next_id
        self.next_id += 1
        return pid


class FetchWaiter:
    """A parked Fetch: re-evaluated on appends to its partitions, answered at its deadline."""

    __slots__ = ("partitions", "evaluate", "pending", "timer")

    def __init__(self, partitions, evaluate):
        self.partitions = partitions  # (topic, partition) pairs it reads
        self.evaluate = evaluate  # (force) -> response or None (not enough bytes yet)
        self.pending = PendingResponse()    # what the handler returns; answered by _wake
        self.timer = None


class DataPath:
    def __init__(self, config: BrokerConfig, data_dir: str, topic_configs: dict[str, dict[str, str]],
                 max_open_files: int | None = None, clock=None):
        self.config = config
        self.clock = clock or now_ms      # the broker's clock (BrokerClock.now_ms)
        self.default_log_config = log_config_from_broker(config)
        self.data_dir = data_dir
        self.logs = LogManager(data_dir, self.default_log_config, topic_configs=topic_configs,
                               max_open_files=max_open_files, clock=self.clock)
        self._data_device = os.stat(data_dir).st_dev
        self._device_of: dict[str, int] = {}    # log directory -> st_dev
        self.producer_ids = ProducerIdManager(data_dir)
        # parked fetches per partition, in the order they parked (a dict as an ordered set): an
        # append wakes the longest waiting first, so share fetches parked on one share-partition
        # take its new records in turn
        self._waiters: dict[tuple[str, int], dict[FetchWaiter, None]] = {}
        self._flush_pending: set = set()
        # (PendingResponse, the logs it waits for): a log's failure fails only its own waiters
        # (a topic deleted mid-round must not fail another topic's produce).
        self._flush_waiters: list[tuple[PendingResponse, object]] = []
        self._flush_scheduled = False
        self._sync_in_flight = False
        self._syncer: _SyncThread | None = None   # the sync thread, started at the first sync
        self._round_started = 0.0
        self._loop = None
        self._closed = False
        self.flush_observer = None  # fn(seconds) per group-commit round (broker metrics), or None
        # fn(error, what, failed logs) on a disk I/O error (broker.log_dir_failure.failed): the
        # log directory goes offline before any waiter of the round is answered.
        self.on_io_error = None

    # -- partitions ---------------------------------------------------------------------------
    def create_partitions(self, topic: str, num_partitions: int, topic_configs: dict[str, str]) -> None:
        self.logs.update_topic_config(topic, topic_configs)
        for p in range(num_partitions):
            self.logs.get_or_create(topic, p)

    def delete_partitions(self, topic: str, num_partitions: int) -> None:
        for p in range(num_partitions):
            self.logs.delete_partition(topic, p)
            for w in list(self._waiters.get((topic, p), ())):
                self._wake(w, force=True)

    def log(self, topic: str, partition: int):
        return self.logs.get(topic, partition)

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Kafka's periodic UnifiedLog.removeExpiredProducers on every log (each
        producer.id.expiration.check.interval.ms): producers idle longer than
        producer.id.expiration.ms, with no open transaction, are forgotten, so their next
        append starts a new sequence (or answers UNKNOWN_PRODUCER_ID). Returns how many."""
        now = self.clock() if now_ms is None else now_ms
        return sum(plog.producer_state.remove_expired_producers(now) for _, plog in self.logs)

    # -- durability ---------------------------------------------------------------------------
    def _running_loop(self):
        """The loop the broker runs on, kept (asyncio.get_running_loop costs a getpid system
        call, and the data path schedules a callback for most requests)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            loop = self._loop = asyncio.get_running_loop()
        return loop

    def wait_flushed(self, logs) -> PendingResponse:
        """Answered (with None) once every given log is fsynced up to its current end (group
        commit at the end of this loop iteration, or after the filesystem sync in flight); failed
        with the flush's error."""
        flushed = PendingResponse(flush_only=True)
        self._flush_pending.update(logs)
        self._flush_waiters.append((flushed, logs))
        if not self._flush_scheduled and not self._sync_in_flight:
            self._flush_scheduled = True
            self._running_loop().call_soon(self._group_commit)
        return flushed

    def _group_commit(self) -> None:
        self._flush_scheduled = False
        if self._sync_in_flight or not self._flush_waiters:
            return          # the sync in flight starts the next round when it finishes
        self._round_started = time.perf_counter()
        pending, waiters = self._flush_pending, self._flush_waiters
        self._flush_pending, self._flush_waiters = set(), []
        if len(pending) >= SYNCFS_MIN_LOGS and syncfs_available():
            here, elsewhere = self._split_by_device(pending)
            if len(here) >= SYNCFS_MIN_LOGS:
                failures = self._fsync_each(elsewhere)
                marks = []
                for plog in here:
                    try:
                        marks.append((plog, plog.sync_mark()))
                    except Exception as e:  # closed or deleted meanwhile
                        _flush_failed(plog, e)
                        failures[plog] = e
                self._start_sync(marks, waiters, failures)
                return
        failures = self._fsync_each(pending)
        self._report_io_errors(failures)
        self._resolve(waiters, failures)
        if self.flush_observer is not None:
            self.flush_observer(time.perf_counter() - self._round_started)

    def _split_by_device(self, pending):
        """(logs on the data directory's filesystem, logs elsewhere)."""
        here, elsewhere = [], []
        for plog in pending:
            device = self._device_of.get(plog.directory)
            if device is None:
                try:
                    device = self._device_of[plog.directory] = os.stat(plog.directory).st_dev
                except OSError:
                    device = -1     # deleted meanwhile: its own flush() reports it
            (here if device == self._data_device else elsewhere).append(plog)
        return here, elsewhere

    def _start_sync(self, marks, waiters, failures) -> None:
        """One syncfs of the data directory's filesystem on the sync thread. The loop goes on
        reading, deciding and appending meanwhile (a slow disk delays answers, not work); what
        is appended meanwhile waits for the next round, which starts when this one ends."""
        if self._closed:            # shutdown: nothing more is made durable
            self._resolve(waiters, {}, RuntimeError("the data path is closed"))
            return
        if self._syncer is None:
            self._syncer = _SyncThread(self._running_loop(), self.data_dir)
        self._sync_in_flight = True
        self._syncer.start(lambda failed: self._synced(failed, marks, waiters, failures))

    def _synced(self, failed, marks, waiters, failures) -> None:
        self._sync_in_flight = False
        if failed is not None:
            log.warning("syncfs of %s failed (%s); fsyncing log by log", self.data_dir, failed)
            failures.update(self._fsync_each([plog for plog, _ in marks]))
        else:
            for plog, mark in marks:
                try:
                    plog.synced(mark)
                except Exception as e:  # closed or deleted meanwhile
                    _flush_failed(plog, e)
                    failures[plog] = e
        self._report_io_errors(failures)
        self._resolve(waiters, failures)
        if self.flush_observer is not None:
            self.flush_observer(time.perf_counter() - self._round_started)
        # The round that gathered meanwhile starts after the callbacks this one scheduled (the
        # transaction markers of the Prepare records just made durable are appended by one).
        if self._flush_waiters and not self._flush_scheduled:
            self._flush_scheduled = True
            self._running_loop().call_soon(self._group_commit)

    @staticmethod
    def _fsync_each(logs) -> dict:
        """fsync each log; returns {log: error} for those that failed."""
        failures = {}
        for plog in logs:
            try:
                plog.flush()
            except Exception as e:  # a closed/deleted log or a disk error fails its waiters
                _flush_failed(plog, e)
                failures[plog] = e
        return failures

    def _report_io_errors(self, failures) -> None:
        io = [plog for plog, e in failures.items() if is_io_error(e)]
        if io and self.on_io_error is not None:
            self.on_io_error(failures[io[0]], "flushing " + ", ".join(p.directory for p in io), io)

    def append_failed(self, error, plog) -> None:
        """An append raised ``error``: a disk I/O error takes the log directory offline."""
        if self.on_io_error is not None and is_io_error(error):
            self.on_io_error(error, f"appending to {getattr(plog, 'directory', 'a log')}", ())

    @staticmethod
    def _resolve(waiters, failures, error=None) -> None:
        """Answer each waiter, or fail it with the error of one of its own logs (``error``:
        the whole round failed)."""
        for flushed, logs in waiters:
            failed = error
            if failed is None and failures:
                failed = next((failures[plog] for plog in logs if plog in failures), None)
            if failed is None:
                flushed.answer(None)
            else:
                flushed.fail(failed)

    # -- parked fetches -----------------------------------------------------------------------
    def park(self, waiter: FetchWaiter, max_wait_ms: int) -> None:
        for tp in waiter.partitions:
            self._waiters.setdefault(tp, {})[waiter] = None
        loop = self._running_loop()
        waiter.timer = loop.call_later(max_wait_ms / 1000.0, self._wake, waiter, True)

    def appended(self, topic: str, partition: int) -> None:
        """An append landed: re-evaluate the fetches parked on this partition."""
        ws = self._waiters.get((topic, partition))
        if ws:
            for w in list(ws):
                self._wake(w, force=False)

    def _wake(self, waiter: FetchWaiter, force: bool) -> None:
        if waiter.pending.answered:
            self._unpark(waiter)
            return
        try:
            resp = waiter.evaluate(force)
        except Exception as e:
            self._unpark(waiter)
            waiter.pending.fail(e)
            return
        if resp is not None:
            self._unpark(waiter)
            waiter.pending.answer(resp)

    def _unpark(self, waiter: FetchWaiter) -> None:
        if waiter.timer is not None:
            waiter.timer.cancel()
        for tp in waiter.partitions:
            ws = self._waiters.get(tp)
            if ws is not None:
                ws.pop(waiter, None)
                if not ws:
                    del self._waiters[tp]

    def close(self, clean: bool = True) -> None:
        self._closed = True
        if self._syncer is not None:
            self._syncer.stop()     # after the sync in flight, if any
        self.logs.close_all(clean=clean)


def _flush_failed(plog, error) -> None:
    """A flush that failed: a log closed by its partition's deletion is no fault (its waiters are
    answered as for a partition no longer hosted), anything else is logged as the error it is."""
    if isinstance(error, LogClosedError):
        log.debug("flush of %s skipped: %s", getattr(plog, "directory", plog), error)
    else:
        log.error("flush of %s failed: %s", getattr(plog, "directory", plog), error)
