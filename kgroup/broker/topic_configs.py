"""Topic-level configs: Kafka 4.0's LogConfig definitions (names, types, defaults, validators,
broker synonyms) and its validation, in one table.

CreateTopics, DescribeConfigs and the config-altering APIs read this table, so what we accept is
what we describe. Validation follows Kafka's ``LogConfig.validate``: unknown names first
("Unknown topic config name"), then each value parsed by its type and checked by its validator
("Invalid value V for configuration N: ..."), then the cross-config rules of
``LogConfig.validateValues`` (min.compaction.lag.ms <= max.compaction.lag.ms) and the tiered
storage rules (this broker has no remote log storage system, as Kafka's default).

Kafka 4.0 removed ``message.format.version`` and ``message.timestamp.difference.max.ms``
(KIP-724, KIP-937); ``message.downconversion.enable`` is still accepted but does nothing since
4.0 dropped down-conversion (KIP-896).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

from ..protocol.errors import ErrorCode, KafkaError
from .config import CONFIG_DEFS, LONG_MAX, BrokerConfig

INT_MIN, INT_MAX = -2**31, 2**31 - 1
LONG_MIN = -2**63
_HOURS, _MINUTES = 3_600_000, 60_000


class InvalidConfig(ValueError):
    """A config value Kafka's ConfigDef would refuse; the message is Kafka's."""


def _invalid(name: str, value: Any, why: str) -> InvalidConfig:
    return InvalidConfig(f"Invalid value {value} for configuration {name}: {why}")


# -- validators (ConfigDef.Range / ValidString / ValidList and Kafka's special ones) ------------
def at_least(lo):
    def check(name, v):
        if v < lo:
            raise _invalid(name, v, f"Value must be at least {lo}")
    return check


def between(lo, hi):
    def check(name, v):
        if v < lo:
            raise _invalid(name, v, f"Value must be at least {lo}")
        if v > hi:
            raise _invalid(name, v, f"Value must be no more than {hi}")
    return check


def one_of(*valid):
    def check(name, v):
        if v not in valid:
            raise _invalid(name, v, "String must be one of: " + ", ".join(valid))
    return check


def list_of(*valid):
    def check(name, items):
        for item in items:
            if item not in valid:
                raise _invalid(name, item, "String must be one of: " + ", ".join(valid))
    return check


def compression_level(lo, hi, default):
    """CompressionType.levelValidator: a level in [lo, hi], or the codec's default marker."""
    def check(name, v):
        if v > hi or (v < lo and v != default):
            raise _invalid(name, v, f"Value must be between {lo} and {hi} or equal to {default}")
    return check


