"""Online migration between the classic and the consumer group protocol (KIP-848), on the fake
clock: the upgrade of a classic group by a ConsumerGroupHeartbeat, classic members inside a consumer
group (JoinGroup / SyncGroup / Heartbeat / LeaveGroup / OffsetCommit answered from the consumer
group), and the downgrade when the last consumer-protocol member leaves. Every operation is checked
by the harness: live durable state == a shard replayed from the log."""
import pytest

from kgroup.coordinator.consumer_group.member import MemberState
from kgroup.protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kgroup.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kgroup.protocol.messages.join_group import JoinGroupRequest

from .support import E, CgCtx, assignment, fresh_shard, protocols

P = JoinGroupRequest.JoinGroupRequestProtocol


def sub(topics, owned=None, version=1):
    """A ConsumerProtocolSubscription; ``owned``: {topic: [partitions]} (v1+: cooperative clients)."""
    S = ConsumerProtocolSubscription
    return S(topics=list(topics), owned_partitions=[S.TopicPartition(topic=t, partitions=list(p))
                                                    for t, p in (owned or {}).items()]).to_versioned_bytes(version)


def protos(topics, owned=None, names=("range",), version=1):
    return [P(name=n, metadata=sub(topics, owned, version)) for n in names]


def decoded(sync_response) -> dict:
    a, _ = ConsumerProtocolAssignment.from_versioned_bytes(sync_response.assignment)
    return {tp.topic: sorted(tp.partitions) for tp in a.assigned_partitions if tp.partitions}


def classic_join(c, gid, member_id="", topics=("t",), owned=None, names=("range",), session=10000,
                 rebalance=30000, instance_id=None, version=9):
    """A JoinGroup; a dynamic member's two-step join (KIP-394) when ``member_id`` is empty."""
    ps = protos(topics, owned, names)
    r = c.answer(c.join(gid, member_id, protos=ps, session=session, rebalance=rebalance,
                        instance_id=instance_id, version=version))
    if r is not None and r.error_code == E.MEMBER_ID_REQUIRED:
        r = c.answer(c.join(gid, r.member_id, protos=ps, session=session, rebalance=rebalance,
                            instance_id=instance_id, version=version))
    return r


def cg_join(c, gid, mid, topics, **kw):
    r = c.hb(gid, mid, 0, topics=topics, **kw)
    assert r.error_code == 0, r
    return r


def record_types(log_slice):
    return [(int.from_bytes(k[:2], "big"), v is None) for k, v in log_slice]


def classic_stable(c, gid, parts):
    """A classic Stable group whose leader assigns ``parts[i]`` of topic t to member i (eager
    range members). Returns (generation, member ids)."""
    tokens = [c.join_dynamic(gid) for _ in parts]
    while any(c.answer(t) is None for _, t in tokens):
        c.advance(c.config.initial_rebalance_delay_ms)
    members = [m for m, _ in tokens]
    first = c.answer(tokens[0][1])
    leader = first.leader
    for m in members:
        s = c.answer(c.sync(gid, m, first.generation_id, {x: assignment(t=p) for x, p in zip(members, parts)}
                            if m == leader else None))
        assert s.error_code == 0
    return first.generation_id, members


def upgraded(c, gid="g"):
    """A classic Stable group of two range members, m0 owning all four partitions of t, then a
    consumer-protocol member joins: returns (generation, classic member ids, the joiner's response)."""
    gen, members = classic_stable(c, gid, [[0, 1, 2, 3], []])
    n = len(c.log)
    r = cg_join(c, gid, "c1", ["t"])
    types = record_types(c.log[n:])
    # the classic tombstone, then Kafka's createConsumerGroupRecords, then the joiner's records
    assert types[:9] == [(2, True), (5, False), (5, False), (3, False), (7, False), (7, False), (6, False),
                         (8, False), (8, False)]
    return gen, members, r


# == upgrade ==========================================================================================

