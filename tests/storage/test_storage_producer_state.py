"""Idempotent producer state: sequence and epoch rules, duplicates, transactions, snapshots and
rebuilding from the log."""
from __future__ import annotations

import logging
import os

import pytest

from kgroup.protocol import records as R
from kgroup.protocol.records import build_batch, read_batch_header
from kgroup.storage import AppendOrigin, LogConfig, PartitionLog
from kgroup.storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)
from kgroup.storage.producer_state import ProducerStateManager
from tests.storage.helpers import T0, batch

PID = 1000


def pbatch(seq: int, n: int = 1, epoch: int = 0, pid: int = PID, **kw) -> bytes:
    return batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, **kw)


@pytest.fixture
def plog(tmp_path, clock):
    return PartitionLog(str(tmp_path / "t-0"), LogConfig(segment_bytes=2000), clock=clock)


def test_in_sequence_appends_and_duplicates(plog):
    results = [plog.append(pbatch(seq, 2)) for seq in (0, 2, 4, 6, 8, 10)]
    assert [r.base_offset for r in results] == [0, 2, 4, 6, 8, 10]
    leo = plog.log_end_offset
    dup = plog.append(pbatch(8, 2))  # a retry of a batch still among the last five
    assert dup.duplicate and (dup.base_offset, dup.last_offset) == (8, 9)
    assert plog.log_end_offset == leo  # acknowledged, not appended
    with pytest.raises(OutOfOrderSequenceError) as e:
        plog.append(pbatch(0, 2))  # the oldest batch has left the window of five
    assert e.value.error_code == 45
    with pytest.raises(OutOfOrderSequenceError):
        plog.append(pbatch(14, 1))  # a gap
    assert plog.append(pbatch(12, 1)).base_offset == leo


def test_epoch_rules(plog):
    plog.append(pbatch(0, 3, epoch=2))
    with pytest.raises(InvalidProducerEpochError) as e:
        plog.append(pbatch(3, epoch=1))
    assert e.value.error_code == 47
    with pytest.raises(OutOfOrderSequenceError):
        plog.append(pbatch(3, epoch=3))  # a new epoch must start at 0
    plog.append(pbatch(0, epoch=3))
    plog.append(pbatch(1, epoch=3))
    assert plog.producer_state.last_entry(PID).last_seq == 1
    # an unknown producer may start anywhere (Kafka 4.0 has no UNKNOWN_PRODUCER_ID here)
    assert plog.append(pbatch(57, pid=7)).duplicate is False


def test_sequence_wraps_at_int_max(plog):
    plog.append(pbatch(R.INT32_MAX - 1, 2))
    assert plog.producer_state.last_entry(PID).last_seq == R.INT32_MAX
    with pytest.raises(OutOfOrderSequenceError):
        plog.append(pbatch(R.INT32_MAX + 1 - 2**31 + 5))
    plog.append(pbatch(0, 1))
    dup = plog.append(pbatch(R.INT32_MAX - 1, 2))
    assert dup.duplicate and dup.base_offset == 0
    # a batch spanning the wrap
    plog.append(pbatch(1, 1))
    other = 55
    plog.append(pbatch(R.INT32_MAX - 1, 4, pid=other))
    assert plog.producer_state.last_entry(other).last_seq == 1
    assert plog.append(pbatch(R.INT32_MAX - 1, 4, pid=other)).duplicate


def test_check_and_update_api(tmp_path):
    psm = ProducerStateManager(str(tmp_path))
    b = bytearray(pbatch(0, 3))
    R.patch_base_offset(b, 10)
    h = read_batch_header(b)
    pending = {}
    assert psm.check(h, AppendOrigin.CLIENT, pending) is None
    psm.update(pending[PID])
    dup = psm.check(h)
    assert dup is not None and (dup.first_offset, dup.last_offset, dup.first_seq, dup.last_seq) == (10, 12, 0, 2)
    # the coordinator's appends skip sequence checks but not epoch checks
    psm.check(read_batch_header(pbatch(40)), AppendOrigin.COORDINATOR, {})
    with pytest.raises(InvalidProducerEpochError):
        psm.check(read_batch_header(pbatch(3, epoch=-1)), AppendOrigin.COORDINATOR, {})


