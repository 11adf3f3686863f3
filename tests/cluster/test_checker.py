"""The chaos checker (tests/cluster/checker.py) on histories that keep and that break each property."""
from tests.cluster.checker import (acknowledged_once_in_order, commits_never_go_back, every_group_consumed_everything,
                                  one_owner_per_partition)


def test_acknowledged_records_present_once_in_order():
    assert acknowledged_once_in_order({0: [b"1", b"2", b"3"], 1: [b"4"]},
                                      {0: [b"1", b"x", b"2", b"3"], 1: [b"4", b"5"]}) == []


def test_an_acknowledged_record_lost():
    bad = acknowledged_once_in_order({0: [b"1", b"2", b"3"]}, {0: [b"1", b"3"]})
    assert len(bad) == 1 and "missing" in bad[0] and "b'2'" in bad[0]


def test_an_acknowledged_record_twice():
    bad = acknowledged_once_in_order({0: [b"1", b"2"]}, {0: [b"1", b"2", b"1"]})
    assert bad == ["partition 0: b'1' at offsets 0 and 2"]


def test_acknowledged_records_out_of_order():
    bad = acknowledged_once_in_order({0: [b"1", b"2", b"3"]}, {0: [b"2", b"1", b"3"]})
    assert bad == ["partition 0: b'2' (offset 0) acknowledged after b'1' (offset 1)"]


def test_an_acknowledged_record_in_the_wrong_partition():
    assert acknowledged_once_in_order({0: [b"1"], 1: [b"2"]}, {0: [b"1", b"2"], 1: []})


def test_commits_that_only_grow():
    assert commits_never_go_back([("poll", "g", 0, -1001), ("poll", "g", 0, 5), ("callback", "g", 0, 5),
                                  ("poll", "g", 1, 3), ("poll", "h", 0, 1), ("callback", "g", 0, 9)]) == []


def test_a_commit_going_back():
    bad = commits_never_go_back([("poll", "g", 0, 5), ("callback c1", "g", 0, 9), ("poll", "g", 0, 7),
                                 ("poll", "g", 1, 2)])
    assert bad == ["group g partition 0: committed 7 (poll) after 9 (callback c1)"]


def test_one_owner_per_partition():
    assert one_owner_per_partition([("g", "Stable", {"a": [0, 1], "b": [2]}),
                                    ("g", "Stable", {"a": [2], "b": [0, 1]})]) == []


def test_two_owners_of_one_partition_in_one_view():
    bad = one_owner_per_partition([("g", "Stable", {"a": [0, 1], "b": [2]}),
                                   ("g", "Reconciling", {"a": [0, 2], "b": [2]})])
    assert bad == ["group g (Reconciling): partition 2 owned by a and b"]


def test_every_group_consumed_everything():
    acked = {0: [b"1", b"2"], 1: [b"3"]}
    assert every_group_consumed_everything(acked, {"g": {(0, b"1"), (0, b"2"), (1, b"3"), (0, b"x")}}) == []
    bad = every_group_consumed_everything(acked, {"g": {(0, b"1"), (0, b"2"), (1, b"3")},
                                                  "h": {(0, b"1"), (1, b"2"), (1, b"3")}})
    assert bad == ["group h: 1 acknowledged records never consumed, first [(0, b'2')]"]
