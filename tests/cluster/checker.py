"""The chaos run's checker: pure functions over the histories the run records, each returning the
list of violations it found (empty when the property holds).

- ``acknowledged_once_in_order``: every record the producer saw acknowledged is in its partition's
  log exactly once, and the acknowledged records of a partition appear in the order they were
  acknowledged (an idempotent producer's acknowledgements of one partition come in offset order).
- ``commits_never_go_back``: per group and partition, the committed offsets observed (OffsetFetch
  polls and the consumers' commit callbacks, in the order observed) never decrease.
- ``one_owner_per_partition``: in each view of a group the coordinator gave (one DescribeGroups /
  ConsumerGroupDescribe answer: one generation, or the members' current assignments at one group
  epoch), no partition is owned by two members.
- ``every_group_consumed_everything``: each group consumed every acknowledged record (at least
  once): its members went on through the faults."""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence


def acknowledged_once_in_order(acked: Mapping[int, Sequence[bytes]],
                               log: Mapping[int, Sequence[bytes]]) -> list[str]:
    """``acked``: per partition, the acknowledged values in acknowledgement order; ``log``: per
    partition, the values read back from offset 0, in offset order."""
    bad = []
    for p, values in acked.items():
        got = log.get(p, ())
        position: dict[bytes, int] = {}
        for offset, v in enumerate(got):
            if v in position:
                bad.append(f"partition {p}: {v!r} at offsets {position[v]} and {offset}")
            else:
                position[v] = offset
        missing = [v for v in values if v not in position]
        if missing:
            bad.append(f"partition {p}: {len(missing)} acknowledged records missing, first {missing[:5]}")
        last, last_v = -1, None
        for v in values:
            at = position.get(v)
            if at is None:
                continue
            if at < last:
                bad.append(f"partition {p}: {v!r} (offset {at}) acknowledged after {last_v!r} (offset {last})")
            last, last_v = at, v
    return bad


def commits_never_go_back(observations: Iterable[tuple[str, str, int, int]]) -> list[str]:
    """``observations``: (source, group, partition, committed offset) in the order observed;
    offsets < 0 (none committed yet) are ignored."""
    bad, high = [], {}
    for source, group, p, offset in observations:
        if offset < 0:
            continue
        key = (group, p)
        prev = high.get(key)
        if prev is not None and offset < prev[0]:
            bad.append(f"group {group} partition {p}: committed {offset} ({source}) after {prev[0]} ({prev[1]})")
        else:
            high[key] = (offset, source)
    return bad


def one_owner_per_partition(views: Iterable[tuple[str, object, Mapping[str, Iterable[int]]]]) -> list[str]:
    """``views``: (group, generation or epoch as described, {member id: partitions it owns})."""
    bad = []
    for group, generation, members in views:
        owner: dict[int, str] = {}
        for member, partitions in members.items():
            for p in partitions:
                if p in owner and owner[p] != member:
                    bad.append(f"group {group} ({generation}): partition {p} owned by {owner[p]} and {member}")
                owner.setdefault(p, member)
    return bad



def every_group_consumed_everything(acked: Mapping[int, Sequence[bytes]],
                                    seen: Mapping[str, set[tuple[int, bytes]]]) -> list[str]:
    """``seen``: per group, the (partition, value) pairs its members consumed."""
    bad = []
    for group, got in seen.items():
        missing = [(p, v) for p, values in acked.items() for v in values if (p, v) not in got]
        if missing:
            bad.append(f"group {group}: {len(missing)} acknowledged records never consumed, first {missing[:5]}")
    return bad
