"""The coordinator and its log: which partition owns a group (Java's String.hashCode), requests
while loading, rebuilding the acknowledged state on restart, replay of unknown records,
tombstones and undecodable records, and a consumer's close (commit, then leave)."""
from __future__ import annotations

import struct

import pytest

from kgroup.coordinator import CoordinatorLoadError, GroupCoordinatorShard, group_partition
from kgroup.coordinator.result import gate
from kgroup.java_compat import string_hash_code
from kgroup.coordinator.timer import heartbeat_key
from kgroup.protocol.messages.heartbeat import HeartbeatRequest
from kgroup.protocol.messages.join_group import JoinGroupRequest
from kgroup.protocol.messages.list_groups import ListGroupsRequest
from tests.coordinator.support import E, Ctx, fresh_shard, protocols


# -- group -> partition ------------------------------------------------------------------------
def test_group_partition():
    assert group_partition("polygenelubricants") == 0
    assert group_partition("hello") == 99162322 % 50
    assert group_partition("\U0001F600", 7) == (0xD83D * 31 + 0xDE00) % 7
    neg = "console-consumer-1"
    assert group_partition(neg) == abs(string_hash_code(neg)) % 50


# -- loading ---------------------------------------------------------------------------------------
def test_requests_while_loading_get_load_in_progress():
    """The runtime answers a loading partition's requests in each API's error form (``gate``);
    the shard itself runs only once the partition is active."""
    S, config, loading = GroupCoordinatorShard, Ctx().config, E.COORDINATOR_LOAD_IN_PROGRESS
    req = JoinGroupRequest(group_id="g", session_timeout_ms=10000, protocol_type="consumer",
                           protocols=protocols("range"))
    assert gate(S.handle_join_group, req, 9, config, loading).error_code == loading
    assert gate(S.handle_list_groups, ListGroupsRequest(), 5, config, loading).error_code == loading
    hb = gate(S.handle_heartbeat, HeartbeatRequest(group_id="g", member_id="m"), 4, config, loading)
    assert hb.error_code == E.NONE      # Kafka answers heartbeats blindly while loading
    assert gate(S.handle_join_group, req, 9, config, E.NOT_COORDINATOR).error_code == E.NOT_COORDINATOR
    shard = GroupCoordinatorShard(3)
    shard.on_loaded(0)
    assert gate(S.handle_join_group, req, 9, config, None) is None
    assert shard.handle_join_group(req, 9, 0, "t").responses[0][1].error_code == E.MEMBER_ID_REQUIRED


def test_restart_rebuilds_last_acknowledged_state():
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2, session=10000)
    c.commit("g", {("t", 0): 100, ("t", 1): 200}, member_id=a, generation=gen)
    c.commit("g", {("t", 0): 150}, member_id=b, generation=gen)
    c.commit("simple", {("u", 0): 1})
    restarted = fresh_shard(c.shard, c.log, c.now + 500)
    assert restarted.durable_state() == c.shard.durable_state()
    g = restarted.group_metadata_manager.classic_group("g")
    assert str(g.state) == "Stable" and g.generation_id == gen and set(g.members) == {a, b}
    assert g.leader_id == leader and g.protocol_name == "range"
    # consumption resumes at the committed offsets
    fetched = restarted.offset_metadata_manager.fetch_offsets("g", [("t", [0, 1])], False).topics
    assert fetched == [("t", [(0, 150, -1, "", 0), (1, 200, -1, "", 0)])]
    # members come back with their sessions restarted at load time
    assert restarted.scheduler.deadline(heartbeat_key("g", a)) == c.now + 500 + 10000


def test_loaded_members_keep_working_and_expire_without_heartbeats():
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2, session=10000)
    c2 = Ctx()
    c2.shard = fresh_shard(c.shard, c.log, 0)
    c2.scheduler = c2.shard.scheduler
    c2.log = list(c.log)
    assert c2.heartbeat("g", a, gen) == E.NONE
    r = c2.answer(c2.sync("g", b, gen))
    assert r.error_code == 0 and r.assignment == c.group("g").members[b].assignment
    c2.advance(5000)
    assert c2.heartbeat("g", a, gen) == E.NONE
    c2.advance(5000)           # b's session (restarted at load, t=0) ends at 10000
    assert c2.state("g") == "PreparingRebalance" and set(c2.group("g").members) == {a}


def test_oversized_group_rebalances_after_load():
    c = Ctx()
    gen, members, leader = c.stable_group("g", 3)
    shard = GroupCoordinatorShard(7, type(c.config)(max_size=2))
    for i, (k, v) in enumerate(c.log):
        shard.replay(k, v, i)
    shard.on_loaded(0)
    assert str(shard.group_metadata_manager.classic_group("g").state) == "PreparingRebalance"


# -- replay robustness --------------------------------------------------------------------------
def test_unknown_record_types_are_ignored():
    c = Ctx()
    c.commit("g", {("t", 0): 5})
    log = list(c.log)
    log.insert(0, (struct.pack(">h", 100) + b"\x00\x01g", b"\x00\x00whatever"))   # a future type
    log.insert(1, (struct.pack(">h", 999) + b"??", None))
    shard = fresh_shard(c.shard, log, 0)
    assert shard.skipped_records == 2
    assert shard.durable_state() == c.shard.durable_state()


def test_a_malformed_consumer_group_record_fails_the_load():
    # types 3-8 are KIP-848 records the shard replays: bytes that do not decode stop the load
    log = [(struct.pack(">h", 3) + b"\x00\x01g", b"\x00\x00whatever")]
    with pytest.raises(CoordinatorLoadError):
        fresh_shard(Ctx().shard, log, 0)


def test_tombstones_are_applied():
    c = Ctx()
    c.commit("g", {("t", 0): 5, ("t", 1): 6})
    c.delete_offsets("g", {"t": [0]})
    shard = fresh_shard(c.shard, c.log, 0)
    kept = c.shard.offset_metadata_manager.offset("g", "t", 1)
    assert shard.offset_metadata_manager.offsets == {"g": {"t": {1: kept}}}


@pytest.mark.parametrize("key, value", [
    (b"\x00", None),                                  # key too short for the record type
    (b"\x00\x01\x00\x05ab", None),                    # truncated key struct
    (b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00", b"\x00\x03\x00"),   # truncated value
    (b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00", b"\x00\x09" + bytes(40)),  # unknown value version
    (b"\x00\x02\x00\x01g", b"\x00\x03\x00\x08consumer\xff"),           # truncated group metadata
])
def test_deserialization_error_fails_the_loading(key, value):
    shard = GroupCoordinatorShard(17)
    shard.replay(b"\x00\x02\x00\x01h", None, 0)       # a harmless tombstone first
    with pytest.raises(CoordinatorLoadError) as info:
        shard.replay(key, value, 41)
    assert "__consumer_offsets-17" in str(info.value) and "offset 41" in str(info.value)
    assert info.value.partition == 17 and info.value.offset == 41


# -- consumer close -------------------------------------------------------------------------------
def test_close_commits_then_leaves_and_the_group_rebalances_at_once():
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2, session=45000)
    assert c.commit("g", {("t", 0): 9}, member_id=a, generation=gen) == {("t", 0): 0}
    r = c.leave("g", a)
    assert r.members[0].error_code == 0
    assert c.state("g") == "PreparingRebalance" and a not in c.group("g").members
    assert heartbeat_key("g", a) not in c.scheduler
    t = c.join("g", b, session=45000)
    assert c.answer(t).generation_id == gen + 1       # no wait for a's session timeout
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (9, 0)}
