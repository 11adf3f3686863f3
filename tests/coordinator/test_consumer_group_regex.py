"""Regex subscriptions as Kafka 4.0 persists them: the group's resolution of every subscribed regex
is record 16 (ConsumerGroupRegularExpression: topics, metadata version, timestamp), written when a
member brings a regex new to the group and again, at most every 10 s, at a heartbeat when a regex
is unresolved or topics were created since; tombstoned when no member uses the regex any more
(changed, left, fenced) and when the group is deleted. Matching is RE2's whole-name match (Kafka's
RE2/J ``matcher(topic).matches()``). Every step checks live == replayed (CgCtx)."""
from __future__ import annotations

import pytest

from kgroup.coordinator.consumer_group import consumer_group_records as rec
from kgroup.coordinator.consumer_group.manager import REGEX_BATCH_REFRESH_INTERVAL_MS
from kgroup.coordinator.consumer_group.validation import check_regex
from kgroup.protocol.errors import ErrorCode as E

from .support import CgCtx


def regex_records(c, since):
    """(regex, topics or None for a tombstone) of the record-16 entries written since ``since``."""
    out = []
    for key, value in c.log[since:]:
        r = rec.decode_record(key, value) if int.from_bytes(key[:2], "big") >= 3 else None
        if r is not None and r.record_type == rec.REGULAR_EXPRESSION:
            out.append((r.key_struct.regular_expression, None if value is None else list(r.value_struct.topics)))
    return out


def record_types(c, since):
    return [int.from_bytes(k[:2], "big") for k, _ in c.log[since:]]


def test_a_new_regex_is_resolved_and_persisted_before_the_topic_metadata_and_epoch():
    c = CgCtx({"orders-eu": 2, "orders-us": 1, "users": 1, "xorders-eu": 1})
    c.advance(1000)
    n = len(c.log)
    r = c.hb("g", "m1", 0, regex="orders-.*")
    assert c.names(r) == {"orders-eu": [0, 1], "orders-us": [0]}
    # member subscription (5), the resolution (16), topic metadata (4), group epoch (3), target, ...
    assert record_types(c, n)[:4] == [5, 16, 4, 3]
    assert regex_records(c, n) == [("orders-.*", ["orders-eu", "orders-us"])]   # whole names, sorted
    resolved = c.cg("g").resolved_regexes["orders-.*"]
    assert (resolved.version, resolved.timestamp) == (c.topics_version, 1000)
    # a second member with the same regex uses the group's resolution: nothing resolved again
    n = len(c.log)
    c.hb("g", "m2", 0, regex="orders-.*")
    assert regex_records(c, n) == []


def test_changing_or_dropping_a_regex_tombstones_it_when_nobody_uses_it():
    c = CgCtx({"a1": 1, "a2": 1, "b1": 2})
    r1 = c.hb("g", "m1", 0, regex="a.*")
    c.hb("g", "m2", 0, regex="a.*")
    n = len(c.log)
    c.hb("g", "m1", r1.member_epoch, regex="b.*")     # m2 still uses a.*: only b.* is new
    assert regex_records(c, n) == [("a.*", ["a1", "a2"]), ("b.*", ["b1"])]
    n = len(c.log)
    r2 = c.cg("g").members["m2"]
    c.hb("g", "m2", r2.member_epoch, topics=["a1"], regex="")   # m2 drops its regex for a name
    assert regex_records(c, n) == [("a.*", None)]
    assert set(c.cg("g").resolved_regexes) == {"b.*"}
    # the last member subscribed to b.* leaves: its resolution goes with it
    n = len(c.log)
    c.hb("g", "m1", -1)
    assert regex_records(c, n) == [("b.*", None)] and not c.cg("g").resolved_regexes


def test_a_fenced_member_takes_its_regex_along():
    c = CgCtx({"a1": 1, "b1": 1})     # sessions: 45 s
    c.hb("g", "m1", 0, regex="a.*")
    r2 = c.hb("g", "m2", 0, regex="b.*")
    c.advance(30000)
    c.hb("g", "m2", r2.member_epoch)
    n = len(c.log)
    c.advance(20000)                                   # m1's session expires, m2's does not
    assert "m1" not in c.cg("g").members and regex_records(c, n) == [("a.*", None)]
    c.hb("g", "m2", -1)
    assert regex_records(c, n)[-1] == ("b.*", None)


