"""The one place that reads the clocks (README's rule 3, injected time). Everything else is
handed ``now_ms`` or a clock callable, so tests drive time with a fake clock."""
import time


def now_ms() -> int:
    """Wall-clock milliseconds: record timestamps, commit times, expiry."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Monotonic milliseconds: timeouts and intervals that must not jump with the wall clock."""
    return time.monotonic_ns() // 1_000_000
