"""A broker's membership of the cluster (Kafka 3.9's KafkaServer in ZooKeeper mode): the session,
the cluster id, the broker's registration, the controller elector, the metadata cache kept from
ZooKeeper watches, and the admin writes of CreateTopics / DeleteTopics / CreatePartitions
(Kafka's AdminZkClient, which brokers run themselves in ZooKeeper mode).

How a broker learns partition states: it watches them in ZooKeeper (every state znode of every
topic, the broker ids, /controller, the topics) instead of waiting for the controller's
LeaderAndIsr / UpdateMetadata / StopReplica requests; docs/cluster.md gives the reasons. Each
watch event is decoded on kazoo's thread and applied on the broker's event loop, in order:
the metadata cache is updated, and the partitions this broker hosts are handed to
``broker.replica_manager.apply_partition_states`` (a deleted topic's to ``stop_replicas``).

The seam for replication: ``alter_isr`` (a leader's conditional ISR update of the state znode)
and ``broker_endpoint`` (a broker's address on the inter-broker listener) are set on the
replica manager at start."""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import os
import time

from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import KazooState

from ..protocol.errors import ErrorCode, KafkaError
from . import zk_data as zd
from .controller import ControllerConfig, KafkaController
from .errors import ClusterStartError
from .metadata_cache import MetadataCache
from .replica_placement import assign_replicas_to_brokers
from .zk_client import KafkaZkClient

log = logging.getLogger("kgroup.cluster")

KAFKA_INTERNAL_RF_DEFAULT = 3       # offsets.topic / transaction.state.log replication factor in Kafka
CONTROLLED_SHUTDOWN_TIMEOUT_S = 30.0


def _read_meta_cluster_id(data_dir: str) -> str | None:
    path = os.path.join(data_dir, "meta.properties")
    try:
        for line in open(path):
            if line.startswith("cluster.id="):
                return line.strip().split("=", 1)[1]
    except OSError:
        return None
    return None


