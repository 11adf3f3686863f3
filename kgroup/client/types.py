"""Value types shared by the consumer, the producer and the admin client."""
from __future__ import annotations

import enum
from typing import NamedTuple, Sequence

from .assignors import TopicPartition

__all__ = ["AcknowledgeType", "ConsumerRebalanceListener", "ConsumerRecord", "OffsetAndMetadata", "RecordMetadata",
           "TopicPartition", "NodeInfo", "PartitionInfo", "TopicInfo"]


class AcknowledgeType(enum.IntEnum):
    """How a share consumer acknowledges a delivered record (Java's AcknowledgeType, KIP-932; the
    ids are the protocol's): ACCEPT processed, RELEASE deliver again (to anyone), REJECT never
    deliver again, RENEW keep it locked for this consumer (ShareFetch/ShareAcknowledge v2)."""

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class OffsetAndMetadata(NamedTuple):
    """A committed position: the offset of the next record to consume, its metadata string and
    the leader epoch of the last consumed record (None when unknown)."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]]
    leader_epoch: int | None = None
    delivery_count: int | None = None  # share groups (KIP-932): this delivery's number, from 1


class RecordMetadata(NamedTuple):
    """What ``Producer.send`` resolves to once the broker acknowledged the record
    (offset -1 with acks=0, as the Java client reports)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1


class NodeInfo(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None


class PartitionInfo(NamedTuple):
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


class TopicInfo(NamedTuple):
    name: str
    topic_id: bytes
    is_internal: bool
    partitions: dict  # partition -> PartitionInfo
    error_code: int = 0


class ConsumerRebalanceListener:
    """Java's ``ConsumerRebalanceListener``. Methods may be plain functions or coroutines; they
    run inside ``poll()`` (never concurrently with the application's own code).

    ``on_partitions_lost`` defaults to ``on_partitions_revoked``, as in Java."""

    def on_partitions_revoked(self, revoked: list[TopicPartition]):
        pass

    def on_partitions_assigned(self, assigned: list[TopicPartition]):
        pass

    def on_partitions_lost(self, lost: list[TopicPartition]):
        return self.on_partitions_revoked(lost)


# The last versions before topic ids (KIP-516) of the requests that name topics: a request is
# capped there when a topic's id is unknown, as the Java client caps it (and always for the
# classic consumer's and the admin's offset requests: Java builds them forTopicNames).
NAMES_MAX_VERSIONS: dict[int, int] = {0: 12, 1: 12, 8: 9, 9: 9}     # Produce, Fetch, OffsetCommit, OffsetFetch
