"""Java's own rules where Kafka's results depend on them: ``String.hashCode``, ``String.compareTo``,
``Uuid.hashCode``/``compareTo``, ``TopicPartition.hashCode`` and the iteration order of
``java.util.HashMap``/``HashSet``. Pure functions, no I/O: the protocol, the coordinator and the
client all use this one definition.

``String.hashCode`` is ``h = 31*h + c`` over the UTF-16 code units (a character outside the BMP
counts as its two surrogates) with int32 wrap-around. A ``HashMap`` iterates its table's buckets
in index order (bucket = ``(h ^ (h >>> 16)) & (n - 1)``), each bucket in insertion order (a resize
splits buckets but keeps that relative order); the table starts at 16 (or the power of two at or
above a given initial capacity) and doubles past 0.75 full, or when a bucket reaches nine entries
while the table is shorter than 64 (``treeifyBin``). Not modelled: the iteration order inside a
real tree bin (nine or more colliding keys in a table of 64+).
"""
from __future__ import annotations

import heapq
from functools import lru_cache
from typing import Callable, Hashable, Iterable, Mapping, Protocol, TypeVar

V = TypeVar("V")
MASK32 = 0xFFFFFFFF
INT_MIN = -(1 << 31)


def to_int32(n: int) -> int:
    """``n`` wrapped to a signed Java ``int``."""
    n &= MASK32
    return n - (1 << 32) if n & 0x80000000 else n


@lru_cache(maxsize=1024)     # names that recur (topics, protocols); not one entry per member id
def string_hash_u32(s: str) -> int:
    """``String.hashCode`` as an unsigned 32-bit value (the bits a ``HashMap`` spreads)."""
    h = 0
    if s.isascii():
        for ch in s.encode("ascii"):
            h = (31 * h + ch) & MASK32
        return h
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & MASK32
    return h


def string_hash_code(s: str) -> int:
    """``String.hashCode`` as the signed Java ``int`` it returns."""
    return to_int32(string_hash_u32(s))


def utils_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Integer.MIN_VALUE`` becomes 0 instead of overflowing."""
    return 0 if n == INT_MIN else abs(n)


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not abs: abs(MIN_VALUE) overflows in Java)."""
    return n & 0x7FFFFFFF


def utf16_length(s: str) -> int:
    """``String.length()``: UTF-16 code units."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def string_sort_key(s: str) -> str:
    """Sort key giving ``String.compareTo`` order (by UTF-16 code units). It is the string itself
    unless the string holds characters outside the BMP, which are replaced by their two surrogate
    code units."""
    if s.isascii() or max(s) <= "\uffff":
        return s
    data = s.encode("utf-16-be", "surrogatepass")
    return "".join(chr((data[i] << 8) | data[i + 1]) for i in range(0, len(data), 2))


def uuid_hash_code(uuid: bytes) -> int:
    """Kafka's ``Uuid.hashCode`` (unsigned): the two 64-bit halves xored, then its 32-bit halves."""
    x = int.from_bytes(uuid[:8], "big") ^ int.from_bytes(uuid[8:16], "big")
    return ((x >> 32) ^ x) & MASK32


def uuid_sort_key(uuid: bytes) -> tuple[int, int]:
    """Kafka's ``Uuid.compareTo``: most then least significant bits, as signed longs."""
    return (int.from_bytes(uuid[:8], "big", signed=True),
            int.from_bytes(uuid[8:16], "big", signed=True))


class _TopicPartitionLike(Protocol):
    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...


def topic_partition_hash(tp: _TopicPartitionLike) -> int:
    """``TopicPartition.hashCode`` (unsigned): ``31 * (31 + partition) + topic.hashCode()``."""
    return (31 * (31 + tp.partition) + string_hash_u32(tp.topic)) & MASK32


def spread(h: int) -> int:
    """``HashMap.hash``: ``h ^ (h >>> 16)`` of an unsigned 32-bit hash."""
    return h ^ (h >> 16)


def table_size(n: int, initial_capacity: int | None = None) -> int:
    """Table length of a ``HashMap`` after ``n`` insertions (no removals, no bucket overflow),
    created with ``new HashMap<>()`` or ``new HashMap<>(initial_capacity)``."""
    if initial_capacity is None:
        cap = 16
    else:
        cap = 1
        while cap < initial_capacity:
            cap <<= 1
    while n > cap * 3 // 4:
        cap <<= 1
    return cap


