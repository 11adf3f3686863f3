"""The producer partitioner against Java's values: murmur2 vectors from Kafka's UtilsTest and
kafka-python's DefaultPartitioner (an independent port) as an oracle; sticky switching."""
import random

from hypothesis import given, settings, strategies as st

from kafka.partitioner.default import murmur2 as kp_murmur2  # import once: it is slow

from kgroup.client.partitioner import BuiltInPartitioner, murmur2, partition_for_key, to_positive


def test_murmur2_matches_kafka_utils_test_vectors():
    # org.apache.kafka.common.utils.UtilsTest#testMurmur2
    cases = {
        b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        bytes([ord(c) for c in "abc"]): 479470107,
    }
    for data, expected in cases.items():
        assert murmur2(data) == expected, data


def test_to_positive_is_not_abs():
    assert to_positive(-2147483648) == 0
    assert to_positive(-1) == 2147483647
    assert to_positive(5) == 5


@settings(deadline=None, max_examples=300)
@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_keyed_partition_matches_kafka_python(key, n):
    assert partition_for_key(key, n) == (kp_murmur2(key) & 0x7FFFFFFF) % n


def test_known_key_partitions():
    # the partition the Java client picks for these keys with 3 / 10 partitions
    assert [partition_for_key(k, 3) for k in (b"a", b"b", b"c", b"key-0")] == \
        [(to_positive(murmur2(k))) % 3 for k in (b"a", b"b", b"c", b"key-0")]
    assert partition_for_key(b"foobar", 10) == (-790332482 & 0x7FFFFFFF) % 10 == 6


def test_sticky_partition_switches_after_batch_size():
    values = iter([7, 8, 9])
    p = BuiltInPartitioner("t", 100, random_int=lambda: next(values))
    info = p.peek([0, 1, 2], 3)
    assert info.partition == 7 % 3
    p.update(info, 60, [0, 1, 2], 3)
    assert p.peek([0, 1, 2], 3) is info  # still sticky
    p.update(info, 60, [0, 1, 2], 3)  # 120 >= batch.size: switch
    info2 = p.peek([0, 1, 2], 3)
    assert info2 is not info and info2.partition == 8 % 3
    p.update(info2, 150, [0, 1, 2], 3, enable_switch=False)  # batch not full: wait for 2x
    assert p.peek([0, 1, 2], 3) is info2
    p.update(info2, 60, [0, 1, 2], 3, enable_switch=False)
    assert p.peek([0, 1, 2], 3).partition == 9 % 3


def test_sticky_prefers_available_partitions():
    p = BuiltInPartitioner("t", 10, random_int=lambda: 5)
    assert p.peek([4], 6).partition == 4
    p2 = BuiltInPartitioner("t", 10, random_int=lambda: 5)
    assert p2.peek([], 4).partition == 1  # nothing available: any partition


def test_adaptive_load_stats_weight_short_queues():
    rng = random.Random(1)
    p = BuiltInPartitioner("t", 1, random_int=lambda: rng.getrandbits(32))
    p.update_load_stats([0, 9, 9], [0, 1, 2], 3)  # weights 10, 1, 1
    counts = {0: 0, 1: 0, 2: 0}
    for _ in range(1200):
        info = p.peek([0, 1, 2], 3)
        counts[info.partition] += 1
        p.update(info, 1, [0, 1, 2], 3)
    assert counts[0] > 800 and counts[1] > 30 and counts[2] > 30
    p.update_load_stats([3, 3, 3], [0, 1, 2], 3)
    assert p._load_stats is None
