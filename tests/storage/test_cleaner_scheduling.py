"""The log cleaner's choice, as Kafka's LogCleanerManager makes it: dirty ratio against
min.cleanable.dirty.ratio (strictly above it), the filthiest log first (by dirty ratio only),
max.compaction.lag.ms making a log cleanable (from its earliest dirty segment),
min.compaction.lag.ms holding records back, and the cleaner checkpoint (persisted)."""
from __future__ import annotations

from kgroup.protocol.records import Record, build_batch
from kgroup.storage import LogConfig, LogManager
from kgroup.storage.cleaner import cleanable_info
from kgroup.storage.manager import CLEANER_OFFSET_CHECKPOINT, read_checkpoint
from tests.storage.helpers import T0, keyed


def fill(plog, rounds, keys=3, ts=T0):
    for r in range(rounds):
        for k in range(keys):
            plog.append(keyed([(b"k%d" % k, b"round%d" % r)], ts=ts))


def manager(tmp_path, clock, **cfg):
    base = dict(cleanup_policy=("compact",), segment_bytes=300)
    base.update(cfg)
    return LogManager(str(tmp_path), LogConfig(**base), clock=clock)


def test_dirty_ratio_decides_and_the_checkpoint_moves(tmp_path, clock):
    mgr = manager(tmp_path, clock, min_cleanable_dirty_ratio=0.5)
    plog = mgr.get_or_create("c", 0)
    fill(plog, 6, keys=20)
    info = cleanable_info(plog, clock())
    assert info.first_dirty == 0 and info.clean_bytes == 0 and info.dirty_ratio == 1.0
    assert mgr.clean_filthiest() == ("c", 0)
    assert plog.cleaner_checkpoint == plog.active_segment.base_offset
    after = cleanable_info(plog, clock())
    assert after.cleanable_bytes == 0 and after.clean_bytes > 0
    assert mgr.clean_filthiest() is None                # nothing dirty: the cleaner backs off
    mgr.checkpoint()
    assert read_checkpoint(str(tmp_path / CLEANER_OFFSET_CHECKPOINT)) == {("c", 0): plog.cleaner_checkpoint}
    # a little new dirt under the ratio waits; enough of it is cleaned
    fill(plog, 1, keys=1)
    plog.roll()
    small = cleanable_info(plog, clock())
    assert 0 < small.dirty_ratio < 0.5 and mgr.clean_filthiest() is None
    fill(plog, 8, keys=20)
    plog.roll()
    assert cleanable_info(plog, clock()).dirty_ratio >= 0.5 and mgr.clean_filthiest() == ("c", 0)
    mgr.close_all()
    again = manager(tmp_path, clock, min_cleanable_dirty_ratio=0.5)   # the checkpoint survives a restart
    assert again.get("c", 0).cleaner_checkpoint == plog.cleaner_checkpoint
    again.close_all()


def test_the_filthiest_log_goes_first(tmp_path, clock):
    mgr = manager(tmp_path, clock, min_cleanable_dirty_ratio=0.01)
    a, b = mgr.get_or_create("a", 0), mgr.get_or_create("b", 0)
    fill(a, 6)
    fill(b, 6)
    assert mgr.clean_filthiest() in {("a", 0), ("b", 0)}
    first = a if a.cleaner_checkpoint else b
    other = b if first is a else a
    assert other.cleaner_checkpoint == 0        # one log per pass
    fill(first, 2)
    first.roll()
    assert mgr.clean_filthiest() == (("b", 0) if other is b else ("a", 0))   # fully dirty beats partly


def test_min_compaction_lag_holds_back_and_max_lag_forces(tmp_path, clock):
    mgr = manager(tmp_path, clock, min_cleanable_dirty_ratio=0.5, min_compaction_lag_ms=60_000)
    plog = mgr.get_or_create("c", 0)
    fill(plog, 6)
    assert cleanable_info(plog, clock()).cleanable_bytes == 0   # everything younger than the min lag
    assert mgr.clean_filthiest() is None
    clock.advance(61_000)
    info = cleanable_info(plog, clock())
    assert info.cleanable_bytes > 0 and not info.needs_compaction_now
    assert mgr.clean_filthiest() == ("c", 0)
    # min.cleanable.dirty.ratio 1.0: no ratio is above it, only max.compaction.lag.ms cleans
    cfg = dict(cleanup_policy=("compact",), segment_bytes=300, min_cleanable_dirty_ratio=1.0,
               min_compaction_lag_ms=60_000)
    plog.update_config(LogConfig(**cfg))
    fill(plog, 4, ts=clock())
    plog.roll()
    clock.advance(61_000)
    assert cleanable_info(plog, clock()).cleanable_bytes > 0 and mgr.clean_filthiest() is None
    plog.update_config(LogConfig(**cfg, max_compaction_lag_ms=150_000))
    assert not cleanable_info(plog, clock()).needs_compaction_now
    clock.advance(50_000)
    assert cleanable_info(plog, clock()).needs_compaction_now
    assert mgr.clean_filthiest() == ("c", 0)


