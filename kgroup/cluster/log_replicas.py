"""The seam's stand-in for the ReplicaManager (kgroup/broker/replica_manager.py replaces it): what
the cluster wiring calls on a broker, doing only what needs no replication. A partition this
broker hosts gets its local log (empty until written: nothing is fetched from a leader), a
deleted one loses it, and leadership of a coordinator partition loads or unloads that
coordinator (Kafka's onLeadershipChange). No follower fetching, no ISR tracking, no high
watermark across replicas: those are the ReplicaManager's."""
from __future__ import annotations

import logging

from .partition_state import PartitionState

log = logging.getLogger("kgroup.cluster")


class LogReplicas:
    def __init__(self, broker):
        self.broker = broker
        self.broker_id = broker.config.node_id
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.alter_isr = None           # set by the cluster wiring (zk_broker.py)
        self.broker_endpoint = None     # set by the cluster wiring

    def _coordinator(self, topic: str):
        b = self.broker
        if topic == b.group_coordinator.topic:
            return b.group_coordinator
        if topic == b.transaction_coordinator.topic:
            return b.transaction_coordinator
        return None

    def apply_partition_states(self, states: list[PartitionState]) -> None:
        """becomeLeaderOrFollower: a state older than the one known (leader epoch) is ignored."""
        logs = self.broker.data_path.logs
        for st in states:
            tp = (st.topic, st.partition)
            known = self.states.get(tp)
            if known is not None and (st.leader_epoch, st.partition_epoch) < (known.leader_epoch, known.partition_epoch):
                continue
            if self.broker_id not in st.replicas:
                continue
            topic = self.broker.metadata.get(st.topic)
            logs.get_or_create(st.topic, st.partition, topic.configs if topic is not None else None)
            self.states[tp] = st
            was_leader = known is not None and known.leader == self.broker_id
            coordinator = self._coordinator(st.topic)
            if coordinator is None:
                continue
            if st.leader == self.broker_id and (not was_leader or known.leader_epoch != st.leader_epoch):
                coordinator.load_partition(st.partition, st.leader_epoch)
            elif st.leader != self.broker_id and was_leader:
                coordinator.unload_partition(st.partition, st.leader_epoch)

    def stop_replicas(self, tps: list[tuple[str, int]], delete: bool) -> None:
        for tp in tps:
            known = self.states.pop(tp, None)
            coordinator = self._coordinator(tp[0])
            if coordinator is not None and known is not None and known.leader == self.broker_id:
                coordinator.unload_partition(tp[1], None)
            if delete:
                self.broker.data_path.logs.delete_partition(*tp)
