"""Helpers for testing Kafka code against kgroup and against its peers."""