def test_the_dirty_ratio_must_be_above_the_minimum(tmp_path, clock):
    # grabFilthiestCompactedLog: cleanableRatio > minCleanableRatio, strictly
    mgr = manager(tmp_path, clock, min_cleanable_dirty_ratio=1.0)
    plog = mgr.get_or_create("c", 0)
    fill(plog, 6)
    assert cleanable_info(plog, clock()).dirty_ratio == 1.0     # never cleaned: all of it is dirty
    assert mgr.clean_filthiest() is None


def test_a_log_past_its_max_lag_waits_behind_a_filthier_one(tmp_path, clock):
    # LogToClean is ordered by cleanableRatio alone: max.compaction.lag.ms makes a log cleanable
    # below the ratio, it does not put it first
    mgr = manager(tmp_path, clock, min_cleanable_dirty_ratio=0.5)
    lagging = mgr.get_or_create("lagging", 0)
    fill(lagging, 6, keys=20)
    assert mgr.clean_filthiest() == ("lagging", 0)
    fill(lagging, 1, keys=1, ts=clock())
    lagging.roll()
    lagging.update_config(LogConfig(cleanup_policy=("compact",), segment_bytes=300, min_cleanable_dirty_ratio=0.5,
                                    max_compaction_lag_ms=10_000))
    clock.advance(11_000)
    info = cleanable_info(lagging, clock())
    assert info.needs_compaction_now and 0 < info.dirty_ratio < 0.5
    filthy = mgr.get_or_create("filthy", 0)
    fill(filthy, 6)
    assert mgr.clean_filthiest() == ("filthy", 0)
    assert mgr.clean_filthiest() == ("lagging", 0)
    assert mgr.clean_filthiest() is None


def lag_due(tmp_path, clock, first_batches):
    """needs_compaction_now with max.compaction.lag.ms 10 s for a log whose inactive segments
    start with the given batches (each a list of record timestamps)."""
    mgr = manager(tmp_path, clock, segment_bytes=1_000_000, max_compaction_lag_ms=10_000)
    plog = mgr.get_or_create("c", 0)
    for timestamps in first_batches:
        plog.append(build_batch([Record(b"k", b"v", (), ts) for ts in timestamps]))
        plog.roll()
    plog.append(keyed([(b"k", b"active")], ts=clock()))
    due = cleanable_info(plog, clock()).needs_compaction_now
    mgr.close_all()
    return due


def test_max_lag_is_measured_from_the_earliest_dirty_segment(tmp_path, clock):
    # LogCleanerManager.maxCompactionDelay: the minimum over every dirty inactive segment of its
    # first batch's (max) timestamp, timestamps <= 0 left out
    now = clock()
    assert lag_due(tmp_path / "a", clock, [[now], [now - 20_000]])               # not only the first segment
    assert not lag_due(tmp_path / "b", clock, [[now - 20_000, now]])             # the batch's max timestamp
    assert not lag_due(tmp_path / "c", clock, [[0], [now]])                      # no timestamp: ignored
    assert lag_due(tmp_path / "d", clock, [[0], [now - 20_000]])


def test_max_compaction_lag_rolls_the_active_segment(tmp_path, clock):
    mgr = manager(tmp_path, clock, segment_bytes=1_000_000, max_compaction_lag_ms=10_000)
    plog = mgr.get_or_create("c", 0)
    plog.append(keyed([(b"k", b"1")], ts=clock()))
    clock.advance(11_000)
    plog.append(keyed([(b"k", b"2")], ts=clock()))
    assert plog.num_segments == 2     # LogConfig.maxSegmentMs = min(max.compaction.lag.ms, segment.ms)
