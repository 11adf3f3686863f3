"""In-process brokers replicating to each other with no ZooKeeper: the test is the controller. It
gives every broker the same topics (same topic ids), hands them PartitionStates through
``apply_partition_states``, answers their ISR changes (``alter_isr``, conditional on the partition
epoch, as the state znode's version) and tells them each other's endpoints (``broker_endpoint``)."""
from __future__ import annotations

import asyncio
import threading
import time

from kgroup.client.connection import BrokerConnection
from kgroup.cluster.partition_state import PartitionState
from kgroup.protocol.records import Record, build_batch
from kgroup.testing import KafkaBroker

FAST = {"replica.fetch.backoff.ms": "50", "replica.fetch.wait.max.ms": "200"}


class Cluster:
    def __init__(self, n: int, overrides=None, racks=None):
        self.brokers: dict[int, KafkaBroker] = {}
        self.down: set[int] = set()         # brokers the controller considers dead
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.lock = threading.Lock()
        for i in range(1, n + 1):
            per = {**FAST, "node.id": str(i), **{k: str(v) for k, v in (overrides or {}).items()}}
            if racks:
                per["broker.rack"] = racks[i - 1]
            self.brokers[i] = KafkaBroker(overrides=per).start()
        for i in self.brokers:
            self.wire(i)

    def wire(self, i: int) -> None:
        def setup(b):
            b.replica_manager.broker_endpoint = self.endpoint
            b.replica_manager.alter_isr = self.alter_isr
            b.replica_manager.metadata_leader = self.metadata_leader
        self.brokers[i].call(setup)

    def close(self) -> None:
        for kb in self.brokers.values():
            if kb.broker is not None:
                _SERVED.pop(id(kb.broker), None)
            kb.close()

    def metadata_leader(self, topic: str, partition: int):
        """The cluster's view of a partition's leader (the metadata cache's, in a ZooKeeper cluster)."""
        with self.lock:
            state = self.states.get((topic, partition))
        return None if state is None else (state.leader, state.leader_epoch)

    def serve_cluster_metadata(self) -> None:
        """Metadata and FindCoordinator answered from this controller's states, as a cluster's
        brokers answer them from their metadata cache: every live broker, each partition's
        leader, replicas and ISR, a coordinator key's partition leader, one cluster id. Real
        clients then find each partition's leader and each coordinator on its broker."""
        _install_cluster_metadata()
        self.cluster_id = self.brokers[min(self.brokers)].call(lambda b: b.metadata.cluster_id)
        for kb in self.brokers.values():
            _SERVED[id(kb.broker)] = self

    def create_internal_topic(self, name: str) -> None:
        """A coordinator topic on every broker with one topic id (num partitions as configured)."""
        ensure = {"__consumer_offsets": lambda b: b.group_coordinator.ensure_offsets_topic(),
                  "__transaction_state": lambda b: b.transaction_coordinator.ensure_topic()}[name]
        for kb in self.brokers.values():
            kb.call(ensure)
        topic_id = self.topic_id(name)
        for kb in list(self.brokers.values())[1:]:
            kb.call(_set_topic_id, name, topic_id)

    # -- the controller's side ------------------------------------------------------------------
    def endpoint(self, broker_id: int):
        kb = self.brokers.get(broker_id)
        if kb is None or broker_id in self.down or not kb.running:
            return None
        rack = kb.overrides.get("broker.rack")
        return ("127.0.0.1", kb.port, rack) if rack else ("127.0.0.1", kb.port)

    async def alter_isr(self, topic, partition, leader_epoch, new_isr, partition_epoch):
        with self.lock:
            state = self.states[(topic, partition)]
            if state.leader_epoch != leader_epoch or state.partition_epoch != partition_epoch:
                return None
            self.states[(topic, partition)] = PartitionState(
                topic, partition, state.topic_id, state.leader, state.leader_epoch, tuple(new_isr),
                state.replicas, state.partition_epoch + 1)
            return state.partition_epoch + 1

    def isr(self, topic: str, partition: int = 0) -> tuple[int, ...]:
        with self.lock:
            return self.states[(topic, partition)].isr

    def create_topic(self, name: str, partitions: int = 1, configs=None) -> bytes:
        """The topic on every broker, with one topic id."""
        first = next(iter(self.brokers.values()))
        topic_id = first.call(lambda b: b.create_topic(name, partitions, 1, dict(configs or {})).topic_id)
        for kb in list(self.brokers.values())[1:]:
            kb.call(_create_with_id, name, partitions, dict(configs or {}), topic_id)
        return topic_id

    def elect(self, topic: str, leader: int, isr, replicas=None, partitions=(0,)) -> None:
        """A new leader epoch for each partition, sent to every live broker."""
        states = []
        with self.lock:
            for p in partitions:
                old = self.states.get((topic, p))
                topic_id = self.topic_id(topic)
                epoch = old.leader_epoch + 1 if old else 0
                pe = old.partition_epoch + 1 if old else 0
                reps = tuple(replicas) if replicas else (old.replicas if old else tuple(sorted(self.brokers)))
                states.append(PartitionState(topic, p, topic_id, leader, epoch, tuple(isr), reps, pe))
                self.states[(topic, p)] = states[-1]
        for i, kb in self.brokers.items():
            if i not in self.down and kb.running:
                kb.call(lambda b: b.replica_manager.apply_partition_states(states))

    def topic_id(self, topic: str) -> bytes:
        return next(kb for kb in self.brokers.values() if kb.running).call(lambda b: b.metadata.get(topic).topic_id)

    # -- looking at brokers ---------------------------------------------------------------------
    def log_bytes(self, i: int, topic: str, partition: int = 0) -> bytes:
        return self.brokers[i].call(
            lambda b: bytes(b.data_path.log(topic, partition).read(
                b.data_path.log(topic, partition).log_start_offset, 1 << 30).records))

    def offsets(self, i: int, topic: str, partition: int = 0) -> tuple[int, int]:
        """(log end offset, high watermark) on broker ``i``."""
        return self.brokers[i].call(lambda b: (b.data_path.log(topic, partition).log_end_offset,
                                               b.data_path.log(topic, partition).high_watermark))

    def wait(self, predicate, timeout: float = 20.0, what: str = "condition"):
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.02)

    def stop_fetching(self, i: int, topic: str, partition: int = 0) -> None:
        self.brokers[i].call(lambda b: b.replica_manager.fetchers.remove_partition((topic, partition)))

    def resume_fetching(self, i: int, topic: str, partition: int = 0) -> None:
        self.brokers[i].call(lambda b: b.replica_manager.fetchers.add_partition(
            b.replica_manager.partitions[(topic, partition)]))