def test_upgrade_converts_the_classic_group_with_its_assignment():
    c = CgCtx({"t": 4})
    gen, (m0, m1), r = upgraded(c)
    assert c.group("g") is None
    g = c.cg("g")
    assert g.classic_members == 2 and len(g.members) == 3
    for mid, owned in ((m0, {"t": [0, 1, 2, 3]}), (m1, {})):
        m = g.members[mid]
        assert m.classic_member_metadata[0] == 10000 and m.subscribed_topic_names == {"t"}
        assert m.member_epoch == gen and m.previous_member_epoch == gen and m.state is MemberState.STABLE
        assert c.names(m.assigned_partitions) == owned
    # the joiner is due partitions m0 still owns: it waits for them
    assert g.group_epoch == gen + 1 and r.member_epoch == gen + 1 and c.names(r) == {}
    assert g.members["c1"].state is MemberState.UNRELEASED_PARTITIONS
    c.owned_check("g")
    assert [x.group_type for x in c.list_groups().groups] == ["consumer"]


def test_upgraded_classic_members_rejoin_and_hand_over():
    c = CgCtx({"t": 4})
    gen, (m0, m1), r = upgraded(c)
    g = c.cg("g")
    target = {mid: c.names(g.target_assignment[mid]) for mid in (m0, m1, "c1")}
    assert sum(len(t.get("t", [])) for t in target.values()) == 4 and len(target[m0]["t"]) < 4
    # both classic members are behind the group epoch: rejoin
    assert c.heartbeat("g", m0, gen) == E.REBALANCE_IN_PROGRESS
    assert c.heartbeat("g", m1, gen) == E.REBALANCE_IN_PROGRESS
    # m1 rejoins first: what it is due is still m0's
    j1 = classic_join(c, "g", m1, version=9)
    assert j1.error_code == 0 and j1.generation_id == gen + 1 and j1.protocol_name == "range" and j1.leader == ""
    assert decoded(c.answer(c.sync("g", m1, j1.generation_id))) == {}
    assert c.heartbeat("g", m1, j1.generation_id) == E.NONE
    # m0, eager (a v0 subscription: it revoked everything before rejoining), gives up two at once
    j0 = c.answer(c.join("g", m0))
    assert j0.error_code == 0 and j0.generation_id == gen + 1
    assert decoded(c.answer(c.sync("g", m0, j0.generation_id))) == target[m0]
    c.owned_check("g")
    # the others now get the released partitions
    r = c.hb("g", "c1", r.member_epoch, owned={})
    assert r.error_code == 0 and c.names(r) == target["c1"]
    assert c.heartbeat("g", m1, j1.generation_id) == E.REBALANCE_IN_PROGRESS
    j1 = classic_join(c, "g", m1)
    assert decoded(c.answer(c.sync("g", m1, j1.generation_id))) == target[m1]
    assert c.heartbeat("g", m1, j1.generation_id) == E.NONE
    c.owned_check("g")
    assert c.cg("g").state.value == "Stable"


def test_upgrade_answers_parked_requests_rebalance_in_progress():
    c = CgCtx({"t": 2})
    gen, (m0, m1), _ = c.stable_group("g", 2)
    parked = c.join("g", m0, protos=protocols("range"))     # a member rejoins: PreparingRebalance
    assert c.answer(parked) is None and c.state("g") == "PreparingRebalance"
    cg_join(c, "g", "c1", ["t"])
    assert c.answer(parked).error_code == E.REBALANCE_IN_PROGRESS
    assert c.cg("g") is not None and c.group("g") is None


@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_upgrade_refused_by_policy(policy):
    c = CgCtx({"t": 2}, **{"group.consumer.migration.policy": policy})
    c.stable_group("g", 2)
    r = c.hb("g", "c1", 0, topics=["t"])
    assert r.error_code == E.GROUP_ID_NOT_FOUND and c.state("g") == "Stable" and c.cg("g") is None


