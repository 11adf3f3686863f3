"""Shared read-only empty maps a group starts its rarely used maps from (static members, pending
members, regexes, assignor counts): most groups never fill them, and an empty dict, set or Counter
of its own costs 64-216 bytes per group. Reads, ``pop`` and ``clear`` work as on any empty map;
an insertion raises, since the group must first swap in a map of its own (and swaps this back
once its map is empty again: an emptied dict keeps its table)."""
from __future__ import annotations

from collections import Counter


def _refuse(self, *_args, **_kwargs):
    raise TypeError("a shared empty map is read-only")


class _NoEntries(dict):
    __slots__ = ()
    __setitem__ = setdefault = update = __ior__ = _refuse


class _NoCounts(Counter):
    __slots__ = ()

    def __init__(self):
        dict.__init__(self)

    __setitem__ = setdefault = update = subtract = __ior__ = _refuse


NO_ENTRIES: dict = _NoEntries()
NO_COUNTS: Counter = _NoCounts()
