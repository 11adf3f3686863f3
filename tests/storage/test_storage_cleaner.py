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



def read_committed_values(plog: PartitionLog) -> list[tuple[int, bytes, bytes | None]]:
    """What a read_committed consumer returns from offset 0, filtering as Java's Fetcher does:
    a producer listed in the aborted transactions is skipped from its first offset until its
    ABORT marker."""
    from kgroup.protocol.records import CONTROL_ABORT, control_record_type, iter_batches
    pending: list = []
    skipping: set[int] = set()
    out = []
    fetched = []
    offset = 0
    while offset < plog.last_stable_offset:      # one fetch returns one segment's batches
        result, aborted = plog.read_committed(offset, 1 << 24)
        pending += [a for a in aborted if a not in pending]
        batches = list(iter_batches(result.records))
        fetched += batches
        offset = batches[-1][1].next_offset
    pending.sort(key=lambda a: a.first_offset)
    for _, header, batch in fetched:
        records = decode_records(batch, header)
        if header.is_transactional:
            while pending and pending[0].first_offset <= header.last_offset:
                skipping.add(pending.pop(0).producer_id)
        if header.is_control:
            if records and control_record_type(records[0].key) == CONTROL_ABORT:
                skipping.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in skipping:
            continue
        out += [(r.offset, r.key, r.value) for r in records]
    return out


def _two_producers_log(path, clock):
    """pid 7 aborts a transaction then commits one; pid 8 commits a transaction whose only
    record is later superseded, then commits another."""
    from kgroup.protocol.records import build_end_txn_marker_batch
    from kgroup.storage.producer_state import AppendOrigin
    plog = compacted(path, clock, delete_retention_ms=DAY, segment_bytes=1 << 20)

    def txn(pid, seq, pairs):
        plog.append(keyed(pairs, producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True))

    def marker(pid, commit):
        plog.append(build_end_txn_marker_batch(pid, 0, commit, 0, T0), origin=AppendOrigin.COORDINATOR)
    txn(7, 0, [(b"x", b"aborted")])          # 0
    marker(7, False)                         # 1 ABORT
    txn(8, 0, [(b"y", b"old")])              # 2
    marker(8, True)                          # 3 COMMIT
    txn(7, 1, [(b"z", b"committed")])        # 4
    marker(7, True)                          # 5 COMMIT
    txn(8, 1, [(b"w", b"committed")])        # 6
    marker(8, True)                          # 7 COMMIT
    plog.append(keyed([(b"y", b"new")]))     # 8
    plog.roll()
    plog.append(keyed([(b"other", b"x")]))   # 9 (active segment)
    # pid 7 aborts once more in the active segment: a read_committed read must still drop it
    txn(7, 2, [(b"x", b"aborted-again")])    # 10
    marker(7, False)                         # 11 ABORT
    return plog


def _markers(plog):
    return [(h.base_offset, h.records_count, h.delete_horizon_ms) for h, _ in plog.iter_batches() if h.is_control]


