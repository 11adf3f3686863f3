"""Broker settings the transaction coordinator reads, with Kafka's names and defaults
(TransactionStateManagerConfig, TransactionLogConfig)."""
from __future__ import annotations

from dataclasses import dataclass

# property name -> attribute
_PROPS = {
    "transaction.max.timeout.ms": "max_timeout_ms",
    "transactional.id.expiration.ms": "transactional_id_expiration_ms",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "abort_timed_out_transactions_interval_ms",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "remove_expired_transactional_ids_interval_ms",
    "transaction.state.log.num.partitions": "num_partitions",
    "offsets.topic.num.partitions": "offsets_num_partitions",
}


@dataclass(frozen=True)
class TransactionCoordinatorConfig:
    max_timeout_ms: int = 15 * 60_000
    transactional_id_expiration_ms: int = 7 * 24 * 3600_000
    abort_timed_out_transactions_interval_ms: int = 10_000
    remove_expired_transactional_ids_interval_ms: int = 3600_000
    num_partitions: int = 50
    # AddOffsetsToTxn adds the group's __consumer_offsets partition to the transaction.
    offsets_num_partitions: int = 50

    @classmethod
    def from_props(cls, props: dict | None = None) -> "TransactionCoordinatorConfig":
        kwargs = {}
        for name, attr in _PROPS.items():
            if props and props.get(name) is not None:
                kwargs[attr] = int(str(props[name]).strip())
        return cls(**kwargs)