def test_upgrade_refused_by_size_and_protocol_type_and_state():
    c = CgCtx({"t": 2}, **{"group.consumer.max.size": 1})
    c.stable_group("g", 2)
    assert c.hb("g", "c1", 0, topics=["t"]).error_code == E.GROUP_ID_NOT_FOUND
    c = CgCtx({"t": 2})
    c.stable_group("connect", 1, protocol_type="connect")
    assert c.hb("connect", "c1", 0, topics=["t"]).error_code == E.GROUP_ID_NOT_FOUND
    # a first rebalance still in flight has no protocol yet: its subscriptions cannot be read
    c.join_dynamic("new")
    assert c.state("new") == "PreparingRebalance"
    assert c.hb("new", "c1", 0, topics=["t"]).error_code == E.GROUP_ID_NOT_FOUND
    assert c.cg("new") is None and c.state("new") == "PreparingRebalance"


def test_upgrade_then_group_full_writes_nothing():
    c = CgCtx({"t": 2}, **{"group.consumer.max.size": 2})
    c.stable_group("g", 2)
    n = len(c.log)
    assert c.hb("g", "c1", 0, topics=["t"]).error_code == E.GROUP_MAX_SIZE_REACHED
    assert len(c.log) == n and c.state("g") == "Stable"
    c.advance(9000)                 # the classic sessions (10 s) are still the classic group's
    assert c.state("g") == "Stable"


def test_upgraded_group_replays_after_a_restart():
    c = CgCtx({"t": 4})
    upgraded(c)
    other = fresh_shard(c.shard, c.log, c.now)
    assert other.group_metadata_manager.classic_group("g") is None
    assert other.consumer_group_manager.consumer_group("g").classic_members == 2


# == classic members inside a consumer group ==========================================================

def test_classic_member_joins_a_consumer_group_and_waits_for_its_partitions():
    c = CgCtx({"a": 4})
    r1 = cg_join(c, "g", "m1", ["a"])
    first = c.answer(c.join("g", protos=protos(["a"], names=("range", "roundrobin"))))
    assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id
    mid = first.member_id
    j = classic_join(c, "g", mid, topics=("a",), names=("range", "roundrobin"))
    assert j.error_code == 0 and j.member_id == mid and j.protocol_type == "consumer" and j.protocol_name == "range"
    g = c.cg("g")
    assert j.generation_id == g.group_epoch == 2 and g.classic_members == 1
    assert g.members[mid].state is MemberState.UNRELEASED_PARTITIONS
    s = c.answer(c.sync("g", mid, j.generation_id))
    assert s.error_code == 0 and decoded(s) == {}
    assert c.heartbeat("g", mid, j.generation_id) == E.NONE       # still waiting for m1
    # m1 revokes half of its partitions
    r = c.hb("g", "m1", r1.member_epoch, owned={"a": [0, 1, 2, 3]})
    keep = c.names(r)["a"]
    assert len(keep) == 2
    r = c.hb("g", "m1", r.member_epoch, owned={"a": keep})
    assert r.member_epoch == 2
    c.owned_check("g")
    # the partitions are free now: the classic member is told to rejoin to get them
    assert c.heartbeat("g", mid, j.generation_id) == E.REBALANCE_IN_PROGRESS
    j = classic_join(c, "g", mid, topics=("a",), names=("range", "roundrobin"))
    s = c.answer(c.sync("g", mid, j.generation_id))
    assert sorted(decoded(s)["a"] + keep) == [0, 1, 2, 3]
    assert c.heartbeat("g", mid, j.generation_id) == E.NONE
    assert c.cg("g").state.value == "Stable"
    c.owned_check("g")


