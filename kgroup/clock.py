"""The one place that reads the wall clock (architecture rule 2). Everything else is handed
``now_ms`` or a clock callable, so tests drive time with a fake clock."""
import time


def now_ms() -> int:
    return time.time_ns() // 1_000_000
