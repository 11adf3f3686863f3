"""Cluster and topic metadata: the cluster id, this node, and the topic registry.

The registry is the single-node stand-in for KRaft's metadata log: topics (name, topic id,
partition count, config overrides) persisted atomically as JSON in the data dir, and the cluster
id in ``meta.properties`` exactly as Kafka writes it (``version=1``, ``cluster.id``, ``node.id``).
Synchronous, no asyncio.
"""
from __future__ import annotations

import base64
import json
import os
import re
import uuid
from dataclasses import dataclass, field

from ..protocol.errors import ErrorCode, KafkaError
from .config import BrokerConfig
from .client_metrics import ClientMetrics
from .features import Features
# Topic-level configs (name -> (broker synonym, type)) live in topic_configs.py with Kafka's
# validation; DescribeConfigs reports the broker value as the default, as Kafka does.
from .topic_configs import TOPIC_CONFIGS, broker_default, validate as validate_topic_configs  # noqa: F401

OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, "__transaction_state", "__share_group_state"})
MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")

def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate: non-empty, not '.'/'..', at most 249 legal characters."""
    if not name:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
                         f"topic name: {name}")
    if not _LEGAL.fullmatch(name):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name \"{name}\" is illegal, it contains a character other than "
                         "ASCII alphanumerics, '.', '_' and '-'")


def broker_default_for(config: BrokerConfig, topic_key: str) -> str | None:
    return broker_default(config, topic_key)


@dataclass
class Topic:
    name: str
    topic_id: bytes
    num_partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


def new_uuid() -> bytes:
    """A random uuid that is neither the zero uuid nor Kafka's reserved METADATA_TOPIC_ID."""
    while True:
        b = uuid.uuid4().bytes
        if b != bytes(16) and b != bytes(15) + b"\x01":
            return b


