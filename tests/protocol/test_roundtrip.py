"""Hypothesis round-trips for every message version, plus truncation robustness."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgroup.protocol.primitives import DecodeError
from tests.protocol.strategies import message_strategy
from tests.protocol.test_conformance import MESSAGES

CASES = [(cls, v) for cls, _ in MESSAGES for v in range(cls.VERSIONS[0], cls.VERSIONS[1] + 1)]


@pytest.mark.parametrize("cls,version", CASES, ids=[f"{c.__name__}-v{v}" for c, v in CASES])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_roundtrip(cls, version, data):
    msg = data.draw(message_strategy(cls, version))
    raw = msg.to_bytes(version)
    back = cls.from_bytes(raw, version)
    assert back == msg
    assert back.to_bytes(version) == raw
    # The server decodes small frames from bytes, large ones from a view: the same message.
    assert cls.decode(raw, version) == (msg, len(raw))
    # Every strict prefix is rejected with DecodeError, never another exception.
    cut = data.draw(st.integers(0, max(0, len(raw) - 1)))
    if cut < len(raw):
        with pytest.raises(DecodeError):
            cls.from_bytes(raw[:cut], version)
        with pytest.raises(DecodeError):
            cls.decode(raw[:cut], version)


def test_records_as_list_of_buffers_encode_like_one_buffer():
    """Fetch hands the encoder the batches it read as separate buffers; the bytes on the wire are
    the same as for one joined buffer, and the pieces are passed through, not copied."""
    from kgroup.protocol.messages.fetch import FetchResponse
    parts = [b"a" * 10, memoryview(b"b" * 300), bytearray(b"c" * 5)]
    for v in (4, 12, 17):
        P = FetchResponse.PartitionData
        T = FetchResponse.FetchableTopicResponse
        joined = FetchResponse(responses=[T(topic="t", partitions=[P(records=b"".join(parts))])])
        split = FetchResponse(responses=[T(topic="t", partitions=[P(records=list(parts))])])
        pieces = split.encode(v)
        assert b"".join(pieces) == joined.to_bytes(v)
        assert any(p is parts[1] for p in pieces)


def test_version_prefixed_framing():
    """int16 version + message, as Kafka's MessageUtil writes the consumer protocol and the
    __consumer_offsets records; a newer version reads with our newest layout only when asked."""
    from kgroup.protocol.consumer_protocol import ConsumerProtocolSubscription as S
    sub = S(topics=["a", "b"], user_data=b"u", generation_id=4, rack_id=None)
    raw = sub.to_versioned_bytes(3)
    assert raw[:2] == b"\x00\x03" and raw[2:] == sub.to_bytes(3)
    assert S.from_versioned_bytes(raw) == (sub, 3)
    newer = b"\x00\x09" + raw[2:] + b"appended-by-v9"
    assert S.from_versioned_bytes(newer, newest_known=True) == (sub, 3)
    with pytest.raises(DecodeError):
        S.from_versioned_bytes(newer)
    with pytest.raises(DecodeError):
        S.from_versioned_bytes(b"\x00")
