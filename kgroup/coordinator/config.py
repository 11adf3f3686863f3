"""Broker settings the group coordinator reads, with Kafka's names and defaults.

``GroupCoordinatorConfig.from_props`` takes the broker's property dict (string keys such as
``group.min.session.timeout.ms``; values as ints or strings) and ignores keys it does not own.
"""
from __future__ import annotations

from dataclasses import dataclass

INT32_MAX = 2**31 - 1

# property name -> (attribute, default, multiplier applied to the property value)
_PROPS = {
    "group.min.session.timeout.ms": ("min_session_timeout_ms", 6000, 1),
    "group.max.session.timeout.ms": ("max_session_timeout_ms", 1800000, 1),
    "group.max.size": ("max_size", INT32_MAX, 1),
    "group.initial.rebalance.delay.ms": ("initial_rebalance_delay_ms", 3000, 1),
    "offsets.retention.minutes": ("offsets_retention_ms", 10080 * 60_000, 60_000),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_interval_ms", 600000, 1),
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", 4096, 1),
    "offsets.topic.num.partitions": ("num_partitions", 50, 1),
}


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = INT32_MAX
    initial_rebalance_delay_ms: int = 3000
    offsets_retention_ms: int = 10080 * 60_000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    num_partitions: int = 50
    # Kafka's CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS: a constant (5 minutes), not a broker config.
    new_member_join_timeout_ms: int = 300000

    @classmethod
    def from_props(cls, props: dict | None = None) -> "GroupCoordinatorConfig":
        kwargs = {}
        for name, (attr, _default, mult) in _PROPS.items():
            if props and name in props and props[name] is not None:
                kwargs[attr] = int(str(props[name]).strip()) * mult
        return cls(**kwargs)
