"""Java's HashMap / HashSet iteration order, where Kafka's assignors depend on it.

Kafka's uniform homogeneous builder walks ``new HashSet<>(subscribedTopicIds)`` to lay out the
partitions it hands out, and the coordinator builds the assignor's member map as a ``HashMap``:
the same input gives the same output only if we walk them in the same order. A HashMap iterates
its table's buckets in index order (bucket = ``(h ^ (h >>> 16)) & (n - 1)``), each bucket in
insertion order (a resize splits buckets but keeps that relative order). Not modelled: bins of 8+
colliding keys that Java turns into trees (vanishingly rare with these hashes).
"""
from __future__ import annotations

from ..partitioner import java_string_hash_code

_M32 = 0xFFFFFFFF


def uuid_hash_code(topic_id: bytes) -> int:
    """Kafka's ``Uuid.hashCode``: the two 64-bit halves xored, then its two 32-bit halves xored."""
    x = int.from_bytes(topic_id[:8], "big") ^ int.from_bytes(topic_id[8:16], "big")
    return ((x >> 32) ^ x) & _M32


def uuid_sort_key(topic_id: bytes) -> tuple[int, int]:
    """Kafka's ``Uuid.compareTo``: most then least significant bits, as signed longs."""
    return (int.from_bytes(topic_id[:8], "big", signed=True),
            int.from_bytes(topic_id[8:16], "big", signed=True))


def _table_size_for(cap: int) -> int:
    n = 1
    while n < cap:
        n <<= 1
    return max(n, 1)


def _grown_table_size(count: int) -> int:
    """The table size of a ``new HashMap<>()`` after ``count`` puts (16, doubled past 0.75 full)."""
    n = 16
    while count > n * 3 // 4:
        n <<= 1
    return n


def _order(keys, hashes, n: int) -> list:
    mask = n - 1
    indexed = [((h ^ (h >> 16)) & mask, i) for i, h in enumerate(hashes)]
    indexed.sort()
    return [keys[i] for _, i in indexed]


def hash_set_copy_order(topic_ids) -> list[bytes]:
    """The iteration order of ``new HashSet<>(c)`` over topic ids given in ``c``'s order: its
    table is sized ``max(size / 0.75 + 1, 16)`` up front."""
    keys = list(topic_ids)
    n = _table_size_for(max(int(len(keys) / 0.75) + 1, 16))
    return _order(keys, [uuid_hash_code(k) for k in keys], n)


def hash_map_put_order(member_ids) -> list[str]:
    """The iteration order of a ``new HashMap<String, ...>()`` filled by ``put`` in this order."""
    keys = list(member_ids)
    return _order(keys, [java_string_hash_code(k) & _M32 for k in keys], _grown_table_size(len(keys)))
