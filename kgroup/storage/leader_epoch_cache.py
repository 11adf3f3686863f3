"""The leader epoch cache of one partition log (Kafka's LeaderEpochFileCache), kept in the log
directory's ``leader-epoch-checkpoint`` in Kafka's format (CheckpointFile):

    0                 the version
    2                 how many entries follow
    0 0               epoch, the offset of its first record
    3 1042

Each entry says from which offset on the records were written by the leader of that epoch. It
answers OffsetForLeaderEpoch (the end offset of an epoch: the start of the next one, or the log
end for the latest), by which a follower finds where its log diverged from the leader's, and a
consumer whether its position was truncated (KIP-101, KIP-279, KIP-320).

An entry is written through (fsynced) when assigned, as Kafka does; truncations are written
without an fsync (Kafka flushes them asynchronously: a stale entry restored after a crash is cut
again by the truncation at load). Synchronous and single-threaded, as the log.
"""
from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from typing import NamedTuple

CHECKPOINT_FILE = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCheckpointError(ValueError):
    """A malformed leader-epoch-checkpoint file."""


def read_checkpoint(path: str) -> list[EpochEntry]:
    """The entries of a leader-epoch-checkpoint file ([] when absent)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    if len(lines) < 2:
        raise LeaderEpochCheckpointError(f"{path}: truncated checkpoint file")
    if int(lines[0]) != CHECKPOINT_VERSION:
        raise LeaderEpochCheckpointError(f"{path}: unrecognized version {lines[0]}")
    count = int(lines[1])
    entries = []
    for line in lines[2:2 + count]:
        parts = line.split()
        if len(parts) != 2:
            raise LeaderEpochCheckpointError(f"{path}: malformed line {line!r}")
        entries.append(EpochEntry(int(parts[0]), int(parts[1])))
    if len(entries) != count:
        raise LeaderEpochCheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    return entries


def write_checkpoint(path: str, entries, sync: bool = True) -> None:
    """Write ``entries`` atomically (a temporary file renamed over the checkpoint)."""
    text = f"{CHECKPOINT_VERSION}\n{len(entries)}\n" + "".join(f"{e} {o}\n" for e, o in entries)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


class LeaderEpochFileCache:
    """Epoch -> start offset, in increasing order of both (Kafka keeps them monotonic)."""

    __slots__ = ("path", "_epochs", "_offsets", "latest_epoch")

    def __init__(self, directory: str, read: bool = True):
        self.path = os.path.join(directory, CHECKPOINT_FILE)
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        # the latest epoch, or UNDEFINED_EPOCH when empty: read on every append
        self.latest_epoch = UNDEFINED_EPOCH
        if read:
            self.load()

    def load(self) -> None:
        """Read the checkpoint file (the log knows from its directory listing whether there is one)."""
        for entry in read_checkpoint(self.path):
            self._assign(entry.epoch, entry.start_offset)

    # -- reads ------------------------------------------------------------------------------------
    @property
    def entries(self) -> list[EpochEntry]:
        return [EpochEntry(e, o) for e, o in zip(self._epochs, self._offsets)]

    def __bool__(self) -> bool:
        return bool(self._epochs)

    def latest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[-1], self._offsets[-1]) if self._epochs else None

    def earliest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[0], self._offsets[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose records include ``offset`` (the last entry starting at or before it)."""
        i = bisect_right(self._offsets, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as LeaderEpochFileCache.endOffsetFor: the largest epoch at or
        below the requested one and the start offset of the first epoch above it, or the log
        end offset for the latest epoch; (-1, -1) for an undefined epoch or one above all."""
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._epochs and self._epochs[-1] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:         # older than every known epoch: where the first known one starts
            return requested_epoch, self._offsets[0]
        return self._epochs[higher - 1], self._offsets[higher]

    # -- changes ----------------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Records from ``start_offset`` on were written at ``epoch``: a new entry (written
        through) unless it is the latest one already. Entries at or above the epoch, or starting
        at or after the offset, are removed first (monotonicity). Returns whether it changed."""
        if self._assign(epoch, start_offset):
            self.flush()
            return True
        return False

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._offsets[-1]:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            self._epochs.pop()
            self._offsets.pop()
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        self.latest_epoch = epoch
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Remove the entries starting at or after ``end_offset`` (the log was truncated there)."""
        if end_offset < 0 or not self._offsets or self._offsets[-1] < end_offset:
            return False
        keep = bisect_left(self._offsets, end_offset)
        del self._epochs[keep:], self._offsets[keep:]
        self.latest_epoch = self._epochs[-1] if self._epochs else UNDEFINED_EPOCH
        self.flush(sync=False)
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log now starts at ``start_offset``: the entries starting at or before it collapse
        into the last of them, moved to ``start_offset`` (Kafka's truncateFromStart)."""
        below = bisect_right(self._offsets, start_offset)
        if below == 0 or (below == 1 and self._offsets[0] == start_offset):
            return False
        epoch = self._epochs[below - 1]
        del self._epochs[:below], self._offsets[:below]
        self._epochs.insert(0, epoch)
        self._offsets.insert(0, start_offset)
        self.flush(sync=False)
        return True

    def clear(self) -> None:
        """Forget every entry (the log was deleted or truncated fully)."""
        if self._epochs:
            self._epochs.clear()
            self._offsets.clear()
            self.latest_epoch = UNDEFINED_EPOCH
            self.flush(sync=False)

    def flush(self, sync: bool = True) -> None:
        if not os.path.isdir(os.path.dirname(self.path)):
            return      # the log directory was deleted meanwhile (Kafka's writeIfDirExists)
        write_checkpoint(self.path, list(zip(self._epochs, self._offsets)), sync=sync)
