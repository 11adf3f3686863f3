"""Client configuration with the Java client's keys and defaults (Kafka 4.0).

A config is built from a dict of Kafka keys (``"session.timeout.ms"``) and/or keyword arguments
with underscores (``session_timeout_ms=...``); unknown keys are rejected so typos do not pass
silently. Values are coerced to the key's type (``"true"``/``"5000"`` strings from a properties
file work). ``config["max.poll.interval.ms"]`` reads a value; ``config.explicit`` holds the keys the
user set (the producer needs it to decide whether idempotence was asked for).
"""
from __future__ import annotations

import itertools
from typing import Any, Mapping

_LIST = "list"

COMMON = {
    "bootstrap.servers": ("localhost:9092", _LIST),
    "client.id": ("", str),
    "client.rack": ("", str),
    "request.timeout.ms": (30000, int),
    "retry.backoff.ms": (100, int),
    "retry.backoff.max.ms": (1000, int),
    "reconnect.backoff.ms": (50, int),
    "reconnect.backoff.max.ms": (1000, int),
    "metadata.max.age.ms": (300000, int),
    "socket.connection.setup.timeout.ms": (10000, int),
    "connections.max.idle.ms": (540000, int),
    "security.protocol": ("PLAINTEXT", str),
    # TLS and SASL (client/security.py): Java's keys; stores in PEM form
    "sasl.mechanism": ("GSSAPI", str),
    "sasl.jaas.config": (None, str),
    "ssl.truststore.type": ("JKS", str),
    "ssl.truststore.location": (None, str),
    "ssl.truststore.certificates": (None, str),
    "ssl.keystore.type": ("JKS", str),
    "ssl.keystore.location": (None, str),
    "ssl.keystore.password": (None, str),
    "ssl.keystore.certificate.chain": (None, str),
    "ssl.keystore.key": (None, str),
    "ssl.key.password": (None, str),
    "ssl.endpoint.identification.algorithm": ("https", str),
}

CONSUMER = dict(COMMON, **{
    "group.id": (None, str),
    "group.instance.id": (None, str),
    "group.protocol": ("classic", str),  # KIP-848: "consumer" uses ConsumerGroupHeartbeat
    "group.remote.assignor": (None, str),  # KIP-848: null lets the broker pick (its first assignor)
    "session.timeout.ms": (45000, int),
    "heartbeat.interval.ms": (3000, int),
    "max.poll.interval.ms": (300000, int),
    "max.poll.records": (500, int),
    "partition.assignment.strategy": (["range", "cooperative-sticky"], _LIST),
    "enable.auto.commit": (True, bool),
    "auto.commit.interval.ms": (5000, int),
    "auto.offset.reset": ("latest", str),
    "fetch.min.bytes": (1, int),
    "fetch.max.wait.ms": (500, int),
    "max.partition.fetch.bytes": (1048576, int),
    "fetch.max.bytes": (52428800, int),
    "isolation.level": ("read_uncommitted", str),
    "default.api.timeout.ms": (60000, int),
    "exclude.internal.topics": (True, bool),
    "allow.auto.create.topics": (True, bool),
    "check.crcs": (True, bool),
    "key.deserializer": (None, object),
    "value.deserializer": (None, object),
    "internal.leave.group.on.close": (True, bool),
})

PRODUCER = dict(COMMON, **{
    "acks": ("all", str),
    "batch.size": (16384, int),
    "linger.ms": (5, int),  # KIP-1030: 0 -> 5 in Kafka 4.0
    "compression.type": ("none", str),
    "enable.idempotence": (True, bool),
    "max.in.flight.requests.per.connection": (5, int),
    "retries": (2147483647, int),
    "delivery.timeout.ms": (120000, int),
    "max.request.size": (1048576, int),
    "max.block.ms": (60000, int),
    "buffer.memory": (33554432, int),
    "partitioner.ignore.keys": (False, bool),
    "partitioner.adaptive.partitioning.enable": (True, bool),
    "transactional.id": (None, str),
    "transaction.timeout.ms": (60000, int),
    "key.serializer": (None, object),
    "value.serializer": (None, object),
})

# Java's ConsumerConfig keys a KafkaShareConsumer takes (ShareConsumerConfig refuses the group and
# offset keys below, which have no meaning in a share group).
SHARE_CONSUMER = dict(COMMON, **{
    "group.id": (None, str),
    "share.acknowledgement.mode": ("implicit", str),
    "share.acquire.mode": ("batch_optimized", str),
    "max.poll.interval.ms": (300000, int),
    "max.poll.records": (500, int),
    "fetch.min.bytes": (1, int),
    "fetch.max.wait.ms": (500, int),
    "max.partition.fetch.bytes": (1048576, int),
    "fetch.max.bytes": (52428800, int),
    "default.api.timeout.ms": (60000, int),
    "check.crcs": (True, bool),
    "key.deserializer": (None, object),
    "value.deserializer": (None, object),
})