def test_cooperative_classic_member_revokes_before_anyone_gets_its_partitions():
    c = CgCtx({"a": 4})
    r1 = cg_join(c, "g", "m1", ["a"])
    # a cooperative classic member (owned partitions in its subscription) joins and gets half
    j = classic_join(c, "g", topics=("a",), names=("cooperative-sticky",))
    mid = j.member_id
    r1 = c.hb("g", "m1", r1.member_epoch, owned={"a": [0, 1, 2, 3]})
    kept = c.names(r1)["a"]
    r1 = c.hb("g", "m1", r1.member_epoch, owned={"a": kept})
    assert c.heartbeat("g", mid, j.generation_id) == E.REBALANCE_IN_PROGRESS
    j = classic_join(c, "g", mid, topics=("a",), names=("cooperative-sticky",))
    mine = decoded(c.answer(c.sync("g", mid, j.generation_id, protocol_name="cooperative-sticky")))["a"]
    assert sorted(mine + kept) == [0, 1, 2, 3]
    # a consumer-protocol member joins: the classic member must give up a partition first
    r2 = cg_join(c, "g", "m2", ["a"])
    epoch = c.cg("g").group_epoch
    assert c.heartbeat("g", mid, j.generation_id) == E.REBALANCE_IN_PROGRESS
    j2 = classic_join(c, "g", mid, topics=("a",), owned={"a": mine}, names=("cooperative-sticky",))
    m = c.cg("g").members[mid]
    assert m.state is MemberState.UNREVOKED_PARTITIONS and j2.generation_id == j.generation_id
    # revoking: the sync is not refused
    s = c.answer(c.sync("g", mid, j2.generation_id, protocol_name="cooperative-sticky"))
    still = decoded(s).get("a", [])
    assert len(still) < len(mine)
    # m2 does not get the partition the classic member still holds
    r2 = c.hb("g", "m2", r2.member_epoch, owned={})
    got = set(c.names(r2).get("a", []) if r2.assignment is not None else [])
    assert not got & set(mine)
    c.owned_check("g")
    assert c.heartbeat("g", mid, j2.generation_id) == E.REBALANCE_IN_PROGRESS
    j3 = classic_join(c, "g", mid, topics=("a",), owned={"a": still}, names=("cooperative-sticky",))
    assert j3.generation_id == epoch and c.cg("g").members[mid].state is MemberState.STABLE
    r1 = c.hb("g", "m1", r1.member_epoch, owned={"a": kept})
    if r1.assignment is not None:
        kept = c.names(r1)["a"]
        r1 = c.hb("g", "m1", r1.member_epoch, owned={"a": kept})
    r2 = c.hb("g", "m2", r2.member_epoch, owned={"a": sorted(got)})
    assert set(c.names(r2)["a"]) & set(mine)          # now it has what the classic member revoked
    c.owned_check("g")


def test_classic_member_errors():
    c = CgCtx({"a": 2})
    cg_join(c, "g", "m1", ["a"])
    j = classic_join(c, "g", topics=("a",))
    mid = j.member_id
    assert c.heartbeat("g", "nobody", j.generation_id) == E.UNKNOWN_MEMBER_ID
    assert c.heartbeat("g", "m1", 1) == E.UNKNOWN_MEMBER_ID        # not a classic member
    assert c.heartbeat("g", mid, j.generation_id + 5) == E.ILLEGAL_GENERATION
    assert c.answer(c.sync("g", mid, j.generation_id, protocol_name="roundrobin")).error_code == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert c.answer(c.sync("g", mid, j.generation_id, protocol_type="connect")).error_code == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert c.answer(c.sync("g", mid, 99)).error_code == E.ILLEGAL_GENERATION
    # a protocol no classic member supports, and another protocol type
    r = c.answer(c.join("g", mid, protos=protos(["a"], names=("roundrobin",))))
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    r = c.answer(c.join("g", mid, protos=protos(["a"]), protocol_type="connect"))
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # a static member known under another member id is fenced
    classic_join(c, "g", topics=("a",), instance_id="i1")
    r = c.answer(c.join("g", "someone-else", protos=protos(["a"]), instance_id="i1"))
    assert r.error_code == E.FENCED_INSTANCE_ID