def hash_order(keys: Iterable[Hashable], hash_fn: Callable, initial_capacity: int | None = None) -> list:
    """Iteration order of a ``HashMap``/``HashSet`` into which ``keys`` were inserted in the given
    order (``hash_fn`` gives a key's unsigned 32-bit ``hashCode``). A bucket keeps insertion order,
    so the order is a stable sort by bucket index in the final table."""
    keys = list(keys)
    if not keys:
        return keys
    spreads = [spread(hash_fn(k)) for k in keys]
    cap = 16 if initial_capacity is None else table_size(0, initial_capacity)
    # replay the insertions to find the final table size (bucket overflow can grow it)
    counts: dict[int, int] = {}
    for i, h in enumerate(spreads):
        b = h & (cap - 1)
        c = counts.get(b, 0)
        counts[b] = c + 1
        grow = c >= 8 and cap < 64
        if grow:
            cap <<= 1
        if i + 1 > cap * 3 // 4:
            cap <<= 1
            grow = True
        if grow:
            counts = {}
            for h2 in spreads[:i + 1]:
                b2 = h2 & (cap - 1)
                counts[b2] = counts.get(b2, 0) + 1
    mask = cap - 1
    order = sorted(range(len(keys)), key=lambda i: spreads[i] & mask)
    return [keys[i] for i in order]


def string_map_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of a ``new HashMap<String, _>()`` filled by ``put`` in this order."""
    return hash_order(keys, string_hash_u32)


def string_hash_map(mapping: Mapping[str, V]) -> dict[str, V]:
    """``mapping`` re-ordered as the ``HashMap<String, _>`` filled from it in its order iterates."""
    return {k: mapping[k] for k in string_map_order(mapping)}


def hash_set_copy_order(keys: Iterable[Hashable], hash_fn: Callable) -> list:
    """The iteration order of ``new HashSet<>(c)`` over ``c`` in this order: its table is sized
    ``max(size / .75f + 1, 16)`` up front."""
    keys = list(keys)
    return hash_order(keys, hash_fn, max(int(len(keys) / 0.75) + 1, 16))


class JavaHashSet:
    """The iteration head of a ``HashSet`` under adds and removes (``set.iterator().next()``), kept
    in a heap keyed by (bucket, insertion sequence) and rebuilt when the table doubles.
    ``hash_fn`` gives an element's unsigned ``hashCode`` (``TopicPartition``'s by default)."""

    __slots__ = ("_hash", "_cap", "_seq", "_items", "_heap", "_counts")

    def __init__(self, hash_fn: Callable = topic_partition_hash) -> None:
        self._hash = hash_fn
        self._cap = 16
        self._seq = 0
        self._items: dict = {}                      # element -> (spread hash, seq)
        self._heap: list[tuple[int, int, object]] = []
        self._counts: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, item) -> bool:
        return item in self._items

    def __iter__(self):
        mask = self._cap - 1
        return iter(sorted(self._items, key=lambda t: (self._items[t][0] & mask, self._items[t][1])))

    def _rebuild(self) -> None:
        mask = self._cap - 1
        self._counts = {}
        heap = []
        for item, (h, seq) in self._items.items():
            b = h & mask
            self._counts[b] = self._counts.get(b, 0) + 1
            heap.append((b, seq, item))
        heapq.heapify(heap)
        self._heap = heap

    def add(self, item) -> None:
        if item in self._items:
            return
        h = spread(self._hash(item))
        seq = self._seq
        self._seq += 1
        self._items[item] = (h, seq)
        b = h & (self._cap - 1)
        c = self._counts.get(b, 0)
        self._counts[b] = c + 1
        heapq.heappush(self._heap, (b, seq, item))
        grow = False
        if c >= 8 and self._cap < 64:
            self._cap <<= 1
            grow = True
        if len(self._items) > self._cap * 3 // 4:
            self._cap <<= 1
            grow = True
        if grow:
            self._rebuild()

    def discard(self, item) -> None:
        entry = self._items.pop(item, None)
        if entry is not None:
            self._counts[entry[0] & (self._cap - 1)] -= 1

    def first(self):
        heap = self._heap
        items = self._items
        mask = self._cap - 1
        while heap:
            b, seq, item = heap[0]
            entry = items.get(item)
            if entry is not None and entry[1] == seq and (entry[0] & mask) == b:
                return item
            heapq.heappop(heap)
        raise KeyError("first() of an empty set")


def uuid_map_order(keys: Iterable[bytes]) -> list[bytes]:
    """The iteration order of a ``new HashMap<Uuid, _>()`` (or ``Collectors.toMap``) filled by
    ``put`` in this order: a member's assignment as Kafka's ``Assignment.fromRecord`` rebuilds it."""
    return hash_order(keys, uuid_hash_code)


def int_hash_set_copy_order(values: Iterable[int]) -> list[int]:
    """The iteration order of ``new HashSet<Integer>(c)`` over ``c`` in this order
    (``Integer.hashCode`` is the value): a topic's partitions in ``Assignment.fromRecord``."""
    return hash_set_copy_order(values, _int_hash)


def _int_hash(v: int) -> int:
    return v & MASK32


_M64 = (1 << 64) - 1
_FIBONACCI = -7046029254386353131       # Knuth's multiplicative constant of BaseHashTable.findSlot


def timeline_hash_grown_slots(slots: int, size: int) -> int:
    """The slot count of a ``TimelineHashMap`` of ``size`` keys with ``slots`` slots after one
    more key is added: doubled when ``(size + 1) * 0.75 > slots`` (it never shrinks)."""
    return slots * 2 if (size + 1) * 0.75 > slots else slots


