"""The share coordinator (KIP-932) as a deterministic core: the durable state of share-partitions
in ``__share_group_state`` (Kafka's share-coordinator module)."""
from .config import ShareCoordinatorConfig
from .shard import ShareCoordinatorShard, share_partition_key, share_state_partition

__all__ = ["ShareCoordinatorConfig", "ShareCoordinatorShard", "share_partition_key", "share_state_partition"]
