"""The descriptors a LogManager keeps open for its segment and index files, at most ``capacity``.

Kafka keeps every segment's files open (a descriptor per ``.log`` plus two mapped indexes), so a
broker with 10,000 partitions holds 30,000 of them. Here a file is opened on first use (an
append, a read, a flush) and the least recently used ones are closed once more than
``capacity`` are open; a closed one is opened again when next used. The broker sizes
``capacity`` from the descriptors it keeps for its own files (broker/connections.py), so
clients can never take the descriptors log housekeeping needs, and a data directory of any size
opens within the limit.

Closing a file with writes not yet fsynced loses nothing: the dirty pages belong to the inode,
and the next ``fsync`` (on a new descriptor) writes them; since Linux 4.16 a writeback error
nobody has seen yet is reported to a descriptor opened after it (errseq), so a failed write is
still reported by that ``fsync``.

Callers never keep a descriptor across a call that may open another file (it could be closed
and its number reused): they ask their file for it at each system call.
"""
from __future__ import annotations

from collections import OrderedDict


class OpenFiles:
    """LRU set of open files; each has ``evict()`` (close the descriptor, stay usable)."""

    __slots__ = ("capacity", "_lru", "evictions")

    def __init__(self, capacity: int | None = None):
        self.capacity = capacity        # None: unbounded
        self._lru: OrderedDict = OrderedDict()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._lru)

    def opened(self, f) -> None:
        """``f`` has just opened its descriptor: count it, closing the least recently used
        others while over capacity."""
        lru = self._lru
        lru[f] = None
        capacity = self.capacity
        if capacity is not None and len(lru) > capacity:
            self._evict(capacity)

    def used(self, f) -> None:
        try:
            self._lru.move_to_end(f)
        except KeyError:
            pass

    def closed(self, f) -> None:
        self._lru.pop(f, None)

    def _evict(self, capacity: int) -> None:
        lru = self._lru
        keep = max(capacity, 1)         # never the file just opened
        while len(lru) > keep:
            f, _ = lru.popitem(last=False)
            f.evict()
            self.evictions += 1