def _set_topic_id(b, name, topic_id):
    reg = b.metadata
    topic = reg.topics[name]
    reg._by_id.pop(topic.topic_id, None)
    topic.topic_id = topic_id
    reg._by_id[topic_id] = topic
    reg._save_topics()


# brokers whose Metadata / FindCoordinator answers come from a Cluster's states: id(broker) -> Cluster
_SERVED: dict[int, Cluster] = {}
_ORIGINAL: dict = {}


def _install_cluster_metadata() -> None:
    from kgroup.broker import handlers
    from kgroup.protocol.api import ApiKey
    if _ORIGINAL:
        return
    for (key, version), handler in list(handlers.HANDLER_BY_KEY_VERSION.items()):
        if key == ApiKey.METADATA:
            wrapped = _metadata_from_cluster
        elif key == ApiKey.FIND_COORDINATOR:
            wrapped = _coordinator_from_cluster
        else:
            continue
        _ORIGINAL[(key, version)] = handler
        handlers.HANDLER_BY_KEY_VERSION[(key, version)] = (
            lambda broker, ctx, req, version, _h=handler, _w=wrapped: _w(_h, broker, ctx, req, version))


def _metadata_from_cluster(original, broker, ctx, req, version):
    resp = original(broker, ctx, req, version)
    cluster = _SERVED.get(id(broker))
    if cluster is None:
        return resp
    B = type(resp.brokers[0])
    resp.brokers = [B(node_id=i, host=ep[0], port=ep[1], rack=ep[2] if len(ep) > 2 else None)
                    for i in sorted(cluster.brokers) if (ep := cluster.endpoint(i)) is not None]
    resp.controller_id = min(cluster.brokers)
    resp.cluster_id = cluster.cluster_id
    with cluster.lock:
        for t in resp.topics:
            for p in t.partitions:
                state = cluster.states.get((t.name, p.partition_index))
                if state is not None:
                    p.leader_id, p.leader_epoch = state.leader, state.leader_epoch
                    p.replica_nodes, p.isr_nodes = list(state.replicas), list(state.isr)
    return resp


def _coordinator_from_cluster(original, broker, ctx, req, version):
    resp = original(broker, ctx, req, version)
    cluster = _SERVED.get(id(broker))
    if cluster is None or req.key_type not in (0, 1):
        return resp
    runtime = broker.group_coordinator if req.key_type == 0 else broker.transaction_coordinator
    topic = "__consumer_offsets" if req.key_type == 0 else "__transaction_state"

    def place(entry, key):
        found = cluster.metadata_leader(topic, runtime.shard_for(key))
        ep = cluster.endpoint(found[0]) if found is not None else None
        if ep is not None and entry.error_code == 0:
            entry.node_id, entry.host, entry.port = found[0], ep[0], ep[1]
    if version >= 4:
        for c in resp.coordinators:
            place(c, c.key)
    else:
        place(resp, req.key)
    return resp


def _create_with_id(b, name, partitions, configs, topic_id):
    b.create_topic(name, partitions, 1, configs)
    reg = b.metadata
    topic = reg.topics[name]
    reg._by_id.pop(topic.topic_id, None)
    topic.topic_id = topic_id
    reg._by_id[topic_id] = topic
    reg._save_topics()


def request(kb: KafkaBroker, body, version: int | None = None):
    """One request to a broker over a fresh connection; its response."""
    async def run():
        conn = await BrokerConnection("127.0.0.1", kb.port, node_id=0, client_id="replication-test").connect()
        try:
            return await conn.send(body, version=version)
        finally:
            conn.close()
    return asyncio.run(run())


def batch(values, **kw) -> bytes:
    return build_batch([Record(value=v if isinstance(v, bytes) else str(v).encode()) for v in values], **kw)