_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def throttled_replicas(name, items):
    """ThrottledReplicaListValidator: '*' or partitionId:brokerId pairs."""
    if not (all(_REPLICA.fullmatch(s) for s in items) or "".join(items) == "*"):
        raise _invalid(name, ",".join(items), f"{name} must be the literal '*' or a list of replicas in the "
                       "following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


@dataclass(frozen=True)
class TopicConfigDef:
    name: str
    type: str                       # ConfigDef type: boolean, string, int, long, double, list
    default: str                    # the topic default when no broker synonym is set, as Kafka prints it
    synonyms: tuple[tuple[str, int], ...]   # (broker config, multiplier to this config's unit), by precedence
    validator: Callable[[str, Any], None] | None
    doc: str


def _t(name, type_, default, synonyms, validator, doc):
    syn = tuple((s, 1) if isinstance(s, str) else s for s in synonyms)
    return TopicConfigDef(name, type_, default, syn, validator, doc)


_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# Kafka 4.0's LogConfig, in its definition order; synonyms from ServerTopicConfigSynonyms.
TOPIC_CONFIG_DEFS: dict[str, TopicConfigDef] = {d.name: d for d in (
    # Kafka 4.0 raised this minimum to 1 MiB (KIP-1030, KAFKA-16368) and 4.1 added an internal
    # override for tests; kgroup keeps the 3.x minimum (one legacy record's overhead) so tests
    # and tools (librdkafka's 0077 uses 10000) can roll small segments over the wire.
    _t("segment.bytes", "int", "1073741824", ["log.segment.bytes"], at_least(14),
       "The segment file size for the log."),
    _t("segment.ms", "long", "604800000", ["log.roll.ms", ("log.roll.hours", _HOURS)], at_least(1),
       "The time after which the log rolls a new segment even if it is not full."),
    _t("segment.jitter.ms", "long", "0", ["log.roll.jitter.ms", ("log.roll.jitter.hours", _HOURS)], at_least(0),
       "The maximum random jitter subtracted from the scheduled segment roll time."),
    _t("segment.index.bytes", "int", "10485760", ["log.index.size.max.bytes"], at_least(4),
       "The size of the index that maps offsets to file positions."),
    _t("flush.messages", "long", str(LONG_MAX), ["log.flush.interval.messages"], at_least(1),
       "Messages written to a log partition between forced fsyncs."),
    _t("flush.ms", "long", str(LONG_MAX), ["log.flush.interval.ms", "log.flush.scheduler.interval.ms"], at_least(0),
       "Milliseconds between forced fsyncs of a log partition."),
    _t("retention.bytes", "long", "-1", ["log.retention.bytes"], None,
       "The largest size a partition can grow to before old segments are deleted; -1 is no limit."),
    _t("retention.ms", "long", "604800000",
       ["log.retention.ms", ("log.retention.minutes", _MINUTES), ("log.retention.hours", _HOURS)], at_least(-1),
       "How long a log is retained before old segments are deleted; -1 is no limit."),
    _t("max.message.bytes", "int", "1048588", ["message.max.bytes"], at_least(0),
       "The largest record batch size allowed."),
    _t("index.interval.bytes", "int", "4096", ["log.index.interval.bytes"], at_least(0),
       "Bytes between entries of the offset index."),
    _t("delete.retention.ms", "long", "86400000", ["log.cleaner.delete.retention.ms"], at_least(0),
       "How long tombstones are retained on compacted topics."),
    _t("min.compaction.lag.ms", "long", "0", ["log.cleaner.min.compaction.lag.ms"], at_least(0),
       "The minimum time a message remains uncompacted in the log."),
    _t("max.compaction.lag.ms", "long", str(LONG_MAX), ["log.cleaner.max.compaction.lag.ms"], at_least(1),
       "The maximum time a message remains ineligible for compaction in the log."),
    _t("file.delete.delay.ms", "long", "60000", ["log.segment.delete.delay.ms"], at_least(0),
       "The time to wait before deleting a file from the filesystem."),
    _t("min.cleanable.dirty.ratio", "double", "0.5", ["log.cleaner.min.cleanable.ratio"], between(0, 1),
       "The dirty/total ratio at which the log compactor attempts to clean the log."),
    _t("cleanup.policy", "list", "delete", ["log.cleanup.policy"], list_of("compact", "delete"),
       "delete, compact, or both (comma-separated)."),
    _t("unclean.leader.election.enable", "boolean", "false", ["unclean.leader.election.enable"], None,
       "Whether replicas not in the ISR may be elected leader (one node: no effect)."),
    _t("min.insync.replicas", "int", "1", ["min.insync.replicas"], at_least(1),
       "The minimum number of in-sync replicas for an acks=all write."),
    _t("compression.type", "string", "producer", ["compression.type"], one_of(*_COMPRESSION_TYPES),
       "The final compression type for the topic; producer keeps the producer's codec."),
    _t("compression.gzip.level", "int", "-1", ["compression.gzip.level"], compression_level(1, 9, -1),
       "The gzip compression level when compression.type is gzip."),
    _t("compression.lz4.level", "int", "9", ["compression.lz4.level"], between(1, 17),
       "The lz4 compression level when compression.type is lz4."),
    _t("compression.zstd.level", "int", "3", ["compression.zstd.level"], between(-131072, 22),
       "The zstd compression level when compression.type is zstd."),
    _t("preallocate", "boolean", "false", ["log.preallocate"], None,
       "Whether a new segment file is preallocated."),
    _t("message.timestamp.type", "string", "CreateTime", ["log.message.timestamp.type"],
       one_of("CreateTime", "LogAppendTime"), "CreateTime or LogAppendTime."),
    _t("message.timestamp.before.max.ms", "long", str(LONG_MAX), ["log.message.timestamp.before.max.ms"],
       at_least(0), "How far a record's timestamp may lie before the broker's time."),
    _t("message.timestamp.after.max.ms", "long", "3600000", ["log.message.timestamp.after.max.ms"],
       at_least(0), "How far a record's timestamp may lie after the broker's time."),
    _t("leader.replication.throttled.replicas", "list", "", [], throttled_replicas,
       "Replicas throttled on the leader side (one node: no effect)."),
    _t("follower.replication.throttled.replicas", "list", "", [], throttled_replicas,
       "Replicas throttled on the follower side (one node: no effect)."),
    _t("message.downconversion.enable", "boolean", "true", ["log.message.downconversion.enable"], None,
       "A no-op since Kafka 4.0 (no down-conversion, KIP-896); deprecated."),
    _t("remote.storage.enable", "boolean", "false", [], None,
       "Tiered storage for the topic; this broker has no remote log storage system."),
    _t("local.retention.ms", "long", "-2", ["log.local.retention.ms"], at_least(-2),
       "Local retention with tiered storage; -2 follows retention.ms."),
    _t("local.retention.bytes", "long", "-2", ["log.local.retention.bytes"], at_least(-2),
       "Local retention with tiered storage; -2 follows retention.bytes."),
    _t("remote.log.copy.disable", "boolean", "false", [], None,
       "Stops copying segments to remote storage (tiered storage)."),
    _t("remote.log.delete.on.disable", "boolean", "false", [], None,
       "Deletes remote data when tiered storage is turned off."),
)}

# name -> (highest-precedence broker synonym or None, type): the shape metadata.py has used
TOPIC_CONFIGS: dict[str, tuple[str | None, str]] = {
    n: (d.synonyms[0][0] if d.synonyms else None, d.type) for n, d in TOPIC_CONFIG_DEFS.items()}


def parse_value(defn: TopicConfigDef, raw: str) -> Any:
    """ConfigDef.parseType for a string value: Kafka trims it first."""
    s = raw.strip()
    t = defn.type
    try:
        if t == "boolean":
            if s.lower() not in ("true", "false"):
                raise _invalid(defn.name, s, "Expected value to be either true or false")
            return s.lower() == "true"
        if t in ("int", "long"):
            if not re.fullmatch(r"[+-]?[0-9]+", s):
                raise ValueError
            v = int(s)
            lo, hi = (INT_MIN, INT_MAX) if t == "int" else (LONG_MIN, LONG_MAX)
            if not lo <= v <= hi:
                raise ValueError
            return v
        if t == "double":
            return float(s)
        if t == "list":
            return [] if not s else [p for p in re.split(r"\s*,\s*", s)]
        return s
    except ValueError as e:
        if isinstance(e, InvalidConfig):
            raise
        raise _invalid(defn.name, s, f"Not a number of type {t.upper()}") from None


def broker_default(config: BrokerConfig, name: str) -> str:
    """The value a topic without an override gets: the first broker synonym that has a value
    (scaled to the topic config's unit), else Kafka's topic default."""
    defn = TOPIC_CONFIG_DEFS[name]
    for synonym, scale in defn.synonyms:
        if synonym not in CONFIG_DEFS:
            continue
        v = config[synonym]
        if v is None:
            continue
        if scale != 1:
            v = int(v) * scale
        return str(v).lower() if isinstance(v, bool) else str(v)
    return defn.default


def broker_synonym_source(config: BrokerConfig, name: str) -> str | None:
    """The broker config a topic default comes from (the one DescribeConfigs names as synonym)."""
    defn = TOPIC_CONFIG_DEFS[name]
    for synonym, _ in defn.synonyms:
        if synonym in CONFIG_DEFS and config[synonym] is not None:
            return synonym
    return defn.synonyms[0][0] if defn.synonyms else None


def validate(configs: dict[str, str | None], config: BrokerConfig,
             existing: dict[str, str] | None = None) -> dict[str, Any]:
    """Kafka's LogConfig.validate for a topic's full override set; returns the parsed overrides.
    Raises KafkaError(INVALID_CONFIG) with Kafka's message."""
    for key in configs:
        if key not in TOPIC_CONFIG_DEFS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key}")
    for key, value in configs.items():
        if value is None:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {key}")
    try:
        parsed = {k: parse_value(TOPIC_CONFIG_DEFS[k], v) for k, v in configs.items()}
        for k, v in parsed.items():
            check = TOPIC_CONFIG_DEFS[k].validator
            if check is not None:
                check(k, v)
    except InvalidConfig as e:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None

    def effective(key):
        if key in parsed:
            return parsed[key]
        return parse_value(TOPIC_CONFIG_DEFS[key], broker_default(config, key))

    lo, hi = effective("min.compaction.lag.ms"), effective("max.compaction.lag.ms")
    if lo > hi:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"conflict topic config setting min.compaction.lag.ms ({lo}) > "
                                                   f"max.compaction.lag.ms ({hi})")
    if effective("remote.storage.enable"):
        # remote.log.storage.system.enable defaults to false in Kafka, and we have none
        raise KafkaError(ErrorCode.INVALID_CONFIG, "Tiered Storage functionality is disabled in the broker. "
                                                   "Topic cannot be configured with remote log storage.")
    was_remote = (existing or {}).get("remote.storage.enable", "false").strip().lower() == "true"
    if was_remote and not effective("remote.log.delete.on.disable"):
        raise KafkaError(ErrorCode.INVALID_CONFIG, "It is invalid to disable remote storage without deleting "
                                                   "remote data.")
    return parsed
