"""Broker settings the group coordinator reads, with Kafka's names and defaults.

``GroupCoordinatorConfig.from_props`` takes the broker's property dict (string keys such as
``group.min.session.timeout.ms``; values as ints or strings) and ignores keys it does not own.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
    # the consumer group protocol (KIP-848)
    "group.consumer.session.timeout.ms": ("consumer_session_timeout_ms", 45000, 1),
    "group.consumer.min.session.timeout.ms": ("consumer_min_session_timeout_ms", 45000, 1),
    "group.consumer.max.session.timeout.ms": ("consumer_max_session_timeout_ms", 60000, 1),
    "group.consumer.heartbeat.interval.ms": ("consumer_heartbeat_interval_ms", 5000, 1),
    "group.consumer.min.heartbeat.interval.ms": ("consumer_min_heartbeat_interval_ms", 5000, 1),
    "group.consumer.max.heartbeat.interval.ms": ("consumer_max_heartbeat_interval_ms", 15000, 1),
    "group.consumer.max.size": ("consumer_max_size", INT32_MAX, 1),
    # share groups (KIP-932): Kafka's GroupCoordinatorConfig and ShareGroupConfig
    "group.share.session.timeout.ms": ("share_session_timeout_ms", 45000, 1),
    "group.share.min.session.timeout.ms": ("share_min_session_timeout_ms", 45000, 1),
    "group.share.max.session.timeout.ms": ("share_max_session_timeout_ms", 60000, 1),
    "group.share.heartbeat.interval.ms": ("share_heartbeat_interval_ms", 5000, 1),
    "group.share.min.heartbeat.interval.ms": ("share_min_heartbeat_interval_ms", 5000, 1),
    "group.share.max.heartbeat.interval.ms": ("share_max_heartbeat_interval_ms", 15000, 1),
    "group.share.max.size": ("share_max_size", 200, 1),
    "group.share.initialize.retry.interval.ms": ("share_initialize_retry_interval_ms", 30000, 1),
    "group.share.delivery.count.limit": ("share_delivery_count_limit", 5, 1),
    "group.share.min.delivery.count.limit": ("share_min_delivery_count_limit", 2, 1),
    "group.share.max.delivery.count.limit": ("share_max_delivery_count_limit", 10, 1),
    "group.share.record.lock.duration.ms": ("share_record_lock_duration_ms", 30000, 1),
    "group.share.min.record.lock.duration.ms": ("share_min_record_lock_duration_ms", 15000, 1),
    "group.share.max.record.lock.duration.ms": ("share_max_record_lock_duration_ms", 60000, 1),
    "group.share.partition.max.record.locks": ("share_partition_max_record_locks", 2000, 1),
    "group.share.min.partition.max.record.locks": ("share_min_partition_max_record_locks", 100, 1),
    "group.share.max.partition.max.record.locks": ("share_max_partition_max_record_locks", 4000, 1),
    "group.share.max.share.sessions": ("share_max_share_sessions", 2000, 1),
}
# list-valued properties: name -> (attribute, default)
_LIST_PROPS = {
    "group.consumer.assignors": ("consumer_assignors", ("uniform", "range")),
}
# string-valued properties: name -> (attribute, default)
_STR_PROPS = {
    "group.consumer.migration.policy": ("consumer_migration_policy", "bidirectional"),
}
# Kafka 4.0's group-level configs (GroupConfig) the consumer group protocol reads per group. The
# shards get them as configuration, not records: ``GroupConfigs`` maps a group id to its overrides
# (name -> int, validated by the broker), kept current by the runtime as AlterConfigs changes them
# (Kafka's GroupConfigManager); a group without an override uses the broker's value.
CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
GroupConfigs = Mapping[str, Mapping[str, int]]

# Kafka's ConsumerGroupMigrationPolicy (KIP-848 online migration), by its lower-case name
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


def validate_migration_policy(value) -> str:
    """Kafka's CaseInsensitiveValidString over ConsumerGroupMigrationPolicy; the canonical name."""
    v = str(value).strip().lower()
    if v not in MIGRATION_POLICIES:
        raise ValueError(f"Invalid value {value} for configuration group.consumer.migration.policy: String "
                         f"must be one of (case insensitive): DISABLED, UPGRADE, DOWNGRADE, BIDIRECTIONAL")
    return v


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
    consumer_session_timeout_ms: int = 45000
    consumer_min_session_timeout_ms: int = 45000
    consumer_max_session_timeout_ms: int = 60000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_min_heartbeat_interval_ms: int = 5000
    consumer_max_heartbeat_interval_ms: int = 15000
    consumer_max_size: int = INT32_MAX
    # the first is the default when no member names one (Kafka: uniform, then range)
    consumer_assignors: tuple = ("uniform", "range")
    # online migration between the classic and the consumer protocol (KIP-848)
    consumer_migration_policy: str = "bidirectional"
    # share groups (KIP-932)
    share_session_timeout_ms: int = 45000
    share_min_session_timeout_ms: int = 45000
    share_max_session_timeout_ms: int = 60000
    share_heartbeat_interval_ms: int = 5000
    share_min_heartbeat_interval_ms: int = 5000
    share_max_heartbeat_interval_ms: int = 15000
    share_max_size: int = 200
    share_initialize_retry_interval_ms: int = 30000
    share_delivery_count_limit: int = 5
    share_min_delivery_count_limit: int = 2
    share_max_delivery_count_limit: int = 10
    share_record_lock_duration_ms: int = 30000
    share_min_record_lock_duration_ms: int = 15000
    share_max_record_lock_duration_ms: int = 60000
    share_partition_max_record_locks: int = 2000
    share_min_partition_max_record_locks: int = 100
    share_max_partition_max_record_locks: int = 4000
    share_max_share_sessions: int = 2000

    @property
    def upgrade_enabled(self) -> bool:
        """ConsumerGroupMigrationPolicy.isUpgradeEnabled: classic -> consumer allowed."""
        return self.consumer_migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        """ConsumerGroupMigrationPolicy.isDowngradeEnabled: consumer -> classic allowed."""
        return self.consumer_migration_policy in ("downgrade", "bidirectional")

    @classmethod
    def from_props(cls, props: dict | None = None) -> "GroupCoordinatorConfig":
        kwargs: dict[str, Any] = {}
        for name, (attr, _, mult) in _PROPS.items():
            if props and name in props and props[name] is not None:
                kwargs[attr] = int(str(props[name]).strip()) * mult
        for name, (attr, _) in _LIST_PROPS.items():
            if props and props.get(name) is not None:
                v = props[name]
                items = v if isinstance(v, (list, tuple)) else str(v).split(",")
                kwargs[attr] = tuple(x.strip() for x in items if x.strip())
        for name, (attr, _) in _STR_PROPS.items():
            if props and props.get(name) is not None:
                kwargs[attr] = validate_migration_policy(props[name])
        cfg = cls(**kwargs)
        cfg.validate_consumer()
        cfg.validate_share()
        return cfg

    def validate_share(self) -> None:
        """Kafka's GroupCoordinatorConfig and ShareGroupConfig checks of the share group settings."""
        def need(ok, msg):
            if not ok:
                raise ValueError(msg)
        need(self.share_min_session_timeout_ms <= self.share_session_timeout_ms <= self.share_max_session_timeout_ms,
             "group.share.session.timeout.ms must be within group.share.min/max.session.timeout.ms")
        need(self.share_min_heartbeat_interval_ms <= self.share_heartbeat_interval_ms
             <= self.share_max_heartbeat_interval_ms,
             "group.share.heartbeat.interval.ms must be within group.share.min/max.heartbeat.interval.ms")
        need(self.share_heartbeat_interval_ms < self.share_session_timeout_ms,
             "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms")
        need(1 <= self.share_max_size <= 1000, "group.share.max.size must be between 1 and 1000")
        need(self.share_min_delivery_count_limit <= self.share_delivery_count_limit
             <= self.share_max_delivery_count_limit,
             "group.share.delivery.count.limit must be within group.share.min/max.delivery.count.limit")
        need(self.share_min_record_lock_duration_ms <= self.share_record_lock_duration_ms
             <= self.share_max_record_lock_duration_ms,
             "group.share.record.lock.duration.ms must be within group.share.min/max.record.lock.duration.ms")
        need(self.share_min_partition_max_record_locks <= self.share_partition_max_record_locks
             <= self.share_max_partition_max_record_locks,
             "group.share.partition.max.record.locks must be within group.share.min/max.partition.max.record.locks")

    def validate_consumer(self) -> None:
        """Kafka's GroupCoordinatorConfig checks of the consumer-protocol settings."""
        from .assignor import ASSIGNORS
        def need(ok, msg):
            if not ok:
                raise ValueError(msg)
        need(self.consumer_min_session_timeout_ms <= self.consumer_session_timeout_ms
             <= self.consumer_max_session_timeout_ms,
             "group.consumer.session.timeout.ms must be within group.consumer.min/max.session.timeout.ms")
        need(self.consumer_min_heartbeat_interval_ms <= self.consumer_heartbeat_interval_ms
             <= self.consumer_max_heartbeat_interval_ms,
             "group.consumer.heartbeat.interval.ms must be within group.consumer.min/max.heartbeat.interval.ms")
        need(self.consumer_heartbeat_interval_ms < self.consumer_session_timeout_ms,
             "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")
        need(self.consumer_max_size >= 1, "group.consumer.max.size must be at least 1")
        need(len(self.consumer_assignors) > 0, "group.consumer.assignors must not be empty")
        for a in self.consumer_assignors:
            need(a in ASSIGNORS, f"group.consumer.assignors: unknown assignor {a}")