def test_classic_member_behind_the_group_epoch_must_rejoin_before_syncing():
    c = CgCtx({"a": 2})
    cg_join(c, "g", "m1", ["a"])
    j = classic_join(c, "g", topics=("a",))
    cg_join(c, "g", "m2", ["a"])                                   # bumps the group epoch
    s = c.answer(c.sync("g", j.member_id, j.generation_id))
    assert s.error_code == E.REBALANCE_IN_PROGRESS


def test_classic_member_session_is_its_own():
    c = CgCtx({"a": 2})
    cg_join(c, "g", "m1", ["a"])
    j = classic_join(c, "g", topics=("a",), session=8000, rebalance=60000)
    c.answer(c.sync("g", j.member_id, j.generation_id))
    c.hb("g", "m1", 2, owned={})
    c.advance(7000)
    assert c.heartbeat("g", j.member_id, j.generation_id) in (E.NONE, E.REBALANCE_IN_PROGRESS)
    c.advance(7000)
    c.hb("g", "m1", c.cg("g").members["m1"].member_epoch, owned={"a": [0, 1]})
    assert j.member_id in c.cg("g").members
    c.advance(1001)
    assert j.member_id not in c.cg("g").members                    # 8 s without a heartbeat


def test_classic_member_that_does_not_sync_in_its_rebalance_timeout_is_fenced():
    c = CgCtx({"a": 2})
    cg_join(c, "g", "m1", ["a"])
    j = classic_join(c, "g", topics=("a",), session=30000, rebalance=5000)
    c.advance(5001)
    assert j.member_id not in c.cg("g").members


def test_classic_member_that_does_not_rejoin_in_its_rebalance_timeout_is_fenced():
    c = CgCtx({"a": 2})
    r = cg_join(c, "g", "m1", ["a"])
    j = classic_join(c, "g", topics=("a",), session=30000, rebalance=5000)
    c.answer(c.sync("g", j.member_id, j.generation_id))
    cg_join(c, "g", "m2", ["a"])                                   # a new epoch
    c.hb("g", "m1", r.member_epoch, owned={"a": [0, 1]})
    assert c.heartbeat("g", j.member_id, j.generation_id) == E.REBALANCE_IN_PROGRESS
    c.advance(3000)
    assert c.heartbeat("g", j.member_id, j.generation_id) == E.REBALANCE_IN_PROGRESS   # the deadline stays
    c.advance(2001)
    assert j.member_id not in c.cg("g").members


def test_classic_leave_group_from_a_consumer_group():
    c = CgCtx({"a": 2})
    cg_join(c, "g", "m1", ["a"])
    j = classic_join(c, "g", topics=("a",))
    s = classic_join(c, "g", topics=("a",), instance_id="i1")
    epoch = c.cg("g").group_epoch
    out = c.leave("g", j.member_id, ("", "i1"), "nobody", "m1")
    assert [m.error_code for m in out.members] == [E.NONE, E.NONE, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]
    assert out.members[1].member_id == s.member_id
    g = c.cg("g")
    assert set(g.members) == {"m1"} and g.group_epoch == epoch + 1 and g.classic_members == 0


def test_static_classic_member_rejoins_with_a_new_member_id_and_keeps_its_partitions():
    c = CgCtx({"a": 2})
    r = cg_join(c, "g", "m1", ["a"])
    j = classic_join(c, "g", topics=("a",), instance_id="i1")
    r = c.hb("g", "m1", r.member_epoch, owned={"a": [0, 1]})
    c.hb("g", "m1", r.member_epoch, owned=c.names(r))
    j = classic_join(c, "g", j.member_id, topics=("a",), instance_id="i1")
    mine = decoded(c.answer(c.sync("g", j.member_id, j.generation_id, instance_id="i1")))
    assert len(mine["a"]) == 1
    epoch = c.cg("g").group_epoch
    # the process restarts: same instance id, no member id
    j2 = classic_join(c, "g", "", topics=("a",), instance_id="i1")
    assert j2.error_code == 0 and j2.member_id != j.member_id
    g = c.cg("g")
    assert j.member_id not in g.members and g.group_epoch == epoch
    assert c.names(g.members[j2.member_id].assigned_partitions) == mine
    assert decoded(c.answer(c.sync("g", j2.member_id, j2.generation_id, instance_id="i1"))) == mine
    assert c.heartbeat("g", j.member_id, j.generation_id, instance_id="i1") == E.FENCED_INSTANCE_ID
    c.owned_check("g")


