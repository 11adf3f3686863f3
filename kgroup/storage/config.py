"""LogConfig: the per-topic log settings, under Kafka's names.

Owns the defaults (Kafka 4.0's) and the mapping from Kafka property names: topic-level names
(``segment.bytes``) override broker-level synonyms (``log.segment.bytes``), which override the
defaults, exactly as a topic override sits on top of the broker default in Kafka.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_index_bytes: int = 10 * 1024 * 1024
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    max_message_bytes: int = 1024 * 1024 + 12  # 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600 * 1000  # Kafka 4.0 default (KIP-1030)
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    # Broker-wide, kept here so a PartitionLog needs one config object.
    producer_id_expiration_ms: int = 24 * 3600 * 1000

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def with_overrides(self, props: Mapping[str, Any]) -> "LogConfig":
        return LogConfig.from_props(props, defaults=self)

    @classmethod
    def from_props(cls, props: Mapping[str, Any] | None, defaults: "LogConfig | None" = None) -> "LogConfig":
        """Build from Kafka property names; unknown names are ignored (they belong to other
        components), malformed values raise ``ValueError``."""
        base = defaults or cls()
        props = dict(props or {})
        values: dict[str, Any] = {}
        for fname, (topic_name, broker_names) in _NAMES.items():
            raw = None
            if topic_name in props:
                raw = props[topic_name]
            else:
                for bname, scale in broker_names:
                    if bname in props and props[bname] is not None:
                        raw = _scaled(props[bname], scale)
                        break
            if raw is None:
                continue
            values[fname] = _convert(fname, raw)
        ts_type = values.get("message_timestamp_type", base.message_timestamp_type)
        if ts_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError(f"message.timestamp.type must be CreateTime or LogAppendTime, not {ts_type!r}")
        for policy in values.get("cleanup_policy", ()):
            if policy not in ("compact", "delete"):
                raise ValueError(f"cleanup.policy {policy!r} is not compact or delete")
        return dataclasses.replace(base, **values)


def _scaled(raw: Any, scale: int) -> Any:
    return int(raw) * scale if scale != 1 else raw


def _convert(fname: str, raw: Any) -> Any:
    if fname == "cleanup_policy":
        if isinstance(raw, str):
            return tuple(p.strip().lower() for p in raw.split(",") if p.strip())
        return tuple(str(p).strip().lower() for p in raw)
    if fname in ("message_timestamp_type", "compression_type"):
        return str(raw).strip().lower() if fname == "compression_type" else str(raw)
    if fname == "min_cleanable_dirty_ratio":
        return float(raw)
    return int(raw)


_HOURS = 3600 * 1000
_MINUTES = 60 * 1000

# field -> (topic config name, [(broker synonym, multiplier to ms), ...] in precedence order)
_NAMES: dict[str, tuple[str, list[tuple[str, int]]]] = {
    "segment_bytes": ("segment.bytes", [("log.segment.bytes", 1)]),
    "segment_ms": ("segment.ms", [("log.roll.ms", 1), ("log.roll.hours", _HOURS)]),
    "segment_index_bytes": ("segment.index.bytes", [("log.index.size.max.bytes", 1)]),
    "retention_ms": ("retention.ms", [("log.retention.ms", 1), ("log.retention.minutes", _MINUTES),
                                      ("log.retention.hours", _HOURS)]),
    "retention_bytes": ("retention.bytes", [("log.retention.bytes", 1)]),
    "cleanup_policy": ("cleanup.policy", [("log.cleanup.policy", 1)]),
    "delete_retention_ms": ("delete.retention.ms", [("log.cleaner.delete.retention.ms", 1)]),
    "min_compaction_lag_ms": ("min.compaction.lag.ms", [("log.cleaner.min.compaction.lag.ms", 1)]),
    "max_compaction_lag_ms": ("max.compaction.lag.ms", [("log.cleaner.max.compaction.lag.ms", 1)]),
    "min_cleanable_dirty_ratio": ("min.cleanable.dirty.ratio", [("log.cleaner.min.cleanable.ratio", 1)]),
    "min_insync_replicas": ("min.insync.replicas", [("min.insync.replicas", 1)]),
    "compression_type": ("compression.type", [("compression.type", 1)]),
    "max_message_bytes": ("max.message.bytes", [("message.max.bytes", 1)]),
    "message_timestamp_type": ("message.timestamp.type", [("log.message.timestamp.type", 1)]),
    "message_timestamp_before_max_ms": ("message.timestamp.before.max.ms",
                                        [("log.message.timestamp.before.max.ms", 1)]),
    "message_timestamp_after_max_ms": ("message.timestamp.after.max.ms",
                                       [("log.message.timestamp.after.max.ms", 1)]),
    "index_interval_bytes": ("index.interval.bytes", [("log.index.interval.bytes", 1)]),
    "flush_messages": ("flush.messages", [("log.flush.interval.messages", 1)]),
    "flush_ms": ("flush.ms", [("log.flush.interval.ms", 1)]),
    "producer_id_expiration_ms": ("producer.id.expiration.ms", []),
}
