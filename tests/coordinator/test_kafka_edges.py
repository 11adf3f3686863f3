"""Edges found by an audit against Kafka's GroupCoordinatorService / OffsetMetadataManager:
deleted partitions lose their committed offsets (tombstones, replayed like any record) and the
request validation Kafka does before the shard's loading check."""
from __future__ import annotations

from kgroup.coordinator import GroupCoordinatorShard
from kgroup.coordinator.result import gate
from kgroup.protocol.messages.join_group import JoinGroupRequest
from kgroup.protocol.messages.sync_group import SyncGroupRequest
from tests.coordinator.support import E, Ctx, fresh_shard, protocols


def test_partitions_deleted_tombstone_every_groups_offsets():
    c = Ctx()
    assert set(c.commit("g1", {("gone", 0): 5, ("gone", 1): 6, ("kept", 0): 7}).values()) == {0}
    assert set(c.commit("g2", {("gone", 1): 9}).values()) == {0}
    before = len(c.log)
    c.run(c.shard.handle_partitions_deleted([("gone", 0), ("gone", 1)], c.now, "del"))
    assert c.answer("del") == 3
    tombstones = c.log[before:]
    assert len(tombstones) == 3 and all(value is None for _, value in tombstones)
    assert c.fetched("g1", {"gone": [0, 1], "kept": [0]}) == {
        ("gone", 0): (-1, 0), ("gone", 1): (-1, 0), ("kept", 0): (7, 0)}
    assert c.fetched("g2", {"gone": [1]}) == {("gone", 1): (-1, 0)}
    reloaded = fresh_shard(c.shard, c.log, c.now)     # survives a restart: the tombstones replay
    assert reloaded.offset_metadata_manager.offset("g1", "gone", 0) is None and reloaded.offset_metadata_manager.offset("g1", "kept", 0) is not None
    # a partition nobody committed to writes nothing
    n = len(c.log)
    c.run(c.shard.handle_partitions_deleted([("other", 0)], c.now, "none"))
    assert c.answer("none") == 0 and len(c.log) == n


LOADING = E.COORDINATOR_LOAD_IN_PROGRESS


def _gated(handler, req, version):
    """What the runtime answers for a request to a partition still loading (``result.gate``)."""
    return gate(handler, req, version, Ctx().config, LOADING)


def test_validation_happens_before_the_loading_check():
    S = GroupCoordinatorShard
    J = JoinGroupRequest
    join = J(group_id="", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="m1",
             protocol_type="consumer", protocols=protocols("range"))
    r = _gated(S.handle_join_group, join, 9)
    assert (r.error_code, r.member_id) == (E.INVALID_GROUP_ID, "m1")
    join = J(group_id="g", session_timeout_ms=1, rebalance_timeout_ms=10000, member_id="",
             protocol_type="consumer", protocols=protocols("range"))
    assert _gated(S.handle_join_group, join, 9).error_code == E.INVALID_SESSION_TIMEOUT
    join.session_timeout_ms = 10000
    assert _gated(S.handle_join_group, join, 9).error_code == LOADING
    sync = SyncGroupRequest(group_id="g", generation_id=1, member_id="m", protocol_type=None, protocol_name="range",
                            assignments=[])
    assert _gated(S.handle_sync_group, sync, 5).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    sync.group_id = ""      # KafkaApis.handleSyncGroupRequest: protocol type/name before the group id
    assert _gated(S.handle_sync_group, sync, 5).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert _gated(S.handle_sync_group, sync, 4).error_code == E.INVALID_GROUP_ID
    sync.protocol_type = "consumer"
    assert _gated(S.handle_sync_group, sync, 5).error_code == E.INVALID_GROUP_ID
    sync.group_id, sync.protocol_type = "g", "consumer"
    assert _gated(S.handle_sync_group, sync, 5).error_code == LOADING
    from kgroup.protocol.messages.heartbeat import HeartbeatRequest
    from kgroup.protocol.messages.leave_group import LeaveGroupRequest
    from kgroup.protocol.messages.offset_delete import OffsetDeleteRequest
    hb = HeartbeatRequest(group_id="", generation_id=1, member_id="m")
    assert _gated(S.handle_heartbeat, hb, 4).error_code == E.INVALID_GROUP_ID
    hb.group_id = "g"       # Kafka: "the group is still loading, so blindly respond"
    assert _gated(S.handle_heartbeat, hb, 4).error_code == E.NONE
    leave = LeaveGroupRequest(group_id="", members=[])
    assert _gated(S.handle_leave_group, leave, 5).error_code == E.INVALID_GROUP_ID
    od = OffsetDeleteRequest(group_id="", topics=[])
    assert _gated(S.handle_offset_delete, od, 0).error_code == E.INVALID_GROUP_ID
    # an active partition runs the handler
    assert gate(S.handle_offset_delete, OffsetDeleteRequest(group_id="g", topics=[]), 0, Ctx().config, None) is None
