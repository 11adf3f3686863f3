"""Broker configuration: Kafka's own keys, types and defaults.

``BrokerConfig.load(path, overrides)`` mirrors ``kafka-server-start.sh server.properties
--override k=v``: a Java-style properties file, then overrides. Every Kafka 4.3 broker key is
accepted: those kgroup applies are below, the rest (kafka_broker_keys.py) are kept and reported
as not applied; any other key is an error naming it. ``DescribeConfigs`` for the broker resource reads the same table, so what we accept is what we
describe.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..coordinator.config import validate_migration_policy
from .kafka_broker_keys import KAFKA_KEYS_NOT_APPLIED

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: str  # "int", "long", "boolean", "string", "list", "double", "short"
    default: Any
    doc: str


def _d(name, type_, default, doc):
    return ConfigDef(name, type_, default, doc)


# Only keys kgroup honours, with Kafka's defaults. Where a single node forces a different default
# (replication factors), the value matches Kafka's own config/server.properties for one broker.
CONFIG_DEFS: dict[str, ConfigDef] = {c.name: c for c in (
    _d("node.id", "int", 1, "The node id of this broker."),
    _d("broker.id", "int", -1, "Legacy name for node.id; when set (>= 0) it must equal node.id."),
    _d("listeners", "list", "PLAINTEXT://:9092",
       "Listener URIs NAME://host:port, comma-separated; each name's security protocol comes from "
       "listener.security.protocol.map (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)."),
    _d("advertised.listeners", "list", None, "Listeners given to clients; defaults to listeners."),
    _d("listener.security.protocol.map", "string",
       "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
       "Listener name to security protocol."),
    _d("inter.broker.listener.name", "string", None,
       "The listener brokers use between themselves; must be one of listeners."),
    _d("security.inter.broker.protocol", "string", "PLAINTEXT",
       "Security protocol between brokers, when inter.broker.listener.name is not set."),
    # TLS (Kafka's SslConfigs; the keystore and truststore in PEM form)
    _d("ssl.keystore.type", "string", "JKS", "Keystore format; kgroup reads PEM."),
    _d("ssl.keystore.location", "string", None, "PEM file with the private key and certificate chain."),
    _d("ssl.keystore.password", "password", None, "Password of the keystore file (PEM: of its key)."),
    _d("ssl.key.password", "password", None, "Password of the private key."),
    _d("ssl.keystore.certificate.chain", "password", None, "Certificate chain in PEM, inline."),
    _d("ssl.keystore.key", "password", None, "Private key in PEM (PKCS#8), inline."),
    _d("ssl.truststore.type", "string", "JKS", "Truststore format; kgroup reads PEM."),
    _d("ssl.truststore.location", "string", None, "PEM file of trusted CA certificates."),
    _d("ssl.truststore.password", "password", None, "Password of the truststore (unused for PEM)."),
    _d("ssl.truststore.certificates", "password", None, "Trusted certificates in PEM, inline."),
    _d("ssl.client.auth", "string", "none", "Client certificates: none, requested or required."),
    _d("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", "TLS versions accepted."),
    _d("ssl.protocol", "string", "TLSv1.3", "The TLS protocol of the context."),
    _d("ssl.cipher.suites", "list", None, "TLS 1.2 cipher suites (IANA names); unset: the defaults."),
    _d("ssl.endpoint.identification.algorithm", "string", "https",
       "Host name verification of the peer (a broker verifies no client host name)."),
    _d("ssl.principal.mapping.rules", "string", "DEFAULT",
       "Rules mapping a client certificate's distinguished name to a principal name."),
    # SASL
    _d("sasl.enabled.mechanisms", "list", "GSSAPI", "SASL mechanisms enabled on SASL listeners."),
    _d("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", "SASL mechanism between brokers."),
    _d("connection.failed.authentication.delay.ms", "int", 100,
       "How long a connection whose authentication failed stays open (its error answered, nothing more "
       "read) before it is closed, so clients read the answer and retry no faster."),
    _d("connections.max.reauth.ms", "long", 0,
       "Most milliseconds a SASL session lasts before the client must re-authenticate (KIP-368); 0: forever."),
    # Authorization
    _d("authorizer.class.name", "string", "",
       "org.apache.kafka.metadata.authorizer.StandardAuthorizer (or kafka.security.authorizer.AclAuthorizer) "
       "to enforce ACLs; empty: every request allowed."),
    _d("super.users", "string", None, "Principals allowed everything, separated by semicolons."),
    _d("allow.everyone.if.no.acl.found", "boolean", False,
       "Allow a request on a resource that no ACL matches."),
    _d("log.dir", "string", "/tmp/kafka-logs", "The directory in which the log data is kept."),
    _d("log.dirs", "list", None, "Directories for log data; overrides log.dir. kgroup uses the first."),
    _d("num.partitions", "int", 1, "Default number of partitions for new topics."),
    _d("default.replication.factor", "int", 1, "Default replication factor for new topics."),
    _d("auto.create.topics.enable", "boolean", True, "Create topics on Metadata/Produce when unknown."),
    _d("delete.topic.enable", "boolean", True, "Allow DeleteTopics."),
    _d("socket.request.max.bytes", "int", 104857600, "Largest request frame accepted."),
    _d("queued.max.request.bytes", "long", -1,
       "Memory for requests being read, over all connections; -1: no pool (each request is still "
       "bounded by socket.request.max.bytes and its buffer grows only as its bytes arrive)."),
    _d("connections.max.idle.ms", "long", 600000, "Close connections idle for this long."),
    _d("max.connections", "int", INT_MAX, "Most connections the broker accepts at once."),
    _d("max.connections.per.ip", "int", INT_MAX, "Most connections from one IP address."),
    _d("socket.listen.backlog.size", "int", 50, "Connections queued by the kernel for accept()."),
    _d("message.max.bytes", "int", 1048588, "Largest record batch accepted (max.message.bytes)."),
    _d("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets."),
    _d("offsets.topic.replication.factor", "short", 1, "Replication factor of __consumer_offsets."),
    _d("offsets.topic.segment.bytes", "int", 104857600, "Segment size of __consumer_offsets."),
    _d("offsets.retention.minutes", "int", 10080, "Retention of committed offsets of empty groups."),
    _d("offsets.retention.check.interval.ms", "long", 600000, "How often offsets expiry runs."),
    _d("offsets.commit.timeout.ms", "int", 5000, "How long an offset commit write may take."),
    _d("offsets.load.buffer.size", "int", 5242880,
       "Batch size for reading from the offsets segments when loading offsets into the cache "
       "(soft-limit, overridden if records are too large)."),
    _d("offset.metadata.max.bytes", "int", 4096, "Largest metadata string in an offset commit."),
    _d("group.initial.rebalance.delay.ms", "int", 3000, "Wait for more members before the first rebalance."),
    _d("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout a member may ask."),
    _d("group.max.session.timeout.ms", "int", 1800000, "Largest session timeout a member may ask."),
    _d("group.max.size", "int", INT_MAX, "Most members in one classic group."),
    _d("group.consumer.session.timeout.ms", "int", 45000, "Session timeout of consumer-protocol members (KIP-848)."),
    _d("group.consumer.min.session.timeout.ms", "int", 45000, "Lower bound of group.consumer.session.timeout.ms."),
    _d("group.consumer.max.session.timeout.ms", "int", 60000, "Upper bound of group.consumer.session.timeout.ms."),
    _d("group.consumer.heartbeat.interval.ms", "int", 5000, "Heartbeat interval given to consumer-protocol members."),
    _d("group.consumer.min.heartbeat.interval.ms", "int", 5000, "Lower bound of group.consumer.heartbeat.interval.ms."),
    _d("group.consumer.max.heartbeat.interval.ms", "int", 15000, "Upper bound of group.consumer.heartbeat.interval.ms."),
    _d("group.consumer.max.size", "int", INT_MAX, "Most members in one consumer-protocol group."),
    _d("group.consumer.assignors", "list", "uniform,range", "Server-side assignors; the first is the default."),
    _d("group.consumer.migration.policy", "string", "bidirectional",
       "Online migration between the classic and the consumer group protocol (KIP-848): disabled, upgrade, "
       "downgrade or bidirectional (case insensitive)."),
    # share groups (KIP-932): GroupCoordinatorConfig and ShareGroupConfig
    _d("group.share.session.timeout.ms", "int", 45000, "Session timeout of share group members."),
    _d("group.share.min.session.timeout.ms", "int", 45000, "Lower bound of group.share.session.timeout.ms."),
    _d("group.share.max.session.timeout.ms", "int", 60000, "Upper bound of group.share.session.timeout.ms."),
    _d("group.share.heartbeat.interval.ms", "int", 5000, "Heartbeat interval given to share group members."),
    _d("group.share.min.heartbeat.interval.ms", "int", 5000, "Lower bound of group.share.heartbeat.interval.ms."),
    _d("group.share.max.heartbeat.interval.ms", "int", 15000, "Upper bound of group.share.heartbeat.interval.ms."),
    _d("group.share.max.size", "int", 200, "Most members in one share group (1-1000)."),
    _d("group.share.assignors", "list", "simple", "Server-side share group assignors."),
    _d("group.share.initialize.retry.interval.ms", "int", 30000,
       "Time after which a share-partition initialization still pending is asked again."),
    _d("group.share.delivery.count.limit", "int", 5, "Deliveries of a record before it is archived."),
    _d("group.share.min.delivery.count.limit", "int", 2, "Lower bound of group.share.delivery.count.limit."),
    _d("group.share.max.delivery.count.limit", "int", 10, "Upper bound of group.share.delivery.count.limit."),
    _d("group.share.record.lock.duration.ms", "int", 30000, "How long an acquired record stays locked."),
    _d("group.share.min.record.lock.duration.ms", "int", 15000, "Lower bound of group.share.record.lock.duration.ms."),
    _d("group.share.max.record.lock.duration.ms", "int", 60000, "Upper bound of group.share.record.lock.duration.ms."),
    _d("group.share.partition.max.record.locks", "int", 2000, "Most in-flight records of one share-partition."),
    _d("group.share.min.partition.max.record.locks", "int", 100,
       "Lower bound of group.share.partition.max.record.locks."),
    _d("group.share.max.partition.max.record.locks", "int", 4000,
       "Upper bound of group.share.partition.max.record.locks."),
    _d("group.share.max.share.sessions", "int", 2000, "Most share sessions the broker keeps."),
    _d("share.coordinator.state.topic.num.partitions", "int", 50, "Partitions of __share_group_state."),
    _d("share.coordinator.state.topic.segment.bytes", "int", 104857600, "Segment size of __share_group_state."),
    _d("share.coordinator.state.topic.replication.factor", "short", 1,
       "Replication factor of __share_group_state."),
    _d("share.coordinator.load.buffer.size", "int", 5242880, "Read buffer when loading __share_group_state."),
    _d("share.coordinator.snapshot.update.records.per.snapshot", "int", 500,
       "Updates of a share-partition's state between two snapshots (0-500)."),
    _d("share.coordinator.cold.partition.snapshot.interval.ms", "int", 300000,
       "Time after which a share-partition whose state did not change is snapshotted again."),
    _d("log.segment.bytes", "int", 1073741824, "Size at which a log segment rolls."),
    _d("log.roll.ms", "long", None, "Age at which a log segment rolls (log.roll.hours if unset)."),
    _d("log.roll.hours", "int", 168, "Age in hours at which a log segment rolls."),
    _d("log.retention.ms", "long", None, "Retention by age (log.retention.minutes/hours if unset)."),
    _d("log.retention.minutes", "int", None, "Retention by age in minutes."),
    _d("log.retention.hours", "int", 168, "Retention by age in hours."),
    _d("log.retention.bytes", "long", -1, "Retention by size per partition; -1 is unlimited."),
    _d("log.retention.check.interval.ms", "long", 300000, "How often retention runs."),
    _d("log.cleanup.policy", "list", "delete", "Default cleanup.policy of topics."),
    _d("log.cleaner.delete.retention.ms", "long", 86400000, "How long tombstones survive compaction."),
    _d("log.index.interval.bytes", "int", 4096, "Bytes between offset-index entries."),
    _d("log.flush.interval.messages", "long", LONG_MAX, "Messages between forced fsyncs."),
    _d("log.flush.interval.ms", "long", None, "Milliseconds between forced fsyncs."),
    _d("log.message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime."),
    # Broker synonyms of topic configs (ServerTopicConfigSynonyms): the defaults of topics' configs.
    _d("log.roll.jitter.ms", "long", None, "Jitter subtracted from segment roll times (log.roll.jitter.hours if unset)."),
    _d("log.roll.jitter.hours", "int", 0, "Jitter in hours subtracted from segment roll times."),
    _d("log.index.size.max.bytes", "int", 10485760, "Size of a segment's offset index."),
    _d("log.flush.scheduler.interval.ms", "long", LONG_MAX, "How often flush.ms is checked."),
    _d("log.cleaner.min.compaction.lag.ms", "long", 0, "Minimum age of a record before compaction."),
    _d("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "Maximum age of an uncompacted record."),
    _d("log.cleaner.min.cleanable.ratio", "double", 0.5, "Dirty ratio at which a log is compacted."),
    _d("log.cleaner.backoff.ms", "long", 15000, "How long the cleaner sleeps when no log is cleanable."),
    _d("log.segment.delete.delay.ms", "long", 60000, "Delay before a deleted segment's files are removed."),
    _d("log.preallocate", "boolean", False, "Preallocate new segment files."),
    _d("log.message.timestamp.before.max.ms", "long", LONG_MAX, "Largest allowed lag of a record timestamp."),
    _d("log.message.timestamp.after.max.ms", "long", 3600000, "Largest allowed lead of a record timestamp."),
    _d("log.message.downconversion.enable", "boolean", True, "A no-op since Kafka 4.0 (no down-conversion)."),
    _d("log.local.retention.ms", "long", -2, "Local retention with tiered storage; -2 follows retention."),
    _d("log.local.retention.bytes", "long", -2, "Local retention with tiered storage; -2 follows retention."),
    _d("min.insync.replicas", "int", 1, "Minimum in-sync replicas for acks=all."),
    # replication (kgroup.broker.replica_manager, replica_fetcher): used in a cluster only
    _d("replica.lag.time.max.ms", "long", 30000,
       "A follower that has not caught up with the leader's log end for this long leaves the ISR."),
    _d("replica.fetch.wait.max.ms", "int", 500, "The longest a follower's Fetch waits at the leader."),
    _d("replica.fetch.min.bytes", "int", 1, "The bytes a follower's Fetch waits for."),
    _d("replica.fetch.max.bytes", "int", 1048576, "The bytes a follower fetches per partition."),
    _d("replica.fetch.response.max.bytes", "int", 10485760, "The bytes a follower fetches per request."),
    _d("replica.fetch.backoff.ms", "int", 1000, "The wait after a follower's fetch failed."),
    _d("replica.socket.timeout.ms", "int", 30000, "The time a follower's request may take."),
    _d("replica.high.watermark.checkpoint.interval.ms", "long", 5000,
       "How often the high watermarks are written to replication-offset-checkpoint."),
    _d("replica.selector.class", "string", None,
       "KIP-392: org.apache.kafka.common.replica.RackAwareReplicaSelector sends consumers to a replica "
       "in their rack (PreferredReadReplica); unset: consumers read from leaders."),
    _d("unclean.leader.election.enable", "boolean", False, "Elect out-of-sync replicas (one node: no effect)."),
    _d("compression.type", "string", "producer", "Default compression.type of topics."),
    _d("compression.gzip.level", "int", -1, "Default compression.gzip.level of topics."),
    _d("compression.lz4.level", "int", 9, "Default compression.lz4.level of topics."),
    _d("compression.zstd.level", "int", 3, "Default compression.zstd.level of topics."),
    _d("transactional.id.expiration.ms", "int", 604800000, "Expiry of idle transactional ids."),
    _d("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state."),
    _d("transaction.state.log.replication.factor", "short", 1, "Replication factor of __transaction_state."),
    _d("transaction.state.log.segment.bytes", "int", 104857600, "Segment size of __transaction_state."),
    _d("transaction.state.log.load.buffer.size", "int", 5242880,
       "Batch size for reading from the transaction log segments when loading producer ids and "
       "transactions into the cache (soft-limit, overridden if records are too large)."),
    _d("transaction.max.timeout.ms", "int", 900000, "Longest transaction.timeout.ms a producer may ask for."),
    _d("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000,
       "How often timed-out transactions are aborted."),
    _d("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000,
       "How often expired transactional ids are removed."),
    _d("producer.id.expiration.ms", "int", 86400000, "Expiry of idle producer ids."),
    _d("producer.id.expiration.check.interval.ms", "int", 600000,
       "How often producer ids idle longer than producer.id.expiration.ms are removed."),
    _d("transaction.partition.verification.enable", "boolean", True,
       "Verify with the transaction coordinator that a transactional produce or TxnOffsetCommit "
       "belongs to an ongoing transaction of its producer (KIP-890 part 1)."),
    _d("transaction.state.log.min.isr", "int", 1,
       "min.insync.replicas of __transaction_state (one node: its only replica is always in sync)."),
    _d("max.request.partition.size.limit", "int", 2000,
       "Most partitions a DescribeTopicPartitions answer carries before its cursor."),
    _d("num.network.threads", "int", 3, "Accepted for compatibility; kgroup uses one event loop."),
    _d("num.io.threads", "int", 8, "Accepted for compatibility; kgroup uses one event loop."),
    # Cluster mode (kgroup/cluster/, docs/cluster.md): Kafka 3.9's ZooKeeper-mode keys. Without
    # zookeeper.connect the broker is a single node and none of these is used.
    _d("zookeeper.connect", "string", None,
       "ZooKeeper connection string (host:port[,host:port...][/chroot]); set, the broker joins the cluster "
       "whose metadata that ZooKeeper holds."),
    _d("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session timeout."),
    _d("zookeeper.connection.timeout.ms", "int", None,
       "Longest wait for the ZooKeeper connection at start-up, and for a lost one by a write of "
       "ACLs, SCRAM credentials, dynamic configs or features (30 s when unset); "
       "zookeeper.session.timeout.ms at start-up when unset."),
    _d("broker.rack", "string", None, "Rack of the broker, used in rack-aware replica placement."),
    _d("auto.leader.rebalance.enable", "boolean", True,
       "Move leadership back to preferred replicas (checked every leader.imbalance.check.interval.seconds)."),
    _d("leader.imbalance.check.interval.seconds", "long", 300, "How often the controller checks leader imbalance."),
    _d("leader.imbalance.per.broker.percentage", "int", 10,
       "Share of a broker's preferred partitions it may not lead before a preferred leader election."),
    _d("controlled.shutdown.enable", "boolean", True,
       "On SIGTERM, ask the controller to move this broker's leaderships away before stopping."),
    _d("zookeeper.set.acl", "boolean", False,
       "Secure ACLs on the znodes the broker creates: not supported (kgroup's ZooKeeper client has no "
       "TLS or SASL); true is refused at start-up."),
    _d("zookeeper.ssl.client.enable", "boolean", False,
       "TLS to ZooKeeper: not supported (kgroup's ZooKeeper client has no TLS); true is refused at start-up."),
    # kgroup's own keys (not Kafka's).
    _d("metrics.listener", "string", None,
       "http://host:port of the HTTP listener serving /metrics (Prometheus), the web console and "
       "/admin/faults; unset: no listener."),
    _d("kgroup.fault.injection.enable", "boolean", False,
       "Accept fault-injection commands (injected errors, delays, dropped connections, a loading "
       "coordinator, paused heartbeat expiry) for tests; never enable in production."),
)}


class ConfigError(ValueError):
    pass


# Per-listener overrides, as Kafka's ``listener.name.<listener>.<key>`` (and
# ``listener.name.<listener>.<mechanism>.sasl.jaas.config``): any key of the ssl.* / sasl.* /
# connections.max.reauth.ms families under a listener's name.
_LISTENER_KEY = re.compile(r"listener\.name\.([a-z0-9_]+)\.(.+)")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SECURITY_DEFAULTS_FOR_NEW = ("sasl.jaas.config", "sasl.server.callback.handler.class")


@dataclass(frozen=True)
class ListenerSpec:
    name: str                 # upper case, as Kafka's ListenerName.normalised
    security_protocol: str
    host: str
    port: int

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def _parse(defn: ConfigDef, raw: str):
    raw = raw.strip()
    if defn.type in ("int", "long", "short"):
        try:
            v = int(raw)
        except ValueError:
            raise ConfigError(f"Invalid value {raw!r} for configuration {defn.name}: not a number") from None
        return v
    if defn.type == "boolean":
        if raw.lower() not in ("true", "false"):
            raise ConfigError(f"Invalid value {raw!r} for configuration {defn.name}: expected true or false")
        return raw.lower() == "true"
    if defn.type == "double":
        return float(raw)
    return raw


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties, the subset server.properties uses: comments, key=value / key: value,
    backslash line continuations."""
    props: dict[str, str] = {}
    logical = ""
    for line in text.splitlines():
        s = line.strip()
        if not logical and (not s or s[0] in "#!"):
            continue
        if s.endswith("\\") and not s.endswith("\\\\"):
            logical += s[:-1]
            continue
        logical += s
        m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", logical)
        if m:
            props[m.group(1)] = m.group(2)
        elif logical:
            props[logical] = ""
        logical = ""
    return props


