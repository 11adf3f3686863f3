"""Transactions in the data path: COMMIT/ABORT control batches, the last stable offset, the
aborted transaction index (.txnindex, Kafka's format) written on ABORT, truncated, rebuilt after a
crash, and read_committed reads that stop at the LSO and return the overlapping aborted
transactions."""
from __future__ import annotations

import os
import struct

import pytest

from kgroup.protocol import records as R
from kgroup.protocol.records import build_batch, read_batch_header
from kgroup.storage.log import PartitionLog
from kgroup.storage.producer_state import AppendOrigin
from kgroup.storage.txn_index import AbortedTxn, CorruptIndexError, TransactionIndex
from tests.storage.helpers import T0, batch

# -- control batches -------------------------------------------------------------------------------


def test_end_txn_marker_batch_layout_is_kafkas():
    b = R.build_end_txn_marker_batch(7, 3, True, 5, T0, base_offset=40, partition_leader_epoch=2)
    h = read_batch_header(b)
    assert h.attributes == R.TRANSACTIONAL_MASK | R.CONTROL_MASK == 0x30
    assert (h.base_offset, h.partition_leader_epoch, h.producer_id, h.producer_epoch) == (40, 2, 7, 3)
    assert (h.base_sequence, h.records_count, h.last_offset_delta) == (-1, 1, 0)
    assert (h.base_timestamp, h.max_timestamp) == (T0, T0)
    R.validate_batch(h, memoryview(b))                      # CRC and structure
    [record] = R.decode_records(b)
    assert record.key == struct.pack(">hh", 0, 1)         # version 0, ControlRecordType COMMIT
    assert record.value == struct.pack(">hi", 0, 5)       # version 0, coordinator epoch
    # The record body, byte for byte: length 16, attributes, deltas, key 4 bytes, value 6, no headers.
    assert bytes(b[R.RECORD_BATCH_OVERHEAD:]) == bytes.fromhex("2000000008000000010c000000000005" + "00")
    assert R.read_end_txn_marker_batch(b) == R.EndTransactionMarker(R.ControlRecordType.COMMIT, 5)
    abort = R.build_end_txn_marker_batch(7, 3, False, 0, T0)
    assert R.read_end_txn_marker_batch(abort) == (R.CONTROL_ABORT, 0)


def test_read_end_txn_marker_batch_ignores_other_batches():
    assert R.read_end_txn_marker_batch(batch(2)) is None
    leader_change = build_batch([R.Record(struct.pack(">hh", 0, R.ControlRecordType.LEADER_CHANGE), b"x", (), T0)],
                                is_control=True)
    assert R.read_end_txn_marker_batch(leader_change) is None
    assert R.read_end_txn_marker_batch(build_batch([], is_control=True, is_transactional=True)) is None
    with pytest.raises(R.InvalidRecordError):
        R.control_record_type(b"\x00")
    with pytest.raises(R.InvalidRecordError):
        R.control_record_type(b"\xff\xff\x00\x01")


# -- the index file --------------------------------------------------------------------------------

def test_txn_index_file_format_and_search(tmp_path):
    path = str(tmp_path / "00000000000000000100.txnindex")
    idx = TransactionIndex(path, 100)
    assert not os.path.exists(path)                          # created by the first abort only
    idx.append(AbortedTxn(5, 100, 110, 111))
    idx.append(AbortedTxn(6, 105, 120, 121))
    idx.append(AbortedTxn(7, 130, 140, 200))
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) == 3 * 34
    assert data[:34] == struct.pack(">hqqqq", 0, 5, 100, 110, 111)
    with pytest.raises(ValueError, match="increase"):
        idx.append(AbortedTxn(8, 90, 140, 150))
    idx.close()
    idx = TransactionIndex(path, 100)                        # read back from the file
    assert idx.entries() == [AbortedTxn(5, 100, 110, 111), AbortedTxn(6, 105, 120, 121), AbortedTxn(7, 130, 140, 200)]
    found = idx.collect_aborted_txns(111, 125)
    assert found.aborted_transactions == [AbortedTxn(6, 105, 120, 121)] and found.is_complete
    found = idx.collect_aborted_txns(0, 500)
    assert len(found.aborted_transactions) == 3 and not found.is_complete
    idx.truncate_to(120)
    assert idx.entries() == [AbortedTxn(5, 100, 110, 111)] and os.path.getsize(path) == 34
    idx.sanity_check()
    idx.reset()
    assert idx.entries() == [] and os.path.getsize(path) == 0


