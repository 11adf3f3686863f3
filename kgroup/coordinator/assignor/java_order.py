"""Java's HashMap / HashSet (and Kafka's TimelineHashMap) iteration order, where Kafka's assignors
depend on it.

Kafka's uniform homogeneous builder walks ``new HashSet<>(subscribedTopicIds)`` to lay out the
partitions it hands out, and the coordinator builds the assignor's member map as a ``HashMap``:
the same input gives the same output only if we walk them in the same order. A HashMap iterates
its table's buckets in index order (bucket = ``(h ^ (h >>> 16)) & (n - 1)``), each bucket in
insertion order (a resize splits buckets but keeps that relative order). Not modelled: bins of 8+
colliding keys that Java turns into trees (vanishingly rare with these hashes). Where Java's order
within a bucket comes from an earlier map we do not keep (a record's list order), the given order
stands in for it.
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


def hash_map_order(topic_ids) -> list[bytes]:
    """The iteration order of a ``new HashMap<Uuid, ...>()`` (or ``Collectors.toMap``) filled by
    ``put`` in this order: a member's assignment as Kafka's ``Assignment.fromRecord`` rebuilds it."""
    keys = list(topic_ids)
    return _order(keys, [uuid_hash_code(k) for k in keys], _grown_table_size(len(keys)))


def int_hash_set_copy_order(values) -> list[int]:
    """The iteration order of ``new HashSet<Integer>(c)`` over ``c`` (Integer.hashCode is the value):
    the partitions of a topic in a member's assignment as ``Assignment.fromRecord`` rebuilds them."""
    keys = list(values)
    n = _table_size_for(max(int(len(keys) / 0.75) + 1, 16))
    return _order(keys, [k & _M32 for k in keys], n)


_M64 = (1 << 64) - 1
_FIBONACCI = -7046029254386353131       # Knuth's multiplicative constant in BaseHashTable.findSlot


class TimelineHashOrder:
    """The iteration order of Kafka's ``TimelineHashMap`` (its BaseHashTable) over String keys, kept
    as keys are added and removed: the table starts at 2 slots (``new TimelineHashMap<>(registry, 0)``)
    and doubles before an add would make it more than 0.75 full; a key's slot is the top bits of
    ``hashCode * -7046029254386353131``; a slot holds its keys in the order they came (a rehash
    walks the old slots in order); iteration walks the slots in order. A key added again keeps its
    place."""

    __slots__ = ("slots", "size")

    def __init__(self):
        self.slots: list[list[str]] = [[], []]
        self.size = 0

    @staticmethod
    def _slot(key: str, n: int) -> int:
        shift = 65 - n.bit_length()
        return ((java_string_hash_code(key) * _FIBONACCI) & _M64) >> shift

    def add(self, key: str) -> None:
        n = len(self.slots)
        if key in self.slots[self._slot(key, n)]:
            return
        if (self.size + 1) * 0.75 > n:
            old, n = self.slots, n * 2
            self.slots = [[] for _ in range(n)]
            for bucket in old:
                for k in bucket:
                    self.slots[self._slot(k, n)].append(k)
        self.slots[self._slot(key, n)].append(key)
        self.size += 1

    def remove(self, key: str) -> None:
        bucket = self.slots[self._slot(key, len(self.slots))]
        if key in bucket:
            bucket.remove(key)
            self.size -= 1

    def __iter__(self):
        for bucket in self.slots:
            yield from bucket