class BrokerConfig:
    """Resolved broker settings; ``values`` holds every key (explicit or default)."""

    def __init__(self, explicit: dict[str, str] | None = None):
        self.explicit: dict[str, Any] = {}
        # Kafka keys accepted but not applied here (kafka_broker_keys.py): kept as given
        self.not_applied: dict[str, str] = {}
        self.listener_props: dict[str, str] = {}     # listener.name.<l>.<key> overrides, raw
        for key, raw in (explicit or {}).items():
            defn = CONFIG_DEFS.get(key)
            if defn is None:
                if _LISTENER_KEY.fullmatch(key):
                    self.listener_props[key] = raw.strip()
                    continue
                if key in KAFKA_KEYS_NOT_APPLIED:
                    self.not_applied[key] = raw
                    continue
                if key.startswith("zookeeper.ssl.") or key == "zookeeper.clientCnxnSocket":
                    raise ConfigError(f"{key}: TLS to ZooKeeper is not supported by kgroup (its ZooKeeper "
                                      f"client, kazoo, connects without TLS); remove the zookeeper.ssl.* keys")
                raise ConfigError(f"Unknown configuration '{key}'")
            self.explicit[key] = _parse(defn, raw)
        # Dynamic broker configs (AlterConfigs on a BROKER resource): this node's, then the
        # cluster-wide default (resource name ""), both above the static file, as in Kafka.
        self.dynamic_broker: dict[str, Any] = {}
        self.dynamic_default: dict[str, Any] = {}
        self._resolve()

    def _resolve(self) -> None:
        self.values = {k: self.dynamic_broker.get(k, self.dynamic_default.get(k, self.explicit.get(k, d.default)))
                       for k, d in CONFIG_DEFS.items()}
        self._validate()

    def set_dynamic(self, per_broker: dict[str, str], cluster_default: dict[str, str]) -> None:
        """Install dynamic configs (raw strings, already validated by the caller)."""
        self.dynamic_broker = {k: _parse(CONFIG_DEFS[k], v) for k, v in per_broker.items() if k in CONFIG_DEFS}
        self.dynamic_default = {k: _parse(CONFIG_DEFS[k], v) for k, v in cluster_default.items() if k in CONFIG_DEFS}
        self._resolve()

    def source(self, key: str) -> int:
        """Kafka's ConfigSource of a broker config's value: DYNAMIC_BROKER_CONFIG 2,
        DYNAMIC_DEFAULT_BROKER_CONFIG 3, STATIC_BROKER_CONFIG 4, DEFAULT_CONFIG 5."""
        if key in self.dynamic_broker:
            return 2
        if key in self.dynamic_default:
            return 3
        return 4 if key in self.explicit else 5

    @classmethod
    def load(cls, path: str | None = None, overrides: list[str] = ()) -> "BrokerConfig":
        props = parse_properties(open(path).read()) if path else {}
        for o in overrides:
            if "=" not in o:
                raise ConfigError(f"--override expects key=value, got {o!r}")
            k, v = o.split("=", 1)
            props[k.strip()] = v
        return cls(props)

    def __getitem__(self, key: str):
        return self.values[key]

    def _validate(self):
        bid = self.values["broker.id"]
        if bid >= 0 and "node.id" in self.explicit and bid != self.values["node.id"]:
            raise ConfigError("broker.id and node.id must be equal when both are set")
        if bid >= 0 and "node.id" not in self.explicit:
            self.values["node.id"] = bid
        if self.values["log.message.timestamp.type"] not in ("CreateTime", "LogAppendTime"):
            raise ConfigError("log.message.timestamp.type must be CreateTime or LogAppendTime")
        for key in ("offsets.load.buffer.size", "transaction.state.log.load.buffer.size"):
            if self.values[key] < 1:        # Kafka's atLeast(1)
                raise ConfigError(f"Invalid value {self.values[key]} for configuration {key}: "
                                  "Value must be at least 1")
        self.listener_specs()  # validates listeners, the protocol map, inter.broker.listener.name
        self._validate_zookeeper_security()
        try:
            self.values["group.consumer.migration.policy"] = validate_migration_policy(
                self.values["group.consumer.migration.policy"])
        except ValueError as e:
            raise ConfigError(str(e)) from None
        ml = self.values["metrics.listener"]
        if ml and not re.fullmatch(r"http://\[?[^\]/]*\]?:\d+/?", ml.strip()):
            raise ConfigError(f"Invalid value {ml!r} for configuration metrics.listener: expected http://host:port")

    @property
    def node_id(self) -> int:
        return self.values["node.id"]

    @property
    def log_dir(self) -> str:
        dirs = self.values["log.dirs"] or self.values["log.dir"]
        return dirs.split(",")[0].strip()

    def protocol_map(self) -> dict[str, str]:
        out = {}
        for item in (self.values["listener.security.protocol.map"] or "").split(","):
            if not item.strip():
                continue
            if ":" not in item:
                raise ConfigError(f"Invalid value {item!r} in listener.security.protocol.map: expected NAME:PROTOCOL")
            name, proto = (x.strip() for x in item.split(":", 1))
            if proto.upper() not in SECURITY_PROTOCOLS:
                raise ConfigError(f"No enum constant org.apache.kafka.common.security.auth.SecurityProtocol.{proto}")
            out[name.upper()] = proto.upper()
        return out

    def listener_specs(self, key: str = "listeners") -> list[ListenerSpec]:
        """Kafka's listeners: NAME://host:port, the name's security protocol from
        listener.security.protocol.map; names and ports unique."""
        pmap = self.protocol_map()
        specs = [_parse_listener(item, pmap) for item in (self.values[key] or "").split(",") if item.strip()]
        if not specs:
            raise ConfigError(f"{key} must contain at least one listener")
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ConfigError(f"Each listener must have a different name, listeners: {self.values[key]}")
        if key == "listeners":
            ports = [s.port for s in specs if s.port != 0]
            if len(set(ports)) != len(ports):
                raise ConfigError(f"Each listener must have a different port, listeners: {self.values[key]}")
            self._validate_inter_broker(specs)
            for s in specs:
                if s.uses_ssl and not (self.for_listener(s.name, "ssl.keystore.location") or (
                        self.for_listener(s.name, "ssl.keystore.certificate.chain")
                        and self.for_listener(s.name, "ssl.keystore.key"))):
                    raise ConfigError(f"Listener {s.name} uses {s.security_protocol} but no keystore is configured "
                                      "(ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key)")
                if s.uses_sasl and not self.enabled_mechanisms(s.name):
                    raise ConfigError(f"Listener {s.name}: sasl.enabled.mechanisms is empty")
        return specs

    def inter_broker_listener(self) -> tuple[str, str]:
        """(listener name, security protocol) brokers use between themselves, as
        KafkaConfig.getInterBrokerListenerNameAndSecurityProtocol: ``inter.broker.listener.name``
        (its protocol from listener.security.protocol.map), else the listener named after
        ``security.inter.broker.protocol`` (PLAINTEXT by default); never both."""
        name = self.values["inter.broker.listener.name"]
        if name and "security.inter.broker.protocol" in self.explicit:
            raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
        if name:
            name = name.strip().upper()
            protocol = self.protocol_map().get(name)
            if protocol is None:
                raise ConfigError(f"Listener with name {name} defined in inter.broker.listener.name not found "
                                  f"in listener.security.protocol.map.")
            return name, protocol
        protocol = (self.values["security.inter.broker.protocol"] or "").strip()
        if protocol.upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(f"Invalid security protocol `{protocol}` defined in security.inter.broker.protocol")
        return protocol.upper(), protocol.upper()

    def _validate_inter_broker(self, specs: list[ListenerSpec]) -> None:
        """KafkaConfig.validateValues' inter-broker rules. A single node has no inter-broker
        traffic, so there the listener need not exist unless one of the keys is set."""
        name, protocol = self.inter_broker_listener()
        explicit = self.values["inter.broker.listener.name"] or "security.inter.broker.protocol" in self.explicit
        if not (self.values["zookeeper.connect"] or explicit):
            return
        advertised = self.listener_specs("advertised.listeners") if self.values["advertised.listeners"] else specs
        names = [s.name for s in advertised]
        if name not in names:
            raise ConfigError(f"inter.broker.listener.name must be a listener name defined in "
                              f"advertised.listeners. The valid options based on currently configured "
                              f"listeners are {','.join(names)}")
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            mechanism = (self.values["sasl.mechanism.inter.broker.protocol"] or "").strip()
            if mechanism not in self.enabled_mechanisms(name):
                raise ConfigError("sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms "
                                  "when SASL is used for inter-broker communication")

    def _validate_zookeeper_security(self) -> None:
        """Secure znode ACLs and TLS to ZooKeeper need a ZooKeeper client with TLS or SASL; kgroup's
        (kazoo) connects in plain TCP: refused, with Kafka's own message for zookeeper.set.acl
        (KafkaZkClient.createZkClient)."""
        if self.values["zookeeper.connect"]:
            if self.values["zookeeper.set.acl"]:
                raise ConfigError(
                    "zookeeper.set.acl is true, but ZooKeeper client TLS configuration identifying at least "
                    "zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, and zookeeper.ssl.keystore.location "
                    "was not present and the verification of the JAAS login file failed (kgroup's ZooKeeper "
                    "client has no TLS or SASL: secure znode ACLs are not supported)")
            if self.values["zookeeper.ssl.client.enable"]:
                raise ConfigError("zookeeper.ssl.client.enable=true: TLS to ZooKeeper is not supported by kgroup "
                                  "(its ZooKeeper client, kazoo, connects without TLS)")

    def listener(self) -> tuple[str, int]:
        """(host, port) to bind of the first listener."""
        s = self.listener_specs()[0]
        return s.host, s.port

    def advertised(self, bound_port: int | None = None, listener_name: str | None = None,
                   bound_ports: dict[str, int] | None = None) -> tuple[str, int]:
        """(host, port) given to clients of ``listener_name`` (default: the first listener) in
        Metadata; an empty host advertises 127.0.0.1 and port 0 (ephemeral) the port bound."""
        specs = self.listener_specs("advertised.listeners" if self.values["advertised.listeners"] else "listeners")
        spec = specs[0]
        if listener_name is not None:
            spec = next((s for s in specs if s.name == listener_name), spec)
        port = spec.port
        if port == 0:
            port = (bound_ports or {}).get(spec.name) or bound_port or 0
        return spec.host or "127.0.0.1", port

    def for_listener(self, listener_name: str, key: str, mechanism: str | None = None):
        """A security key's value on one listener: ``listener.name.<l>[.<mechanism>].<key>`` if
        set, else the broker-wide key (Kafka's ListenerName.configPrefix lookup)."""
        prefix = f"listener.name.{listener_name.lower()}."
        if mechanism is not None:
            v = self.listener_props.get(prefix + mechanism.lower() + "." + key)
            if v is not None:
                return v
        v = self.listener_props.get(prefix + key)
        if v is not None:
            defn = CONFIG_DEFS.get(key)
            return _parse(defn, v) if defn is not None else v
        return self.values.get(key)

    def enabled_mechanisms(self, listener_name: str) -> list[str]:
        raw = self.for_listener(listener_name, "sasl.enabled.mechanisms") or ""
        return [m.strip() for m in raw.split(",") if m.strip()]

    @property
    def retention_ms(self) -> int:
        v = self.values
        if v["log.retention.ms"] is not None:
            return v["log.retention.ms"]
        if v["log.retention.minutes"] is not None:
            return v["log.retention.minutes"] * 60_000
        return v["log.retention.hours"] * 3_600_000

    @property
    def roll_ms(self) -> int:
        v = self.values
        return v["log.roll.ms"] if v["log.roll.ms"] is not None else v["log.roll.hours"] * 3_600_000


def _parse_listener(item: str, pmap: dict[str, str]) -> ListenerSpec:
    item = item.strip()
    m = re.fullmatch(r"(?:([A-Za-z0-9_]+)://)?\[?([^\]]*?)\]?:(\d+)", item)
    if not m:
        raise ConfigError(f"Invalid listener {item!r}: expected NAME://host:port")
    name, host, port = m.groups()
    name = (name or "PLAINTEXT").upper()
    proto = pmap.get(name)
    if proto is None:
        raise ConfigError(f"No security protocol defined for listener {name}")
    return ListenerSpec(name, proto, host, int(port))
