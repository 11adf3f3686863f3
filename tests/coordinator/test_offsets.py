"""Offsets: commits during a rebalance, generation and member validation, the metadata size limit,
failed appends, OffsetFetch, expiry (KIP-211), DeleteGroups and OffsetDelete; with a fake clock
and the replay-consistency check after every step."""
from __future__ import annotations

from tests.coordinator.support import E, S, Ctx, protocols

DAY = 24 * 3600 * 1000
RETENTION = 7 * DAY          # offsets.retention.minutes = 10080
CHECK = 600000               # offsets.retention.check.interval.ms


# -- commits during a rebalance ---------------------------------------------------------------
def test_commit_in_completing_rebalance_is_refused_and_nothing_written():
    c = Ctx()
    toks = [c.join_dynamic("g") for _ in range(2)]
    while any(c.answer(t) is None for _, t in toks):
        c.advance(3000)
    gen = c.answer(toks[0][1]).generation_id
    before = len(c.log)
    errs = c.commit("g", {("t", 0): 5}, member_id=toks[0][0], generation=gen)
    assert errs == {("t", 0): E.REBALANCE_IN_PROGRESS}
    assert len(c.log) == before


def test_commit_in_preparing_rebalance_from_current_generation_is_allowed():
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2)
    c.join("g", leader, protos=protocols("range", topics=("t", "u")))
    assert c.state("g") == "PreparingRebalance"
    follower = b if leader == a else a
    assert c.commit("g", {("t", 0): 42}, member_id=follower, generation=gen) == {("t", 0): 0}
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (42, 0)}


# -- generation and member validation -----------------------------------------------------------
def test_commit_validation_rules():
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2)
    assert c.commit("g", {("t", 0): 1}, member_id=a, generation=gen - 1) == {("t", 0): E.ILLEGAL_GENERATION}
    assert c.commit("g", {("t", 0): 1}, member_id="ghost", generation=gen) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert c.commit("g", {("t", 0): 1}) == {("t", 0): E.UNKNOWN_MEMBER_ID}       # simple commit, non-empty group
    assert c.commit("g", {("t", 0): 1}, member_id=a, generation=gen) == {("t", 0): 0}
    # Unknown groups: generation -1 is a simple commit; otherwise GROUP_ID_NOT_FOUND (v9) or
    # ILLEGAL_GENERATION (older versions).
    assert c.commit("simple", {("t", 0): 7}) == {("t", 0): 0}
    assert c.state("simple") == "Empty" and c.fetched("simple", {"t": [0]}) == {("t", 0): (7, 0)}
    assert c.commit("other", {("t", 0): 7}, member_id="m", generation=3) == {("t", 0): E.GROUP_ID_NOT_FOUND}
    assert c.commit("other", {("t", 0): 7}, member_id="m", generation=3, version=8) == \
        {("t", 0): E.ILLEGAL_GENERATION}
    c.leave("g", a, b)
    assert c.state("g") == "Empty"
    assert c.commit("g", {("t", 1): 9}) == {("t", 1): 0}          # simple commit on an empty group
    c.group("g").transition_to(c.group("g").state.DEAD, c.now)
    assert c.commit("g", {("t", 1): 9}) == {("t", 1): E.COORDINATOR_NOT_AVAILABLE}


def test_listed_simple_group():
    c = Ctx()
    c.commit("simple", {("t", 0): 7})
    (g,) = c.list_groups().groups
    assert (g.group_id, g.protocol_type, g.group_state, g.group_type) == ("simple", "", "Empty", "classic")


# -- metadata size -------------------------------------------------------------------------------
def test_offset_metadata_too_large_only_for_that_partition():
    c = Ctx()
    c.commit("g", {("t", 0): 1})
    from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    req = OffsetCommitRequest(group_id="g", topics=[T(name="t", partitions=[
        P(partition_index=0, committed_offset=10, committed_metadata="x" * 4097),
        P(partition_index=1, committed_offset=11, committed_metadata="y" * 4096),
        P(partition_index=2, committed_offset=12, committed_metadata="é" * 4096),      # 4096 UTF-16 units
        P(partition_index=3, committed_offset=13, committed_metadata="\U0001F600" * 2049)])])  # 4098 units
    c.handle(S.handle_offset_commit, req, 8, "tok")
    errs = [p.error_code for p in c.answer("tok").topics[0].partitions]
    assert errs == [E.OFFSET_METADATA_TOO_LARGE, 0, 0, E.OFFSET_METADATA_TOO_LARGE]
    got = c.fetched("g", {"t": [0, 1, 2, 3]})
    assert got == {("t", 0): (1, 0), ("t", 1): (11, 0), ("t", 2): (12, 0), ("t", 3): (-1, 0)}


