"""Helpers for testing Kafka code against kgroup and against its peers."""

from .broker import KafkaBroker, broker
from .cluster import KafkaCluster
from .zookeeper import ZooKeeperServer

__all__ = ["KafkaBroker", "KafkaCluster", "ZooKeeperServer", "broker"]