def timeline_hash_order(keys: Iterable[str], slots: int) -> list[str]:
    """The iteration order of a ``TimelineHashMap`` with ``slots`` slots over ``keys`` given in the
    order they were (last) added: by slot, and within a slot in that order (a rehash walks the old
    slots in order and splits each into two neighbours, so it never reorders keys within a slot).
    The same order ``TimelineHashOrder`` keeps, from the slot count alone."""
    shift = 65 - slots.bit_length()
    return sorted(keys, key=lambda k: ((string_hash_code(k) * _FIBONACCI) & _M64) >> shift)


class TimelineHashOrder:
    """The iteration order of Kafka's ``TimelineHashMap`` (its ``BaseHashTable``) over String keys,
    kept as keys are added and removed: the table starts at 2 slots (``new
    TimelineHashMap<>(registry, 0)``) and doubles when ``(size + 1) * 0.75 > slots`` before an add; a
    key's slot is the top bits of ``hashCode * -7046029254386353131`` (as a long); a slot keeps its
    keys in the order they came (a rehash walks the old slots in order); iteration walks the slots
    in order. A key added again keeps its place."""

    __slots__ = ("slots", "size")

    def __init__(self) -> None:
        self.slots: list[list[str]] = [[], []]
        self.size = 0

    @staticmethod
    def _slot(key: str, n: int) -> int:
        return ((string_hash_code(key) * _FIBONACCI) & _M64) >> (65 - n.bit_length())

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


def int_hash(v: int) -> int:
    """``Integer.hashCode`` (unsigned)."""
    return v & MASK32


def topic_id_partition_hash(tp: tuple) -> int:
    """``hashCode`` of the record ``TopicIdPartition(Uuid topicId, int partitionId)`` of Kafka's
    server-common (unsigned): a record's ``31 * topicId.hashCode() + partitionId``."""
    return (31 * uuid_hash_code(tp[0]) + tp[1]) & MASK32


def hash_map_capacity(num_mappings: int) -> int:
    """The initial capacity Kafka's ``AssignorHelpers.newHashMap`` / ``newHashSet`` ask for:
    ``(int) (((n + 1) / 0.75f) + 1)``."""
    return int((num_mappings + 1) / 0.75 + 1)


class JavaHashMap:
    """A ``java.util.HashMap`` (or the ``HashSet`` over one) under ``put``/``remove``, iterated
    in Java's order: buckets in index order, each in insertion order. The table starts at 16 (or
    the power of two at or above ``initial_capacity``), doubles past 0.75 full, or when a bucket
    reaches nine entries while shorter than 64. ``hash_fn`` gives a key's unsigned ``hashCode``.
    Iterating takes a snapshot of the order, so the current key may be removed meanwhile (an
    ``Iterator.remove``)."""

    __slots__ = ("_hash", "_cap", "_seq", "_items", "_counts")

    def __init__(self, hash_fn: Callable = int_hash, initial_capacity: int | None = None) -> None:
        self._hash = hash_fn
        self._cap = 16 if initial_capacity is None else table_size(0, max(1, initial_capacity))
        self._seq = 0
        self._items: dict = {}                  # key -> [spread hash, seq, value]
        self._counts: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key) -> bool:
        return key in self._items

    def get(self, key, default=None):
        e = self._items.get(key)
        return default if e is None else e[2]

    def __getitem__(self, key):
        return self._items[key][2]

    def put(self, key, value=None) -> None:
        e = self._items.get(key)
        if e is not None:
            e[2] = value
            return
        h = spread(self._hash(key))
        self._items[key] = [h, self._seq, value]
        self._seq += 1
        b = h & (self._cap - 1)
        c = self._counts.get(b, 0)
        self._counts[b] = c + 1
        grow = c >= 8 and self._cap < 64
        if len(self._items) > self._cap * 3 // 4:
            grow = True
        if grow:
            self._cap <<= 1
            mask = self._cap - 1
            self._counts = {}
            for h2, _, _ in self._items.values():
                self._counts[h2 & mask] = self._counts.get(h2 & mask, 0) + 1

    add = put

    def setdefault(self, key, factory: Callable):
        """``computeIfAbsent(key, k -> factory())``."""
        e = self._items.get(key)
        if e is not None:
            return e[2]
        value = factory()
        self.put(key, value)
        return value

    def remove(self, key) -> bool:
        e = self._items.pop(key, None)
        if e is None:
            return False
        self._counts[e[0] & (self._cap - 1)] -= 1
        return True

    discard = remove

    def keys(self) -> list:
        mask = self._cap - 1
        items = self._items
        return sorted(items, key=lambda k: (items[k][0] & mask, items[k][1]))

    __iter__ = lambda self: iter(self.keys())  # noqa: E731

    def items(self) -> list:
        return [(k, self._items[k][2]) for k in self.keys()]
