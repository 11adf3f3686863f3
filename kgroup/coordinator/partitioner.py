"""Which ``__consumer_offsets`` partition owns a group: ``Utils.abs(groupId.hashCode()) % n``.

``java_string_hash_code`` is Java's ``String.hashCode``: ``h = 31*h + c`` over the UTF-16 code
units (a character outside the BMP counts as its two surrogates) with int32 wrap-around.
Kafka's ``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0 (``n & 0x7fffffff``) instead of overflowing.
"""
from __future__ import annotations

_MASK = 0xFFFFFFFF


def java_string_hash_code(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def java_utils_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Integer.MIN_VALUE`` becomes 0, like ``n & 0x7fffffff``."""
    return 0 if n == -(1 << 31) else abs(n)


def utf16_length(s: str) -> int:
    """Java's ``String.length()``: UTF-16 code units (Kafka measures offset metadata with it)."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


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
        p = cache[group_id] = java_utils_abs(java_string_hash_code(group_id)) % n
    return p
