"""The one codec of the embedded consumer protocol (Java's ConsumerProtocol): the version prefix
checks, newer versions read with the newest layout, and the v0 prefix the classic group reads."""
from __future__ import annotations

import pytest

from kgroup.protocol.consumer_protocol import (HIGHEST_VERSION, ConsumerProtocolAssignment,
                                               ConsumerProtocolSubscription, check_version,
                                               decode_assignment, decode_subscription,
                                               deserialize_version)
from kgroup.protocol.primitives import DecodeError

S, A = ConsumerProtocolSubscription, ConsumerProtocolAssignment


def test_versions_below_the_lowest_are_errors_and_above_the_highest_read_as_newest():
    assert HIGHEST_VERSION == 3
    assert [check_version(v) for v in (0, 2, 3, 4, 32767)] == [0, 2, 3, 3, 3]
    with pytest.raises(DecodeError, match="Unsupported consumer protocol version: -1"):
        check_version(-1)
    with pytest.raises(DecodeError):
        deserialize_version(b"\x00")
    assert deserialize_version(b"\x00\x07rest") == 3


def test_a_newer_subscription_reads_with_the_newest_layout():
    sub = S(topics=["b", "a"], owned_partitions=[S.TopicPartition(topic="a", partitions=[1])],
            generation_id=4, rack_id="r1")
    raw = bytearray(sub.to_versioned_bytes(3) + b"future fields")
    raw[0:2] = (9).to_bytes(2, "big")
    got = decode_subscription(raw)
    assert (got.topics, got.generation_id, got.rack_id) == (["b", "a"], 4, "r1")
    assert [(t.topic, t.partitions) for t in got.owned_partitions] == [("a", [1])]
    # the classic group reads only the topics: the v0 prefix of any version
    assert decode_subscription(raw, version=0).topics == ["b", "a"]
    with pytest.raises(DecodeError):
        decode_subscription(b"\xff\xff" + sub.to_versioned_bytes(3)[2:])


def test_assignment_round_trips_at_every_version():
    a = A(assigned_partitions=[A.TopicPartition(topic="t", partitions=[0, 2])], user_data=b"u")
    for v in range(HIGHEST_VERSION + 1):
        got = decode_assignment(a.to_versioned_bytes(v))
        assert [(t.topic, t.partitions) for t in got.assigned_partitions] == [("t", [0, 2])]
        assert bytes(got.user_data) == b"u"
    with pytest.raises(DecodeError):
        decode_assignment(b"\x00\x00\x00")
