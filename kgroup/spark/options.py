"""Option parsing for the ``kgroup`` Spark data source (no pyspark import: testable alone).

Option names follow Spark's built-in Kafka source (``kafka.bootstrap.servers``, ``subscribe``,
``subscribePattern``, ``assign``, ``startingOffsets``, ``endingOffsets``, ``maxOffsetsPerTrigger``,
``failOnDataLoss``, ``kafka.group.id``, ``groupIdPrefix``, ``includeHeaders``, ``minPartitions``,
``kafkaConsumer.pollTimeoutMs``) and mean the same; kgroup adds ``groupMode``
(``standalone`` | ``coordinated``) and ``assignor`` (``range`` | ``roundrobin`` | ``sticky``; with
``kafka.group.protocol=consumer`` (KIP-848) the broker assigns and ``assignor`` names its server-side
assignor, ``uniform`` | ``range``).
Spark hands options over case-insensitively (lower-cased keys); any other ``kafka.<key>`` is a
consumer config passed to the kgroup client, checked against its known keys. An unknown option,
or one of Spark's Kafka options this source does not implement, is an error naming it.
``kafka.isolation.level`` works as in Spark: ``read_uncommitted`` by default (the consumer's
default); with ``read_committed`` the driver plans up to the last stable offset and the executors'
consumers drop aborted transactions and transaction markers (offsets have gaps, as in Spark).

Offsets in ``startingOffsets`` / ``endingOffsets`` JSON use Spark's layout
``{"topic": {"0": 23, "1": -2}}`` with -2 = earliest and -1 = latest.
"""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field

from kgroup.client.config import CONSUMER, ConfigError, ConsumerConfig

log = logging.getLogger("kgroup.spark")

EARLIEST = -2
LATEST = -1

# canonical spelling of every option this source understands, keyed by its lower-case form
_KNOWN = {name.lower(): name for name in (
    "kafka.bootstrap.servers", "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
    "maxOffsetsPerTrigger", "failOnDataLoss", "kafka.group.id", "groupIdPrefix", "includeHeaders",
    "minPartitions", "kafkaConsumer.pollTimeoutMs", "groupMode", "assignor", "startingTimestamp",
    "endingTimestamp", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "minOffsetsPerTrigger", "maxTriggerDelay", "maxRecordsPerPartition")}

