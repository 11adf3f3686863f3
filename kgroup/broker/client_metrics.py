"""Client metrics (KIP-714): CLIENT_METRICS subscriptions, the client instances that ask for them,
and the metrics they push, shown per client instance on the metrics endpoint.

A subscription is a CLIENT_METRICS config resource (IncrementalAlterConfigs / AlterConfigs,
persisted in ``kgroup-client-metrics.json``): ``metrics`` (name prefixes, ``*`` for all),
``interval.ms`` (100 ms to 1 h, default 5 min) and ``match`` (``selector=regex`` pairs on
client_instance_id, client_id, client_software_name, client_software_version,
client_source_address, client_source_port; none matches every client) (ClientMetricsConfigs).

GetTelemetrySubscriptions gives a client (a new instance id when it sends none) the union of the
metrics of the subscriptions it matches at the shortest of their intervals, with a subscription id
that changes with them; PushTelemetry checks what ClientMetricsManager checks (a terminating
client pushes no more, one push per interval, the current subscription id, a known compression,
``telemetry.max.bytes``), decompresses the OTLP MetricsData and keeps each metric's last pushed
value per client instance. Like Kafka, the broker offers these APIs only where the metrics have a
destination: with ``metrics.listener`` set.
"""
from __future__ import annotations

import json
import os
import struct
import uuid
import zlib

import re2

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records import decompress

CLIENT_METRICS = 16                 # ConfigResource.Type.CLIENT_METRICS
METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
INTERVAL_MS_DEFAULT = 5 * 60 * 1000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3600 * 1000
ALL_METRICS = "*"
SELECTORS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
             "client_source_address", "client_source_port")
# ClientMetricsManager.SUPPORTED_COMPRESSION_TYPES: zstd, lz4, gzip, snappy
ACCEPTED_COMPRESSION_TYPES = [4, 3, 1, 2]
TELEMETRY_MAX_BYTES = 1024 * 1024   # telemetry.max.bytes
_RE2 = re2.Options()
_RE2.log_errors = False


def _list(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def parse_match(patterns: list[str]) -> dict:
    """ClientMetricsConfigs.parseMatchingPatterns: {selector: compiled regex}."""
    out = {}
    for pattern in patterns:
        parts = pattern.split("=")
        if len(parts) != 2 or parts[0].strip() not in SELECTORS:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")
        try:
            out[parts[0].strip()] = re2.compile(parts[1].strip(), _RE2)
        except re2.error:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}") from None
    return out