def test_txn_index_rejects_unknown_versions_and_foreign_entries(tmp_path):
    path = str(tmp_path / "x.txnindex")
    with open(path, "wb") as f:
        f.write(struct.pack(">hqqqq", 1, 5, 100, 110, 111))
    with pytest.raises(CorruptIndexError, match="version 1"):
        TransactionIndex(path, 0).entries()
    with open(path, "wb") as f:
        f.write(struct.pack(">hqqqq", 0, 5, 10, 20, 21))
    with pytest.raises(CorruptIndexError, match="less than start offset"):
        TransactionIndex(path, 50).sanity_check()


# -- the log ---------------------------------------------------------------------------------------

class Producer:
    """A transactional producer's batches for one partition."""

    def __init__(self, plog: PartitionLog, pid: int, epoch: int = 0):
        self.plog, self.pid, self.epoch, self.seq = plog, pid, epoch, 0

    def send(self, n: int = 1, transactional: bool = True) -> int:
        res = self.plog.append(batch(n, producer_id=self.pid, producer_epoch=self.epoch, base_sequence=self.seq,
                                     is_transactional=transactional))
        self.seq += n
        return res.base_offset

    def end(self, committed: bool, coordinator_epoch: int = 0) -> int:
        marker = R.build_end_txn_marker_batch(self.pid, self.epoch, committed, coordinator_epoch, T0)
        return self.plog.append(marker, origin=AppendOrigin.COORDINATOR).base_offset


def test_last_stable_offset_follows_open_transactions(tmp_path, clock):
    plog = PartitionLog(str(tmp_path / "t-0"), clock=clock)
    a, b = Producer(plog, 1), Producer(plog, 2)
    plog.append(batch(2))
    assert plog.last_stable_offset == plog.high_watermark == 2
    first_a = a.send(2)
    plog.append(batch(1))
    first_b = b.send(1)
    assert plog.last_stable_offset == first_a == 2 and plog.high_watermark == 6
    a.end(committed=True)
    assert plog.last_stable_offset == first_b == 5
    b.end(committed=False)
    assert plog.last_stable_offset == plog.log_end_offset == 8
    assert os.listdir(plog.directory).count("00000000000000000000.txnindex") == 1


def test_last_stable_offset_never_falls_below_the_log_start_offset(tmp_path, clock):
    """DeleteRecords past an open transaction's first offset: the LSO is the new log start offset,
    not an offset the log no longer has (UnifiedLog.maybeIncrementFirstUnstableOffset)."""
    plog = PartitionLog(str(tmp_path / "t-0"), clock=clock)
    a = Producer(plog, 1)
    plog.append(batch(1))
    assert a.send(2) == 1
    plog.append(batch(2))
    assert plog.last_stable_offset == 1
    assert plog.delete_records_before(4) == 4
    assert plog.log_start_offset == 4 and plog.last_stable_offset == 4
    a.end(committed=True)
    assert plog.last_stable_offset == plog.log_end_offset == 6


def test_abort_writes_the_txn_index_with_the_lso_after_the_marker(tmp_path, clock):
    plog = PartitionLog(str(tmp_path / "t-0"), clock=clock)
    a, b, c = Producer(plog, 1), Producer(plog, 2), Producer(plog, 3)
    a.send(2)                      # 0-1
    b.send(1)                      # 2
    marker_a = a.end(False)        # 3: b is still open, so the LSO after it is b's first offset
    c.send(1)                      # 4
    c.end(True)                    # 5: commits are not indexed
    marker_b = b.end(False)        # 6: nothing open any more
    assert plog.active_segment.txn_index.entries() == [AbortedTxn(1, 0, marker_a, 2),
                                                       AbortedTxn(2, 2, marker_b, marker_b + 1)]
    assert plog.collect_aborted_transactions(0, plog.log_end_offset) == plog.active_segment.txn_index.entries()
    assert plog.collect_aborted_transactions(4, 6) == [AbortedTxn(2, 2, 6, 7)]
    assert plog.collect_aborted_transactions(7, 9) == []


