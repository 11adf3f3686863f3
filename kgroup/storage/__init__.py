"""The broker's partition logs: segments of RecordBatch v2 bytes with Kafka's on-disk layout,
producer state, retention, compaction and recovery (see ``log.PartitionLog`` and
``manager.LogManager``)."""
from kgroup.storage.config import LogConfig
from kgroup.storage.log import AppendOrigin, AppendResult, PartitionLog, ReadResult, TimestampAndOffset
from kgroup.storage.manager import LogManager

__all__ = ["AppendOrigin", "AppendResult", "LogConfig", "LogManager", "PartitionLog", "ReadResult",
           "TimestampAndOffset"]
