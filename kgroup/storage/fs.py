"""Filesystem-wide sync for group commit: Linux ``syncfs(2)`` through ctypes.

One group commit may cover many partition logs (50 ``__consumer_offsets`` partitions, many
acks=-1 topics). ``fsync`` on each costs one journal commit per file; ``syncfs`` on any
descriptor of the filesystem writes back every dirty page and inode there and commits the
journal once, so the whole round costs about one ``fsync``. It is at least as strong as the
fsyncs it replaces (it also flushes data other processes wrote). Linux reports writeback errors
through ``syncfs`` since 5.8. Elsewhere, or if the call fails, callers fsync log by log.
"""
from __future__ import annotations

import ctypes
import os
import sys


def _load_syncfs():
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_syncfs = _load_syncfs()


def syncfs_available() -> bool:
    return _syncfs is not None


def syncfs(fd: int) -> None:
    """Make everything written to the filesystem holding ``fd`` durable (the GIL is released
    meanwhile, as for ``os.fsync``). Raises OSError on failure or where it does not exist."""
    if _syncfs is None:
        raise OSError(38, "syncfs is not available on this platform")   # ENOSYS
    if _syncfs(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def check_data_dir(path: str) -> None:
    """Make sure ``path`` can hold logs before anything is loaded: it exists (created if
    missing), is a directory, and a file can be created, written, synced and removed in it.
    Raises OSError naming the path, as Kafka's LogManager refuses a log directory it cannot create
    or write at start-up."""
    probe = os.path.join(path, f".kgroup-write-check-{os.getpid()}")
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotADirectoryError(20, "Not a directory", path)
    os.makedirs(path, exist_ok=True)
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"k")
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(probe)
