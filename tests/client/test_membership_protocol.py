"""ConsumerProtocol bytes exactly as Java's ConsumerProtocol writes and reads them."""
import struct

from hypothesis import given, strategies as st

from kgroup.client.assignors import Assignment, Subscription, TopicPartition as TP
from kgroup.client.consumer_protocol import (decode_assignment, decode_subscription, encode_assignment,
                                             encode_subscription)


def s16(s):
    return struct.pack(">h", len(s)) + s.encode()


def i32(*xs):
    return b"".join(struct.pack(">i", x) for x in xs)


def test_subscription_v3_bytes():
    sub = Subscription(["b", "a"], b"\x01", [TP("b", 1), TP("a", 0), TP("b", 0)], 5, "r1")
    expected = (b"\x00\x03" + i32(2) + s16("a") + s16("b")  # topics sorted
                + i32(1) + b"\x01"  # user data
                + i32(2) + s16("a") + i32(1, 0) + s16("b") + i32(2, 0, 1)  # owned: sorted, grouped by topic
                + i32(5) + s16("r1"))  # generation, rack
    assert encode_subscription(sub) == expected
    back = decode_subscription(expected, group_instance_id="i")
    assert back == Subscription(["a", "b"], b"\x01", [TP("a", 0), TP("b", 0), TP("b", 1)], 5, "r1", "i")


def test_subscription_without_optionals_and_older_versions():
    plain = encode_subscription(Subscription(["t"]))
    assert plain == b"\x00\x03" + i32(1) + s16("t") + i32(-1) + i32(0) + i32(-1) + b"\xff\xff"
    v0 = b"\x00\x00" + i32(1) + s16("t") + i32(-1)
    assert decode_subscription(v0) == Subscription(["t"], None, [], -1, None)
    v1 = b"\x00\x01" + i32(1) + s16("t") + i32(-1) + i32(1) + s16("t") + i32(1, 3)
    assert decode_subscription(v1).owned_partitions == [TP("t", 3)]
    assert decode_subscription(encode_subscription(Subscription(["t"], rack_id="")) ).rack_id is None


def test_newer_versions_are_read_with_the_newest_known_layout():
    v3 = encode_subscription(Subscription(["t"], None, [], 7, "r"))
    v9 = b"\x00\x09" + v3[2:] + b"future-fields"
    assert decode_subscription(v9).generation_id == 7
    a = encode_assignment(Assignment([TP("t", 0)]))
    assert decode_assignment(b"\x00\x05" + a[2:] + b"\x00").partitions == [TP("t", 0)]


def test_assignment_v3_bytes_keep_assignor_order_grouped_by_first_topic_occurrence():
    a = Assignment([TP("b", 1), TP("a", 0), TP("b", 0)])
    expected = b"\x00\x03" + i32(2) + s16("b") + i32(2, 1, 0) + s16("a") + i32(1, 0) + i32(-1)
    assert encode_assignment(a) == expected
    assert decode_assignment(expected).partitions == [TP("b", 1), TP("b", 0), TP("a", 0)]
    assert decode_assignment(b"\x00\x00" + i32(0) + i32(2) + b"hi") == Assignment([], b"hi")


topic = st.text(alphabet="abcxyz-._", min_size=1, max_size=5)


@given(st.lists(topic, max_size=4), st.lists(st.tuples(topic, st.integers(0, 50)), max_size=6, unique=True),
       st.integers(-1, 1000), st.one_of(st.none(), st.binary(max_size=8)), st.one_of(st.none(), topic))
def test_subscription_roundtrip(topics, owned, generation, user_data, rack):
    sub = Subscription(topics, user_data, [TP(*o) for o in owned], generation, rack)
    back = decode_subscription(encode_subscription(sub))
    assert back.topics == sorted(topics) and back.user_data == user_data and back.generation_id == generation
    assert back.owned_partitions == sorted(TP(*o) for o in owned) and back.rack_id == rack
