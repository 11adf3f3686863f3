"""The single-batch append path (``PartitionLog._append_one``) against the general one: a log fed
batch by batch holds exactly the bytes, offsets, producer state and aborted-transaction index of
a log fed the same batches in multi-batch appends (which take the general path), whatever the
batches (data, transactional, markers, compressed, LogAppendTime) and origins."""
from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgroup.protocol.records import (CONTROL_ABORT, CONTROL_COMMIT, Compression, Record, build_batch,
                                     build_end_txn_marker_batch, end_transaction_marker_record)
from kgroup.storage import AppendOrigin, LogConfig, PartitionLog
from kgroup.storage.errors import LogError
from kgroup.protocol.records import RecordBatchError
from tests.storage.helpers import T0, FakeClock


def _log_bytes(plog: PartitionLog) -> bytes:
    out = b""
    for name in sorted(os.listdir(plog.directory)):
        if name.endswith(".log"):
            with open(os.path.join(plog.directory, name), "rb") as f:
                out += f.read()
    return out


@st.composite
def workloads(draw):
    """Steps of (batch bytes, origin) a producer mix could append: idempotent and transactional
    data batches, COMMIT/ABORT markers (some in a non-standard layout), plain records."""
    steps = []
    seq = {1: 0, 2: 0}
    open_txn = {1: False, 2: False}
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["plain", "data", "txn", "marker", "odd_marker"]))
        n = draw(st.integers(1, 4))
        ts = T0 + draw(st.integers(-5, 5))
        codec = draw(st.sampled_from([Compression.NONE, Compression.NONE, Compression.GZIP]))
        records = [Record(draw(st.sampled_from([None, b"k"])), b"v%d" % i, (), ts) for i in range(n)]
        pid = draw(st.sampled_from([1, 2]))
        if kind == "plain":
            steps.append((build_batch(records, compression=codec), AppendOrigin.CLIENT))
        elif kind in ("data", "txn"):
            if kind == "data" and open_txn[pid]:
                kind = "txn"
            steps.append((build_batch(records, producer_id=pid, producer_epoch=0, base_sequence=seq[pid],
                                      is_transactional=kind == "txn", compression=codec), AppendOrigin.CLIENT))
            seq[pid] += n
            open_txn[pid] = open_txn[pid] or kind == "txn"
        else:
            committed = draw(st.booleans())
            if kind == "marker":
                marker = build_end_txn_marker_batch(pid, 0, committed, draw(st.integers(0, 3)), ts)
            else:       # a layout other than the usual one (a header on the record): decoded
                rec = end_transaction_marker_record(CONTROL_COMMIT if committed else CONTROL_ABORT, 0, ts)
                marker = build_batch([Record(rec.key, rec.value, (("h", b"x"),), ts)], producer_id=pid,
                                     producer_epoch=0, is_transactional=True, is_control=True)
            steps.append((marker, AppendOrigin.COORDINATOR))
            open_txn[pid] = False
    return steps


def _apply(plog, steps, together: bool):
    """Append ``steps`` one by one, or (``together``) consecutive batches of one origin in one
    append, which takes the general path. Returns the outcome of each append call."""
    out = []
    i = 0
    while i < len(steps):
        j = i + 1
        if together:
            while j < len(steps) and steps[j][1] is steps[i][1] and j - i < 3:
                j += 1
        data = b"".join(b for b, _ in steps[i:j])
        try:
            r = plog.append(data, origin=steps[i][1])
            out.append((j - i, r.base_offset if j - i == 1 else None))
        except (LogError, RecordBatchError) as e:
            out.append((j - i, type(e).__name__))
        i = j
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=workloads(), append_time=st.booleans())
def test_one_batch_at_a_time_stores_what_multi_batch_appends_store(tmp_path_factory, steps, append_time):
    cfg = LogConfig.from_props({"message.timestamp.type": "LogAppendTime"} if append_time else {})
    base = tmp_path_factory.mktemp("logs")
    one = PartitionLog(str(base / "one-0"), cfg, clock=FakeClock())
    many = PartitionLog(str(base / "many-0"), cfg, clock=FakeClock())
    singles = _apply(one, steps, together=False)
    # Only compare when every single append succeeded: a refused batch inside a multi-batch
    # append refuses the whole append, so the two logs would then legitimately differ.
    if any(isinstance(o[1], str) for o in singles):
        return
    _apply(many, steps, together=True)
    assert _log_bytes(one) == _log_bytes(many)
    assert one.log_end_offset == many.log_end_offset
    assert one.last_stable_offset == many.last_stable_offset
    assert {p: (e.producer_epoch, e.last_seq, e.current_txn_first_offset)
            for p, e in one.producer_state.producers.items()} == \
        {p: (e.producer_epoch, e.last_seq, e.current_txn_first_offset)
         for p, e in many.producer_state.producers.items()}
    assert one.collect_aborted_transactions(0, one.log_end_offset) == \
        many.collect_aborted_transactions(0, many.log_end_offset)


def test_a_single_batch_is_checked_as_in_a_multi_batch_append(tmp_path, clock):
    plog = PartitionLog(str(tmp_path / "t-0"), LogConfig(), clock=clock)
    good = build_batch([Record(b"k", b"v", (), T0)])
    corrupt = bytearray(good)
    corrupt[-1] ^= 1
    for data in (bytes(corrupt), build_batch([Record(b"k", b"v", (), T0)], base_offset=5)):
        for records in (data, data + good):
            try:
                plog.append(records)
            except (LogError, RecordBatchError) as e:
                error = type(e)
            else:
                error = None
            assert error is not None
    assert plog.log_end_offset == 0
    marker = build_end_txn_marker_batch(1, 0, True, 0, T0)
    try:
        plog.append(marker)         # a client may not write control batches
    except RecordBatchError:
        pass
    else:
        raise AssertionError("a client's control batch was accepted")
    assert plog.log_end_offset == 0
