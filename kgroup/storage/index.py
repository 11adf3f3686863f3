"""The sparse per-segment indexes, in Kafka's file layout.

``.index``: entries of (int32 offset relative to the segment base, int32 file position),
big-endian, offsets strictly increasing. ``.timeindex``: entries of (int64 timestamp, int32
relative offset), appended only when the timestamp grows. Unlike Kafka the files are not
preallocated: they hold exactly the valid entries (what Kafka leaves after trimming on roll
or close). Entries are cached in arrays for bisecting; closed segments load them lazily.
"""
from __future__ import annotations

import abc
import os
import struct
import sys
from array import array
from bisect import bisect_right
from typing import NamedTuple

from kgroup.storage.open_files import OpenFiles

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_LITTLE = sys.byteorder == "little"


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class _IndexFile(abc.ABC):
    entry_size = 0

    def __init__(self, path: str, base_offset: int, max_index_size: int):
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry_size)
        self._fd: int | None = None
        self.files: OpenFiles | None = None     # the LogManager's OpenFiles, which may close _fd (open_files.py)
        self._loaded = False
        # Writes so far and how many of them are known durable (fsynced, or covered by a
        # filesystem-wide sync that started after them): counters, not a flag, so a sync that
        # ran while more was written marks only what it covered.
        self.writes = 0
        self.synced_writes = 0

    def _open(self) -> int:
        fd = self._fd
        if fd is None:
            fd = self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if self.files is not None:
                self.files.opened(self)
        elif self.files is not None:
            self.files.used(self)
        return fd

    def evict(self) -> None:
        """Close the descriptor to save one (OpenFiles); reopened on the next write."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _read_all(self) -> bytes:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return b""
        # A torn final entry (crash mid-write) is ignored, as Kafka ignores trailing slack.
        return data[: len(data) - len(data) % self.entry_size]

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self._load(self._read_all())
            self._loaded = True

    def _write_entry(self, index: int, data: bytes) -> None:
        os.pwrite(self._open(), data, index * self.entry_size)
        self.writes += 1

    def _truncate_entries(self, count: int) -> None:
        os.ftruncate(self._open(), count * self.entry_size)
        self.writes += 1

    @property
    def entries(self) -> int:
        self._ensure_loaded()
        return self._count()

    def is_full(self) -> bool:
        if not self._loaded:
            self._ensure_loaded()
        return self._count() >= self.max_entries

    def file_size_ok(self) -> bool:
        try:
            return os.path.getsize(self.path) % self.entry_size == 0
        except FileNotFoundError:
            return False

    def reset(self) -> None:
        self._load(b"")
        self._loaded = True
        self._truncate_entries(0)

    @property
    def dirty(self) -> bool:
        return self.writes != self.synced_writes

    def flush(self) -> None:
        writes = self.writes
        if writes != self.synced_writes:
            if self._fd is not None:
                os.fsync(self._fd)
            elif os.path.exists(self.path):
                # fsync covers the file, not the descriptor: a fresh one will do.
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        self.synced_writes = writes

    def synced(self, writes: int) -> None:
        """A filesystem-wide sync that started after the first ``writes`` writes has finished."""
        if writes > self.synced_writes:
            self.synced_writes = writes

    def close(self) -> None:
        """Release the descriptor (reopened on the next write); pending fsyncs are kept."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            if self.files is not None:
                self.files.closed(self)

    def delete(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self._load(b"")
        self._loaded = True

    def unload(self) -> None:
        """The file was replaced (a cleaned segment swapped in, already fsynced): read it
        again on next use."""
        self.close()
        self._loaded = False
        self.synced_writes = self.writes

    # subclass hooks
    @abc.abstractmethod
    def _load(self, data: bytes) -> None:
        """Parse the file's entries."""

    @abc.abstractmethod
    def _count(self) -> int:
        """Entries held."""


class OffsetIndex(_IndexFile):
    entry_size = _OFFSET_ENTRY.size

    def _load(self, data: bytes) -> None:
        flat = array("i")
        flat.frombytes(data)
        if _LITTLE:
            flat.byteswap()
        self._rel = flat[0::2]
        self._pos = flat[1::2]

    def _count(self) -> int:
        return len(self._rel)

    @property
    def last_offset(self) -> int:
        self._ensure_loaded()
        return self.base_offset + self._rel[-1] if self._rel else self.base_offset

    def last_entry(self) -> OffsetPosition:
        self._ensure_loaded()
        if not self._rel:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._rel[-1], self._pos[-1])

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= 2**31 - 1

    def append(self, offset: int, position: int) -> None:
        self._ensure_loaded()
        rel = offset - self.base_offset
        if self._rel and rel <= self._rel[-1]:
            raise ValueError(f"Attempt to append offset {offset} to index {self.path} no larger than "
                             f"the last offset appended ({self.base_offset + self._rel[-1]})")
        self._write_entry(len(self._rel), _OFFSET_ENTRY.pack(rel, position))
        self._rel.append(rel)
        self._pos.append(position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target, else (base offset, 0)."""
        self._ensure_loaded()
        i = bisect_right(self._rel, target_offset - self.base_offset) - 1
        if i < 0:
            return OffsetPosition(self.base_offset, 0)
        return OffsetPosition(self.base_offset + self._rel[i], self._pos[i])

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        self._ensure_loaded()
        rel = offset - self.base_offset
        keep = bisect_right(self._rel, rel - 1) if rel > 0 else 0
        if keep < len(self._rel):
            del self._rel[keep:]
            del self._pos[keep:]
            self._truncate_entries(keep)

    def positions_ok(self, log_size: int) -> bool:
        """Kafka's sanity check, plus positions within the log."""
        self._ensure_loaded()
        if not self._rel:
            return True
        return self._rel[0] >= 0 and self._rel[-1] >= self._rel[0] and 0 <= self._pos[-1] <= log_size


class TimeIndex(_IndexFile):
    entry_size = _TIME_ENTRY.size

    def _load(self, data: bytes) -> None:
        self._ts = array("q")
        self._rel = array("i")
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            self._ts.append(ts)
            self._rel.append(rel)

    def _count(self) -> int:
        return len(self._ts)

    def last_entry(self) -> TimestampOffset:
        self._ensure_loaded()
        if not self._ts:
            return TimestampOffset(-1, self.base_offset)
        return TimestampOffset(self._ts[-1], self.base_offset + self._rel[-1])

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        self._ensure_loaded()
        if not skip_full_check and self.is_full():
            raise ValueError(f"Attempt to append to a full time index {self.path}")
        rel = offset - self.base_offset
        if self._ts:
            if rel < self._rel[-1]:
                raise ValueError(f"Attempt to append offset {offset} to time index {self.path} smaller "
                                 f"than the last offset appended ({self.base_offset + self._rel[-1]})")
            if timestamp <= self._ts[-1]:
                return
        elif timestamp < 0:
            return  # nothing useful to index yet
        self._write_entry(len(self._ts), _TIME_ENTRY.pack(timestamp, rel))
        self._ts.append(timestamp)
        self._rel.append(rel)

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, else (-1, base offset)."""
        self._ensure_loaded()
        i = bisect_right(self._ts, target_timestamp) - 1
        if i < 0:
            return TimestampOffset(-1, self.base_offset)
        return TimestampOffset(self._ts[i], self.base_offset + self._rel[i])

    def truncate_to(self, offset: int) -> None:
        self._ensure_loaded()
        rel = offset - self.base_offset
        keep = len(self._rel)
        while keep > 0 and self._rel[keep - 1] >= rel:
            keep -= 1
        if keep < len(self._ts):
            del self._ts[keep:]
            del self._rel[keep:]
            self._truncate_entries(keep)