# -- failed appends ------------------------------------------------------------------------------
def test_commit_acknowledged_only_after_write_and_failed_write_changes_nothing():
    c = Ctx()
    assert c.commit("g", {("t", 0): 5}) == {("t", 0): 0}
    for append_error, expected in [(E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
                                   (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
                                   (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
                                   (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR)]:
        c.fail_writes = append_error
        assert c.commit("g", {("t", 0): 6, ("u", 1): 1}) == {("t", 0): expected, ("u", 1): expected}
        c.fail_writes = None
        assert c.fetched("g", {"t": [0], "u": [1]}) == {("t", 0): (5, 0), ("u", 1): (-1, 0)}


def test_commit_result_holds_no_answer_before_commit():
    c = Ctx()
    from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    req = OffsetCommitRequest(group_id="g", topics=[T(name="t", partitions=[
        T.OffsetCommitRequestPartition(partition_index=0, committed_offset=3)])])
    res = c.shard.handle_offset_commit(req, 9, c.now, "tok")
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (-1, 0)}      # not applied until commit
    c.run(res)
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (3, 0)}


def test_failed_empty_group_write_keeps_kafka_semantics():
    """A failed write of the Empty-generation record leaves the group Empty in memory (Kafka only
    logs), but the log, and so a reload, still has the previous generation."""
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2)
    c.check = False
    c.fail_writes = E.REQUEST_TIMED_OUT
    r = c.leave("g", a, b)
    assert r.error_code == E.COORDINATOR_NOT_AVAILABLE
    assert c.state("g") == "Empty"
    assert c.shard.durable_state()["groups"]["g"]["generation"] == gen


# -- OffsetFetch --------------------------------------------------------------------------------
def test_fetch_never_invents_offsets_and_null_topics_means_all():
    c = Ctx()
    assert c.fetched("nope", {"t": [0, 1]}) == {("t", 0): (-1, 0), ("t", 1): (-1, 0)}
    assert c.fetch("nope").topics == []
    c.commit("g", {("t", 0): 5, ("t", 2): 7, ("u", 0): 1}, leader_epoch=3, metadata="m")
    assert c.fetched("g") == {("t", 0): (5, 0), ("t", 2): (7, 0), ("u", 0): (1, 0)}
    p = c.fetch("g", {"t": [0]}, version=5).topics[0].partitions[0]
    assert (p.committed_leader_epoch, p.metadata) == (3, "m")


def test_fetch_multiple_groups_v8_and_require_stable():
    c = Ctx()
    c.commit("a", {("t", 0): 1})
    c.commit("b", {("t", 0): 2})
    from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    req = OffsetFetchRequest(require_stable=True, groups=[
        G(group_id="a", topics=None),
        G(group_id="b", topics=[G.OffsetFetchRequestTopics(name="t", partition_indexes=[0, 1])])])
    c.handle(S.handle_offset_fetch, req, 8, "tok")
    groups = {g.group_id: g for g in c.answer("tok").groups}
    assert [(p.partition_index, p.committed_offset) for p in groups["a"].topics[0].partitions] == [(0, 1)]
    assert [(p.partition_index, p.committed_offset, p.error_code) for p in groups["b"].topics[0].partitions] == \
        [(0, 2, 0), (1, -1, 0)]
    assert c.answer("tok").to_bytes(8)


def test_group_errors_per_version():
    """Before v2 a group error goes into every partition; v2-7 top level; v8+ per group."""
    from kgroup.coordinator import GroupCoordinatorShard
    from kgroup.coordinator.result import gate
    from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
    handler, loading = GroupCoordinatorShard.handle_offset_fetch, E.COORDINATOR_LOAD_IN_PROGRESS
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    req = OffsetFetchRequest(group_id="g", topics=[T(name="t", partition_indexes=[0, 1])])
    config = Ctx().config
    v1 = gate(handler, req, 1, config, loading)          # the partition is still loading
    assert [p.error_code for p in v1.topics[0].partitions] == [E.COORDINATOR_LOAD_IN_PROGRESS] * 2
    v3 = gate(handler, req, 3, config, loading)
    assert v3.error_code == E.COORDINATOR_LOAD_IN_PROGRESS and v3.topics == []
    assert v1.to_bytes(1) and v3.to_bytes(3)