# Spark Kafka source options that exist there but are not implemented here
_SPARK_UNSUPPORTED = {name.lower(): name for name in (
    "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "kafka.consumer.cache.capacity")}

# kafka.* keys Spark refuses because the source manages them itself (KafkaSourceProvider)
_KAFKA_MANAGED = {
    "auto.offset.reset": "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
                         "'startingOffsets' to 'earliest' or 'latest' to specify where to start.",
    "key.deserializer": "Kafka option 'key.deserializer' is not supported, as keys are always read as byte "
                        "arrays. Use DataFrame operations to explicitly deserialize the keys.",
    "value.deserializer": "Kafka option 'value.deserializer' is not supported, as values are always read as byte "
                          "arrays. Use DataFrame operations to explicitly deserialize the values.",
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported: the source commits the offsets "
                          "of every completed micro-batch to the group itself.",
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported.",
    "partition.assignment.strategy": "Kafka option 'partition.assignment.strategy' is not supported; use the "
                                     "source option 'assignor' with groupMode=coordinated.",
}

ASSIGNORS = ("range", "roundrobin", "sticky")
SERVER_ASSIGNORS = ("uniform", "range")  # KIP-848: kafka.group.protocol=consumer, the broker assigns
GROUP_MODES = ("standalone", "coordinated")


class OptionError(ValueError):
    """An invalid option of the kgroup source (Spark shows it as the query's error)."""


def _tps(spec: dict) -> str:
    return "Set(" + ", ".join(f"{t}-{p}" for t, p in sorted(spec)) + ")"


def _bool(name: str, value: str) -> bool:
    v = str(value).strip().lower()
    if v not in ("true", "false"):
        raise OptionError(f"Invalid value '{value}' for option '{name}': must be 'true' or 'false'")
    return v == "true"


def _positive_int(name: str, value: str) -> int:
    try:
        n = int(str(value).strip())
    except ValueError:
        raise OptionError(f"Invalid value '{value}' for option '{name}': must be a positive integer") from None
    if n <= 0:
        raise OptionError(f"Invalid value '{value}' for option '{name}': must be a positive integer")
    return n


def parse_offsets_json(name: str, text: str) -> dict[tuple[str, int], int]:
    """``{"t": {"0": 23, "1": -2}}`` -> {(t, 0): 23, (t, 1): -2}."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise OptionError(f"Invalid JSON in option '{name}': {text!r} ({e})") from None
    if not isinstance(data, dict):
        raise OptionError(f"Option '{name}' must be 'earliest', 'latest' or JSON like "
                          f'{{"topicA":{{"0":23,"1":-1}}}}, got {text!r}')
    out: dict[tuple[str, int], int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(f"Option '{name}': the value for topic '{topic}' must be an object "
                              f"{{partition: offset}}, got {parts!r}")
        for p, off in parts.items():
            try:
                pnum = int(p)
            except ValueError:
                raise OptionError(f"Option '{name}': partition {p!r} of topic '{topic}' is not a number") from None
            if not isinstance(off, int) or isinstance(off, bool) or off < EARLIEST:
                raise OptionError(f"Option '{name}': offset {off!r} for {topic}-{p} must be an integer >= -2")
            out[(topic, pnum)] = off
    return out


_TIMESTAMP_JSON_EXAMPLE = ('Expected e.g. {"topicA": {"0": 123456789, "1": 123456789}, '
                           '"topicB": {"0": 123456789, "1": 123456789}}, got ')


def parse_timestamps_json(text: str) -> dict[tuple[str, int], int]:
    """Spark's JsonUtils.partitionTimestamps: ``{"t": {"0": 1700000000000}}``."""
    try:
        data = json.loads(text)
        out = {}
        for topic, parts in data.items():
            for p, ts in parts.items():
                if not isinstance(ts, int) or isinstance(ts, bool):
                    raise ValueError(ts)
                out[(topic, int(p))] = ts
        return out
    except (ValueError, AttributeError, TypeError):
        raise OptionError(_TIMESTAMP_JSON_EXAMPLE + text) from None


def _long(value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise OptionError(f"Expected a single long value, got {value.strip()}") from None


_TIME_UNITS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60000, "min": 60000, "h": 3600000, "d": 86400000}


def _time_ms(name: str, value: str) -> int:
    """Spark's Utils.timeStringAsMs: a number with an optional unit (ms when none)."""
    m = re.fullmatch(r"\s*(-?[0-9]+)\s*([a-z]*)\s*", value.lower())
    if not m or (m.group(2) and m.group(2) not in _TIME_UNITS):
        raise OptionError(f"Invalid value '{value}' for option '{name}': Time must be specified as seconds (s), "
                          "milliseconds (ms), microseconds (us), minutes (m or min), hour (h), or day (d). "
                          "E.g. 50s, 100ms, or 250us.")
    return int(int(m.group(1)) * _TIME_UNITS[m.group(2) or "ms"])


def _parse_position(name: str, value: str):
    v = value.strip()
    if v.lower() in ("earliest", "latest"):
        return v.lower()
    return parse_offsets_json(name, v)


@dataclass
class SourceOptions:
    """The validated options of one ``spark.read/readStream.format("kgroup")``."""

    bootstrap_servers: str
    subscribe: list[str] | None = None
    subscribe_pattern: str | None = None
    assign: dict[str, list[int]] | None = None
    starting_offsets: object = None  # "earliest" | "latest" | {(t, p): offset}; None = mode default
    ending_offsets: object = None  # "latest" | {(t, p): offset}; None = "latest" (batch only)
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    group_id: str | None = None
    group_id_prefix: str = "spark-kafka-source"
    include_headers: bool = False
    min_partitions: int | None = None
    poll_timeout_ms: int = 120000
    group_mode: str = "standalone"
    assignor: str | None = "range"  # classic: the client assignor; consumer: group.remote.assignor
    group_protocol: str = "classic"  # kafka.group.protocol: "consumer" is KIP-848's protocol
    starting_timestamp: int | None = None  # startingTimestamp (wins over the two below)
    starting_by_timestamp: dict | None = None  # startingOffsetsByTimestamp {(t, p): ts}
    ending_timestamp: int | None = None
    ending_by_timestamp: dict | None = None
    timestamp_strategy: str = "error"  # startingOffsetsByTimestampStrategy: error | latest
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000  # maxTriggerDelay, Spark's default 15m
    max_records_per_partition: int | None = None
    kafka_params: dict[str, str] = field(default_factory=dict)
    explicit: set[str] = field(default_factory=set)

    # --- per-mode checks (Spark checks these in createRelation / createSource) ---------------------

    def starting_spec(self, default):
        """Spark's getKafkaOffsetRangeLimit: startingTimestamp, else startingOffsetsByTimestamp, else
        startingOffsets, else ``default``; a timestamp spec is ("timestamp", ts or {(t, p): ts})."""
        if self.starting_timestamp is not None:
            return ("timestamp", self.starting_timestamp)
        if self.starting_by_timestamp is not None:
            return ("timestamp", self.starting_by_timestamp)
        return self.starting_offsets or default

    def ending_spec(self):
        if self.ending_timestamp is not None:
            return ("timestamp", self.ending_timestamp)
        if self.ending_by_timestamp is not None:
            return ("timestamp", self.ending_by_timestamp)
        return self.ending_offsets or "latest"

    def check_batch(self) -> None:
        start, end = self.starting_spec("earliest"), self.ending_spec()
        self._check_limits(start, end)
        start = None if isinstance(start, tuple) else start
        end = None if isinstance(end, tuple) else end
        if self.group_mode == "coordinated":
            raise OptionError("groupMode=coordinated only applies to streaming queries (spark.readStream)")
        for name in ("minoffsetspertrigger", "maxoffsetspertrigger", "maxtriggerdelay"):
            if name in self.explicit:
                log.warning("%s option ignored in batch queries", _KNOWN[name])
        if start == "latest":
            raise OptionError("starting offset can't be latest for batch queries on Kafka")
        if isinstance(start, dict):
            bad = [f"{t}-{p}" for (t, p), o in start.items() if o == LATEST]
            if bad:
                raise OptionError(f"startingOffsets for {', '.join(bad)} can't be latest for batch queries on Kafka")
        if end == "earliest":
            raise OptionError("ending offset can't be earliest for batch queries on Kafka")
        if isinstance(end, dict):
            bad = [f"{t}-{p}" for (t, p), o in end.items() if o == EARLIEST]
            if bad:
                raise OptionError(f"ending offset for {', '.join(bad)} can't be earliest for batch queries on Kafka")

    @staticmethod
    def _check_limits(start, end) -> None:
        """Spark's checkOffsetLimitValidity: the same partitions on both sides, start <= end."""
        kinds = (isinstance(start, tuple), isinstance(end, tuple))
        if kinds == (True, True) and isinstance(start[1], dict) and isinstance(end[1], dict):
            start, end = start[1], end[1]
        elif kinds != (False, False) or not (isinstance(start, dict) and isinstance(end, dict)):
            return
        if set(start) != set(end):
            raise OptionError("The specified start offset and end offset should have the same topic-partitions.\n"
                              f"Topic-partitions for start offset: {_tps(start)}, topic-partitions for end offset: "
                              f"{_tps(end)}.")
        for (t, p), so in sorted(start.items()):
            eo = end[(t, p)]
            if so > eo and so >= 0 and eo >= 0:
                what = "timestamp" if kinds[0] else "offset"
                raise OptionError(f"The specified start {what} {so} is greater than the end {what} {eo} for topic "
                                  f"{t} partition {p}.")

    def check_stream(self) -> None:
        if "endingoffsets" in self.explicit:
            raise OptionError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in self.explicit:
            raise OptionError("ending timestamp not valid in streaming queries")
        if self.group_mode == "coordinated":
            if self.assign is not None:
                raise OptionError("groupMode=coordinated needs 'subscribe' or 'subscribePattern': with 'assign' "
                                  "the partitions are fixed and no group assignment takes place")
            if not self.group_id:
                raise OptionError("groupMode=coordinated needs 'kafka.group.id': the applications that share "
                                  "a topic join the group of that name")

    def consumer_params(self) -> dict[str, str]:
        """kafka.* pass-through configs (Kafka keys) for the kgroup client."""
        return dict(self.kafka_params)


def parse_options(options) -> SourceOptions:
    """Validate Spark's (case-insensitive) option map into :class:`SourceOptions`."""
    raw = {str(k).lower(): str(v) for k, v in dict(options).items()}
    kafka_params: dict[str, str] = {}
    for key in raw:
        if key in _KNOWN:
            continue
        if key in _SPARK_UNSUPPORTED:
            raise OptionError(f"Option '{_SPARK_UNSUPPORTED[key]}' of Spark's Kafka source is not supported by "
                              "the kgroup source")
        if key.startswith("kafka."):
            kkey = key[len("kafka."):]
            if kkey in _KAFKA_MANAGED:
                raise OptionError(_KAFKA_MANAGED[kkey])
            if kkey not in CONSUMER:
                raise OptionError(f"Unknown option '{key}': '{kkey}' is not a consumer configuration of the kgroup "
                                  "client")
            kafka_params[kkey] = raw[key]
            continue
        raise OptionError(f"Unknown option '{key}' for the kgroup source (known options: "
                          f"{', '.join(sorted(_KNOWN.values()))}, and kafka.<consumer config>)")

    bootstrap = raw.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer")
    try:  # type-check pass-through consumer configs now (driver side), not in a task
        ConsumerConfig({"bootstrap.servers": bootstrap, **kafka_params})
    except ConfigError as e:
        raise OptionError(f"Invalid Kafka consumer option: {e}") from None

    strategies = [k for k in ("assign", "subscribe", "subscribepattern") if k in raw]
    if len(strategies) != 1:
        raise OptionError("One of the following options must be specified for Kafka source: subscribe, "
                          "subscribePattern, assign. See the docs for more details."
                          if not strategies else
                          "Only one of the following options can be specified for Kafka source: subscribe, "
                          f"subscribePattern, assign (got {', '.join(_KNOWN[s] for s in strategies)})")
    opts = SourceOptions(bootstrap_servers=bootstrap, kafka_params=kafka_params, explicit=set(raw))
    kind = strategies[0]
    value = raw[kind]
    if kind == "subscribe":
        topics = [t.strip() for t in value.split(",") if t.strip()]
        if not topics:
            raise OptionError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
        opts.subscribe = topics
    elif kind == "subscribepattern":
        if not value.strip():
            raise OptionError("Pattern to subscribe is empty as specified value for option 'subscribePattern' is ''")
        try:
            re.compile(value.strip())
        except re.error as e:
            raise OptionError(f"Invalid regular expression in option 'subscribePattern': {e}") from None
        opts.subscribe_pattern = value.strip()
    else:
        try:
            data = json.loads(value)
        except ValueError:
            data = None
        if not isinstance(data, dict) or not data or not all(
                isinstance(ps, list) and all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in ps)
                for ps in data.values()):
            raise OptionError(f"Option 'assign' must be JSON like {{\"topicA\":[0,1],\"topicB\":[2,4]}}, got {value!r}")
        opts.assign = {t: sorted(set(ps)) for t, ps in data.items()}

    if "startingoffsets" in raw:
        opts.starting_offsets = _parse_position("startingOffsets", raw["startingoffsets"])
    if "endingoffsets" in raw:
        opts.ending_offsets = _parse_position("endingOffsets", raw["endingoffsets"])
    if "maxoffsetspertrigger" in raw:
        opts.max_offsets_per_trigger = _positive_int("maxOffsetsPerTrigger", raw["maxoffsetspertrigger"])
    if "failondataloss" in raw:
        opts.fail_on_data_loss = _bool("failOnDataLoss", raw["failondataloss"])
    if "includeheaders" in raw:
        opts.include_headers = _bool("includeHeaders", raw["includeheaders"])
    if "minpartitions" in raw:
        try:
            opts.min_partitions = int(raw["minpartitions"].strip())
        except ValueError:
            raise OptionError(f"Invalid value '{raw['minpartitions']}' for option 'minPartitions': must be a positive "
                              "integer") from None
        if opts.min_partitions <= 0:
            raise OptionError("minPartitions must be positive")
    if "maxrecordsperpartition" in raw:
        opts.max_records_per_partition = _long(raw["maxrecordsperpartition"])
        if opts.max_records_per_partition <= 0:
            raise OptionError("maxrecordsperpartition must be positive")
    if "startingtimestamp" in raw:
        opts.starting_timestamp = _long(raw["startingtimestamp"])
    if "startingoffsetsbytimestamp" in raw:
        opts.starting_by_timestamp = parse_timestamps_json(raw["startingoffsetsbytimestamp"].strip())
    if "endingtimestamp" in raw:
        opts.ending_timestamp = _long(raw["endingtimestamp"])
    if "endingoffsetsbytimestamp" in raw:
        opts.ending_by_timestamp = parse_timestamps_json(raw["endingoffsetsbytimestamp"].strip())
    if "startingoffsetsbytimestampstrategy" in raw:
        strategy = raw["startingoffsetsbytimestampstrategy"].strip().lower()
        if strategy not in ("error", "latest"):
            raise OptionError(f"No value found for '{strategy.upper()}'")
        opts.timestamp_strategy = strategy
    if "minoffsetspertrigger" in raw:
        opts.min_offsets_per_trigger = _positive_int("minOffsetsPerTrigger", raw["minoffsetspertrigger"])
    if "maxtriggerdelay" in raw:
        opts.max_trigger_delay_ms = _time_ms("maxTriggerDelay", raw["maxtriggerdelay"])
    if opts.min_offsets_per_trigger is not None and opts.max_offsets_per_trigger is not None and \
            opts.min_offsets_per_trigger > opts.max_offsets_per_trigger:
        raise OptionError(f"The value of minOffsetPerTrigger({opts.min_offsets_per_trigger}) is higher than the "
                          f"maxOffsetsPerTrigger({opts.max_offsets_per_trigger}).")
    if "kafkaconsumer.polltimeoutms" in raw:
        opts.poll_timeout_ms = _positive_int("kafkaConsumer.pollTimeoutMs", raw["kafkaconsumer.polltimeoutms"])
    if "kafka.group.id" in raw:
        if not raw["kafka.group.id"].strip():
            raise OptionError("Option 'kafka.group.id' must not be empty")
        opts.group_id = raw["kafka.group.id"].strip()
    if "groupidprefix" in raw:
        if not raw["groupidprefix"].strip():
            raise OptionError("Option 'groupIdPrefix' must not be empty")
        opts.group_id_prefix = raw["groupidprefix"].strip()
    if "groupmode" in raw:
        mode = raw["groupmode"].strip().lower()
        if mode not in GROUP_MODES:
            raise OptionError(f"Invalid value '{raw['groupmode']}' for option 'groupMode': must be one of "
                              f"{', '.join(GROUP_MODES)}")
        opts.group_mode = mode
    if str(kafka_params.get("group.protocol", "classic")).strip().lower() == "consumer":
        opts.group_protocol = "consumer"
        opts.assignor = None  # the broker's default assignor unless 'assignor' names one
    if "assignor" in raw:
        name = raw["assignor"].strip().lower()
        choices = SERVER_ASSIGNORS if opts.group_protocol == "consumer" else ASSIGNORS
        if name not in choices:
            raise OptionError(f"Invalid value '{raw['assignor']}' for option 'assignor': must be one of "
                              f"{', '.join(choices)}" + (" (server-side assignors: kafka.group.protocol=consumer)"
                                                         if opts.group_protocol == "consumer" else ""))
        if opts.group_mode != "coordinated":
            raise OptionError("Option 'assignor' only applies with groupMode=coordinated")
        opts.assignor = name
    if isinstance(opts.starting_offsets, dict) or isinstance(opts.ending_offsets, dict):
        if opts.assign is not None:
            wanted = {(t, p) for t, ps in opts.assign.items() for p in ps}
            for name, spec in (("startingOffsets", opts.starting_offsets), ("endingOffsets", opts.ending_offsets)):
                if isinstance(spec, dict) and set(spec) - wanted:
                    extra = sorted(f"{t}-{p}" for t, p in set(spec) - wanted)
                    raise OptionError(f"{name} names partitions that are not assigned: {', '.join(extra)}")
    return opts
