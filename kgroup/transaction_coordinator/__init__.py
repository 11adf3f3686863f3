"""The transaction coordinator core (Kafka's kafka.coordinator.transaction): pure, deterministic,
no I/O and no clock. One ``TransactionCoordinatorShard`` per ``__transaction_state`` partition,
driven like the group coordinator's shards: handlers -> ``Result`` -> ``commit`` / ``abort``,
plus ``drain_markers`` / ``complete_transaction`` for the COMMIT/ABORT markers."""
from .config import TransactionCoordinatorConfig
from .metadata import TransactionMetadata, TransactionState
from .transaction_log_records import TransactionLogDecodeError
from .shard import (TransactionCoordinatorShard, TxnMarkers, append_error_to_response_error,
                    transaction_partition)

__all__ = ["TransactionCoordinatorConfig", "TransactionCoordinatorShard", "TransactionMetadata",
           "TransactionState", "TransactionLogDecodeError", "TxnMarkers",
           "append_error_to_response_error", "transaction_partition"]