def test_transaction_markers_go_once_past_their_delete_horizon(tmp_path, clock):
    """Kafka's CleanedTransactionMetadata: a pass that still meets a transaction's data keeps its
    marker as it is; the first pass that meets none stamps the marker's batch with a delete
    horizon (now + delete.retention.ms); a pass past the horizon drops it. Markers of
    transactions with data left stay for good. The aborted transaction index drops the
    transaction whose data is gone, so a read_committed reader and the LSO see the same
    before and after, and after a reload."""
    plog = _two_producers_log(tmp_path / "t-0", clock)
    expected = [(4, b"z", b"committed"), (6, b"w", b"committed"), (8, b"y", b"new"), (9, b"other", b"x")]
    assert read_committed_values(plog) == [(2, b"y", b"old")] + expected
    lso = plog.last_stable_offset
    assert lso == plog.log_end_offset == 12
    cleaner.clean(plog, T0)          # the aborted and superseded data go, every marker stays
    assert [o for o, _, _ in contents(plog) if o < 9] == [1, 3, 4, 5, 6, 7, 8]
    assert _markers(plog)[:4] == [(1, 1, None), (3, 1, None), (5, 1, None), (7, 1, None)]
    assert [t.last_offset for t in plog.segments[0].txn_index.entries()] == [1]
    assert read_committed_values(plog) == expected and plog.last_stable_offset == lso

    cleaner.clean(plog, T0 + 1)      # no data behind markers 1 and 3 now: horizon stamped
    horizon = T0 + 1 + DAY
    assert _markers(plog)[:4] == [(1, 1, horizon), (3, 1, horizon), (5, 1, None), (7, 1, None)]
    assert plog.segments[0].txn_index.entries() == []
    assert read_committed_values(plog) == expected and plog.last_stable_offset == lso

    assert cleaner.clean(plog, horizon - 1).segments_rewritten == 0     # not past the horizon yet
    cleaner.clean(plog, horizon)
    assert _markers(plog)[:2] == [(5, 1, None), (7, 1, None)]
    assert [o for o, _, _ in contents(plog) if o < 9] == [4, 5, 6, 7, 8]
    assert read_committed_values(plog) == expected and plog.last_stable_offset == lso
    assert cleaner.clean(plog, horizon + DAY).segments_rewritten == 0

    before = contents(plog)
    plog.close()
    again = compacted(tmp_path / "t-0", clock, delete_retention_ms=DAY, segment_bytes=1 << 20)
    assert contents(again) == before and read_committed_values(again) == expected
    assert again.last_stable_offset == lso
    again.close(clean=False)
    for name in os.listdir(tmp_path / "t-0"):
        if name.endswith(".snapshot"):
            os.unlink(tmp_path / "t-0" / name)
    rebuilt = compacted(tmp_path / "t-0", clock, delete_retention_ms=DAY, segment_bytes=1 << 20)
    assert contents(rebuilt) == before and read_committed_values(rebuilt) == expected
    assert rebuilt.last_stable_offset == lso
    assert {pid: rebuilt.producer_state.last_entry(pid).last_seq for pid in (7, 8)} == {7: 2, 8: 1}


def test_a_marker_that_is_its_producers_last_entry_keeps_an_empty_header(tmp_path, clock):
    """A marker written with a bumped epoch (transaction version 2) leaves its producer without
    data since that epoch: the marker is the producer's last entry, so once past its horizon it
    keeps an empty control header carrying the epoch (Kafka's isBatchLastRecordOfProducer);
    the committed data, superseded, is gone."""
    from kgroup.protocol.records import build_end_txn_marker_batch
    from kgroup.storage.producer_state import AppendOrigin
    plog = compacted(tmp_path / "t-0", clock, delete_retention_ms=DAY, segment_bytes=1 << 20)
    plog.append(keyed([(b"q", b"txn")], producer_id=9, producer_epoch=0, base_sequence=0,
                      is_transactional=True))                                                   # 0
    plog.append(build_end_txn_marker_batch(9, 1, True, 0, T0), origin=AppendOrigin.COORDINATOR)  # 1, epoch 1
    plog.append(keyed([(b"q", b"plain")]))                                                      # 2
    plog.roll()
    plog.append(keyed([(b"other", b"x")]))
    cleaner.clean(plog, T0)
    cleaner.clean(plog, T0)
    assert _markers(plog) == [(1, 1, T0 + DAY)]
    cleaner.clean(plog, T0 + DAY)
    control = [h for h, _ in plog.iter_batches() if h.is_control]
    assert [(h.base_offset, h.records_count, h.producer_id, h.producer_epoch, h.is_transactional)
            for h in control] == [(1, 0, 9, 1, True)]
    assert [o for o, _, _ in contents(plog)] == [2, 3]
    assert cleaner.clean(plog, T0 + 2 * DAY).segments_rewritten == 0      # the empty header stays


def test_the_last_batch_of_the_cleaned_range_keeps_an_empty_header(tmp_path, clock):
    """Kafka's cleaner keeps the last batch of a cleaning round, emptied, so the range's last
    offset is not lost: a tombstone there goes past its horizon but its header stays."""
    plog = compacted(tmp_path / "t-0", clock, delete_retention_ms=DAY, segment_bytes=1 << 20)
    plog.append(keyed([(b"a", b"1")]))
    plog.append(keyed([(b"a", None)]))
    plog.roll()
    plog.append(keyed([(b"b", b"1")]))
    cleaner.clean(plog, T0)
    cleaner.clean(plog, T0 + DAY)
    headers = [(h.base_offset, h.records_count) for h, _ in plog.iter_batches()]
    assert headers == [(1, 0), (2, 1)]
    assert plog.segments[0].next_offset == 2