def test_transactions(plog):
    plog.append(batch(1))
    plog.append(pbatch(0, 2, is_transactional=True))
    assert plog.producer_state.first_unstable_offset() == 1
    assert plog.last_stable_offset == 1 and plog.high_watermark == 3
    with pytest.raises(InvalidTxnStateError) as e:
        plog.append(pbatch(2, 1))
    assert e.value.error_code == 48
    marker = build_batch([R.end_transaction_marker_record(R.CONTROL_ABORT, 3, T0)], is_control=True,
                         is_transactional=True, producer_id=PID, producer_epoch=0)
    plog.append(marker, origin=AppendOrigin.COORDINATOR)
    assert plog.producer_state.first_unstable_offset() is None
    assert plog.last_stable_offset == plog.high_watermark == 4
    assert plog.producer_state.last_entry(PID).coordinator_epoch == 3
    plog.append(pbatch(2, 1))  # a non-transactional write is fine again


def test_state_survives_clean_restart_via_snapshot(tmp_path, clock):
    plog = PartitionLog(str(tmp_path / "t-0"), clock=clock)
    for seq in range(0, 10, 2):
        plog.append(pbatch(seq, 2))
    plog.close()
    snaps = [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".snapshot")]
    assert snaps == [f"{10:020d}.snapshot"]
    entries = ProducerStateManager.read_snapshot(str(tmp_path / "t-0" / snaps[0]))
    assert [(e.producer_id, e.producer_epoch, e.last_seq, e.last_data_offset) for e in entries] == [(PID, 0, 9, 9)]
    again = PartitionLog(str(tmp_path / "t-0"), clock=clock, had_clean_shutdown=True)
    assert again.append(pbatch(8, 2)).duplicate  # the snapshot keeps the last batch
    assert again.append(pbatch(10, 1)).base_offset == 10


def test_state_rebuilt_from_log_without_snapshot(tmp_path, clock, caplog):
    plog = PartitionLog(str(tmp_path / "t-0"), LogConfig(segment_bytes=300), clock=clock)
    for seq in range(0, 20, 2):
        plog.append(pbatch(seq, 2))
    assert plog.num_segments > 2
    plog.close(clean=False)
    for name in os.listdir(tmp_path / "t-0"):
        if name.endswith(".snapshot"):
            os.unlink(tmp_path / "t-0" / name)
    again = PartitionLog(str(tmp_path / "t-0"), LogConfig(segment_bytes=300), clock=clock)
    entry = again.producer_state.last_entry(PID)
    assert entry.last_seq == 19 and len(entry.batch_metadata) == 5
    assert again.append(pbatch(14, 2)).duplicate
    with pytest.raises(OutOfOrderSequenceError):
        again.append(pbatch(21))
    # a corrupt snapshot is ignored with a warning and the log replayed instead
    again.close()
    snap = [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".snapshot")][-1]
    with open(tmp_path / "t-0" / snap, "r+b") as f:
        f.seek(10)
        f.write(b"\x99")
    with caplog.at_level(logging.WARNING):
        third = PartitionLog(str(tmp_path / "t-0"), LogConfig(segment_bytes=300), clock=clock,
                             had_clean_shutdown=True)
    assert any("Failed to load producer snapshot" in r.getMessage() for r in caplog.records)
    assert third.producer_state.last_entry(PID).last_seq == 19


def test_truncation_reloads_state(plog):
    for seq in range(0, 6, 2):
        plog.append(pbatch(seq, 2))
    plog.roll()
    plog.append(pbatch(6, 2))
    plog.truncate_to(6)
    assert plog.producer_state.last_entry(PID).last_seq == 5
    assert plog.append(pbatch(6, 2)).duplicate is False


def test_expiration(tmp_path, clock):
    psm = ProducerStateManager(str(tmp_path), producer_id_expiration_ms=1000)
    info = psm.prepare_update(PID, AppendOrigin.CLIENT)
    info.append(read_batch_header(pbatch(0, ts=T0)))
    psm.update(info)
    info = psm.prepare_update(PID + 1, AppendOrigin.CLIENT)     # a transaction still open
    info.append(read_batch_header(pbatch(0, ts=T0, pid=PID + 1, is_transactional=True)))
    psm.update(info)
    assert psm.remove_expired_producers(T0 + 999) == 0
    assert psm.last_entry(PID) is not None
    assert psm.remove_expired_producers(T0 + 1000) == 1
    assert psm.last_entry(PID) is None
    assert psm.last_entry(PID + 1) is not None          # kept while its transaction is open
