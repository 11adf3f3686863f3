"""``scan_records`` checks runs of equal-size records with strided slices instead of walking them
one by one; whatever path it takes, its summary must equal one computed from the fully decoded
records, and a batch it accepts must decode."""
from hypothesis import given, settings
from hypothesis import strategies as st

from kgroup.protocol import records as records_mod
from kgroup.protocol.records import (InvalidRecordError, Record, build_batch, decode_records,
                                     read_batch_header, scan_records)

# Runs of identical-shape records (the fast path) mixed with odd ones (the slow path).
_record = st.builds(
    lambda key, value, ts, hdrs: Record(key=key, value=value, timestamp=ts, headers=hdrs),
    st.one_of(st.none(), st.binary(max_size=3)),
    st.one_of(st.none(), st.binary(max_size=200)),
    st.integers(1_700_000_000_000, 1_700_000_000_300),
    st.lists(st.tuples(st.text(max_size=3), st.binary(max_size=3)), max_size=2))
_run = st.tuples(_record, st.integers(1, 40)).map(lambda t: [Record(t[0].key, t[0].value, t[0].headers,
                                                                     t[0].timestamp) for _ in range(t[1])])
_records = st.lists(st.one_of(_run, _record.map(lambda r: [r])), min_size=1, max_size=8).map(
    lambda parts: [r for p in parts for r in p])


def _oracle(batch):
    recs = decode_records(batch)
    return len(recs), min(r.timestamp for r in recs), max(r.timestamp for r in recs), any(r.key is None for r in recs)


@settings(max_examples=300, deadline=None)
@given(_records)
def test_scan_matches_decoded_records(records):
    batch = build_batch(records)
    got = scan_records(read_batch_header(batch), memoryview(batch))
    assert tuple(got) == _oracle(batch)


def _scan_one_by_one(header, batch):
    """The same function with the strided fast path switched off."""
    saved = records_mod._RUN_PROBE
    records_mod._RUN_PROBE = 1 << 30
    try:
        return scan_records(header, batch)
    finally:
        records_mod._RUN_PROBE = saved


@settings(max_examples=300, deadline=None)
@given(_records, st.data())
def test_fast_path_agrees_with_record_by_record_walk_on_damaged_batches(records, data):
    """Damage one byte: the fast path must reject exactly what the record-by-record walk
    rejects, and agree on everything else."""
    batch = bytearray(build_batch(records))
    i = data.draw(st.integers(61, len(batch) - 1))
    batch[i] = data.draw(st.integers(0, 255))
    raw = bytes(batch)
    header = read_batch_header(raw)
    try:
        slow = _scan_one_by_one(header, memoryview(raw))
    except InvalidRecordError:
        slow = InvalidRecordError
    try:
        fast = scan_records(header, memoryview(raw))
    except InvalidRecordError:
        fast = InvalidRecordError
    assert fast == slow


def test_fast_path_is_taken_for_uniform_records(monkeypatch):
    calls = []
    real = records_mod._scan_run
    monkeypatch.setattr(records_mod, "_scan_run", lambda *a: calls.append(a) or real(*a))
    batch = build_batch([Record(key=b"k", value=b"x" * 90, timestamp=1_700_000_000_000 + i % 3) for i in range(500)])
    got = scan_records(read_batch_header(batch), memoryview(batch))
    assert calls and tuple(got) == _oracle(batch)


def _scan_without_one_record_path(header, batch):
    """The same function with the one-record path switched off."""
    saved = records_mod._scan_one
    records_mod._scan_one = lambda data, end: None
    try:
        return scan_records(header, batch)
    finally:
        records_mod._scan_one = saved


@settings(max_examples=400, deadline=None)
@given(_record, st.data())
def test_one_record_path_agrees_with_the_walk_on_damaged_batches(record, data):
    """A one-record batch (coordinator records, markers), intact or with one byte damaged (its
    record count too): the one-record path accepts and summarizes exactly as the walk does."""
    batch = bytearray(build_batch([record]))
    if data.draw(st.booleans()):
        i = data.draw(st.integers(57, len(batch) - 1))
        batch[i] = data.draw(st.integers(0, 255))
    raw = bytes(batch)
    header = read_batch_header(raw)
    outcomes = []
    for scan in (scan_records, _scan_without_one_record_path):
        try:
            outcomes.append(tuple(scan(header, memoryview(raw))))
        except InvalidRecordError:
            outcomes.append(InvalidRecordError)
    assert outcomes[0] == outcomes[1]
    if header.records_count == 1 and raw == build_batch([record]):
        assert outcomes[0] == _oracle(raw)