def validate(name: str, configs: dict[str, str | None]) -> None:
    """ClientMetricsConfigs.validate."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        if key not in (METRICS, INTERVAL_MS, MATCH):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}")
    for key in (METRICS, MATCH):
        values = _list(configs.get(key))
        if len(set(values)) != len(values):
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {configs[key]} for configuration {key}: "
                                                       "Duplicate entries found.")
    if configs.get(INTERVAL_MS) is not None:
        try:
            interval = int(configs[INTERVAL_MS])
        except ValueError:
            raise KafkaError(ErrorCode.INVALID_CONFIG, f"Invalid value {configs[INTERVAL_MS]} for configuration "
                                                       f"{INTERVAL_MS}: Not a number of type INT") from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid value {interval} for {INTERVAL_MS}, interval must "
                                                        "be between 100 and 3600000 (1 hour)")
    parse_match(_list(configs.get(MATCH)))


class _Instance:
    __slots__ = ("instance_id", "attributes", "subscription_id", "version", "metrics", "interval_ms",
                 "last_get", "last_push", "terminating", "last_error", "values", "pushes")

    def __init__(self, instance_id: bytes, attributes: dict, metrics: list[str], interval_ms: int, version: int):
        self.instance_id, self.attributes, self.version = instance_id, attributes, version
        self.metrics, self.interval_ms = metrics, interval_ms
        # ClientMetricsManager.computeSubscriptionId: a CRC of the metrics and interval, XORed
        # with the instance id's hash (here the metrics in name order)
        crc = zlib.crc32((str(metrics) + str(interval_ms)).encode())
        hi, lo = struct.unpack(">qq", instance_id)
        x = hi ^ lo
        self.subscription_id = struct.unpack(">i", struct.pack(">I", (crc ^ (x ^ (x >> 32))) & 0xFFFFFFFF))[0]
        self.last_get = self.last_push = 0
        self.terminating = False
        self.last_error = ErrorCode.NONE
        self.values: dict = {}          # (metric, attributes) -> last pushed value
        self.pushes = 0


class ClientMetrics:
    FILE = "kgroup-client-metrics.json"

    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, self.FILE)
        self.subscriptions: dict[str, dict[str, str]] = {}
        if os.path.exists(self.path):
            self.subscriptions = json.load(open(self.path))["subscriptions"]
        self.version = 0                # bumped by every subscription change
        self.instances: dict[bytes, _Instance] = {}

    # -- subscriptions (config resources) -------------------------------------------------------
    def configs(self, name: str) -> dict[str, str]:
        return dict(self.subscriptions.get(name, {}))

    def set_configs(self, name: str, configs: dict[str, str | None]) -> None:
        configs = {k: v for k, v in configs.items() if v is not None}
        if configs:
            self.subscriptions[name] = configs
        else:
            self.subscriptions.pop(name, None)
        self.version += 1
        from .metadata import _atomic_write
        _atomic_write(self.path, json.dumps({"version": 1, "subscriptions": self.subscriptions}, indent=1,
                                            sort_keys=True))

    # -- the protocol -----------------------------------------------------------------------------
    def _instance(self, instance_id: bytes, attributes: dict) -> _Instance:
        inst = self.instances.get(instance_id)
        if inst is not None and inst.version == self.version:
            return inst
        metrics: set[str] = set()
        interval = INTERVAL_MS_DEFAULT
        everything = False
        for configs in self.subscriptions.values():
            patterns = parse_match(_list(configs.get(MATCH)))
            if all(attributes.get(k) is not None and p.fullmatch(attributes[k]) for k, p in patterns.items()):
                wanted = _list(configs.get(METRICS))
                everything = everything or ALL_METRICS in wanted
                metrics.update(wanted)
                interval = min(interval, int(configs.get(INTERVAL_MS, INTERVAL_MS_DEFAULT)))
        new = _Instance(instance_id, attributes, [ALL_METRICS] if everything else sorted(metrics), interval,
                        self.version)
        if inst is not None:            # a changed subscription keeps what was pushed
            new.values, new.pushes = inst.values, inst.pushes
        self.instances[instance_id] = new
        return new

    def get_subscriptions(self, instance_id: bytes, attributes: dict, now_ms: int):
        """(error, instance) for GetTelemetrySubscriptions."""
        if instance_id == bytes(16):
            instance_id = uuid.uuid4().bytes
        attributes = dict(attributes, client_instance_id=str(uuid.UUID(bytes=instance_id)))
        inst = self._instance(instance_id, attributes)
        if now_ms - max(inst.last_get, inst.last_push) >= inst.interval_ms:
            inst.last_get = now_ms
        elif inst.last_error not in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE):
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED, inst
        inst.last_error = ErrorCode.NONE
        return ErrorCode.NONE, inst

    def push(self, req, attributes: dict, now_ms: int) -> ErrorCode:
        """PushTelemetry: its error code (NONE when the metrics were taken)."""
        if req.client_instance_id == bytes(16):
            return ErrorCode.INVALID_REQUEST
        attributes = dict(attributes, client_instance_id=str(uuid.UUID(bytes=req.client_instance_id)))
        inst = self._instance(req.client_instance_id, attributes)
        error = self._check_push(req, inst, now_ms)
        inst.terminating = req.terminating
        if error:
            inst.last_error = error
            return error
        if req.metrics:
            try:
                data = bytes(req.metrics) if req.compression_type == 0 else decompress(req.compression_type,
                                                                                     req.metrics)
                for name, attrs, value in decode_otlp_metrics(data):
                    inst.values[(name, attrs)] = value
            except Exception:           # noqa: BLE001 - Kafka: an export failure is INVALID_RECORD
                inst.last_error = ErrorCode.INVALID_RECORD
                return ErrorCode.INVALID_RECORD
        inst.pushes += 1
        inst.last_error = ErrorCode.NONE
        return ErrorCode.NONE

    @staticmethod
    def _check_push(req, inst: _Instance, now_ms: int) -> ErrorCode:
        if inst.terminating:
            return ErrorCode.INVALID_REQUEST
        can = inst.last_get > inst.last_push or now_ms - inst.last_push >= inst.interval_ms
        if can:
            inst.last_push = now_ms
        elif not req.terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if req.subscription_id != inst.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if req.compression_type not in (0, 1, 2, 3, 4):
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if req.metrics is not None and len(req.metrics) > TELEMETRY_MAX_BYTES:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE

    def snapshot(self) -> list:
        """[(client instance id, attributes, {(metric, attributes): value})] for the scrape."""
        return [(str(uuid.UUID(bytes=i.instance_id)), dict(i.attributes), dict(i.values))
                for i in self.instances.values() if i.values]


# -- OTLP (opentelemetry/proto/metrics/v1/metrics.proto), the few fields kept ---------------------

def _fields(buf: bytes):
    """Protobuf wire format: yield (field number, wire type, value) of one message."""
    pos, n = 0, len(buf)
    while pos < n:
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos > n:
            raise ValueError("truncated protobuf message")
        yield field, wire, value


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _any_value(buf: bytes) -> str:
    for field, _, value in _fields(buf):
        if field == 1:
            return value.decode()
        if field in (2, 3):
            return str(value if field == 3 else bool(value))
        if field == 4:
            return repr(struct.unpack("<d", value)[0])
    return ""


def _attributes(kvs: list[bytes]) -> tuple:
    out = []
    for kv in kvs:
        key = val = ""
        for field, _, value in _fields(kv):
            if field == 1:
                key = value.decode()
            elif field == 2:
                val = _any_value(value)
        out.append((key, val))
    return tuple(sorted(out))


def _number_points(buf: bytes):
    """Gauge / Sum: their NumberDataPoints as (attributes, value)."""
    for field, _, point in _fields(buf):
        if field != 1:
            continue
        attrs, value = [], None
        for f, _, v in _fields(point):
            if f == 7:
                attrs.append(v)
            elif f == 4:
                value = struct.unpack("<d", v)[0]
            elif f == 6:
                value = struct.unpack("<q", v)[0]
        if value is not None:
            yield _attributes(attrs), value


def decode_otlp_metrics(data: bytes):
    """Yield (metric name, attributes, value) of an OTLP MetricsData: gauges and sums by value,
    histograms as ``<name>.count`` and ``<name>.sum``; the resource's attributes go with each."""
    for field, _, rm in _fields(data):
        if field != 1:
            continue
        resource: tuple = ()
        scopes = []
        for f, _, v in _fields(rm):
            if f == 1:
                resource = _attributes([a for ff, _, a in _fields(v) if ff == 1])
            elif f == 2:
                scopes.append(v)
        for scope in scopes:
            for f, _, metric in _fields(scope):
                if f != 2:
                    continue
                name = ""
                for mf, _, mv in _fields(metric):
                    if mf == 1:
                        name = mv.decode()
                    elif mf in (5, 7):
                        for attrs, value in _number_points(mv):
                            yield name, resource + attrs, value
                    elif mf == 9:
                        for pf, _, point in _fields(mv):
                            if pf != 1:
                                continue
                            attrs, count, total = [], None, None
                            for f2, _, v2 in _fields(point):
                                if f2 == 9:
                                    attrs.append(v2)
                                elif f2 == 4:
                                    count = struct.unpack("<Q", v2)[0]
                                elif f2 == 5:
                                    total = struct.unpack("<d", v2)[0]
                            a = resource + _attributes(attrs)
                            if count is not None:
                                yield name + ".count", a, count
                            if total is not None:
                                yield name + ".sum", a, total
