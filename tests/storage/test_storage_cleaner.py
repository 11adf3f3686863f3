"""Compaction: last record per key, tombstones with a delete horizon, untouched batches stay
byte-identical, restarts after cleaning."""
from __future__ import annotations

import os

from kgroup.protocol.records import Compression, decode_records, read_batch_header
from kgroup.storage import LogConfig, PartitionLog, cleaner
from kgroup.storage.segment import CLEANED_SUFFIX
from tests.storage.helpers import T0, keyed

DAY = 24 * 3600 * 1000


def compacted(path, clock, **kw) -> PartitionLog:
    cfg = dict(cleanup_policy=("compact",), segment_bytes=300)
    cfg.update(kw)
    return PartitionLog(str(path), LogConfig(**cfg), clock=clock)


def contents(plog: PartitionLog) -> list[tuple[int, bytes, bytes | None]]:
    return [(r.offset, r.key, r.value) for h, b in plog.iter_batches() for r in decode_records(b, h)]


def test_keeps_the_last_record_per_key_in_closed_segments(tmp_path, clock):
    plog = compacted(tmp_path / "t-0", clock)
    for i in range(12):
        plog.append(keyed([(b"k%d" % (i % 3), b"v%d" % i)]))
    plog.append(keyed([(b"k0", b"active")]))
    active_before = plog.active_segment.size
    untouched = [bytes(b) for h, b in plog.iter_batches() if h.base_offset in (9, 10, 11)]
    stats = cleaner.clean(plog, T0)
    assert stats.records_removed > 0 and stats.segments_rewritten >= 1
    got = contents(plog)
    closed_end = plog.active_segment.base_offset
    survivors = [(o, k, v) for o, k, v in got if o < closed_end]
    keys = [k for _, k, _ in survivors]
    assert len(keys) == len(set(keys))  # one record per key in the cleaned part
    assert [o for o, _, _ in got] == sorted(o for o, _, _ in got)  # offsets kept, gaps allowed
    assert got[-1] == (12, b"k0", b"active") and plog.active_segment.size == active_before
    # the latest value of every key is still there
    latest = {}
    for _o, k, v in got:
        latest[k] = v
    assert latest == {b"k0": b"active", b"k1": b"v10", b"k2": b"v11"}
    still = {h.base_offset: bytes(b) for h, b in plog.iter_batches()}
    for b in untouched:
        assert still[read_batch_header(b).base_offset] == b  # copied, not re-encoded
    assert plog.read(0, 1 << 20).first_batch_offset >= 0
    assert cleaner.clean(plog, T0).segments_rewritten == 0  # nothing left to do


def test_tombstones_get_a_delete_horizon_then_go(tmp_path, clock):
    plog = compacted(tmp_path / "t-0", clock, delete_retention_ms=DAY)
    plog.append(keyed([(b"a", b"1"), (b"b", b"1")]))
    plog.append(keyed([(b"a", None)]))  # tombstone for a
    plog.roll()
    plog.append(keyed([(b"c", b"1")]))
    cleaner.clean(plog, T0)
    headers = {h.base_offset: h for h, _ in plog.iter_batches()}
    assert headers[2].has_delete_horizon and headers[2].delete_horizon_ms == T0 + DAY
    assert contents(plog) == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1")]
    cleaner.clean(plog, T0 + DAY - 1)
    assert (2, b"a", None) in contents(plog)
    cleaner.clean(plog, T0 + DAY)
    assert contents(plog) == [(1, b"b", b"1"), (3, b"c", b"1")]


def test_min_compaction_lag_and_policy(tmp_path, clock):
    plog = compacted(tmp_path / "t-0", clock, min_compaction_lag_ms=10_000)
    plog.append(keyed([(b"a", b"1")]))
    plog.append(keyed([(b"a", b"2")]))
    plog.roll()
    plog.append(keyed([(b"z", b"1")]))
    assert cleaner.clean(plog, T0 + 5_000).records_removed == 0  # too young
    assert cleaner.clean(plog, T0 + 10_001).records_removed == 1
    deleting = PartitionLog(str(tmp_path / "d-0"), LogConfig(segment_bytes=300), clock=clock)
    deleting.append(keyed([(b"a", b"1")]))
    deleting.roll()
    assert cleaner.clean(deleting, T0).segments_cleaned == 0


def test_compressed_batches_are_rewritten_with_their_codec_and_survive_restart(tmp_path, clock):
    plog = compacted(tmp_path / "t-0", clock)
    plog.append(keyed([(b"a", b"1"), (b"b", b"1"), (b"a", b"2")], compression=Compression.GZIP))
    plog.roll()
    plog.append(keyed([(b"x", b"1")]))
    cleaner.clean(plog, T0)
    first = next(iter(plog.iter_batches()))[0]
    assert first.compression == Compression.GZIP and first.records_count == 2
    assert (first.base_offset, first.last_offset) == (0, 2)  # offsets range kept
    before = contents(plog)
    plog.close()
    # a leftover of an interrupted cleaning is ignored on load
    open(plog.segments[0].log_path + CLEANED_SUFFIX, "wb").write(b"junk")
    again = compacted(tmp_path / "t-0", clock)
    assert contents(again) == before and again.log_end_offset == 4
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(CLEANED_SUFFIX)]


