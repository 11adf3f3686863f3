"""Broker settings the share coordinator reads, with Kafka's names and defaults (ShareCoordinatorConfig)."""
from __future__ import annotations

from dataclasses import dataclass

SHARE_GROUP_STATE_TOPIC = "__share_group_state"

# property name -> (attribute, default)
_PROPS = {
    "share.coordinator.state.topic.num.partitions": ("num_partitions", 50),
    "share.coordinator.state.topic.segment.bytes": ("segment_bytes", 104857600),
    "share.coordinator.load.buffer.size": ("load_buffer_size", 5 * 1024 * 1024),
    "share.coordinator.snapshot.update.records.per.snapshot": ("snapshot_update_records_per_snapshot", 500),
    "share.coordinator.cold.partition.snapshot.interval.ms": ("cold_partition_snapshot_interval_ms", 300000),
}


@dataclass(frozen=True)
class ShareCoordinatorConfig:
    num_partitions: int = 50
    segment_bytes: int = 104857600
    load_buffer_size: int = 5 * 1024 * 1024
    snapshot_update_records_per_snapshot: int = 500
    cold_partition_snapshot_interval_ms: int = 300000

    @classmethod
    def from_props(cls, props: dict | None = None) -> "ShareCoordinatorConfig":
        kwargs = {}
        for name, (attr, _default) in _PROPS.items():
            if props and props.get(name) is not None:
                kwargs[attr] = int(str(props[name]).strip())
        cfg = cls(**kwargs)
        if cfg.num_partitions < 1:
            raise ValueError("share.coordinator.state.topic.num.partitions must be at least 1")
        if not 0 <= cfg.snapshot_update_records_per_snapshot <= 500:
            raise ValueError("share.coordinator.snapshot.update.records.per.snapshot must be between 0 and 500")
        return cfg
