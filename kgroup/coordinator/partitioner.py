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


# id -> Utils.abs(hashCode), emptied when full. A dict entry and an int per id: an lru_cache
# entry would add its argument tuple and a link node, a few hundred bytes per group held.
_ABS_HASH: dict[str, int] = {}
_ABS_HASH_MAX = 65536


def group_partition(group_id: str, n: int = 50) -> int:
    # Cached: every transactional request and marker looks its id's shard up again, and the
    # hash walks the id's UTF-16 code units in Python.
    h = _ABS_HASH.get(group_id)
    if h is None:
        if len(_ABS_HASH) >= _ABS_HASH_MAX:
            _ABS_HASH.clear()
        h = _ABS_HASH[group_id] = java_utils_abs(java_string_hash_code(group_id))
    return h % n