def test_read_committed_stops_at_the_lso_and_returns_aborted_transactions(tmp_path, clock):
    plog = PartitionLog(str(tmp_path / "t-0"), clock=clock)
    a, b = Producer(plog, 1), Producer(plog, 2)
    plog.append(batch(1))          # 0
    a.send(2)                      # 1-2
    a.end(False)                   # 3
    plog.append(batch(1))          # 4
    b.send(1)                      # 5 (open)
    plog.append(batch(1))          # 6
    result, aborted = plog.read_committed(0, 1 << 20)
    offsets = [read_batch_header(v).base_offset for v in result.batches()]
    assert offsets == [0, 1, 3, 4]                            # nothing at or after the LSO (5)
    assert result.high_watermark == 7
    assert aborted == [AbortedTxn(1, 1, 3, 4)]
    # read_uncommitted sees everything, as before.
    assert [read_batch_header(v).base_offset for v in plog.read(0, 1 << 20).batches()] == [0, 1, 3, 4, 5, 6]
    # A fetch at the LSO gets nothing (and no aborted transactions) until b ends.
    result, aborted = plog.read_committed(5, 1 << 20)
    assert len(result.records) == 0 and aborted == []
    b.end(False)
    result, aborted = plog.read_committed(5, 1 << 20)
    assert [read_batch_header(v).base_offset for v in result.batches()] == [5, 6, 7]
    assert aborted == [AbortedTxn(2, 5, 7, 8)]
    # A fetch past the aborted transaction does not report it.
    assert plog.read_committed(4, 1)[1] == []                # only batch 4 fits: upper bound 5


def test_aborted_transaction_indexed_in_a_later_segment_is_found(tmp_path, clock):
    plog = PartitionLog(str(tmp_path / "t-0"), clock=clock)
    a = Producer(plog, 1)
    first = a.send(3)
    plog.roll()
    plog.append(batch(1))
    marker = a.end(False)
    assert plog.num_segments == 2
    assert plog.segments[0].txn_index.entries() == []
    result, aborted = plog.read_committed(first, 1 << 20)    # reads only the first segment
    assert [read_batch_header(v).base_offset for v in result.batches()] == [0]
    assert aborted == [AbortedTxn(1, first, marker, marker + 1)]


def test_truncation_removes_the_entries_of_removed_markers(tmp_path, clock):
    plog = PartitionLog(str(tmp_path / "t-0"), clock=clock)
    a, b = Producer(plog, 1), Producer(plog, 2)
    a.send(1)
    a.end(False)                   # 1
    b.send(1)
    b.end(False)                   # 3
    plog.truncate_to(3)
    assert plog.active_segment.txn_index.entries() == [AbortedTxn(1, 0, 1, 2)]
    assert plog.last_stable_offset == 2                      # b's transaction is open again
    plog.close()
    reopened = PartitionLog(str(tmp_path / "t-0"), clock=clock)
    assert reopened.active_segment.txn_index.entries() == [AbortedTxn(1, 0, 1, 2)]


def _history(plog):
    a, b = Producer(plog, 1), Producer(plog, 2)
    plog.append(batch(1))
    a.send(2)
    b.send(1)
    a.end(False)
    plog.roll()
    b.send(1)
    b.end(False)
    c = Producer(plog, 3)
    c.send(1)
    c.end(True)
    d = Producer(plog, 4)
    d.send(1)                      # still open at the crash


@pytest.mark.parametrize("damage", ["delete", "garbage", "none"])
def test_txn_index_is_rebuilt_after_a_crash(tmp_path, clock, damage):
    plog = PartitionLog(str(tmp_path / "t-0"), clock=clock)
    _history(plog)
    want = [s.txn_index.entries()[:] for s in plog.segments]
    assert want == [[AbortedTxn(1, 1, 4, 3)], [AbortedTxn(2, 3, 6, 7)]]
    lso = plog.last_stable_offset
    plog.close(clean=False)        # nothing flushed: both segments get recovered
    for name in os.listdir(plog.directory):
        if name.endswith(".txnindex"):
            path = os.path.join(plog.directory, name)
            if damage == "delete":
                os.unlink(path)
            elif damage == "garbage":
                with open(path, "ab") as f:
                    f.write(struct.pack(">hqqqq", 0, 99, 0, 10**9, 10**9))
    reopened = PartitionLog(str(tmp_path / "t-0"), clock=clock)
    assert [s.txn_index.entries() for s in reopened.segments] == want
    assert reopened.last_stable_offset == lso == 9
    assert reopened.read_committed(0, 1 << 20)[1] == [AbortedTxn(1, 1, 4, 3), AbortedTxn(2, 3, 6, 7)]