def test_deleting_a_group_tombstones_its_resolutions_before_the_topic_metadata():
    from kgroup.coordinator.consumer_group.group import ResolvedRegex, group_deletion_records, replay
    groups: dict = {}
    replay(groups, rec.group_epoch_record("d", 1))
    replay(groups, rec.regular_expression_record("d", "z.*", ResolvedRegex(frozenset({"z1"}), 3, 7)))
    deletion = group_deletion_records(groups["d"])
    types = [r.record_type for r in deletion]
    assert types.index(16) < types.index(4) < types.index(3)
    for r in deletion:
        replay(groups, r)
    assert "d" not in groups


def test_topics_created_later_are_picked_up_once_the_refresh_interval_passed_on_the_steady_path():
    c = CgCtx({"rx-1": 1})
    r = c.hb("g", "m1", 0, regex="rx-.*")
    r = c.hb("g", "m1", r.member_epoch, owned={"rx-1": [0]})
    c.add_topic("rx-2", 2)
    c.topics_changed()
    n = len(c.log)
    c.advance(REGEX_BATCH_REFRESH_INTERVAL_MS)         # not past the interval yet
    assert c.hb("g", "m1", r.member_epoch).assignment is None and regex_records(c, n) == []
    c.advance(1)
    r = c.hb("g", "m1", r.member_epoch)                # only the epoch: the steady path must notice
    assert regex_records(c, n) == [("rx-.*", ["rx-1", "rx-2"])]
    assert c.names(r) == {"rx-1": [0], "rx-2": [0, 1]}
    # nothing new since: later heartbeats past the interval resolve nothing again
    c.advance(REGEX_BATCH_REFRESH_INTERVAL_MS + 1)
    n = len(c.log)
    c.hb("g", "m1", r.member_epoch, owned={"rx-1": [0], "rx-2": [0, 1]})
    assert regex_records(c, n) == []


def test_the_resolution_survives_a_reload():
    from .support import fresh_shard
    c = CgCtx({"t-a": 1, "t-b": 1})
    c.hb("g", "m1", 0, regex="t-.*")
    other = fresh_shard(c.shard, c.log, c.now)
    assert other.consumer_group_manager.consumer_group("g").resolved_regexes == c.cg("g").resolved_regexes


@pytest.mark.parametrize("regex, matches, not_matches", [
    ("orders", ["orders"], ["orders-1", "my-orders"]),            # whole names only
    ("a|b", ["a", "b"], ["ab"]),
    (r"t\d+", ["t1", "t42"], ["t", "tx"]),
    ("[[:alpha:]]+", ["abc"], ["ab1"]),                           # POSIX classes, as RE2/J
    (r"\pL+", ["héllo"], ["h3llo"]),                              # Unicode classes
    ("(?i)Orders", ["orders", "ORDERS"], ["order"]),
])
def test_re2_semantics(regex, matches, not_matches):
    p = check_regex(regex)
    assert all(p.fullmatch(t) for t in matches)
    assert not any(p.fullmatch(t) for t in not_matches)


@pytest.mark.parametrize("regex", ["(?=x)y", "(?<!x)y", r"(a)\1", "a++", "(?P=n)"])
def test_what_re2_refuses_is_invalid_regular_expression(regex):
    c = CgCtx({"a": 1})
    r = c.hb("g", "m1", 0, regex=regex)
    assert r.error_code == E.INVALID_REGULAR_EXPRESSION
    assert r.error_message.startswith(f"SubscribedTopicRegex `{regex}` is not a valid regular expression: ")
    assert c.log == []


def test_classic_members_joining_and_leaving_keep_a_regex_members_topics():
    """Online migration: a classic member inside the group subscribes by names; its join and its
    LeaveGroup compute the topic metadata with the group's regex resolutions, so the regex member's
    topics stay subscribed (no spurious epoch bump, no partition of them dropped)."""
    from .test_migration import classic_join
    c = CgCtx({"rx-1": 2, "a": 2})
    r = c.hb("g", "m1", 0, regex="rx-.*")
    assert c.names(r) == {"rx-1": [0, 1]}
    j = classic_join(c, "g", topics=("a",))
    assert j.error_code == 0
    assert set(c.cg("g").subscription_metadata) == {"a", "rx-1"}
    epoch = c.cg("g").group_epoch
    out = c.leave("g", j.member_id)
    assert [m.error_code for m in out.members] == [E.NONE]
    g = c.cg("g")
    assert set(g.subscription_metadata) == {"rx-1"} and g.group_epoch == epoch + 1
    assert g.resolved_regexes["rx-.*"].topics == {"rx-1"}
