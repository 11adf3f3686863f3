"""The aborted transaction index of one segment (``<base offset>.txnindex``, Kafka's
TransactionIndex): one 34-byte entry per transaction aborted by a marker appended to that
segment, in Kafka's on-disk format::

    version int16 (0) | producer id int64 | first offset int64 | last offset int64 | last stable offset int64

``first offset`` is the transaction's first offset in the partition, ``last offset`` the offset
of its ABORT marker, ``last stable offset`` the partition's LSO right after the marker was
written. A read_committed fetch collects the entries overlapping what it returns; the LSO
field tells where the search may stop: an entry whose LSO is at or beyond the fetch's upper
bound proves that no transaction aborted later began before that bound.

The file is created by the first abort (most segments never have one). Entries are also kept
in memory after the first read: the file is only ever appended to or cut.
"""
from __future__ import annotations

import os
import struct
from typing import NamedTuple

from kgroup.protocol.errors import ErrorCode, FixedCodeError

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
CURRENT_VERSION = 0


class CorruptIndexError(FixedCodeError):
    """The file is not a transaction index of this segment (Kafka's CorruptIndexException,
    which is no ApiException: a request it fails is answered UNKNOWN_SERVER_ERROR)."""
    code = ErrorCode.UNKNOWN_SERVER_ERROR


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TxnIndexSearchResult(NamedTuple):
    aborted_transactions: list
    is_complete: bool       # no later segment can hold an overlapping aborted transaction


class TransactionIndex:
    def __init__(self, path: str, start_offset: int):
        self.path = path
        self.start_offset = start_offset
        self._entries: list[AbortedTxn] | None = None     # None: not read yet
        self._fd = -1
        self.writes = 0
        self.synced_writes = 0

    # --- reading -------------------------------------------------------------------------------

    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
            out = []
            for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
                version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
                if version > CURRENT_VERSION:
                    raise CorruptIndexError(f"Unexpected aborted transaction version {version} in transaction "
                                            f"index {self.path}, current version is {CURRENT_VERSION}")
                out.append(AbortedTxn(pid, first, last, lso))
            self._entries = out
        return self._entries

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Entries overlapping [fetch_offset, upper_bound_offset), in index order."""
        found = []
        for txn in self.entries():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self) -> None:
        for txn in self.entries():
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(f"Last offset of aborted transaction {txn} in index {self.path} is less "
                                        f"than start offset {self.start_offset}")

    # --- writing -------------------------------------------------------------------------------

    def _open(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries()
        if entries and entries[-1].last_offset >= txn.last_offset:
            raise ValueError(f"The last offset of appended transactions must increase sequentially, but "
                             f"{txn.last_offset} is not greater than current last offset "
                             f"{entries[-1].last_offset} of index {self.path}")
        data = ENTRY.pack(CURRENT_VERSION, *txn)
        fd = self._open()
        if os.write(fd, data) != len(data):
            raise OSError(f"short write to {self.path}")
        entries.append(txn)
        self.writes += 1

    def truncate_to(self, offset: int) -> None:
        """Remove the entries of transactions whose marker is at or after ``offset``."""
        entries = self.entries()
        keep = next((i for i, t in enumerate(entries) if t.last_offset >= offset), len(entries))
        if keep < len(entries):
            self._cut(keep)

    def reset(self) -> None:
        """Remove every entry (the segment is being recovered and its index rebuilt)."""
        if os.path.exists(self.path):
            self._cut(0)
        self._entries = []

    def _cut(self, keep: int) -> None:
        fd = self._open()
        os.ftruncate(fd, keep * ENTRY_SIZE)
        del self.entries()[keep:]
        self.writes += 1

    @property
    def dirty(self) -> bool:
        return self.writes != self.synced_writes

    def flush(self) -> None:
        writes = self.writes
        if writes != self.synced_writes:
            os.fsync(self._open())
            self.synced_writes = writes

    def synced(self, writes: int) -> None:
        if writes > self.synced_writes:
            self.synced_writes = writes

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def unload(self) -> None:
        """Forget what was read: the file was replaced (a cleaned copy swapped in)."""
        self.close()
        self._entries = None
        self.synced_writes = self.writes

    def delete(self) -> None:
        self.close()
        self._entries = []
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
