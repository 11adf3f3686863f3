"""A clean built off to the side (the broker's cleaner thread) while the log keeps changing:
appends, reads, retention, DeleteRecords, truncation, the partition deleted or recreated, the
manager closed. The swap happens only when no planned segment changed; otherwise the cleaned
files are removed and the log is exactly as the concurrent change left it."""
from __future__ import annotations

import errno
import os
import threading

import pytest

from kgroup.protocol.records import decode_records
from kgroup.storage import LogConfig, LogManager
from kgroup.storage.cleaner import build_cleaned
from kgroup.storage.segment import CLEANED_SUFFIX
from tests.storage.helpers import keyed


def manager(tmp_path, clock, files=None, **cfg):
    base = dict(cleanup_policy=("compact",), segment_bytes=400, min_cleanable_dirty_ratio=0.01)
    base.update(cfg)
    return LogManager(str(tmp_path), LogConfig(**base), clock=clock, max_open_files=files)


def fill(plog, rounds, keys=5, start=0):
    for r in range(start, start + rounds):
        for k in range(keys):
            plog.append(keyed([(b"k%d" % k, b"r%d" % r)]))


def records(plog):
    return [(r.offset, r.key, r.value) for h, b in plog.iter_batches() for r in decode_records(b, h)]


def latest(recs):
    out = {}
    for offset, key, value in recs:
        out[key] = (offset, value)
    return out


def leftovers(directory):
    return [n for n in os.listdir(directory) if n.endswith(CLEANED_SUFFIX)]