SHARE_GROUP_UNSUPPORTED = ("auto.offset.reset", "enable.auto.commit", "group.instance.id", "isolation.level",
                           "partition.assignment.strategy", "interceptor.classes", "session.timeout.ms",
                           "heartbeat.interval.ms", "group.protocol", "group.remote.assignor")

ADMIN = dict(COMMON, **{
    "default.api.timeout.ms": (60000, int),
})

# Java class names accepted for partition.assignment.strategy
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}

_client_ids = itertools.count(1)


class ConfigError(ValueError):
    """Java's ConfigException."""


def _coerce(key: str, value: Any, typ) -> Any:
    if value is None or typ is object:
        return value
    if typ is _LIST:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        return list(value)
    if typ is bool:
        if isinstance(value, str):
            if value.lower() in ("true", "false"):
                return value.lower() == "true"
            raise ConfigError(f"Invalid value {value} for configuration {key}: Expected value to be either true or false")
        return bool(value)
    if typ is int:
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"Invalid value {value} for configuration {key}: Not a number of type INT") from None
    return str(value)


class ClientConfig:
    """A validated mapping of Kafka config keys to values."""

    DEFS: dict = COMMON
    KIND = "client"

    def __init__(self, configs: Mapping[str, Any] | None = None, **kwargs):
        values = {k: v for k, (v, _) in self.DEFS.items()}
        self.explicit: set[str] = set()
        items = dict(configs or {})
        items.update({k.replace("_", "."): v for k, v in kwargs.items()})
        self.check_keys(items)
        for key, value in items.items():
            if key not in self.DEFS:
                raise ConfigError(f"Unknown {self.KIND} configuration {key!r}")
            values[key] = _coerce(key, value, self.DEFS[key][1])
            self.explicit.add(key)
        self._values = values
        self.validate()

    def check_keys(self, items: Mapping[str, Any]) -> None:
        """Refuse keys before they are looked at (a subclass names the ones it forbids)."""

    def __getitem__(self, key: str):
        return self._values[key]

    def get(self, key: str, default=None):
        return self._values.get(key, default)

    def as_dict(self) -> dict:
        return dict(self._values)

    def validate(self) -> None:
        if not self["bootstrap.servers"]:
            raise ConfigError("bootstrap.servers must list at least one host:port")
        for server in self["bootstrap.servers"]:
            host, _, port = server.rpartition(":")
            if not host or not port.isdigit():
                raise ConfigError(f"Invalid url in bootstrap.servers: {server}")
        from .security import ClientSecurity
        try:
            ClientSecurity(self)
        except (ValueError, OSError) as e:
            raise ConfigError(str(e)) from None


class ConsumerConfig(ClientConfig):
    DEFS = CONSUMER
    KIND = "consumer"

    def validate(self) -> None:
        super().validate()
        v = self._values
        if v["group.id"] is None and "enable.auto.commit" not in self.explicit:
            v["enable.auto.commit"] = False  # Java: no group, no auto-commit
        if v["group.id"] is None and v["enable.auto.commit"]:
            raise ConfigError("enable.auto.commit cannot be set to true when default group id (null) is used.")
        protocol = str(v["group.protocol"]).lower()
        if protocol not in ("classic", "consumer"):
            raise ConfigError(f"Invalid value {v['group.protocol']} for configuration group.protocol: "
                              "String must be one of: classic, consumer")
        v["group.protocol"] = protocol
        # Java's ConsumerConfig: under KIP-848 the broker owns the session timeout, the heartbeat
        # interval and the assignment; the classic protocol has no remote assignor.
        if protocol == "consumer":
            for key in ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms"):
                if key in self.explicit:
                    raise ConfigError(f"{key} cannot be set when group.protocol=CONSUMER")
        elif v["group.remote.assignor"] is not None:
            raise ConfigError("group.remote.assignor cannot be set when group.protocol=CLASSIC")
        if v["heartbeat.interval.ms"] >= v["session.timeout.ms"]:
            raise ConfigError("Heartbeat must be set lower than the session timeout")
        if v["auto.offset.reset"] not in ("earliest", "latest", "none"):
            raise ConfigError(f"Invalid value {v['auto.offset.reset']} for configuration auto.offset.reset")
        if v["isolation.level"] not in ("read_uncommitted", "read_committed"):
            raise ConfigError(f"Invalid value {v['isolation.level']} for configuration isolation.level")
        v["partition.assignment.strategy"] = [_ASSIGNOR_CLASSES.get(s, s)
                                              for s in v["partition.assignment.strategy"]]
        if not v["client.id"]:
            v["client.id"] = f"consumer-{v['group.id'] or ''}-{next(_client_ids)}" if v["group.id"] \
                else f"consumer-{next(_client_ids)}"
        if v["group.instance.id"] is not None and not v["group.instance.id"].strip():
            raise ConfigError("group.instance.id cannot be empty")

    @property
    def rebalance_timeout_ms(self) -> int:
        """The JoinGroup rebalance timeout is max.poll.interval.ms, as in the Java client."""
        return self["max.poll.interval.ms"]


