"""Offsets as Spark checkpoints them, offset ranges, and their planning (pure functions).

A source offset is Spark's Kafka layout, ``{"topic": {"0": 23, "1": 40}}``: for each partition the
offset of the next record to read. A micro-batch reads ``[start, end)`` per partition. When a
partition's range must begin somewhere other than the previous batch's end (a partition discovered
or taken over in a group rebalance) the end offset also carries ``"$from": {"topic": {"0": 17}}``
(``$`` cannot occur in a Kafka topic name); being part of the checkpointed offset it makes a
replayed batch read exactly the same ranges.
"""
from __future__ import annotations

import math
from typing import Mapping, NamedTuple

from kgroup.client.assignors import TopicPartition

FROM_KEY = "$from"

Offsets = dict  # TopicPartition -> int


class OffsetRange(NamedTuple):
    """``[from_offset, until_offset)`` of one topic-partition: one Spark input partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def _nest(offsets: Mapping[TopicPartition, int]) -> dict:
    out: dict = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def _flat(nested: Mapping) -> Offsets:
    return {TopicPartition(t, int(p)): int(o) for t, parts in nested.items() for p, o in parts.items()}


def to_json(offsets: Mapping[TopicPartition, int], starts: Mapping[TopicPartition, int] | None = None) -> dict:
    """Spark's offset dict; ``starts`` are range beginnings that differ from the previous end."""
    out = _nest(offsets)
    if starts:
        out[FROM_KEY] = _nest(starts)
    return out


def from_json(data: Mapping | None) -> tuple[Offsets, Offsets]:
    """(offsets, range-start overrides) from a Spark offset dict."""
    if not data:
        return {}, {}
    data = dict(data)
    starts = _flat(data.pop(FROM_KEY, {}) or {})
    return _flat(data), starts


def plan_ranges(start: Mapping, end: Mapping, min_partitions: int | None = None,
                max_records: int | None = None) -> list[OffsetRange]:
    """The ranges of a batch from Spark's start and end offset dicts: every partition of ``end``
    from its ``$from`` override or its ``start`` offset; empty ranges are dropped."""
    begin, _ = from_json(start)
    until, starts = from_json(end)
    ranges = []
    for tp in sorted(until):
        first = starts.get(tp, begin.get(tp))
        if first is None:
            raise ValueError(f"no start offset for {tp} in the batch {start} -> {end}")
        if until[tp] > first:
            ranges.append(OffsetRange(tp.topic, tp.partition, first, until[tp]))
    return split_ranges(ranges, min_partitions, max_records)


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    out = []
    for i in range(parts):
        lo = r.from_offset + int(r.size * (i / parts))
        hi = r.until_offset if i == parts - 1 else r.from_offset + int(r.size * ((i + 1) / parts))
        if hi > lo:
            out.append(OffsetRange(r.topic, r.partition, lo, hi))
    return out


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None,
                 max_records: int | None = None) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator: with ``maxRecordsPerPartition`` every range is first cut
    into ceil(size / max) pieces; then, with ``minPartitions`` above the number of ranges, large
    ranges are split in proportion to their size (each range in at least one piece)."""
    ranges = [r for r in ranges if r.size > 0]
    if max_records:
        ranges = [piece for r in ranges for piece in _divide(r, -(-r.size // max_records))]
    if not min_partitions or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    ideal = total / min_partitions
    out = []
    for r in ranges:
        parts = max(math.floor(r.size / ideal + 0.5), 1)  # Scala's math.round rounds half up
        for i in range(parts):
            lo = r.from_offset + int(r.size * (i / parts))
            hi = r.until_offset if i == parts - 1 else r.from_offset + int(r.size * ((i + 1) / parts))
            if hi > lo:
                out.append(OffsetRange(r.topic, r.partition, lo, hi))
    return out


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int) -> Offsets:
    """Spark's KafkaMicroBatchStream.rateLimit: spread ``limit`` records over the partitions in
    proportion to their backlog, never starving a small partition, never past ``latest``."""
    sizes = {tp: end - start[tp] for tp, end in latest.items() if tp in start}
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        step = int(-(-prorate // 1)) if prorate < 1 else int(prorate // 1)
        out[tp] = min(end, start[tp] + step)
    return out
