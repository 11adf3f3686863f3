"""Group-level configs (DescribeConfigs / AlterConfigs resource type GROUP, Kafka's GroupConfig):
per-group overrides of the consumer group protocol's (KIP-848) session timeout and heartbeat
interval, and of the share group settings (KIP-932: session timeout, heartbeat interval, record
lock duration, delivery count limit, in-flight record locks, where a share-partition starts
(share.auto.offset.reset), which records it delivers (share.isolation.level), whether RENEW
acknowledgements are allowed). Validated as Kafka's GroupConfig.validate does (each value's type
and ConfigDef bound, then the broker's bounds, then session timeout above heartbeat interval),
persisted with the topic registry. Kafka defines no group config for classic groups (their members
send their own timeouts). The coordinator shards read ``overrides(broker)`` as configuration
(coordinator.config.GroupConfigs), which the runtime refreshes after AlterConfigs;
``effective(broker, group_id)`` is what DescribeConfigs shows.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..protocol.errors import ErrorCode, KafkaError

GROUP = 32
GROUP_CONFIG_SOURCE = 8      # ConfigSource.GROUP_CONFIG


@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    type: str                           # "int", "string" or "boolean" (DescribeConfigs' config type)
    broker_default: str | None          # the broker config giving the default, if any
    default: object                     # Kafka's default of that broker config (or the group config's own)
    at_least: int | None = None         # the ConfigDef's own lower bound (an INT)
    minimum: tuple | None = None        # (broker config, Kafka default) bounding it from below
    maximum: tuple | None = None
    doc: str = ""


_AUTO_OFFSET_RESET_MESSAGE = ("Invalid value `{v}` for configuration share.auto.offset.reset. The value must be "
                              "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")
# java.time.Duration.parse: PnDTnHnMn.nS, each part optional but one present, an optional sign
_DURATION = re.compile(r"[-+]?P(?:([-+]?[0-9]+)D)?(?:T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?"
                       r"(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?", re.IGNORECASE)

# in the order Kafka's GroupConfig.validateValues checks their broker bounds
GROUP_CONFIG_DEFS: dict[str, GroupConfigDef] = {d.name: d for d in (
    GroupConfigDef("consumer.heartbeat.interval.ms", "int", "group.consumer.heartbeat.interval.ms", 5000, 1,
                   ("group.consumer.min.heartbeat.interval.ms", 5000),
                   ("group.consumer.max.heartbeat.interval.ms", 15000),
                   "The heartbeat interval given to the members of a consumer group."),
    GroupConfigDef("consumer.session.timeout.ms", "int", "group.consumer.session.timeout.ms", 45000, 1,
                   ("group.consumer.min.session.timeout.ms", 45000), ("group.consumer.max.session.timeout.ms", 60000),
                   "The timeout to detect client failures when using the consumer group protocol."),
    GroupConfigDef("share.heartbeat.interval.ms", "int", "group.share.heartbeat.interval.ms", 5000, 1,
                   ("group.share.min.heartbeat.interval.ms", 5000), ("group.share.max.heartbeat.interval.ms", 15000),
                   "The heartbeat interval given to the members of a share group."),
    GroupConfigDef("share.session.timeout.ms", "int", "group.share.session.timeout.ms", 45000, 1,
                   ("group.share.min.session.timeout.ms", 45000), ("group.share.max.session.timeout.ms", 60000),
                   "The timeout to detect client failures when using the share group protocol."),
    GroupConfigDef("share.record.lock.duration.ms", "int", "group.share.record.lock.duration.ms", 30000, 1000,
                   ("group.share.min.record.lock.duration.ms", 15000),
                   ("group.share.max.record.lock.duration.ms", 60000),
                   "The record acquisition lock duration in milliseconds for share groups."),
    GroupConfigDef("share.delivery.count.limit", "int", "group.share.delivery.count.limit", 5, 2,
                   ("group.share.min.delivery.count.limit", 2), ("group.share.max.delivery.count.limit", 10),
                   "The maximum number of delivery attempts for a record delivered to a share group."),
    GroupConfigDef("share.partition.max.record.locks", "int", "group.share.partition.max.record.locks", 2000, 100,
                   ("group.share.min.partition.max.record.locks", 100),
                   ("group.share.max.partition.max.record.locks", 4000),
                   "Share-group record lock limit per share-partition."),
    GroupConfigDef("share.auto.offset.reset", "string", None, "latest",
                   doc="The strategy to initialize the share-partition start offset: earliest, latest or "
                       "by_duration:<PnDTnHnMn.nS>."),
    GroupConfigDef("share.isolation.level", "string", None, "read_uncommitted",
                   doc="Controls how to read records written transactionally: read_committed or read_uncommitted."),
    GroupConfigDef("share.renew.acknowledge.enable", "boolean", None, True,
                   doc="Whether the renew acknowledge type is enabled for the share group."),
)}
# session timeout must exceed heartbeat interval, checked last (consumer, then share)
_SESSION_ABOVE_HEARTBEAT = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                            ("share.session.timeout.ms", "share.heartbeat.interval.ms"))


def _broker_value(broker, key: str, default):
    v = broker.config.values.get(key)
    return default if v is None else int(v)


def check_name(name: str) -> None:
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")


def _invalid(key, value, why) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {key}: {why}")


def parse_auto_offset_reset(value: str) -> tuple[str, int | None]:
    """("earliest"|"latest"|"by_duration", duration ms or None), or ValueError (Kafka's
    ShareGroupAutoOffsetResetStrategy.fromString: a negative duration is refused)."""
    v = value.strip().lower()
    if v in ("earliest", "latest"):
        return v, None
    if v.startswith("by_duration:"):
        m = _DURATION.fullmatch(value.strip()[len("by_duration:"):])
        if m and any(g is not None for g in m.groups()[:4]):
            d, h, mi, s, frac = m.groups()
            ms = (int(d or 0) * 86_400_000 + int(h or 0) * 3_600_000 + int(mi or 0) * 60_000
                  + int(s or 0) * 1000 + int(((frac or "") + "000")[:3]))
            if value.strip()[len("by_duration:"):].startswith("-"):
                ms = -ms
            if ms >= 0:
                return "by_duration", ms
    raise ValueError(value)


def parse(key: str, raw) -> object:
    """A group config's value in its type (Kafka's ConfigDef.parse with the def's validator);
    KafkaError(INVALID_CONFIG) when it is not valid."""
    d = GROUP_CONFIG_DEFS[key]
    text = "" if raw is None else str(raw).strip()
    if d.type == "int":
        try:
            v = int(text)
            if not -2**31 <= v < 2**31:
                raise ValueError
        except ValueError:
            raise _invalid(key, text, "Not a number of type INT") from None
        if d.at_least is not None and v < d.at_least:
            raise _invalid(key, v, f"Value must be at least {d.at_least}")
        return v
    if d.type == "boolean":
        if text.lower() not in ("true", "false"):
            raise _invalid(key, text, "Expected value to be either true or false")
        return text.lower() == "true"
    if key == "share.isolation.level":
        if text not in ("read_committed", "read_uncommitted"):
            raise _invalid(key, text, "String must be one of: read_committed, read_uncommitted")
        return text
    try:
        parse_auto_offset_reset(text)
    except ValueError:
        raise _invalid(key, text, _AUTO_OFFSET_RESET_MESSAGE.format(v=text)) from None
    return text


def defaults(broker) -> dict[str, object]:
    return {n: (_broker_value(broker, d.broker_default, d.default) if d.broker_default else d.default)
            for n, d in GROUP_CONFIG_DEFS.items()}


def group_overrides(broker, group_id: str) -> dict[str, object]:
    """The group's own values (validated when set), in their types."""
    return {k: parse(k, v) for k, v in broker.metadata.group_configs.get(group_id, {}).items()
            if k in GROUP_CONFIG_DEFS}