def test_offset_commit_from_a_classic_member_checks_its_generation():
    c = CgCtx({"a": 2})
    cg_join(c, "g", "m1", ["a"])
    j = classic_join(c, "g", topics=("a",))
    ok = c.commit("g", {("a", 0): 5}, member_id=j.member_id, generation=j.generation_id, version=8)
    assert ok == {("a", 0): E.NONE}
    bad = c.commit("g", {("a", 0): 6}, member_id=j.member_id, generation=j.generation_id - 1, version=8)
    assert bad == {("a", 0): E.ILLEGAL_GENERATION}
    # a consumer-protocol member must use v9
    assert c.commit("g", {("a", 0): 6}, member_id="m1", generation=2, version=8) == {("a", 0): E.UNSUPPORTED_VERSION}


def test_describe_a_mixed_group():
    c = CgCtx({"a": 2})
    cg_join(c, "g", "m1", ["a"])
    j = classic_join(c, "g", topics=("a",))
    token = c.token()
    c.run(c.shard.handle_consumer_group_describe(ConsumerGroupDescribeRequest(group_ids=["g"]), 0, c.now, token))
    (g,) = c.answer(token).groups
    assert g.error_code == 0 and {m.member_id for m in g.members} == {"m1", j.member_id}
    classic = next(m for m in g.members if m.member_id == j.member_id)
    assert classic.subscribed_topic_names == ["a"] and classic.member_epoch == j.generation_id
    # DescribeGroups shows a consumer group as Dead (Kafka 4.0's describeGroups looks up classic groups)
    (d,) = c.describe("g")
    assert d.group_state == "Dead" and d.members == []
    assert [(x.group_id, x.group_type) for x in c.list_groups().groups] == [("g", "consumer")]


# == downgrade ========================================================================================

def mixed(c):
    """A consumer group with one consumer-protocol member (m1) and one classic member."""
    r = cg_join(c, "g", "m1", ["a"])
    j = classic_join(c, "g", topics=("a",), names=("range", "roundrobin"))
    r = c.hb("g", "m1", r.member_epoch, owned={"a": [0, 1]})
    r = c.hb("g", "m1", r.member_epoch, owned=c.names(r))
    j = classic_join(c, "g", j.member_id, topics=("a",), names=("range", "roundrobin"))
    mine = decoded(c.answer(c.sync("g", j.member_id, j.generation_id)))
    return r, j, mine


def test_downgrade_when_the_last_consumer_member_leaves():
    c = CgCtx({"a": 2})
    r, j, mine = mixed(c)
    epoch = c.cg("g").group_epoch
    n = len(c.log)
    assert c.hb("g", "m1", -1).error_code == 0
    types = record_types(c.log[n:])
    assert types[-1] == (2, False) and all(tomb for _, tomb in types[:-1])
    assert [t for t, _ in types[:-1]] == [8, 8, 7, 7, 6, 5, 5, 4, 3]
    assert c.cg("g") is None
    group = c.group("g")
    assert group.state.value == "PreparingRebalance" and group.generation_id == epoch
    assert group.protocol_name == "range" and set(group.members) == {j.member_id}
    assert group.members[j.member_id].protocol_names() == {"range", "roundrobin"}
    # the written classic group holds the member's target assignment
    rec = c.shard.group_metadata_manager.classic_group("g").record
    a, _ = ConsumerProtocolAssignment.from_versioned_bytes(rec.members[0].assignment)
    assert {tp.topic: sorted(tp.partitions) for tp in a.assigned_partitions} == mine
    # the classic member rejoins the classic group
    assert j.generation_id == epoch
    assert c.heartbeat("g", j.member_id, epoch - 1) == E.ILLEGAL_GENERATION
    assert c.heartbeat("g", j.member_id, epoch) == E.REBALANCE_IN_PROGRESS
    t = c.join("g", j.member_id, protos=protos(["a"], names=("range", "roundrobin")))
    jr = c.answer(t)
    assert jr.error_code == 0 and jr.generation_id == epoch + 1 and jr.leader == j.member_id
    s = c.answer(c.sync("g", j.member_id, jr.generation_id, {j.member_id: assignment(a=[0, 1])}))
    assert s.error_code == 0 and c.state("g") == "Stable"


