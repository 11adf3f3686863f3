"""``value_bytes`` packs TransactionLogValue v1 directly: byte for byte what the message
definition encodes (``generic_value_bytes``), and read back as the metadata it came from."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kgroup.protocol.offsets_records import TransactionLogKey
from kgroup.transaction_coordinator import TransactionState as S
from kgroup.transaction_coordinator import transaction_log_records as rec
from kgroup.transaction_coordinator.metadata import TransactionMetadata

topics = st.sampled_from(["t", "txn-out", "__consumer_offsets", "é-ü", "x" * 130])
partition_sets = st.frozensets(st.tuples(topics, st.integers(0, 2**31 - 1)), max_size=80)
int64 = st.integers(-2**63, 2**63 - 1)


@st.composite
def metadata(draw):
    state = draw(st.sampled_from(list(S)))
    return TransactionMetadata(
        draw(st.text(min_size=1, max_size=20)), draw(int64),
        previous_producer_id=draw(st.one_of(st.just(-1), int64)),
        next_producer_id=draw(st.one_of(st.just(-1), int64)),
        producer_epoch=draw(st.integers(-2**15, 2**15 - 1)),
        txn_timeout_ms=draw(st.integers(-2**31, 2**31 - 1)), state=state,
        partitions=frozenset() if state is S.EMPTY else draw(partition_sets),
        txn_start_timestamp=draw(st.one_of(st.just(-1), int64)),
        txn_last_update_timestamp=draw(int64),
        client_transaction_version=draw(st.one_of(st.just(0), st.integers(-2**15, 2**15 - 1))))


@settings(max_examples=400, deadline=None)
@given(metadata())
def test_value_bytes_is_the_message_definitions_encoding(m):
    packed = rec.value_bytes(m)
    assert packed == rec.generic_value_bytes(m)
    assert rec.value_bytes(m) == packed         # the cached partition set gives the same bytes
    assert rec.decode_value(m.transactional_id, packed) == m


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40))
def test_key_bytes_is_the_message_definitions_encoding(tid):
    expected = TransactionLogKey(transactional_id=tid).to_versioned_bytes(rec.KEY_VERSION)
    assert rec.key_bytes(tid) == expected
    assert rec.key_bytes(tid) == expected
    assert rec.decode_key(expected) == tid