# -- expiry (KIP-211) -----------------------------------------------------------------------------
def test_offsets_expire_retention_after_group_became_empty():
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2)
    c.commit("g", {("t", 0): 5}, member_id=a, generation=gen)
    c.advance(10 * DAY)                       # Stable consumer group subscribed to "t": kept
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (5, 0)}
    c.heartbeat("g", a, gen)                  # (sessions expired long ago; the group is Empty now)
    assert c.state("g") == "Empty"
    emptied_at = c.shard.group_metadata_manager.classic_group("g").current_state_timestamp
    c.advance(emptied_at + RETENTION - c.now - 1)
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (5, 0)}
    c.advance(CHECK)
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (-1, 0)}
    assert any(k[:2] == b"\x00\x01" and v is None for k, v in c.log)   # an offset tombstone
    c.advance(CHECK)                          # an Empty group without offsets is deleted
    assert c.state("g") == "Dead" and c.describe("g")[0].group_state == "Dead"
    assert c.log[-1][1] is None and c.log[-1][0][:2] == b"\x00\x02"


def test_subscribed_group_keeps_subscribed_topics_only():
    c = Ctx()
    gen, (a,), leader = c.stable_group("g", 1, session=1800000)
    c.commit("g", {("t", 0): 5, ("other", 0): 6}, member_id=a, generation=gen)
    for _ in range(int((RETENTION + CHECK) / (25 * 60000)) + 1):
        c.advance(25 * 60000)
        c.heartbeat("g", a, gen)
    assert c.state("g") == "Stable"
    assert c.fetched("g", {"t": [0], "other": [0]}) == {("t", 0): (5, 0), ("other", 0): (-1, 0)}


def test_simple_group_offsets_expire_from_commit_time_and_retention_time_v2():
    c = Ctx()
    c.commit("s", {("t", 0): 1})
    c.commit("s", {("t", 1): 2}, version=2, retention=DAY)      # explicit retention: value v1
    key, value = c.log[-1]
    assert value[:2] == b"\x00\x01"
    c.advance(DAY + CHECK)
    assert c.fetched("s", {"t": [0, 1]}) == {("t", 0): (1, 0), ("t", 1): (-1, 0)}
    c.advance(RETENTION)
    assert c.fetched("s", {"t": [0]}) == {("t", 0): (-1, 0)}
    c.advance(CHECK)
    assert c.state("s") == "Dead"


# -- DeleteGroups / OffsetDelete ------------------------------------------------------------------
def test_delete_groups_only_empty_groups_and_tombstones():
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2)
    c.commit("g", {("t", 0): 5}, member_id=a, generation=gen)
    c.commit("e", {("t", 0): 1, ("u", 3): 2})
    n = len(c.log)
    assert c.delete_groups("g", "e", "nope") == {"g": E.NON_EMPTY_GROUP, "e": 0, "nope": E.GROUP_ID_NOT_FOUND}
    tail = c.log[n:]
    assert all(v is None for _, v in tail) and len(tail) == 3 and tail[-1][0][:2] == b"\x00\x02"
    assert c.state("e") == "Dead" and c.fetched("e") == {}
    c.commit("e", {("t", 0): 1})
    c.fail_writes = E.KAFKA_STORAGE_ERROR
    assert c.delete_groups("e") == {"e": E.NOT_COORDINATOR}
    c.fail_writes = None
    assert c.state("e") == "Empty"


def test_offset_delete_refuses_subscribed_topics():
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2)
    c.commit("g", {("t", 0): 5, ("x", 0): 6}, member_id=a, generation=gen)
    r = c.delete_offsets("g", {"t": [0], "x": [0, 1]})
    assert r.error_code == 0
    errs = {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
    assert errs == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("x", 0): 0, ("x", 1): 0}
    assert c.fetched("g", {"t": [0], "x": [0]}) == {("t", 0): (5, 0), ("x", 0): (-1, 0)}
    assert c.delete_offsets("nope", {"t": [0]}).error_code == E.GROUP_ID_NOT_FOUND
    assert c.delete_offsets("", {"t": [0]}).error_code == E.INVALID_GROUP_ID


def test_offset_delete_non_consumer_group_must_be_empty():
    c = Ctx()
    gen, (a,), leader = c.stable_group("g", 1, protocol_type="connect")
    assert c.delete_offsets("g", {"t": [0]}).error_code == E.NON_EMPTY_GROUP
