"""Helpers for testing Kafka code against kgroup and against its peers."""

from .broker import KafkaBroker, broker

__all__ = ["KafkaBroker", "broker"]