def overrides(broker) -> dict[str, dict[str, object]]:
    """Every group's own values: group id -> name -> value (coordinator.config.GroupConfigs)."""
    return {g: group_overrides(broker, g) for g in broker.metadata.group_configs}


def effective(broker, group_id: str) -> dict[str, object]:
    """The group's settings: its overrides over the broker defaults."""
    out = defaults(broker)
    out.update(group_overrides(broker, group_id))
    return out


def as_string(value) -> str:
    """A value as DescribeConfigs shows it."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def validate(broker, configs: dict[str, str | None]) -> None:
    """GroupConfig.validate: known names, each value's type and bound, the broker's bounds, and a
    session timeout above the heartbeat interval. Raises KafkaError(INVALID_CONFIG)."""
    for key in configs:
        if key not in GROUP_CONFIG_DEFS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {key}")
    values = defaults(broker)
    for key, raw in configs.items():
        values[key] = parse(key, raw)
    for key, d in GROUP_CONFIG_DEFS.items():
        v = values[key]
        if d.minimum is not None and v < _broker_value(broker, *d.minimum):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{key} must be greater than or equal to {d.minimum[0]}")
        if d.maximum is not None and v > _broker_value(broker, *d.maximum):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{key} must be less than or equal to {d.maximum[0]}")
    for session, heartbeat in _SESSION_ABOVE_HEARTBEAT:
        if values[session] <= values[heartbeat]:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"{session} must be greater than {heartbeat}")