class ZkBroker:
    def __init__(self, broker, data_dir: str):
        from ..broker.metadata import new_uuid, uuid_to_str
        self.broker = broker
        config = broker.config
        self.config = config
        self.broker_id = config.node_id
        self.zk = KafkaZkClient(config["zookeeper.connect"], config["zookeeper.session.timeout.ms"],
                                config["zookeeper.connection.timeout.ms"])
        try:
            self.zk.start()
        except Exception as e:      # kazoo's timeout: Kafka's ZooKeeperClientTimeoutException
            self.zk.close()
            raise ClusterStartError(f"Timed out waiting for connection to ZooKeeper at {config['zookeeper.connect']} "
                                    f"({type(e).__name__}: {e})") from None
        self.zk.create_top_level_paths()
        proposed = _read_meta_cluster_id(data_dir) or uuid_to_str(new_uuid())
        self.cluster_id = self.zk.get_or_create_cluster_id(proposed)
        self.cache = MetadataCache()
        self.broker_epoch = -1
        self.loop: asyncio.AbstractEventLoop | None = None
        self._io = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"kgroup-zk-{self.broker_id}")
        self._watched_topics: set[str] = set()
        self._watched_states: set[tuple[str, int]] = set()
        self._watched_configs: set[str] = set()
        # ZooKeeper writes the request being handled made: (the part of the response each is for, its future)
        self._unanswered_writes: list = []
        self._write_owner = None
        self._waiters: list = []        # (predicate, future)
        self._closed = False
        self._registered = False
        self._topics_synced = False
        self.controller = KafkaController(self.zk, ControllerConfig(
            self.broker_id, unclean_leader_election=config["unclean.leader.election.enable"],
            auto_leader_rebalance=config["auto.leader.rebalance.enable"],
            imbalance_check_interval_s=float(config["leader.imbalance.check.interval.seconds"]),
            imbalance_percentage=config["leader.imbalance.per.broker.percentage"]))

    # -- lifecycle ----------------------------------------------------------------------------------
    def attach_settings(self) -> None:
        """ACLs, SCRAM credentials, dynamic broker / group / client-metrics configs and features
        from ZooKeeper, kept there from now on (zk_config_store.py)."""
        from .zk_config_store import WRITE_RETRY_S, ClusterSettings
        retry_ms = self.config["zookeeper.connection.timeout.ms"]
        self.settings = ClusterSettings(self, self.broker,
                                        WRITE_RETRY_S if retry_ms is None else retry_ms / 1000.0)
        self.settings.attach()

    def endpoints(self) -> list[zd.EndPoint]:
        b = self.broker
        out = []
        for spec in b.security.specs:
            host, port = b.config.advertised(b.bound_port, spec.name, b.bound_ports)
            out.append(zd.EndPoint(spec.name, host, port, spec.security_protocol))
        return out

    def metadata_leader(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(leader, leader epoch) of any partition as this broker's metadata cache knows it, for
        KIP-951 hints and for transactions' inter-broker requests (markers, verification)."""
        st = self.cache.states.get((topic, partition))
        if st is None or self.cache.leader(topic, partition) is None:
            return None
        return st.leader, st.leader_epoch

    def inter_broker_listener(self) -> str:
        return self.config.inter_broker_listener()[0]

    async def start(self) -> None:
        """After the listeners are bound: register, watch, run the controller elector."""
        self.loop = asyncio.get_running_loop()
        rm = self.broker.replica_manager
        rm.alter_isr = self.alter_isr
        rm.broker_endpoint = self.broker_endpoint
        rm.metadata_leader = self.metadata_leader
        await self._in_io(self._register)
        self.zk.zk.add_listener(self._on_session_state)
        await self._in_io(self._install_watches)
        await self._in_io(self.settings.start)
        self.controller.start()
        await self.wait_for(lambda: self._topics_synced and self.broker_id in self.cache.brokers, 30.0)

    def _register(self) -> None:
        data = zd.encode_broker(self.endpoints(), self.config["broker.rack"])
        # a registration of this id left by a killed process disappears when its session expires
        wait = self.config["zookeeper.session.timeout.ms"] / 1000.0 * 2 + 5
        try:
            self.broker_epoch = self.zk.register_broker(self.broker_id, data, wait)
        except RuntimeError as e:
            raise ClusterStartError(str(e)) from None
        self._registered = True
        log.info("broker %d registered in ZooKeeper at %s (broker epoch %d, cluster id %s)", self.broker_id,
                 zd.broker_path(self.broker_id), self.broker_epoch, self.cluster_id)

    def _on_session_state(self, state) -> None:
        # A new session after the old one expired: its ephemeral registration is gone (Kafka's
        # SessionExpirationHandler re-registers the broker).
        if self._closed:
            return
        if state == KazooState.LOST:
            self._registered = False
            log.warning("broker %d: ZooKeeper session expired", self.broker_id)
            self._post(self.broker.replica_manager.resign_leaderships)
        elif state == KazooState.CONNECTED and not self._registered and not self._closed:
            self.zk.zk.handler.spawn(self._reregister)

    def _reregister(self) -> None:
        try:
            self._register()
        except Exception:
            log.exception("broker %d: re-registration failed", self.broker_id)

    async def controlled_shutdown(self, timeout: float = CONTROLLED_SHUTDOWN_TIMEOUT_S) -> None:
        """Ask the controller to move this broker's leaderships away, and wait for it
        (KafkaServer.controlledShutdown; the request is a znode here, docs/cluster.md)."""
        if self._closed or not self._registered or not self.config["controlled.shutdown.enable"]:
            return
        path = zd.controlled_shutdown_path(self.broker_id)

        def request():
            try:
                self.zk.zk.create(path, zd.encode_controlled_shutdown(self.broker_epoch), ephemeral=True,
                                  makepath=True)
            except NodeExistsError:
                self.zk.zk.set(path, zd.encode_controlled_shutdown(self.broker_epoch))
        started = time.monotonic()
        try:
            await self._in_io(request)
        except Exception:
            log.exception("controlled shutdown request failed")
            return
        done = False
        req: dict = {}
        while time.monotonic() - started < timeout:
            try:
                data, _ = await self._in_io(self.zk.zk.get, path)
            except NoNodeError:
                break
            req = zd.decode_controlled_shutdown(data)
            if req.get("done"):
                done = True
                break
            await asyncio.sleep(0.05)
        # the leaderships that could move (another live replica in the ISR) moved in ZooKeeper;
        # wait until this broker saw them go too. Those that could not (this broker the ISR's
        # only member) stay until it stops, as Kafka's partitionsRemaining.
        await self.wait_for(lambda: not any(
            st.leader == self.broker_id and any(r != self.broker_id and r in self.cache.brokers for r in st.isr)
            for st in self.cache.states.values()), max(0.5, timeout - (time.monotonic() - started)))
        log.info("broker %d: controlled shutdown %s in %.0f ms (%s partition(s) it alone could lead)", self.broker_id,
                 "completed" if done else "gave up", (time.monotonic() - started) * 1000,
                 req.get("partitions_remaining", "?") if done else "?")

    async def close(self) -> None:
        self._closed = True
        self.controller.close()
        await self._in_io(self.zk.close)
        self._io.shutdown(wait=False)

    # -- helpers ------------------------------------------------------------------------------------
    def _in_io(self, fn, *args):
        return asyncio.get_running_loop().run_in_executor(self._io, fn, *args)

    def _post(self, fn, *args) -> None:
        loop = self.loop
        if loop is not None and not loop.is_closed() and not self._closed:
            loop.call_soon_threadsafe(self._apply, fn, args)

    def _apply(self, fn, args) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("applying cluster metadata failed")
        for pred, fut in list(self._waiters):
            if fut.done():
                self._waiters.remove((pred, fut))
            elif pred():
                self._waiters.remove((pred, fut))
                fut.set_result(True)

    async def wait_for(self, predicate, timeout: float) -> bool:
        """Wait until ``predicate()`` holds for the metadata cache (False on timeout)."""
        if predicate():
            return True
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((predicate, fut))
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            return False
        finally:
            if (predicate, fut) in self._waiters:
                self._waiters.remove((predicate, fut))

    # -- watches (kazoo's callback thread) -------------------------------------------------------------
    def _install_watches(self) -> None:
        zk = self.zk.zk
        zk.ChildrenWatch(zd.BROKER_IDS, self._on_broker_ids)
        zk.DataWatch(zd.CONTROLLER, self._on_controller)
        zk.ChildrenWatch(zd.TOPICS, self._on_topics)

    def _on_broker_ids(self, children):
        if self._closed:
            return False
        self._post(self._set_brokers, self.zk.get_live_brokers())
        return None

    def _on_controller(self, data, stat):
        if self._closed:
            return False
        self._post(self._set_controller, zd.decode_controller(data) if data else None)
        return None

    def _on_topics(self, children):
        if self._closed:
            return False
        for t in children:
            if t not in self._watched_topics:
                self._watched_topics.add(t)
                self.zk.zk.DataWatch(zd.topic_path(t), functools.partial(self._on_topic, t))
        self._post(self._sync_topic_list, set(children))
        return None

    def _on_topic(self, topic, data, stat):
        if self._closed:
            return False
        if data is None:
            self._watched_topics.discard(topic)
            self._post(self._remove_topic, topic)
            return False
        assignment, topic_id = zd.decode_topic(data)
        configs = self.zk.get_topic_config(topic)
        self._post(self._set_topic, topic, topic_id, assignment, configs)
        if topic not in self._watched_configs:
            self._watched_configs.add(topic)
            self.zk.zk.DataWatch(zd.topic_config_path(topic), functools.partial(self._on_topic_config, topic))
        for p in assignment:
            tp = (topic, p)
            if tp not in self._watched_states:
                self._watched_states.add(tp)
                self.zk.zk.DataWatch(zd.partition_state_path(topic, p), self._state_watcher(tp))
        return None

    def _on_topic_config(self, topic, data, stat):
        if self._closed or topic not in self._watched_topics:
            self._watched_configs.discard(topic)
            return False
        if data is not None:
            self._post(self._set_topic_configs, topic, zd.decode_topic_config(data))
        return None

    def _state_watcher(self, tp):
        seen = [False]

        def fn(data, stat):
            if self._closed:
                return False
            if data is None:
                if seen[0]:         # deleted (its topic is going): stop; a new topic watches anew
                    self._watched_states.discard(tp)
                    return False
                return None         # not created yet: the controller writes it next
            seen[0] = True
            self._post(self._set_state, tp, zd.decode_partition_state(data, stat.version))
            return None
        return fn

    # -- applying on the event loop -------------------------------------------------------------------
    def _set_brokers(self, brokers) -> None:
        gone = set(self.cache.brokers) - set(brokers)
        joined = set(brokers) - set(self.cache.brokers)
        self.cache.brokers = dict(brokers)
        self.broker.metadata.max_replication_factor = max(1, len(brokers))
        if gone or joined:
            log.info("broker %d: live brokers %s", self.broker_id, sorted(brokers))

    def _set_controller(self, controller_id) -> None:
        self.cache.controller_id = controller_id

    def _sync_topic_list(self, names: set) -> None:
        """A topic this broker has locally but ZooKeeper no longer has was deleted while it
        was away: its replicas go."""
        for name in list(self.broker.metadata.topics):
            if name not in names and name not in self.cache.topics:
                self._forget_topic(name)
        self._topics_synced = True

    def _set_topic(self, name, topic_id, assignment, configs) -> None:
        md = self.broker.metadata
        local = md.get(name)
        if local is not None and topic_id is not None and local.topic_id != topic_id:
            self._forget_topic(name)            # deleted and created again while away
            local = None
        self.cache.set_topic(name, topic_id, assignment)
        self.cache.topic_configs[name] = dict(configs)
        if local is None:
            md.create_topic(name, len(assignment), configs, topic_id=topic_id)
        else:
            if local.num_partitions != len(assignment):
                md.set_partition_count(name, len(assignment))
            if local.configs != configs:
                md.set_topic_configs(name, configs)
                self.broker.data_path.logs.update_topic_config(name, configs)
        self._stop_removed_replicas(name, assignment)
        self.broker.group_coordinator.on_topics_changed()
        self.broker.share_coordinator.on_topics_changed()

    def _stop_removed_replicas(self, name, assignment) -> None:
        """A reassignment changed the replicas of a partition: one this broker hosts learns its
        new replica set; one it is newly a replica of starts from its known state (Kafka's
        controller sends both a LeaderAndIsr); one it was taken out of (or was while it was away)
        stops and its log is deleted (the StopReplica with deletion Kafka's controller sends)."""
        rm, logs = self.broker.replica_manager, self.broker.data_path.logs
        for p, replicas in assignment.items():
            if self.broker_id not in replicas:
                continue
            if (name, p) in rm.partitions:
                rm.update_replicas((name, p), replicas)
            else:       # newly a replica: its state may have come first (watches re-read after a new session)
                ps = self.cache.partition_state(name, p)
                if ps is not None:
                    rm.apply_partition_states([ps])
        gone = [(name, p) for p, replicas in assignment.items() if self.broker_id not in replicas
                and ((name, p) in rm.partitions or logs.get(name, p) is not None)]
        if gone:
            log.info("broker %d: no longer a replica of %s: deleting", self.broker_id,
                     ", ".join(f"{t}-{p}" for t, p in gone))
            rm.stop_replicas(gone, delete=True)

    def _set_topic_configs(self, name, configs) -> None:
        """A topic's configs changed (AdminZkClient.changeTopicConfig on some broker)."""
        local = self.broker.metadata.get(name)
        if name not in self.cache.topics or local is None:
            return
        self.cache.topic_configs[name] = dict(configs)
        if local.configs != configs:
            self.broker.metadata.set_topic_configs(name, configs)
            self.broker.data_path.logs.update_topic_config(name, configs)

    def publish_topic_config(self, name: str, configs: dict[str, str]) -> None:
        """This broker changed a topic's configs: written to /config/topics/<name> with a change
        notification (in the background; the other brokers apply it from their watch)."""
        self.add_write(self._io.submit(self.zk.set_topic_config, name, dict(configs)))

    def add_write(self, future: concurrent.futures.Future) -> None:
        """A ZooKeeper write the request being handled made, for the part of its response
        ``writes_for`` names (None: the whole response)."""
        self._unanswered_writes.append((self._write_owner, future))

    @contextlib.contextmanager
    def writes_for(self, owner):
        """The writes made inside are for ``owner`` (a resource's result in the response)."""
        outer, self._write_owner = self._write_owner, owner
        try:
            yield
        finally:
            self._write_owner = outer

    def after_writes(self, resp, failed=None):
        """``resp`` once the ZooKeeper writes its request made are done (a PendingResponse), or
        at once when it made none. A write that failed (ZooKeeper still unreachable when its
        retries ran out) is answered as Kafka answers the ZooKeeper exception:
        ``failed([(owner, exception), ...])`` sets the errors in ``resp`` (each owner as given to
        ``writes_for``; None for the whole response)."""
        writes, self._unanswered_writes = self._unanswered_writes, []
        if not writes:
            return resp

        async def wait():
            errors: list = []
            for owner, w in writes:
                try:
                    await asyncio.wrap_future(w)
                except Exception as e:      # noqa: BLE001 - answered in the response
                    if failed is None:
                        raise
                    errors.append((owner, e))
            if errors:
                failed(errors)
            return resp
        return self.answer_later(wait())

    def _set_state(self, tp, state) -> None:
        old = self.cache.states.get(tp)
        if old is not None and old.zk_version >= state.zk_version and old.leader_epoch >= state.leader_epoch:
            return
        self.cache.states[tp] = state
        ps = self.cache.partition_state(*tp)
        if ps is not None and self.broker_id in ps.replicas:
            self.broker.replica_manager.apply_partition_states([ps])

    def _remove_topic(self, name) -> None:
        if name in self.cache.topics:
            self._forget_topic(name)

    def _forget_topic(self, name) -> None:
        t = self.cache.topics.get(name)
        local = self.broker.metadata.get(name)
        count = max(len(t[1]) if t else 0, local.num_partitions if local else 0)
        self.cache.remove_topic(name)
        self.broker.replica_manager.stop_replicas([(name, p) for p in range(count)], delete=True)
        if local is not None:
            self.broker.delete_topic(name)

    # -- the seam for replication ---------------------------------------------------------------------
    def broker_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        return self.cache.endpoint(broker_id, self.inter_broker_listener())

    async def alter_isr(self, topic: str, partition: int, leader_epoch: int, new_isr, partition_epoch: int) -> int | None:
        """A leader's ISR change: the state znode rewritten with ``new_isr`` if it is still at
        ``partition_epoch`` (and this broker still leads at ``leader_epoch``); the new partition
        epoch, or None when stale (the caller waits for the new state)."""
        st = self.cache.states.get((topic, partition))
        if st is None or st.leader != self.broker_id or st.leader_epoch != leader_epoch:
            return None
        new = zd.LeaderAndIsr(self.broker_id, leader_epoch, tuple(new_isr), st.controller_epoch)
        return await self._in_io(self.zk.conditional_update_partition_state, topic, partition, new, partition_epoch)

    # -- admin (AdminZkClient, run by the broker that got the request) -----------------------------------
    def internal_replication_factor(self, key: str) -> int:
        """offsets.topic.replication.factor / transaction.state.log.replication.factor (Kafka's
        default 3 unless set), capped by the live brokers when the topic is created."""
        rf = self.config[key] if key in self.config.explicit else KAFKA_INTERNAL_RF_DEFAULT
        return max(1, min(rf, len(self.cache.brokers)))

    def place(self, num_partitions: int, replication_factor: int, start_partition: int = -1,
              fixed_start_index: int = -1) -> dict[int, list[int]]:
        return assign_replicas_to_brokers(self.cache.racks(), num_partitions, replication_factor,
                                          fixed_start_index, start_partition)

    def check_manual_assignment(self, assignment: dict[int, list[int]]) -> None:
        live = set(self.cache.brokers)
        for p, replicas in assignment.items():
            if not replicas or len(set(replicas)) != len(replicas):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid replica assignment for partition {p}")
            unknown = sorted(set(replicas) - live)
            if unknown:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"The manual partition assignment includes broker(s) that are not registered: {unknown}")

    async def create_topic(self, name: str, assignment: dict[int, list[int]], configs: dict[str, str],
                           timeout_s: float) -> bytes:
        """Write the topic (config, then assignment) and wait until this broker's cache has a
        leader for every partition (Kafka's DelayedCreatePartitions). Returns the topic id."""
        from ..broker.metadata import new_uuid
        topic_id = new_uuid()
        try:
            await self._in_io(self.zk.create_topic, name, assignment, topic_id, configs)
        except NodeExistsError:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
        ok = await self.wait_for(lambda: self.cache.topic_id(name) == topic_id and self.cache.is_ready(name)
                                 and all(p.leader >= 0 for p in self.cache.partitions(name)), timeout_s)
        if not ok:
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"Topic '{name}' was created but its partitions "
                             "have no leader yet.")
        return topic_id

    def create_internal_topic(self, name: str, num_partitions: int, configs: dict[str, str], rf_key: str) -> None:
        """Create an internal topic in the background (FindCoordinator's first use); the caller
        answers COORDINATOR_NOT_AVAILABLE meanwhile, as Kafka does."""
        if name in self.cache.topics or not self.cache.brokers:
            return
        rf = self.internal_replication_factor(rf_key)
        assignment = self.place(num_partitions, rf)
        from ..broker.metadata import new_uuid

        def write():
            try:
                self.zk.create_topic(name, assignment, new_uuid(), configs)
                log.info("created internal topic %s with %d partitions, replication factor %d", name,
                         num_partitions, rf)
            except NodeExistsError:
                pass
        self._io.submit(write)

    def create_topic_in_background(self, name: str, num_partitions: int, rf: int, configs: dict[str, str]) -> None:
        """Metadata's auto-creation: written now, answered LEADER_NOT_AVAILABLE meanwhile."""
        assignment = self.place(num_partitions, rf)
        from ..broker.metadata import new_uuid

        def write():
            try:
                self.zk.create_topic(name, assignment, new_uuid(), configs)
            except NodeExistsError:
                pass
        self._io.submit(write)

    async def delete_topic(self, name: str, timeout_s: float) -> None:
        await self._in_io(self.zk.mark_topic_for_deletion, name)
        if not await self.wait_for(lambda: name not in self.cache.topics, timeout_s):
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"Topic '{name}' is marked for deletion but not deleted yet.")

    async def create_partitions(self, name: str, count: int, assignments, validate_only: bool,
                                timeout_s: float) -> None:
        """AdminZkClient.addPartitions: the new partitions placed after the existing ones
        (starting at partition 0's first replica), written conditionally on the topic znode."""
        got = (await self._in_io(self.zk.get_topics_full, [name])).get(name)
        if got is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        existing, topic_id, adding, removing, version = got
        current = len(existing)
        if count < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        rf = len(existing.get(0, ()))
        if assignments:
            if len(assignments) != count - current:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Increasing the number of partitions by {count - current} but "
                                 f"{len(assignments)} assignments provided.")
            new = {current + i: list(a.broker_ids) for i, a in enumerate(assignments)}
            self.check_manual_assignment(new)
        else:
            brokers = sorted(self.cache.brokers)
            if rf > len(brokers):
                raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"Replication factor: {rf} larger than available brokers: {len(brokers)}.")
            first = existing[0][0] if existing.get(0) else brokers[0]
            start = max(0, next((i for i, b in enumerate(brokers) if b >= first), 0))
            new = self.place(count - current, rf, start_partition=current, fixed_start_index=start)
        if validate_only:
            return
        full = {p: list(r) for p, r in existing.items()} | new
        try:
            await self._in_io(self.zk.set_topic_assignment, name, full, topic_id, version, adding, removing)
        except Exception as e:
            raise KafkaError(ErrorCode.REASSIGNMENT_IN_PROGRESS if "BadVersion" in type(e).__name__
                             else ErrorCode.UNKNOWN_SERVER_ERROR, f"Cannot add partitions to {name}: {e}") from None
        if not await self.wait_for(lambda: len(self.cache.topics.get(name, (None, {}))[1]) == count
                                   and self.cache.is_ready(name), timeout_s):
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"Partitions of '{name}' added but not led yet.")

    # -- answering a request once ZooKeeper has ---------------------------------------------------------
    def answer_later(self, coro):
        """Run ``coro`` on the event loop; its result is the response (a PendingResponse)."""
        from ..broker.pending import PendingResponse
        pending = PendingResponse()

        def done(task):
            if task.cancelled():
                pending.fail(asyncio.CancelledError())
            elif task.exception() is not None:
                pending.fail(task.exception())
            else:
                pending.answer(task.result())
        asyncio.get_running_loop().create_task(coro).add_done_callback(done)
        return pending
