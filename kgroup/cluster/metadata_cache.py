"""The broker's view of the cluster (Kafka's ZkMetadataCache): live brokers with their endpoints
and racks, the controller, every topic's id and assignment, every partition's leader, leader
epoch and ISR as its state znode says. Kept up to date from ZooKeeper watches (zk_broker.py) on
the broker's event loop; read by Metadata, DescribeCluster, FindCoordinator and the admin APIs.
Pure data, no I/O."""
from __future__ import annotations

from dataclasses import dataclass

from .partition_state import PartitionState
from .zk_data import NO_LEADER, BrokerRegistration, LeaderAndIsr


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int             # -1 when the leader is not live (LEADER_NOT_AVAILABLE)
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


class MetadataCache:
    def __init__(self):
        self.brokers: dict[int, BrokerRegistration] = {}
        self.controller_id: int | None = None
        self.topics: dict[str, tuple[bytes | None, dict[int, tuple[int, ...]]]] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.states: dict[tuple[str, int], LeaderAndIsr] = {}
        self._by_id: dict[bytes, str] = {}

    # -- updates ------------------------------------------------------------------------------------
    def set_topic(self, name: str, topic_id: bytes | None, assignment: dict[int, tuple[int, ...]]) -> None:
        old = self.topics.get(name)
        if old is not None and old[0] is not None:
            self._by_id.pop(old[0], None)
        self.topics[name] = (topic_id, dict(assignment))
        if topic_id is not None:
            self._by_id[topic_id] = name

    def remove_topic(self, name: str) -> None:
        old = self.topics.pop(name, None)
        self.topic_configs.pop(name, None)
        if old is not None:
            if old[0] is not None:
                self._by_id.pop(old[0], None)
            for p in old[1]:
                self.states.pop((name, p), None)

    # -- reads --------------------------------------------------------------------------------------
    def live_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def racks(self) -> dict[int, str | None]:
        return {b: r.rack for b, r in self.brokers.items()}

    def endpoint(self, broker_id: int, listener: str | None) -> tuple[str, int] | None:
        reg = self.brokers.get(broker_id)
        e = reg.endpoint(listener) if reg is not None else None
        return (e.host, e.port) if e is not None else None

    def alive_brokers(self, listener: str | None) -> list[tuple[int, str, int, str | None]]:
        """(id, host, port, rack) of each live broker with an endpoint on ``listener`` (Kafka
        leaves out a broker without one)."""
        out = []
        for b in sorted(self.brokers):
            e = self.brokers[b].endpoint(listener)
            if e is not None:
                out.append((b, e.host, e.port, self.brokers[b].rack))
        return out

    def topic_name(self, topic_id: bytes) -> str | None:
        return self._by_id.get(topic_id)

    def topic_id(self, name: str) -> bytes | None:
        t = self.topics.get(name)
        return t[0] if t else None

    def is_ready(self, name: str) -> bool:
        """Every partition of the topic has a state (Kafka's cache holds a topic once the
        controller's UpdateMetadata for its partitions arrived)."""
        t = self.topics.get(name)
        return t is not None and bool(t[1]) and all((name, p) in self.states for p in t[1])

    def partitions(self, name: str) -> list[PartitionInfo]:
        t = self.topics.get(name)
        if t is None:
            return []
        out = []
        for p, replicas in sorted(t[1].items()):
            st = self.states.get((name, p))
            if st is None:
                continue
            leader = st.leader if st.leader in self.brokers else NO_LEADER
            out.append(PartitionInfo(p, leader, st.leader_epoch, replicas, st.isr,
                                     tuple(r for r in replicas if r not in self.brokers)))
        return out

    def leader(self, topic: str, partition: int) -> int | None:
        st = self.states.get((topic, partition))
        if st is None or st.leader not in self.brokers:
            return None
        return st.leader

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        t = self.topics.get(topic)
        st = self.states.get((topic, partition))
        if t is None or st is None:
            return None
        return PartitionState(topic, partition, t[0] or bytes(16), st.leader, st.leader_epoch, st.isr,
                              t[1].get(partition, ()), st.zk_version)
