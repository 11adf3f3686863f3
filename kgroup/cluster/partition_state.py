"""One partition's leadership as the controller decides it: the seam between the cluster's
metadata (controller, ZooKeeper) and replication inside a broker (ReplicaManager).

Kafka 3.9's LeaderAndIsrPartitionState, reduced to what a broker acts on."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    topic_id: bytes
    leader: int                 # broker id, -1 when the partition has no leader
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int        # the state znode's version (Kafka: zkVersion / partitionEpoch)