def test_last_batch_of_a_live_producer_keeps_an_empty_header(tmp_path, clock):
    plog = compacted(tmp_path / "t-0", clock)
    plog.append(keyed([(b"a", b"1")], producer_id=5, producer_epoch=0, base_sequence=0))
    plog.append(keyed([(b"a", b"2")]))
    plog.roll()
    plog.append(keyed([(b"z", b"1")]))
    cleaner.clean(plog, T0)
    first = next(iter(plog.iter_batches()))[0]
    assert (first.base_offset, first.records_count, first.producer_id, first.base_sequence) == (0, 0, 5, 0)
    plog.close(clean=False)
    for name in os.listdir(tmp_path / "t-0"):
        if name.endswith(".snapshot"):
            os.unlink(tmp_path / "t-0" / name)
    again = compacted(tmp_path / "t-0", clock)
    assert again.producer_state.last_entry(5).last_seq == 0
    assert again.append(keyed([(b"a", b"1")], producer_id=5, producer_epoch=0, base_sequence=0)).duplicate


def test_aborted_transactional_records_do_not_supersede_committed_ones(tmp_path, clock):
    """An aborted transaction's record of a key must not make the older committed record of that
    key look superseded (the group coordinator's committed offset would vanish at the next load);
    a committed transaction's record does supersede older ones."""
    from kgroup.protocol.records import build_end_txn_marker_batch
    from kgroup.storage.producer_state import AppendOrigin
    plog = compacted(tmp_path / "t-0", clock)
    plog.append(keyed([(b"aborted-key", b"committed-before")]))                                    # 0
    plog.append(keyed([(b"committed-key", b"old")]))                                               # 1
    plog.append(keyed([(b"aborted-key", b"aborted"), (b"committed-key", b"new")], producer_id=7,
                      producer_epoch=0, base_sequence=0, is_transactional=True))                   # 2-3
    plog.append(build_end_txn_marker_batch(7, 0, False, 0, T0), origin=AppendOrigin.COORDINATOR)  # 4 ABORT
    plog.append(keyed([(b"committed-key", b"txn")], producer_id=8, producer_epoch=0, base_sequence=0,
                      is_transactional=True))                                                      # 5
    plog.append(build_end_txn_marker_batch(8, 0, True, 0, T0), origin=AppendOrigin.COORDINATOR)   # 6 COMMIT
    plog.roll()
    plog.append(keyed([(b"other", b"x")]))
    cleaner.clean(plog, T0)
    kept = {(o, k, v) for o, k, v in contents(plog) if k is not None and not k.startswith(b"\0")}
    assert (0, b"aborted-key", b"committed-before") in kept
    assert (1, b"committed-key", b"old") not in kept and (3, b"committed-key", b"new") not in kept
    assert (5, b"committed-key", b"txn") in kept


def test_aborted_transactions_are_removed(tmp_path, clock):
    """A clean removes the data of an aborted transaction whose ABORT marker it covers, whatever
    the keys (Kafka's CleanedTransactionMetadata), keeps a committed one's, and leaves an open
    transaction's alone; the aborting producer's last batch keeps its empty header."""
    from kgroup.protocol.records import build_end_txn_marker_batch
    from kgroup.storage.producer_state import AppendOrigin
    plog = compacted(tmp_path / "t-0", clock)
    plog.append(keyed([(b"x", b"aborted-1"), (b"unique", b"aborted-2")], producer_id=7, producer_epoch=0,
                      base_sequence=0, is_transactional=True))                                      # 0-1
    plog.append(keyed([(b"y", b"committed")], producer_id=8, producer_epoch=0, base_sequence=0,
                      is_transactional=True))                                                       # 2
    plog.append(keyed([(b"z", b"aborted-3")], producer_id=7, producer_epoch=0, base_sequence=2,
                      is_transactional=True))                                                       # 3
    plog.append(build_end_txn_marker_batch(7, 0, False, 0, T0), origin=AppendOrigin.COORDINATOR)   # 4 ABORT
    plog.append(build_end_txn_marker_batch(8, 0, True, 0, T0), origin=AppendOrigin.COORDINATOR)    # 5 COMMIT
    plog.roll()
    plog.append(keyed([(b"other", b"x")]))
    stats = cleaner.clean(plog, T0)
    assert stats.records_removed == 3
    kept = [(o, k, v) for o, k, v in contents(plog) if k is not None and not k.startswith(b"\0")]
    assert (2, b"y", b"committed") in kept
    assert not [r for r in kept if r[2] and r[2].startswith(b"aborted")]
    headers = [h for h, _ in plog.iter_batches()]
    emptied = [h for h in headers if h.producer_id == 7 and not h.is_control]
    assert [(h.base_offset, h.records_count) for h in emptied] == [(3, 0)]   # the producer's last batch
    assert [h.base_offset for h in headers if h.is_control] == [4, 5]       # markers are kept