def test_flushed_segments_keep_their_index_through_a_crash(tmp_path, clock):
    plog = PartitionLog(str(tmp_path / "t-0"), clock=clock)
    _history(plog)
    plog.flush()                   # recovery point = log end: only the active segment is recovered
    plog.close(clean=False)
    reopened = PartitionLog(str(tmp_path / "t-0"), clock=clock, recovery_point=plog.recovery_point)
    assert [s.txn_index.entries() for s in reopened.segments] == [[AbortedTxn(1, 1, 4, 3)], [AbortedTxn(2, 3, 6, 7)]]


def test_deleting_a_segment_deletes_its_txn_index(tmp_path, clock):
    plog = PartitionLog(str(tmp_path / "t-0"), clock=clock)
    _history(plog)
    plog.append(batch(1))
    plog.roll()
    assert os.path.exists(os.path.join(plog.directory, "00000000000000000000.txnindex"))
    plog.delete_records_before(plog.segments[1].base_offset)
    assert not os.path.exists(os.path.join(plog.directory, "00000000000000000000.txnindex"))
    plog.delete()
    assert not any(n.endswith(".txnindex") for n in os.listdir(plog.directory))


# -- read_committed against Kafka's exact-bound search, on random histories ------------------------

def _ops():
    from hypothesis import strategies as st
    return st.lists(st.tuples(st.sampled_from(["send", "plain", "commit", "abort", "roll"]),
                              st.integers(1, 3), st.integers(1, 3)), min_size=1, max_size=40)


def test_read_committed_matches_kafkas_exact_search():
    import tempfile

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(ops=_ops(), data=st.data())
    def check(ops, data):
        with tempfile.TemporaryDirectory() as d:
            plog = PartitionLog(os.path.join(d, "t-0"))
            producers = {pid: Producer(plog, pid) for pid in (1, 2, 3)}
            open_txns = set()
            for op, pid, n in ops:
                p = producers[pid]
                if op == "send":
                    p.send(n)
                    open_txns.add(pid)
                elif op == "plain":
                    plog.append(batch(n))
                elif op == "roll":
                    plog.roll()
                elif pid in open_txns:
                    p.end(op == "commit")
                    open_txns.discard(pid)
            if plog.log_end_offset == 0:
                return
            fetch_offset = data.draw(st.integers(0, plog.log_end_offset - 1))
            max_bytes = data.draw(st.integers(1, 2000))
            result, aborted = plog.read_committed(fetch_offset, max_bytes)
            if not len(result.records):
                assert aborted == []
                return
            upper = [read_batch_header(v) for v in result.batches()][-1].next_offset
            assert upper <= plog.last_stable_offset
            assert aborted == plog.collect_aborted_transactions(fetch_offset, upper)
            plog.close()
    check()


def test_a_transaction_version_2_marker_must_carry_a_bumped_epoch(tmp_path, clock):
    """ProducerAppendInfo.checkProducerEpoch: a marker written with transaction version 2 must
    have an epoch above the producer's (the coordinator bumped it) while a transaction is open;
    the same epoch with no transaction open is a retry of a marker already written and is
    accepted; a version 0/1 marker needs only an epoch not below the producer's."""
    from kgroup.storage.errors import InvalidProducerEpochError
    plog = PartitionLog(str(tmp_path / "t-0"), clock=clock)
    p = Producer(plog, 7)
    p.send(1)

    def marker(epoch, tv):
        return plog.append(R.build_end_txn_marker_batch(7, epoch, True, 0, T0), origin=AppendOrigin.COORDINATOR,
                           transaction_version=tv)
    with pytest.raises(InvalidProducerEpochError):
        marker(0, 2)                                  # the data's epoch: not a TV2 marker's
    assert plog.last_stable_offset == 0               # nothing written, the transaction still open
    marker(1, 2)
    assert plog.last_stable_offset == plog.log_end_offset == 2
    marker(1, 2)                                      # a retry: accepted, nothing open
    with pytest.raises(InvalidProducerEpochError):
        marker(0, 2)
    with pytest.raises(InvalidProducerEpochError):
        marker(0, 0)
    p.epoch, p.seq = 1, 0                             # a new epoch starts its sequences again
    p.send(1)
    marker(1, 0)                                      # version 0/1: the same epoch ends it
    assert plog.last_stable_offset == plog.log_end_offset