def test_appends_and_reads_during_the_build_and_the_swap_keeps_them(tmp_path, clock):
    mgr = manager(tmp_path, clock)
    plog = mgr.get_or_create("c", 0)
    fill(plog, 10)
    before = records(plog)
    plan = mgr.plan_clean()
    assert plan is not None and plan.tp == ("c", 0)
    built = build_cleaned(plan)                 # what the cleaner thread makes
    assert leftovers(plog.directory)            # the .cleaned files sit beside the log ...
    assert records(plog) == before              # ... which still serves the old segments
    fill(plog, 6, start=10)                     # appends roll new segments meanwhile
    appended = records(plog)[len(before):]
    stats = mgr.finish_clean(plan, built)
    assert stats is not None and stats.records_removed > 0 and stats.segments_rewritten > 0
    assert not leftovers(plog.directory)
    after = records(plog)
    assert after[-len(appended):] == appended   # every append survives the swap
    assert latest(after) == latest(before + appended)
    cleaned = [r for r in after if r[0] < plan.end_offset]
    assert len({k for _, k, _ in cleaned}) == len(cleaned)      # one record per key where cleaned
    assert plog.cleaner_checkpoint == plan.end_offset
    mid = cleaned[len(cleaned) // 2][0]
    assert plog.read(mid, 1 << 20).first_batch_offset == mid    # the swapped-in indexes work
    mgr.close_all()
    again = manager(tmp_path, clock)            # and the swapped files load as they are
    assert records(again.get("c", 0)) == after
    again.close_all()


def test_a_build_on_a_thread_while_the_loop_appends_reads_and_evicts_descriptors(tmp_path, clock):
    # two descriptors for every file of six logs: the loop's reads and appends keep closing and
    # reopening the segments' descriptors while the builder reads through its own
    mgr = manager(tmp_path, clock, files=2)
    logs = [mgr.get_or_create("c", p) for p in range(6)]
    for plog in logs:
        fill(plog, 20)
    plan = mgr.plan_clean()
    target = plan.log
    expected_before = records(target)
    out = {}
    worker = threading.Thread(target=lambda: out.setdefault("built", build_cleaned(plan)))
    worker.start()
    rounds = 20
    while worker.is_alive() or rounds < 25:     # some appends surely overlap the build
        for plog in logs:
            plog.append(keyed([(b"k0", b"r%d" % rounds)]))
            assert plog.read(plog.log_start_offset, 1 << 16).records
        rounds += 1
    worker.join()
    appended = records(target)[len(expected_before):]
    assert mgr.finish_clean(plan, out["built"]) is not None
    after = records(target)
    assert latest(after) == latest(expected_before + appended)
    assert after[-len(appended):] == appended
    mgr.close_all()


def test_retention_deleting_a_planned_segment_abandons_the_swap(tmp_path, clock):
    mgr = manager(tmp_path, clock, cleanup_policy=("compact", "delete"), retention_ms=1000)
    plog = mgr.get_or_create("c", 0)
    fill(plog, 10)
    plan = mgr.plan_clean()
    built = build_cleaned(plan)
    clock.advance(5000)
    fill(plog, 1, start=10)
    assert mgr.delete_old_segments() > 0       # the retention check runs during the clean
    kept = records(plog)
    assert mgr.finish_clean(plan, built) is None
    assert records(plog) == kept and not leftovers(plog.directory)
    assert plog.cleaner_checkpoint < plan.end_offset
    assert mgr.clean_filthiest() in (("c", 0), None)    # a new plan works on what is left
    mgr.close_all()


def test_delete_records_inside_a_segment_keeps_the_swap_past_it_abandons(tmp_path, clock):
    mgr = manager(tmp_path, clock)
    plog = mgr.get_or_create("c", 0)
    fill(plog, 10)
    plan = mgr.plan_clean()
    built = build_cleaned(plan)
    first = plog.segments[0]
    plog.delete_records_before(first.base_offset + 1)   # the start moves inside the first segment
    assert mgr.finish_clean(plan, built) is not None
    assert records(plog)[0][0] >= 1 and plog.log_start_offset == 1
    fill(plog, 10, start=10)
    plan = mgr.plan_clean()
    built = build_cleaned(plan)
    plog.delete_records_before(plan.segments[1].base_offset)    # a planned segment goes
    kept = records(plog)
    assert mgr.finish_clean(plan, built) is None
    assert records(plog) == kept and not leftovers(plog.directory)
    mgr.close_all()


def test_truncation_during_the_build_abandons_the_swap(tmp_path, clock):
    mgr = manager(tmp_path, clock)
    plog = mgr.get_or_create("c", 0)
    fill(plog, 10)
    plan = mgr.plan_clean()
    built = build_cleaned(plan)
    plog.truncate_to(plan.segments[-1].base_offset)
    kept = records(plog)
    assert mgr.finish_clean(plan, built) is None
    assert records(plog) == kept and not leftovers(plog.directory)
    mgr.close_all()


def test_the_partition_deleted_during_the_build(tmp_path, clock):
    mgr = manager(tmp_path, clock)
    plog = mgr.get_or_create("c", 0)
    fill(plog, 10)
    # deleted before the builder starts: the abort (or the missing files) stops it
    plan = mgr.plan_clean()
    mgr.delete_partition("c", 0)
    assert plan.abort.is_set()
    try:
        built = build_cleaned(plan)
    except Exception as e:      # CleanAborted, or the files are already gone
        built = e
    assert mgr.finish_clean(plan, built) is None
    # deleted and recreated (same name, same directory) after the build finished
    plog = mgr.get_or_create("c", 0)
    fill(plog, 10)
    plan = mgr.plan_clean()
    built = build_cleaned(plan)
    mgr.delete_partition("c", 0)
    fresh = mgr.get_or_create("c", 0)
    fresh.append(keyed([(b"new", b"1")]))
    assert mgr.finish_clean(plan, built) is None
    assert records(fresh) == [(0, b"new", b"1")] and not leftovers(fresh.directory)
    mgr.close_all()


def test_closing_the_manager_aborts_the_build(tmp_path, clock):
    mgr = manager(tmp_path, clock)
    plog = mgr.get_or_create("c", 0)
    fill(plog, 10)
    before = records(plog)
    plan = mgr.plan_clean()
    mgr.close_all()
    try:
        built = build_cleaned(plan)
    except Exception as e:
        built = e
    assert mgr.finish_clean(plan, built) is None
    assert not leftovers(plog.directory)
    again = manager(tmp_path, clock)
    assert records(again.get("c", 0)) == before
    again.close_all()


def test_a_crash_before_the_swap_leaves_the_old_segments(tmp_path, clock):
    mgr = manager(tmp_path, clock)
    plog = mgr.get_or_create("c", 0)
    fill(plog, 10)
    before = records(plog)
    build_cleaned(mgr.plan_clean())             # built, never swapped in: then a crash
    mgr.close_all(clean=False)
    again = manager(tmp_path, clock)
    assert records(again.get("c", 0)) == before and not leftovers(again.get("c", 0).directory)
    again.close_all()


def test_a_failed_build_is_raised_unless_its_segments_changed(tmp_path, clock):
    # An I/O error of the build reaches the caller (the broker takes the log directory offline,
    # as Kafka's cleaner does); the same error while a planned segment was deleted meanwhile is
    # the deletion met mid-read, and the clean is only abandoned.
    mgr = manager(tmp_path, clock)
    plog = mgr.get_or_create("c", 0)
    fill(plog, 10)
    plan = mgr.plan_clean()
    with pytest.raises(OSError):
        mgr.finish_clean(plan, OSError(errno.EIO, "Input/output error"))
    plan = mgr.plan_clean()
    plog.delete_records_before(plan.segments[1].base_offset)    # a planned segment goes
    assert mgr.finish_clean(plan, FileNotFoundError(errno.ENOENT, "gone")) is None
    mgr.close_all()