class ShareConsumerConfig(ClientConfig):
    """Java's ShareConsumerConfig: a ConsumerConfig without the keys a share group has no use for."""

    DEFS = SHARE_CONSUMER
    KIND = "share consumer"

    def check_keys(self, items: Mapping[str, Any]) -> None:
        invalid = [k for k in SHARE_GROUP_UNSUPPORTED if k in items]
        if invalid:
            raise ConfigError(", ".join(invalid) + " cannot be set when using a share group.")

    def validate(self) -> None:
        super().validate()
        v = self._values
        if not v["group.id"]:
            raise ConfigError("You must provide a valid group.id in the consumer configuration.")
        for key, allowed in (("share.acknowledgement.mode", ("implicit", "explicit")),
                             ("share.acquire.mode", ("batch_optimized", "record_limit"))):
            value = str(v[key]).lower()
            if value not in allowed:
                raise ConfigError(f"Invalid value {v[key]} for configuration {key}: "
                                  f"String must be one of: {', '.join(allowed)}")
            v[key] = value
        if v["max.poll.records"] < 1:
            raise ConfigError(f"Invalid value {v['max.poll.records']} for configuration max.poll.records: "
                              "Value must be at least 1")
        if not v["client.id"]:
            v["client.id"] = f"consumer-{v['group.id']}-{next(_client_ids)}"

    @property
    def explicit_acknowledgement(self) -> bool:
        return self["share.acknowledgement.mode"] == "explicit"


class ProducerConfig(ClientConfig):
    DEFS = PRODUCER
    KIND = "producer"

    def validate(self) -> None:
        super().validate()
        v = self._values
        acks = str(v["acks"]).lower()
        if acks == "-1":
            acks = "all"
        if acks not in ("all", "0", "1"):
            raise ConfigError(f"Invalid value {v['acks']} for configuration acks")
        v["acks"] = acks
        if v["compression.type"] not in ("none", "gzip", "snappy", "lz4", "zstd"):
            raise ConfigError(f"Invalid value {v['compression.type']} for configuration compression.type")
        if v["delivery.timeout.ms"] < v["linger.ms"] + v["request.timeout.ms"]:
            raise ConfigError("delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms")
        # Java: idempotence needs acks=all, retries > 0, max.in.flight <= 5. If the user asked
        # for it explicitly a conflict is an error; if it is only the default it is turned off.
        conflict = None
        if acks != "all":
            conflict = "acks must be set to 'all'"
        elif v["retries"] == 0:
            conflict = "retries must be greater than 0"
        elif v["max.in.flight.requests.per.connection"] > 5:
            conflict = "max.in.flight.requests.per.connection must be at most 5"
        if v["enable.idempotence"] and conflict:
            if "enable.idempotence" in self.explicit:
                raise ConfigError(f"Must set enable.idempotence to false or fix: {conflict} in order to use the idempotent producer.")
            v["enable.idempotence"] = False
        if v["transactional.id"] is not None and not v["enable.idempotence"]:
            # as Java: a transactional producer is idempotent; a conflicting config is an error
            raise ConfigError("Cannot set a transactional.id without also enabling idempotence."
                              + (f" ({conflict})" if conflict else ""))
        if not v["client.id"]:
            v["client.id"] = f"producer-{next(_client_ids)}"

    @property
    def acks_value(self) -> int:
        return {"all": -1, "0": 0, "1": 1}[self["acks"]]


class AdminConfig(ClientConfig):
    DEFS = ADMIN
    KIND = "admin"

    def validate(self) -> None:
        super().validate()
        if not self._values["client.id"]:
            self._values["client.id"] = f"adminclient-{next(_client_ids)}"
