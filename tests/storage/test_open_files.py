"""A LogManager keeps at most ``max_open_files`` segment and index
descriptors open (least recently used closed first, reopened on use), so a broker with 10,000
partitions does not hold 30,000 descriptors. Everything a log does is unchanged under a budget
far smaller than its files: appends across rolls, reads, a scan interrupted by other logs' I/O,
compaction, flushing, unclean close and recovery."""
from __future__ import annotations

import os

from kgroup.storage import LogManager, cleaner
from tests.storage.helpers import batch, keyed

PARTITIONS = 24
BUDGET = 4


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def values(plog) -> list[bytes]:
    from kgroup.protocol.records import decode_records
    return [r.value for header, b in plog.iter_batches() for r in decode_records(b, header)]


def fill(mgr, rounds: int) -> dict:
    expected = {p: [] for p in range(PARTITIONS)}
    for r in range(rounds):
        for p in range(PARTITIONS):
            plog = mgr.get_or_create("t", p, {"segment.bytes": "400"})   # a roll every few batches
            plog.append(batch(2, value=b"p%d-r%d-" % (p, r)))
            expected[p] += [b"p%d-r%d-0" % (p, r), b"p%d-r%d-1" % (p, r)]
    return expected


def test_a_descriptor_budget_far_below_the_files_changes_nothing(tmp_path, clock):
    base = open_descriptors()
    mgr = LogManager(str(tmp_path), clock=clock, max_open_files=BUDGET)
    expected = fill(mgr, 12)
    segments = sum(mgr.get("t", p).num_segments for p in range(PARTITIONS))
    assert segments >= 3 * PARTITIONS                    # several segments each: far over the budget
    assert len(mgr.open_files) <= BUDGET and open_descriptors() <= base + BUDGET
    assert mgr.open_files.evictions > segments
    # a scan whose descriptor is closed (and its number reused) between two of its reads
    scan = mgr.get("t", 0).iter_batches()
    first = next(scan)
    for p in range(1, PARTITIONS):
        mgr.get("t", p).read(0, 10**6)
    from kgroup.protocol.records import decode_records
    rest = [r.value for header, b in [first, *scan] for r in decode_records(b, header)]
    assert rest == expected[0]
    for p in range(PARTITIONS):
        assert values(mgr.get("t", p)) == expected[p]
    mgr.flush_all()
    assert all(mgr.get("t", p).recovery_point == len(expected[p]) for p in range(PARTITIONS))
    mgr.close_all(clean=False)                          # a crash: recovery scans every segment
    assert open_descriptors() == base
    mgr = LogManager(str(tmp_path), clock=clock, max_open_files=BUDGET)
    assert open_descriptors() <= base + BUDGET
    for p in range(PARTITIONS):
        assert values(mgr.get("t", p)) == expected[p]
        assert mgr.get("t", p).log_end_offset == len(expected[p])
    mgr.close_all()
    assert open_descriptors() == base


def test_compaction_and_truncation_under_the_budget(tmp_path, clock):
    mgr = LogManager(str(tmp_path), clock=clock, max_open_files=2)
    logs = [mgr.get_or_create("c", p, {"cleanup.policy": "compact", "segment.bytes": "300"}) for p in range(6)]
    for r in range(10):
        for plog in logs:
            plog.append(keyed([(b"k%d" % (r % 3), b"v%d" % r)]))
    for plog in logs:
        cleaner.clean(plog)
        assert {v for v in values(plog)} >= {b"v7", b"v8", b"v9"} and b"v0" not in values(plog)
    logs[0].truncate_to(3)
    assert logs[0].log_end_offset <= 3
    assert len(mgr.open_files) <= 2
    mgr.close_all()
    mgr = LogManager(str(tmp_path), clock=clock, max_open_files=2)
    assert values(mgr.get("c", 5))[-3:] == [b"v7", b"v8", b"v9"]
    mgr.close_all()


def test_created_partitions_hold_no_descriptor_once_over_the_budget(tmp_path, clock):
    base = open_descriptors()
    mgr = LogManager(str(tmp_path), clock=clock, max_open_files=10)
    for p in range(300):
        mgr.get_or_create("wide", p)
    assert open_descriptors() <= base + 10
    mgr.get("wide", 7).append(batch(1))
    assert values(mgr.get("wide", 7)) == [b"v0"]
    mgr.close_all()