def uuid_to_str(b: bytes) -> str:
    """Kafka's Uuid.toString: url-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


class TopicRegistry:
    """The topic registry and cluster identity, persisted under ``data_dir`` (Kafka's metadata cache
    and log in one; not the assignors' ClusterMetadata, which is only a view for assignors)."""

    def __init__(self, data_dir: str, config: BrokerConfig, cluster_id: str | None = None):
        self.data_dir = data_dir
        self.config = config
        os.makedirs(data_dir, exist_ok=True)
        # cluster_id: the cluster's (ZooKeeper's /cluster/id in cluster mode), checked against
        # meta.properties as Kafka checks it (InconsistentClusterIdException)
        self.cluster_id = self._load_or_create_cluster_id(cluster_id)
        # cluster mode: the most replicas a partition may have (the live brokers); else one
        self.max_replication_factor = 1
        self.topics: dict[str, Topic] = {}
        self._by_id: dict[bytes, Topic] = {}
        # dynamic broker configs: resource name ("" = cluster default, or a node id) -> {key: value}
        self.broker_configs: dict[str, dict[str, str]] = {}
        self.group_configs: dict[str, dict[str, str]] = {}    # group id -> GROUP config overrides
        # Topics whose partitions are being created (Broker.create_topic_steps): not visible yet,
        # but their names are taken.
        self.creating: set[str] = set()
        self._load_topics()
        self.features = Features(data_dir, config.node_id)     # finalized feature levels (KIP-584)
        self.client_metrics = ClientMetrics(data_dir)          # KIP-714 subscriptions and pushes

    # -- identity ---------------------------------------------------------------------------
    def _load_or_create_cluster_id(self, expected: str | None = None) -> str:
        path = os.path.join(self.data_dir, "meta.properties")
        if os.path.exists(path):
            props = {}
            for line in open(path):
                if "=" in line and not line.startswith("#"):
                    k, v = line.strip().split("=", 1)
                    props[k] = v
            node = int(props.get("node.id", self.config.node_id))
            if node != self.config.node_id:
                raise RuntimeError(f"{path} belongs to node {node}, but node.id is {self.config.node_id}")
            if expected is not None and props["cluster.id"] != expected:
                raise RuntimeError(f"The Cluster ID {expected} doesn't match stored clusterId {props['cluster.id']} "
                                   f"in {path}. The broker is trying to join the wrong cluster.")
            return props["cluster.id"]
        cluster_id = expected or uuid_to_str(new_uuid())
        _atomic_write(path, "#\n#Written by kgroup\nversion=1\n"
                            f"cluster.id={cluster_id}\nnode.id={self.config.node_id}\n")
        return cluster_id

    # -- topics -----------------------------------------------------------------------------
    @property
    def _topics_path(self) -> str:
        return os.path.join(self.data_dir, "kgroup-topics.json")

    def _load_topics(self) -> None:
        if not os.path.exists(self._topics_path):
            return
        doc = json.load(open(self._topics_path))
        self.broker_configs = doc.get("broker_configs", {})
        self.group_configs = doc.get("group_configs", {})
        for t in doc["topics"]:
            topic = Topic(t["name"], base64.b64decode(t["id"]), t["partitions"], t.get("configs", {}))
            self.topics[topic.name] = topic
            self._by_id[topic.topic_id] = topic

    def _save_topics(self) -> None:
        doc = {"version": 1, "topics": [
            {"name": t.name, "id": base64.b64encode(t.topic_id).decode(), "partitions": t.num_partitions,
             "configs": t.configs} for t in self.topics.values()]}
        if self.broker_configs:
            doc["broker_configs"] = self.broker_configs
        if self.group_configs:
            doc["group_configs"] = self.group_configs
        _atomic_write(self._topics_path, json.dumps(doc, indent=1, sort_keys=True))

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def by_id(self, topic_id: bytes) -> Topic | None:
        return self._by_id.get(topic_id)

    def check_create(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str | None]) -> tuple[int, int]:
        """Validate a topic creation the way Kafka's controller does; returns the resolved
        (partitions, replication factor). Raises KafkaError."""
        validate_topic_name(name)
        if name in self.topics or name in self.creating:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions == -1:
            num_partitions = self.config["num.partitions"]
        if num_partitions <= 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid "
                             "non-positive value.")
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if replication_factor <= 0:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0, or -1 to use the default value.")
        if replication_factor > self.max_replication_factor:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {replication_factor} time(s): The target "
                             f"replication factor of {replication_factor} cannot be reached because only "
                             f"{self.max_replication_factor} broker(s) are registered.")
        validate_topic_configs(configs, self.config)
        return num_partitions, replication_factor

    def create_topic(self, name: str, num_partitions: int, configs: dict[str, str] | None = None,
                     topic_id: bytes | None = None) -> Topic:
        topic = Topic(name, topic_id or new_uuid(), num_partitions, dict(configs or {}))
        self.topics[name] = topic
        self._by_id[topic.topic_id] = topic
        self._save_topics()
        return topic

    def delete_topic(self, name: str) -> Topic:
        topic = self.topics.pop(name)
        self._by_id.pop(topic.topic_id, None)
        self._save_topics()
        return topic

    def set_partition_count(self, name: str, count: int) -> Topic:
        """CreatePartitions: persisted before the new partitions' logs exist."""
        topic = self.topics[name]
        topic.num_partitions = count
        self._save_topics()
        return topic

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> Topic:
        """AlterConfigs: the topic's complete override set, persisted."""
        topic = self.topics[name]
        topic.configs = dict(configs)
        self._save_topics()
        return topic

    def set_broker_configs(self, resource_name: str, configs: dict[str, str]) -> None:
        if configs:
            self.broker_configs[resource_name] = dict(configs)
        else:
            self.broker_configs.pop(resource_name, None)
        self._save_topics()

    def set_group_configs(self, group_id: str, configs: dict[str, str]) -> None:
        if configs:
            self.group_configs[group_id] = dict(configs)
        else:
            self.group_configs.pop(group_id, None)
        self._save_topics()

    def topic_config(self, topic: Topic) -> dict[str, tuple[str | None, bool]]:
        """Every topic config: name -> (value, is explicitly set on the topic)."""
        out = {}
        for key in TOPIC_CONFIGS:
            if key in topic.configs:
                out[key] = (topic.configs[key], True)
            else:
                out[key] = (broker_default_for(self.config, key), False)
        return out


def _atomic_write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
