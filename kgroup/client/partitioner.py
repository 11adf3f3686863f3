"""The producer's built-in partitioner (Java's BuiltInPartitioner and Utils.murmur2), sans-IO.

Keyed records go to ``toPositive(murmur2(key)) % numPartitions`` — the same partition the Java,
librdkafka ("murmur2_random") and kafka-python clients pick, so keyed data written by any of them
lands together. Records without a key (or with ``partitioner.ignore.keys``) use the sticky
partitioner of KIP-480/KIP-794: stay on one partition until about ``batch.size`` bytes went to it,
then switch to another, chosen at random among partitions whose leader is available or — with
adaptive partitioning — weighted towards partitions with shorter queues.
"""
from __future__ import annotations

import bisect
import random as _random
from typing import Callable, Sequence

from ..java_compat import MASK32
from ..java_compat import to_int32, to_positive


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 (seed 0x9747b28c), as the signed Java int ``Utils.murmur2`` returns."""
    length = len(data)
    m = 0x5BD1E995
    h = (0x9747B28C ^ length) & MASK32
    length4 = length // 4
    for i in range(length4):
        i4 = i * 4
        k = data[i4] | (data[i4 + 1] << 8) | (data[i4 + 2] << 16) | (data[i4 + 3] << 24)
        k = (k * m) & MASK32
        k ^= k >> 24
        k = (k * m) & MASK32
        h = (h * m) & MASK32
        h ^= k
    rest = length % 4
    tail = length & ~3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & MASK32
    h ^= h >> 13
    h = (h * m) & MASK32
    h ^= h >> 15
    return to_int32(h)


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitionInfo:
    __slots__ = ("partition", "produced_bytes")

    def __init__(self, partition: int):
        self.partition = partition
        self.produced_bytes = 0


class BuiltInPartitioner:
    """Sticky partition choice for one topic (keyless records)."""

    def __init__(self, topic: str, sticky_batch_size: int,
                 random_int: Callable[[], int] | None = None):
        if sticky_batch_size < 1:
            raise ValueError(f"stickyBatchSize must be >= 1 but got {sticky_batch_size}")
        self.topic = topic
        self.sticky_batch_size = sticky_batch_size
        self._random_int = random_int or (lambda: _random.getrandbits(32))
        self._info: StickyPartitionInfo | None = None
        self._load_stats: tuple[list[int], list[int]] | None = None  # (cumulative freq, partition ids)

    def _next_partition(self, available: Sequence[int], num_partitions: int) -> int:
        rnd = to_positive(self._random_int())
        if self._load_stats is None:
            if available:
                return available[rnd % len(available)]
            return rnd % num_partitions
        cft, ids = self._load_stats
        weighted = rnd % cft[-1]
        # Arrays.binarySearch + abs(result + 1): the first index whose value exceeds weighted
        return ids[bisect.bisect_right(cft, weighted)]

    def peek(self, available: Sequence[int], num_partitions: int) -> StickyPartitionInfo:
        """The current sticky partition (choosing one if there is none yet)."""
        if self._info is None:
            self._info = StickyPartitionInfo(self._next_partition(available, num_partitions))
        return self._info

    def update(self, info: StickyPartitionInfo, appended_bytes: int, available: Sequence[int],
               num_partitions: int, enable_switch: bool = True) -> None:
        """Count bytes appended to the sticky partition; switch after batch.size (2x if the
        current batch is not full yet, i.e. ``enable_switch`` is false)."""
        if info is not self._info:
            return
        info.produced_bytes += appended_bytes
        if (info.produced_bytes >= self.sticky_batch_size and enable_switch) or \
                info.produced_bytes >= self.sticky_batch_size * 2:
            self._info = StickyPartitionInfo(self._next_partition(available, num_partitions))

    def update_load_stats(self, queue_sizes: Sequence[int] | None, partition_ids: Sequence[int],
                          num_partitions: int) -> None:
        """Adaptive partitioning (KIP-794): ``queue_sizes[i]`` is the number of queued batches of
        available partition ``partition_ids[i]``; each is weighted by (max + 1 - its size). Uniform
        when there are no stats, fewer than 2 partitions, or all are available with equal queues."""
        if queue_sizes is None or len(queue_sizes) < 1 or num_partitions < 2:
            self._load_stats = None
            return
        max_plus_1 = max(queue_sizes) + 1
        if len(set(queue_sizes)) == 1 and len(queue_sizes) == num_partitions:
            self._load_stats = None
            return
        cft, total = [], 0
        for q in queue_sizes:
            total += max_plus_1 - q
            cft.append(total)
        self._load_stats = (cft, list(partition_ids))


def partitions_for_keys(keys, num_partitions: int):
    """``partition_for_key`` for a whole Arrow ``binary`` array of non-null keys at once (numpy
    murmur2 over the keys of each length, uint32 arithmetic wrapping as Java's int does)."""
    import numpy as np
    import pyarrow.compute as pc
    n = len(keys)
    out = np.empty(n, np.int64)
    if n == 0:
        return out
    lengths = pc.binary_length(keys).to_numpy(zero_copy_only=False).astype(np.int64)
    offsets = np.frombuffer(keys.buffers()[1], np.int32, n + 1, keys.offset * 4).astype(np.int64)
    data = np.frombuffer(keys.buffers()[2], np.uint8)
    m = np.uint32(0x5BD1E995)
    for length in np.unique(lengths):
        rows = np.nonzero(lengths == length)[0]
        length = int(length)
        if len(rows) == n and offsets[-1] - offsets[0] == n * length:  # all keys one length: a matrix view
            mat = data[offsets[0]:offsets[-1]].reshape(n, length)
        else:
            mat = data[offsets[rows, None] + np.arange(length)] if length else np.zeros((len(rows), 0), np.uint8)
        h = np.full(len(rows), (0x9747B28C ^ length) & MASK32, np.uint32)
        for i in range(length // 4):
            w = mat[:, 4 * i:4 * i + 4].astype(np.uint32)
            k = w[:, 0] | (w[:, 1] << np.uint32(8)) | (w[:, 2] << np.uint32(16)) | (w[:, 3] << np.uint32(24))
            k = k * m
            k ^= k >> np.uint32(24)
            k = k * m
            h = h * m
            h ^= k
        tail = length & ~3
        rest = length % 4
        if rest == 3:
            h ^= mat[:, tail + 2].astype(np.uint32) << np.uint32(16)
        if rest >= 2:
            h ^= mat[:, tail + 1].astype(np.uint32) << np.uint32(8)
        if rest >= 1:
            h ^= mat[:, tail].astype(np.uint32)
            h = h * m
        h ^= h >> np.uint32(13)
        h = h * m
        h ^= h >> np.uint32(15)
        out[rows] = (h & np.uint32(0x7FFFFFFF)).astype(np.int64) % num_partitions
    return out
