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
        self.brokers[i].call(setup)

    def close(self) -> None:
        for kb in self.brokers.values():
            kb.close()

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
