"""Shared helpers for the storage tests: a settable clock and batch builders."""
from __future__ import annotations

from kgroup.protocol.records import Record, build_batch

T0 = 1_700_000_000_000  # a fixed "now" in ms


class FakeClock:
    def __init__(self, now: int = T0):
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def batch(n: int = 1, *, ts: int = T0, key: bytes | None = b"k", value: bytes = b"v", **kw) -> bytes:
    """A client batch of ``n`` records (offsets 0..n-1, all at ``ts``)."""
    return build_batch([Record(key, value + b"%d" % i, (), ts) for i in range(n)], **kw)


def keyed(pairs, ts: int = T0, **kw) -> bytes:
    """A batch of (key, value) records; value None is a tombstone."""
    return build_batch([Record(k, v, (), ts) for k, v in pairs], **kw)
