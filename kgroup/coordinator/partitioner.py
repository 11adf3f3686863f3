"""Which ``__consumer_offsets`` partition owns a group: ``Utils.abs(groupId.hashCode()) % n``
(Java's ``String.hashCode`` and Kafka's ``Utils.abs`` are in ``kgroup.java_compat``)."""
from __future__ import annotations

from ..java_compat import string_hash_u32, to_int32, utils_abs

# The uncached hash: this module caches the partition itself, and an entry in java_compat's cache
# too would cost its argument tuple and link node for every group id.
_hash_u32 = getattr(string_hash_u32, "__wrapped__", string_hash_u32)


# n -> {id -> partition}, emptied when full: a dict entry per id (the partition is a small int
# CPython shares), where an lru_cache entry would add its argument tuple and a link node.
_PARTITIONS: dict[int, dict[str, int]] = {}
_PARTITIONS_MAX = 65536


def group_partition(group_id: str, n: int = 50) -> int:
    # Cached: every transactional request and marker looks its id's shard up again, and the
    # hash walks the id's UTF-16 code units in Python.
    cache = _PARTITIONS.get(n)
    if cache is None:
        cache = _PARTITIONS[n] = {}
    p = cache.get(group_id)
    if p is None:
        if len(cache) >= _PARTITIONS_MAX:
            cache.clear()
        p = cache[group_id] = utils_abs(to_int32(_hash_u32(group_id))) % n
    return p
