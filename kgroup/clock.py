"""The one place that reads the clocks (docs/architecture.md, rule 3: injected time). Everything else is
handed ``now_ms`` or a clock callable, so tests drive time with a fake clock.

A broker owns one ``BrokerClock``: wall time plus an offset that only a test moves forward
(``advance``, time travel: kgroup/broker/test_control.py). One per broker rather than one per
process, so two in-process brokers of one test process keep their own time. What reads it: the
coordinators' timers and the times they record, and the logs (retention, segment rolling,
LogAppendTime, producer-id expiry). What does not: loop timers counted in real time (fetch
long-polls, delayed answers, idle connections), and the clients' own clocks.
"""
import time


def now_ms() -> int:
    """Wall-clock milliseconds: record timestamps, commit times, expiry."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Monotonic milliseconds: timeouts and intervals that must not jump with the wall clock."""
    return time.monotonic_ns() // 1_000_000


class BrokerClock:
    """Wall-clock milliseconds plus ``offset_ms``. ``pin(t)`` holds the clock at ``t`` while a
    time travel runs the timers due on its way, each at its own deadline."""

    __slots__ = ("offset_ms", "_pinned")

    def __init__(self):
        self.offset_ms = 0
        self._pinned: int | None = None

    def now_ms(self) -> int:
        pinned = self._pinned
        if pinned is not None:
            return pinned
        return time.time_ns() // 1_000_000 + self.offset_ms

    def pin(self, t: int | None) -> None:
        """Hold the clock at ``t`` (never earlier than it reads), or let it run again (None)."""
        if t is None:
            self._pinned = None
            return
        self._pinned = max(t, self.now_ms())

    def advance(self, ms: int) -> int:
        """Move the clock ``ms`` forward for good; returns the new time."""
        if ms < 0:
            raise ValueError("time travel goes forward only")
        target = self.now_ms() + ms
        self._pinned = None
        self.offset_ms = target - now_ms()
        return target

    def set_to(self, t: int) -> None:
        """Run on from ``t`` (when it is later than now)."""
        self._pinned = None
        if t > self.now_ms():
            self.offset_ms = t - now_ms()