def test_downgrade_when_the_last_consumer_member_session_expires():
    c = CgCtx({"a": 2})
    r, j, mine = mixed(c)
    for _ in range(5):
        c.advance(9000)
        assert c.heartbeat("g", j.member_id, j.generation_id) in (E.NONE, E.REBALANCE_IN_PROGRESS) or \
            c.group("g") is not None
    assert c.cg("g") is None and c.group("g") is not None


def test_no_downgrade_without_policy_or_with_consumer_members_left():
    c = CgCtx({"a": 2}, **{"group.consumer.migration.policy": "upgrade"})
    mixed(c)
    c.hb("g", "m1", -1)
    assert c.group("g") is None and set(c.cg("g").members) != set()
    c = CgCtx({"a": 2})
    cg_join(c, "g", "m1", ["a"])
    cg_join(c, "g", "m2", ["a"])
    classic_join(c, "g", topics=("a",))
    c.hb("g", "m1", -1)
    assert c.cg("g") is not None and c.group("g") is None
    # the last member leaving leaves an empty consumer group, not a classic one
    c = CgCtx({"a": 2})
    cg_join(c, "g", "m1", ["a"])
    c.hb("g", "m1", -1)
    assert c.cg("g") is not None and c.group("g") is None


def test_rolling_upgrade_and_back():
    """Classic -> consumer one member at a time, then back, all on one group."""
    c = CgCtx({"t": 4})
    gen, (m0, m1), r = upgraded(c)
    epochs = {"c1": r.member_epoch}
    # m0 (classic) leaves; m1 rejoins to catch up
    assert c.leave("g", m0).members[0].error_code == E.NONE
    j = classic_join(c, "g", m1)
    c.answer(c.sync("g", m1, j.generation_id))
    r = c.hb("g", "c1", epochs["c1"], owned={})
    epochs["c1"] = r.member_epoch
    # m1 leaves too: the group is all consumer protocol
    assert c.leave("g", m1).members[0].error_code == E.NONE
    assert c.cg("g").classic_members == 0
    cg_join(c, "g", "c2", ["t"])
    c.owned_check("g")
    # back: c1 leaves, a classic member joins; c2 leaves last and the group is classic again
    c.hb("g", "c1", -1)
    j = classic_join(c, "g", topics=("t",))
    assert c.hb("g", "c2", -1).error_code == 0
    assert c.cg("g") is None and c.state("g") == "PreparingRebalance"
    assert set(c.group("g").members) == {j.member_id}


