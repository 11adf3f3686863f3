"""End-transaction marker batches are packed in one go: byte for byte the batch ``build_batch``
makes of ``end_transaction_marker_record``; ``read_end_txn_marker_fields`` reads that layout
without decoding, and declines any other (whose records are then decoded)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kgroup.protocol.records import (CONTROL_ABORT, CONTROL_COMMIT, NO_SEQUENCE, Record, build_batch,
                                     build_end_txn_marker_batch, decode_records, end_transaction_marker_record,
                                     read_batch_header, read_end_transaction_marker, read_end_txn_marker_fields)


@settings(max_examples=300, deadline=None)
@given(pid=st.integers(-1, 2**63 - 1), epoch=st.integers(-1, 2**15 - 1), committed=st.booleans(),
       coordinator_epoch=st.integers(-2**31, 2**31 - 1), ts=st.integers(-1, 2**50),
       base_offset=st.integers(0, 2**40), leader_epoch=st.integers(-1, 2**31 - 1))
def test_marker_batch_is_build_batchs(pid, epoch, committed, coordinator_epoch, ts, base_offset, leader_epoch):
    packed = build_end_txn_marker_batch(pid, epoch, committed, coordinator_epoch, ts, base_offset=base_offset,
                                        partition_leader_epoch=leader_epoch)
    record = end_transaction_marker_record(CONTROL_COMMIT if committed else CONTROL_ABORT, coordinator_epoch, ts)
    assert packed == build_batch([record], base_offset=base_offset, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=NO_SEQUENCE, is_transactional=True, is_control=True,
                                 partition_leader_epoch=leader_epoch)
    header = read_batch_header(packed)
    decoded = decode_records(packed, header)[0]
    marker = read_end_transaction_marker(decoded)
    assert read_end_txn_marker_fields(packed, header) == (marker.control_type, marker.coordinator_epoch,
                                                          decoded.timestamp)


def test_other_layouts_are_declined():
    record = end_transaction_marker_record(CONTROL_COMMIT, 3, 1000)
    for batch in (
            build_batch([Record(record.key, record.value, (("h", b"v"),), 1000)], producer_id=1, producer_epoch=0,
                        is_transactional=True, is_control=True),        # a record header
            build_batch([Record(record.key, record.value + b"\x00", (), 1000)], producer_id=1, producer_epoch=0,
                        is_transactional=True, is_control=True),        # a longer value
            build_batch([record, record], producer_id=1, producer_epoch=0, is_transactional=True,
                        is_control=True),                               # two records
            build_batch([Record(b"\xff\xff\x00\x01", record.value, (), 1000)], producer_id=1, producer_epoch=0,
                        is_transactional=True, is_control=True)):       # a negative key version
        assert read_end_txn_marker_fields(batch, read_batch_header(batch)) is None
