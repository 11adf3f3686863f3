"""The seam between cluster metadata and replication: what a broker is told about one partition.

Kafka's LeaderAndIsrPartitionState, as the controller writes it to the partition's state znode.
``partition_epoch`` is that znode's version (Kafka's zkVersion / partitionEpoch): an ISR change by
the leader (alter_isr) is a conditional update against it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    topic_id: bytes
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int