def test_downgrade_when_a_classic_member_takes_over_the_last_consumer_static_member():
    c = CgCtx({"a": 2})
    r = cg_join(c, "g", "s1", ["a"], instance_id="i1")
    j = classic_join(c, "g", topics=("a",))
    r = c.hb("g", "s1", r.member_epoch, owned={"a": [0, 1]}, instance_id="i1")
    r = c.hb("g", "s1", r.member_epoch, owned=c.names(r), instance_id="i1")
    j = classic_join(c, "g", j.member_id, topics=("a",))
    mine = decoded(c.answer(c.sync("g", j.member_id, j.generation_id)))
    epoch = c.cg("g").group_epoch
    theirs = c.names(c.cg("g").members["s1"].assigned_partitions)
    assert theirs and theirs != mine
    assert c.hb("g", "s1", -2, instance_id="i1").error_code == 0       # the process restarts...
    n = len(c.log)
    j2 = classic_join(c, "g", "", topics=("a",), instance_id="i1")      # ...with the classic protocol
    assert j2.error_code == 0 and j2.member_id != "s1"
    assert record_types(c.log[-1:]) == [(2, False)] and (3, True) in record_types(c.log[n:])
    assert c.cg("g") is None
    group = c.group("g")
    assert group.state.value == "Stable" and group.generation_id == epoch
    assert set(group.members) == {j.member_id, j2.member_id}
    assert group.static_member_id("i1") == j2.member_id
    # each classic member's SyncGroup now goes to the classic group: the joiner has s1's partitions
    s = c.answer(c.sync("g", j2.member_id, epoch, instance_id="i1"))
    assert s.error_code == 0 and decoded(s) == theirs
    s = c.answer(c.sync("g", j.member_id, epoch))
    assert s.error_code == 0 and decoded(s) == mine
    assert c.heartbeat("g", j2.member_id, epoch, instance_id="i1") == E.NONE


def test_upgrade_refused_when_a_subscription_does_not_decode():
    c = CgCtx({"t": 2})
    c.stable_group("g", 1, protos=[P(name="range", metadata=b"\x00")])
    r = c.hb("g", "c1", 0, topics=["t"])
    assert r.error_code == E.GROUP_ID_NOT_FOUND and "malformed" in r.error_message
    assert c.state("g") == "Stable" and c.cg("g") is None


def test_old_join_group_versions_inside_a_consumer_group():
    c = CgCtx({"a": 2})
    cg_join(c, "g", "m1", ["a"])
    # before v4 (KIP-394) the member id is given at once; LeaveGroup v0-2 answers at the top level
    j = c.answer(c.join("g", protos=protos(["a"]), version=3))
    assert j.error_code == 0 and j.member_id and j.generation_id == 2
    assert c.leave("g", "nobody", version=1).error_code == E.UNKNOWN_MEMBER_ID
    assert c.leave("g", j.member_id, version=1).error_code == E.NONE
    assert set(c.cg("g").members) == {"m1"}


def test_consumer_member_replaces_a_static_classic_member_without_unreleased_instance_id():
    """getOrMaybeSubscribeStaticConsumerGroupMember: the instance id of a classic-protocol member is
    taken over by a consumer-protocol join at once (no UNRELEASED_INSTANCE_ID, the classic member
    cannot leave with -2); the new member keeps its partitions and is a consumer-protocol member."""
    from .test_kip848_kafka43 import written
    from kgroup.coordinator.consumer_group import consumer_group_records as rec
    c = CgCtx({"a": 2})
    r = cg_join(c, "g", "m1", ["a"])
    j = classic_join(c, "g", topics=("a",), instance_id="i1")
    r = c.hb("g", "m1", r.member_epoch, owned={"a": [0, 1]})
    c.hb("g", "m1", r.member_epoch, owned=c.names(r))
    j = classic_join(c, "g", j.member_id, topics=("a",), instance_id="i1")
    mine = decoded(c.answer(c.sync("g", j.member_id, j.generation_id, instance_id="i1")))
    since = len(c.log)
    r = c.hb("g", "m9", 0, topics=["a"], instance_id="i1")
    assert r.error_code == 0
    g = c.cg("g")
    assert j.member_id not in g.members and g.static_members["i1"] == "m9"
    assert g.members["m9"].classic_member_metadata is None and c.names(g.members["m9"].assigned_partitions) == mine
    kinds = [(t, m) for t, m, _ in written(c, since)]
    assert kinds[:6] == [(rec.CURRENT_MEMBER_ASSIGNMENT, j.member_id), (rec.TARGET_ASSIGNMENT_MEMBER, j.member_id),
                         (rec.MEMBER_METADATA, j.member_id), (rec.MEMBER_METADATA, "m9"),
                         (rec.TARGET_ASSIGNMENT_MEMBER, "m9"), (rec.CURRENT_MEMBER_ASSIGNMENT, "m9")]
    c.owned_check("g")
