"""Group-level configs (DescribeConfigs / AlterConfigs resource type GROUP, Kafka 4.0's
GroupConfig): per-group overrides of the consumer group protocol's (KIP-848) session timeout and
heartbeat interval, validated against the broker's bounds as Kafka's GroupConfig.validate does,
persisted with the topic registry. Kafka's share.* group configs are not offered: kgroup has no
share groups. Kafka 4.0 defines no group config for classic groups (their members send their own
timeouts). The coordinator shards read ``overrides(broker)`` as configuration
(coordinator.config.GroupConfigs), which the runtime refreshes after AlterConfigs;
``effective(broker, group_id)`` is what DescribeConfigs shows.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..protocol.errors import ErrorCode, KafkaError

GROUP = 32
GROUP_CONFIG_SOURCE = 8      # ConfigSource.GROUP_CONFIG


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    broker_default: str           # the broker config giving the default (GroupCoordinatorConfig)
    default: int                  # Kafka's default of that broker config
    minimum: tuple[str, int]      # (broker config, Kafka default) bounding it from below
    maximum: tuple[str, int]
    doc: str


# in the order Kafka's GroupConfig.validateValues checks their bounds
GROUP_CONFIG_DEFS: dict[str, GroupConfigDef] = {d.name: d for d in (
    GroupConfigDef("consumer.heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms", 5000,
                   ("group.consumer.min.heartbeat.interval.ms", 5000),
                   ("group.consumer.max.heartbeat.interval.ms", 15000),
                   "The heartbeat interval given to the members of a consumer group."),
    GroupConfigDef("consumer.session.timeout.ms", "group.consumer.session.timeout.ms", 45000,
                   ("group.consumer.min.session.timeout.ms", 45000), ("group.consumer.max.session.timeout.ms", 60000),
                   "The timeout to detect client failures when using the consumer group protocol."),
)}


def _broker_value(broker, key: str, default: int) -> int:
    v = broker.config.values.get(key)      # the broker keys arrive with the consumer group protocol
    return default if v is None else int(v)


def check_name(name: str) -> None:
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")


def defaults(broker) -> dict[str, int]:
    return {n: _broker_value(broker, d.broker_default, d.default) for n, d in GROUP_CONFIG_DEFS.items()}


def group_overrides(broker, group_id: str) -> dict[str, int]:
    """The group's own values (validated when set)."""
    return {k: int(v) for k, v in broker.metadata.group_configs.get(group_id, {}).items()}


def overrides(broker) -> dict[str, dict[str, int]]:
    """Every group's own values: group id -> name -> value (coordinator.config.GroupConfigs)."""
    return {g: group_overrides(broker, g) for g in broker.metadata.group_configs}


def effective(broker, group_id: str) -> dict[str, int]:
    """The group's settings: its overrides over the broker defaults."""
    out = defaults(broker)
    out.update(group_overrides(broker, group_id))
    return out


def validate(broker, configs: dict[str, str | None]) -> None:
    """GroupConfig.validate: known names, INT values of at least 1, the broker's bounds, and a
    session timeout above the heartbeat interval. Raises KafkaError(INVALID_CONFIG)."""
    for key in configs:
        if key not in GROUP_CONFIG_DEFS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {key}")
    values = defaults(broker)
    for key, raw in configs.items():
        text = "" if raw is None else raw.strip()
        try:
            v = int(text)
            if not -2**31 <= v < 2**31:
                raise ValueError
        except ValueError:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {text} for configuration {key}: "
                                                       "Not a number of type INT") from None
        if v < 1:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {v} for configuration {key}: "
                                                       "Value must be at least 1")
        values[key] = v
    for key, v in values.items():
        d = GROUP_CONFIG_DEFS[key]
        if v < _broker_value(broker, *d.minimum):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{key} must be greater than or equal to {d.minimum[0]}")
        if v > _broker_value(broker, *d.maximum):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{key} must be less than or equal to {d.maximum[0]}")
    if values["consumer.session.timeout.ms"] <= values["consumer.heartbeat.interval.ms"]:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms")
