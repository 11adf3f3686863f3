"""The classic group coordinator core: pure, deterministic, no I/O and no clock.

Entry point: ``GroupCoordinatorShard`` (one per ``__consumer_offsets`` partition), driven by the
broker runtime through ``handle_*`` / ``poll_timers`` -> ``Result`` -> ``commit`` / ``abort``.
"""
from .config import GroupCoordinatorConfig
from .partitioner import group_partition
from .coordinator_records import CoordinatorLoadError
from .result import Result, append_error_to_response_error
from .shard import GroupCoordinatorShard, merge_list_groups
from .timer import TimerQueue

__all__ = ["GroupCoordinatorConfig", "GroupCoordinatorShard", "Result", "TimerQueue",
           "CoordinatorLoadError", "append_error_to_response_error", "group_partition",
           "merge_list_groups"]
