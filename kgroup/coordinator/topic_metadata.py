"""A topic as a consumer group sees it: the broker's metadata image hands these to the coordinator,
the group keeps them, and the PartitionMetadata record (type 4) persists them."""
from __future__ import annotations

from typing import NamedTuple


class TopicMetadata(NamedTuple):
    """A subscribed topic as the group saw it (PartitionMetadata record): racks per partition."""

    topic_id: bytes
    name: str
    num_partitions: int
    racks: tuple = ()       # ((partition, (rack, ...)), ...)
