"""Combining a share-partition's state batches (Kafka's PersisterStateBatchCombiner). Pure.

A state batch is ``(first_offset, last_offset, delivery_state, delivery_count)``. Combining the
batches so far with new ones gives non-overlapping batches where each offset takes the batch that
covers it with the highest (delivery count, delivery state) - a later delivery or a terminal state
wins, as Kafka's compareBatchDeliveryInfo orders them - adjacent batches of equal state merge, and
everything below the start offset is dropped (-1: nothing is).
"""
from __future__ import annotations

from typing import Iterable, NamedTuple


class StateBatch(NamedTuple):
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


def combine(so_far: Iterable, new: Iterable, start_offset: int) -> list[StateBatch]:
    batches = [StateBatch(*b) for b in so_far] + [StateBatch(*b) for b in new]
    if start_offset != -1:
        pruned = []
        for b in batches:
            if b.last_offset < start_offset:
                continue
            pruned.append(b if b.first_offset >= start_offset else b._replace(first_offset=start_offset))
        batches = pruned
    if len(batches) < 2:
        return batches
    # sweep the elementary intervals between batch boundaries; each takes its best covering batch
    points = sorted({b.first_offset for b in batches} | {b.last_offset + 1 for b in batches})
    batches.sort()
    out: list[StateBatch] = []
    active: list[StateBatch] = []
    i = 0
    for lo, hi in zip(points, points[1:]):
        while i < len(batches) and batches[i].first_offset <= lo:
            active.append(batches[i])
            i += 1
        active = [b for b in active if b.last_offset >= lo]
        if not active:
            continue
        best = max(active, key=lambda b: (b.delivery_count, b.delivery_state))
        if out and out[-1].last_offset + 1 == lo and out[-1].delivery_state == best.delivery_state \
                and out[-1].delivery_count == best.delivery_count:
            out[-1] = out[-1]._replace(last_offset=hi - 1)
        else:
            out.append(StateBatch(lo, hi - 1, best.delivery_state, best.delivery_count))
    return out
