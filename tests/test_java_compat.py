"""kgroup.java_compat against Java: ``String.hashCode`` (signed and unsigned views of one hash),
``String.compareTo``, ``Uuid.hashCode``/``compareTo``, ``Utils.abs``/``toPositive`` and the
iteration order of ``HashMap``/``HashSet``. Expected values were printed by OpenJDK 17."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgroup.client.assignors.base import TopicPartition as TP
from kgroup.java_compat import (JavaHashSet, hash_order, hash_set_copy_order, string_hash_code,
                                string_hash_map, string_hash_u32, string_map_order, string_sort_key,
                                table_size, to_int32, to_positive, topic_partition_hash, utf16_length,
                                utils_abs, uuid_hash_code, uuid_sort_key)


# -- String.hashCode -------------------------------------------------------------------------------
@pytest.mark.parametrize("s, expected", [
    ("", 0), ("a", 97), ("hello", 99162322),
    ("polygenelubricants", -2**31),          # Integer.MIN_VALUE
    ("é", 233), ("日本", 0x65E5 * 31 + 0x672C),
    ("\U0001F600", 0xD83D * 31 + 0xDE00),     # a surrogate pair counts as two code units
    ("range", 108280125), ("roundrobin", -128548644), ("my-group", -1906497762),
    ("console-consumer-1", 35782224), ("\U0001F600x", 54959989), ("consumer1", -421004549),
])
def test_string_hash_code_is_javas(s, expected):
    assert string_hash_code(s) == expected
    assert string_hash_u32(s) == expected & 0xFFFFFFFF


def test_string_hash_code_wraps_like_int32():
    s = "x" * 50
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    assert string_hash_code(s) == (h - 2**32 if h >= 2**31 else h)


@given(st.text())
def test_signed_and_unsigned_hashes_are_one_hash(s):
    signed, unsigned = string_hash_code(s), string_hash_u32(s)
    assert -2**31 <= signed < 2**31 and 0 <= unsigned < 2**32
    assert signed & 0xFFFFFFFF == unsigned and to_int32(unsigned) == signed
    # h = 31*h + c over the UTF-16 code units, mod 2**32
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = h * 31 + int.from_bytes(units[i:i + 2], "big")
    assert h % 2**32 == unsigned


@given(st.integers(-2**31, 2**31 - 1))
def test_utils_abs_and_to_positive(n):
    assert 0 <= utils_abs(n) < 2**31 and 0 <= to_positive(n) < 2**31
    assert utils_abs(n) == (0 if n == -2**31 else abs(n))
    assert to_positive(n) == (n if n >= 0 else n + 2**31)


def test_utils_abs_and_to_positive_of_min_value():
    assert utils_abs(-2**31) == 0 and utils_abs(-5) == 5
    assert to_positive(-2**31) == 0 and to_positive(-1) == 2**31 - 1


@given(st.lists(st.text(), max_size=6))
def test_string_sort_key_is_compare_to(strings):
    by_units = sorted(strings, key=lambda s: s.encode("utf-16-be", "surrogatepass"))
    assert sorted(strings, key=string_sort_key) == by_units


def test_utf16_length():
    assert [utf16_length(s) for s in ("", "abc", "é", "\U0001F600")] == [0, 3, 1, 2]


# -- Uuid --------------------------------------------------------------------------------------
def test_uuid_hash_and_order_are_javas():
    # Uuid(msb=1, lsb=2): xor 3 -> hashCode 3; Uuid(msb=-1, lsb=0): (int)(-1 >> 32) ^ (int)-1 = 0
    assert uuid_hash_code((1).to_bytes(8, "big") + (2).to_bytes(8, "big")) == 3
    assert uuid_hash_code(b"\xff" * 8 + bytes(8)) == 0
    # compareTo on signed longs: a negative msb sorts first
    neg, pos = b"\x80" + bytes(15), b"\x01" + bytes(15)
    assert sorted([pos, neg], key=uuid_sort_key) == [neg, pos]


# -- HashMap / HashSet iteration order ---------------------------------------------------------------
def test_string_map_order_matches_openjdk():
    assert string_map_order(["roundrobin", "range"]) == ["range", "roundrobin"]
    assert string_map_order(["cooperative-sticky", "sticky", "range", "roundrobin"]) == \
        ["sticky", "range", "roundrobin", "cooperative-sticky"]
    keys = ["proto" + chr(ord("a") + (i * 7) % 26) + str(i) for i in range(13)]   # forces a resize
    assert string_map_order(keys) == ["protos10", "protol9", "protoa0", "protoh1", "protoj5", "protog12",
                                      "protoc4", "protoe8", "protov3", "protox7", "protoz11", "protoq6",
                                      "protoo2"]
    assert string_map_order([f"consumer{i}" for i in range(1, 5)]) == [
        "consumer4", "consumer3", "consumer2", "consumer1"]
    assert string_map_order([f"c{i:02d}" for i in range(40)]) == (
        "c31 c30 c11 c33 c10 c32 c13 c35 c12 c34 c15 c37 c14 c36 c17 c39 c16 c38 c19 c18 c20 "
        "c00 c22 c21 c02 c24 c01 c23 c04 c26 c03 c25 c06 c28 c05 c27 c08 c07 c29 c09").split()
    # "A".."C" hash 65..67 -> buckets 1..3
    assert string_map_order(["C", "A", "B"]) == ["A", "B", "C"]
    assert list(string_hash_map({"C": 1, "A": 2, "B": 3}).items()) == [("A", 2), ("B", 3), ("C", 1)]


def test_hash_set_copy_order_sizes_its_table_up_front():
    # HashSet buckets: hash spread (h ^ h >>> 16) & (n - 1), n = 16 for small sets
    ids = [i.to_bytes(16, "big") for i in (17, 2, 33, 1)]   # hashes 17, 2, 33, 1 -> buckets 1, 2, 1, 1
    assert hash_set_copy_order(ids, uuid_hash_code) == [ids[0], ids[2], ids[3], ids[1]]
    # 13 keys: new HashSet<>(c) starts at 32 buckets, a HashMap grown by puts ends at 32 too;
    # 12 keys: 32 buckets (12 / .75 + 1 = 17) against 16 for puts
    keys = list(range(0, 12 * 16, 16))     # identity hashes all in bucket 0 of 16, spread over 32
    assert hash_set_copy_order(keys, lambda k: k) == [k for k in keys if k % 32 == 0] + \
        [k for k in keys if k % 32 == 16]


def test_a_bin_of_nine_grows_a_small_table_like_treeify_bin():
    # nine keys in bucket 0 of a 16 table: the ninth put doubles it (treeifyBin, table < 64)
    keys = [i * 16 for i in range(9)]
    assert hash_order(keys, lambda k: k) == [k for k in keys if k % 32 == 0] + [k for k in keys if k % 32]
    assert table_size(13) == 32 and table_size(12) == 16 and table_size(0, 17) == 32


def test_java_hash_set_first_follows_buckets_and_insertion():
    s = JavaHashSet()
    items = [TP("t", p) for p in range(20)]
    for tp in items:
        s.add(tp)
    assert list(s)[0] == s.first()
    expected = hash_order(items, topic_partition_hash)
    assert list(s) == expected
    s.discard(expected[0])
    assert s.first() == expected[1]
    assert topic_partition_hash(TP("t", 0)) == (31 * 31 + string_hash_u32("t")) & 0xFFFFFFFF


@given(st.lists(st.text(max_size=4), unique=True, max_size=40))
def test_string_map_order_is_a_stable_sort_by_bucket(keys):
    order = string_map_order(keys)
    assert sorted(order) == sorted(keys)
    n = table_size(len(keys))
    buckets = [(string_hash_u32(k) ^ (string_hash_u32(k) >> 16)) & (n - 1) for k in order]
    if all(buckets.count(b) <= 8 for b in buckets):    # no bin overflow: the table only grew by load
        assert buckets == sorted(buckets)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 40)), max_size=120))
def test_timeline_hash_order_from_the_slot_count_alone_matches_the_table(ops):
    """A group keeps only its member table's slot count; the order derived from it and the
    members' insertion order equals the one the modelled TimelineHashMap keeps."""
    from kgroup.java_compat import TimelineHashOrder, timeline_hash_grown_slots, timeline_hash_order
    table, members, slots = TimelineHashOrder(), {}, 2
    for add, n in ops:
        key = f"member-{n}"
        if add:
            table.add(key)
            if key not in members:
                slots = timeline_hash_grown_slots(slots, len(members))
                members[key] = None
        else:
            table.remove(key)
            members.pop(key, None)
        assert slots == len(table.slots)
        assert timeline_hash_order(members, slots) == list(table)
