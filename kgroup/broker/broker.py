"""The broker: configuration, cluster metadata, the logs, the group and transaction
coordinators, plus the asyncio server around them.

``Broker.start()`` binds the listener; ``Broker.stop()`` shuts down the way Kafka does on SIGTERM:
stop accepting, let in-flight requests finish (bounded), flush and close the logs.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import logging
import os
import shutil
import time

from ..clock import BrokerClock
from ..protocol.records import CRC32C_IMPLEMENTATION, crc32c_is_fast
from ..protocol.errors import ErrorCode, KafkaError
from ..storage.cleaner import build_cleaned
from ..storage.manager import prepare_partition_files, write_checkpoint_files
from .config import BrokerConfig
from .data_path import DataPath
from .ops import attach_operations
from .group_runtime import GroupRuntime
from .connections import ConnectionQuotas, log_files_budget, raise_nofile_limit
from .log_dir_failure import LogDirFailure, is_io_error
from .metadata import OFFSETS_TOPIC, TopicRegistry, Topic
from .pending import PendingResponse
from .replica_manager import ReplicaManager
from .security_setup import BrokerSecurity
from .config_entities import ConfigEntities
from .server import RECEIVE_BUFFER_SIZE, KafkaConnection, Listener
from .transaction_runtime import TransactionRuntime
from .share_coordinator_runtime import ShareCoordinatorRuntime
from .share_partition_manager import SharePartitionManager

log = logging.getLogger("kgroup.broker")
GC_YOUNG_THRESHOLD = 50_000     # allocations between young collections (CPython's default: 700)
SLICE_S = 0.005                 # run_in_slices: work at most this long before serving others
CREATE_CHUNK = 128              # partitions whose files the files thread creates at a time


class Broker:
    def __init__(self, config: BrokerConfig):
        if not crc32c_is_fast():
            raise RuntimeError("no native CRC-32C: the crc32c package is absent and crcmod's C extension is "
                               "not in use (only its pure-Python fallback loaded); install crc32c, or "
                               "reinstall crcmod with a C compiler and Python headers available")
        self.config = config
        self.data_dir = os.path.abspath(config.log_dir)
        # Cluster mode (zookeeper.connect): the cluster's metadata is in ZooKeeper
        # (kgroup/cluster/, docs/cluster.md); without it this broker is a single node.
        self.cluster = None
        if config["zookeeper.connect"]:
            try:
                from ..cluster.zk_broker import ZkBroker
            except ImportError as e:
                from ..cluster.errors import ClusterStartError
                raise ClusterStartError(f"zookeeper.connect needs kazoo ({e}): pip install 'kgroup[cluster]'") from None
            os.makedirs(self.data_dir, exist_ok=True)
            self.cluster = ZkBroker(self, self.data_dir)
        self.metadata = TopicRegistry(self.data_dir, config,
                                      cluster_id=self.cluster.cluster_id if self.cluster is not None else None)
        config.set_dynamic(self.metadata.broker_configs.get(str(config.node_id), {}),   # AlterConfigs'
                           self.metadata.broker_configs.get("", {}))
        # The broker's clock (time travel moves it forward: test_control.py); the logs and the
        # coordinator runtimes read it, never time.time directly.
        self.clock = BrokerClock()
        self.data_path = DataPath(config, self.data_dir,
                                  {t.name: t.configs for t in self.metadata.topics.values()},
                                  max_open_files=log_files_budget(raise_nofile_limit()), clock=self.clock.now_ms)
        if self.cluster is not None:    # producer ids unique across the brokers (/latest_producer_id_block)
            from ..cluster.producer_ids import ZkProducerIdManager
            self.data_path.producer_ids = ZkProducerIdManager(self.cluster.zk, config.node_id)
        for topic in self.metadata.topics.values():  # a crash between the two writes leaves none missing
            if self.cluster is None:    # in a cluster, the partitions this broker hosts: replica_manager
                self.data_path.create_partitions(topic.name, topic.num_partitions, topic.configs)
            else:
                self.data_path.logs.update_topic_config(topic.name, topic.configs)
        for name, partition in self.data_path.logs.topic_partitions():
            if name not in self.metadata.topics:
                # A creation cut short by a crash (its topic is saved only after its partitions
                # exist, and answered after that): never acknowledged, so removed, as Kafka
                # removes the stray logs of topics its metadata does not have.
                log.warning("deleting %s-%d: its topic was never created (a creation cut short)", name, partition)
                self.data_path.logs.delete_partition(name, partition)
        # An I/O error on the log directory takes it offline and stops the broker (Kafka's
        # LogDirFailureChannel); the CLI sets log_dir_failure.on_offline.
        self.log_dir_failure = LogDirFailure(self.data_dir, self.data_path.logs)
        self.data_path.on_io_error = self.log_dir_failure.failed
        # Listeners' TLS and SASL, SCRAM credentials, the authorizer (None: every request allowed).
        self.security = BrokerSecurity(config, self.data_dir)
        self.authorizer = self.security.authorizer
        # Dynamic broker configs, group configs, client-metrics subscriptions (config_entities.py);
        # in a cluster these, the ACLs, SCRAM credentials and features are ZooKeeper's.
        self.config_entities = ConfigEntities(self)
        if self.cluster is not None:
            self.cluster.attach_settings()
        # replication (cluster mode only: apply_partition_states makes partitions led or followed)
        self.replica_manager = ReplicaManager(self)
        self.group_coordinator = GroupRuntime(self)
        self.transaction_coordinator = TransactionRuntime(self)
        # share groups (KIP-932): the share coordinator (__share_group_state) and the share-partitions
        self.share_coordinator = ShareCoordinatorRuntime(self)
        self.share_partitions = SharePartitionManager(self)
        # Fault injection, metrics, rebalance timelines (ops.py): self.faults, .metrics,
        # .timelines, each None unless configured, and .request_hook (None when all are off).
        attach_operations(self)
        self.http = None            # the metrics/console/admin HTTP listener (http.py), once started
        self.connections: set[KafkaConnection] = set()
        self.quotas = ConnectionQuotas(config)     # connection limits, idle expiry, request memory
        # The one receive buffer every connection reads into (server.py); a view made once.
        self.receive_buffer_bytes = bytearray(RECEIVE_BUFFER_SIZE)
        self.receive_buffer = memoryview(self.receive_buffer_bytes)
        self._idle_reaper: asyncio.TimerHandle | None = None
        self.server: Listener | None = None        # the first listener
        self.listeners: list[Listener] = []
        self.bound_port: int | None = None          # the first listener's port
        self.bound_ports: dict[str, int] = {}       # listener name -> port bound
        self.loop: asyncio.AbstractEventLoop | None = None
        self._housekeeping: asyncio.Task | None = None
        self._cleaner: asyncio.Task | None = None
        self._in_slices: set = set()    # generators run_in_slices is driving (closed at stop)
        self._files: concurrent.futures.ThreadPoolExecutor | None = None   # creates partition files
        self._cleaner_pool: concurrent.futures.ThreadPoolExecutor | None = None   # builds cleaned segments

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        if self.config.not_applied:
            log.info("Kafka configs accepted but not applied on this single node: %s",
                     ", ".join(sorted(self.config.not_applied)))
        loop = self.loop = asyncio.get_running_loop()
        self._housekeeping = loop.create_task(self._housekeeping_loop())
        self._cleaner = loop.create_task(self._cleaner_loop())
        if self.cluster is None:    # in a cluster, a coordinator partition loads when led here
            self.group_coordinator.start()
            self.transaction_coordinator.start()
            self.share_coordinator.start()
        if self.timelines is not None:
            self.timelines.start()
        # Everything allocated so far (codec classes, metadata, loaded logs) lives for the whole
        # run: keep it out of the garbage collector's generations so each collection is cheaper.
        gc.freeze()
        # A burst of pipelined requests keeps tens of thousands of short-lived objects alive
        # until its group commit answers it; at the default threshold (700) the collector would
        # scan them dozens of times per burst (docs/benchmarks.md, "Coordinator", gives the effect).
        gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        self.quotas.start(len(self.data_path.logs.open_files))
        self._schedule_idle_expiry()
        for spec in self.security.specs:
            self.listeners.append(Listener(self, spec.host or "0.0.0.0", spec.port,
                                           self.config["socket.listen.backlog.size"], spec=spec))
            self.bound_ports[spec.name] = self.listeners[-1].port
        self.server = self.listeners[0]
        self.bound_port = self.server.port
        host = self.security.specs[0].host
        if self.config["metrics.listener"]:
            from .http import BrokerHttpServer
            self.http = BrokerHttpServer(self, self.config["metrics.listener"])
            self.http.start()
        if self.cluster is not None:
            await self.cluster.start()      # registered, watching, in the controller election
        h, p = self.advertised_listener()
        log.info("kgroup broker %d serving on %s:%d (advertised %s:%d), cluster id %s, data in %s, "
                 "CRC-32C by %s", self.config.node_id, host or "0.0.0.0", self.bound_port, h, p,
                 self.metadata.cluster_id, self.data_dir, CRC32C_IMPLEMENTATION)
        for spec, listener in zip(self.security.specs[1:], self.listeners[1:]):
            log.info("listener %s (%s) serving on %s:%d", spec.name, spec.security_protocol,
                     spec.host or "0.0.0.0", listener.port)

    async def stop(self, timeout: float = 10.0) -> None:
        if self.cluster is not None:
            # KafkaServer.controlledShutdown: leaderships move away while this broker still serves
            self.replica_manager.begin_controlled_shutdown()
            await self.cluster.controlled_shutdown()
        if self.server is not None:
            for listener in self.listeners:
                listener.close()  # stop accepting; open connections finish below
            self.listeners = []
            self.server = None
        if self.http is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.http.close)
            self.http = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while any(not c.idle for c in self.connections) and loop.time() < deadline:
            await asyncio.sleep(0.01)
        for c in list(self.connections):
            c.transport.close()
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            self._cleaner.cancel()
        if self._idle_reaper is not None:
            self._idle_reaper.cancel()
        if self.timelines is not None:
            self.timelines.close()
        if self._files is not None:
            self._files.shutdown(wait=True)     # a checkpoint or partition files being written
            self._files = None
        if self._cleaner_pool is not None:
            self.data_path.logs.abort_cleaning()
            self._cleaner_pool.shutdown(wait=True)   # the clean being built stops at its next batch
            self._cleaner_pool = None
        for steps in list(self._in_slices):
            steps.close()               # a topic creation under way is undone
        self._in_slices.clear()
        await self.replica_manager.close()      # fetchers stop; acks=all waits are answered
        self.group_coordinator.close()
        self.transaction_coordinator.close()
        self.share_partitions.close()
        self.share_coordinator.close()
        # After a log directory failure nothing more is written: the logs close as after a crash.
        self.data_path.close(clean=not self.log_dir_failure.offline)
        if self.cluster is not None:
            await self.cluster.close()      # the session ends: the registration goes
        log.info("kgroup broker %d stopped", self.config.node_id)

    async def _housekeeping_loop(self) -> None:
        """Retention every log.retention.check.interval.ms, producer-id expiry every
        producer.id.expiration.check.interval.ms; flush.ms checks every second
        (Kafka's log.flush.scheduler.interval.ms is also coarse). Compaction is the cleaner's."""
        interval = self.config["log.retention.check.interval.ms"] / 1000.0
        next_retention = self.loop.time() + interval
        producer_interval = self.config["producer.id.expiration.check.interval.ms"] / 1000.0
        next_producer_check = self.loop.time() + producer_interval
        while True:
            await asyncio.sleep(1.0)
            if self.log_dir_failure.offline:
                return
            try:
                logs = self.data_path.logs
                logs.flush_dirty_logs()
                # the checkpoint files that changed, written and fsynced on the files thread
                # (with 10,000 partitions, tens of milliseconds a second, more on a busy disk)
                contents, state = logs.checkpoint_contents()
                if contents:
                    await self.loop.run_in_executor(self._files_thread(), write_checkpoint_files, contents)
                logs.checkpoint_written(contents, state)
                if self.log_dir_failure.offline:
                    return
                if self.loop.time() >= next_retention:
                    next_retention = self.loop.time() + interval
                    self.data_path.logs.delete_old_segments()
                if self.loop.time() >= next_producer_check:
                    next_producer_check = self.loop.time() + producer_interval
                    self.data_path.remove_expired_producers()
            except Exception:
                log.exception("log housekeeping failed")

    async def _cleaner_loop(self) -> None:
        """Kafka's log cleaner thread: clean the filthiest compacted log (dirty ratio at least
        min.cleanable.dirty.ratio, or past max.compaction.lag.ms), again at once while one is
        due, else sleep log.cleaner.backoff.ms. The clean is planned and swapped in here, and
        built (reading, offset map, writing the cleaned segments) on the cleaner thread, so a
        large log never holds the event loop (cleaner.CleanPlan)."""
        logs = self.data_path.logs
        while True:
            cleaned = None
            try:
                plan = logs.plan_clean()
                if plan is not None:
                    try:
                        built = await self.loop.run_in_executor(self._cleaner_thread(), build_cleaned, plan)
                    except asyncio.CancelledError:
                        plan.abort.set()        # shutting down: the builder stops and removes its files
                        raise
                    except Exception as e:      # noqa: BLE001 - finish_clean reports it unless abandoned
                        built = e
                    cleaned = plan.tp
                    logs.finish_clean(plan, built, abandon=self.log_dir_failure.offline)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                cleaned = None
                if is_io_error(e):
                    # Kafka's LogCleaner.cleanLog: an IOException takes the log directory offline
                    self.log_dir_failure.failed(e, "cleaning a compacted log")
                    return
                log.exception("log cleaner failed")
            await asyncio.sleep(0 if cleaned else self.config["log.cleaner.backoff.ms"] / 1000.0)

    def _schedule_idle_expiry(self) -> None:
        # Checked a few times per connections.max.idle.ms (at most every 30 s), so a connection
        # is closed at most ~25% after its idle time is up.
        interval = min(max(self.quotas.idle_ms / 4000.0, 0.05), 30.0)
        self._idle_reaper = self.loop.call_later(interval, self._expire_idle_connections)

    def _expire_idle_connections(self) -> None:
        try:
            self.quotas.expire_idle(list(self.connections), self.loop.time())
        finally:
            self._schedule_idle_expiry()

    def advertised_listener(self, listener_name: str | None = None) -> tuple[str, int]:
        """(host, port) advertised for ``listener_name`` (the listener a request came in on, as
        Kafka answers Metadata/FindCoordinator/DescribeCluster with that listener's endpoints)."""
        return self.config.advertised(self.bound_port, listener_name, self.bound_ports)

    # -- topics ---------------------------------------------------------------------------------
    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str]) -> Topic:
        """Create a topic at once (auto-creation, the internal topics: a few partitions)."""
        steps = self.create_topic_steps(name, num_partitions, replication_factor, configs)
        while True:
            try:
                step = next(steps)
            except StopIteration as done:
                return done.value
            if step is not None:
                step.result()           # file creation on the files thread

    def create_topic_steps(self, name: str, num_partitions: int, replication_factor: int,
                           configs: dict[str, str]):
        """A generator creating a topic one partition log per step; returns the Topic. The name
        is taken from the first step (a second creation gets TOPIC_ALREADY_EXISTS), and the
        topic is saved, and so visible, only once every partition exists: a topic is never
        persisted without its partitions (a creation that fails, e.g. out of disk, or is closed
        at shutdown, is undone, and an error reported). CreateTopics runs it in time slices
        (run_in_slices), so up to 10,000 partitions never hold the event loop."""
        num_partitions, _ = self.metadata.check_create(name, num_partitions, replication_factor, configs)
        logs = self.data_path.logs
        self.metadata.creating.add(name)
        made = 0
        try:
            logs.update_topic_config(name, configs)
            for start in range(0, num_partitions, CREATE_CHUNK):
                chunk = range(start, min(start + CREATE_CHUNK, num_partitions))
                made = chunk.stop       # their directories may exist from here on
                # the files are created on a thread (yielded: run_in_slices waits for it) ...
                prepared = self._files_thread().submit(prepare_partition_files,
                                                       logs.new_partition_directories(name, chunk))
                yield prepared
                prepared.result()       # done by now; raises what the thread met
                for p in chunk:         # ... and opened here, reads only
                    logs.get_or_create(name, p)
                    yield None
            topic = self.metadata.create_topic(name, num_partitions, configs)
        except BaseException as e:      # GeneratorExit too: abandoned at shutdown
            self._undo_partitions(name, made)
            if isinstance(e, Exception):
                log.error("cannot create topic %s with %d partition(s): %s", name, num_partitions, e)
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                 f"Cannot create the partitions of topic {name}: {e}") from None
            raise
        finally:
            self.metadata.creating.discard(name)
        log.info("created topic %s with %d partition(s)", name, num_partitions)
        self.group_coordinator.on_topics_changed()
        self.share_coordinator.on_topics_changed()
        return topic

    def _undo_partitions(self, name: str, count: int) -> None:
        for p in range(count):
            try:
                if not self.data_path.logs.delete_partition(name, p):
                    # made but never opened: only its directory exists
                    shutil.rmtree(os.path.join(self.data_dir, f"{name}-{p}"), ignore_errors=True)
            except Exception:
                pass

    def _cleaner_thread(self) -> concurrent.futures.ThreadPoolExecutor:
        # its own thread, as Kafka's LogCleaner: a long clean must not hold up the files
        # thread's checkpoints and partition creations
        if self._cleaner_pool is None:
            self._cleaner_pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kgroup-cleaner")
        return self._cleaner_pool

    def _files_thread(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._files is None:
            self._files = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kgroup-files")
        return self._files

    def run_in_slices(self, steps):
        """Drive the generator ``steps`` from the event loop, at most SLICE_S at a time (other
        connections are served in between); a step may yield a concurrent future (work on a
        thread), and the generator resumes once it is done. Its return value is the answer:
        returned at once when the first slice finishes it, else given to the PendingResponse
        returned."""
        pending = None
        loop = asyncio.get_running_loop()

        def resume(_future):
            loop.call_soon_threadsafe(run)

        def run():
            nonlocal pending
            if pending is not None and steps not in self._in_slices:
                return None             # closed by stop()
            end = time.monotonic() + SLICE_S
            waiting = None
            try:
                while True:
                    waiting = next(steps)
                    if waiting is not None and not waiting.done():
                        break
                    if time.monotonic() >= end:
                        break
            except StopIteration as done:
                self._in_slices.discard(steps)
                if pending is None:
                    return done.value
                pending.answer(done.value)
                return None
            except Exception as e:
                self._in_slices.discard(steps)
                if pending is None:
                    raise
                pending.fail(e)
                return None
            self._in_slices.add(steps)
            if waiting is not None and not waiting.done():
                waiting.add_done_callback(resume)
            else:
                loop.call_soon(run)
            if pending is None:
                pending = PendingResponse()
                return pending
            return None
        return run()

    def delete_topic(self, name: str) -> Topic:
        topic = self.metadata.delete_topic(name)
        self.data_path.delete_partitions(name, topic.num_partitions)
        if name != OFFSETS_TOPIC and self.metadata.get(OFFSETS_TOPIC) is not None:
            # GroupCoordinatorService.onPartitionsDeleted: every shard tombstones those offsets
            self.group_coordinator.on_partitions_deleted([(name, p) for p in range(topic.num_partitions)])
        log.info("deleted topic %s", name)
        self.group_coordinator.on_topics_changed()
        if self.metadata.get(self.share_coordinator.topic) is not None:
            self.share_coordinator.on_topics_changed([topic.topic_id])
        return topic
