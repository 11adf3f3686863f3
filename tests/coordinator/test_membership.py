"""Membership and rebalance of classic groups: the delayed initial rebalance, KIP-394 member ids,
leader election, protocol consistency, the join and sync phases, heartbeats and session expiry,
LeaveGroup, static membership (KIP-345), group.max.size and request validation. Each is driven
by a fake clock; every operation is followed by the replay-consistency check (see support.py)."""
from __future__ import annotations

import re

from kgroup.coordinator.timer import heartbeat_key, pending_key
from tests.coordinator.support import E, Ctx, assignment, protocols, subscription

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


# -- delayed initial rebalance --------------------------------------------------------------
def test_delay_initial_rebalance_by_group_initial_rebalance_delay_on_empty_group():
    c = Ctx()
    mid, tok = c.join_dynamic("g")
    assert c.state("g") == "PreparingRebalance"
    c.advance(2999)
    assert c.answer(tok) is None
    c.advance(1)
    r = c.answer(tok)
    assert r.error_code == 0 and r.generation_id == 1 and r.leader == mid
    assert c.state("g") == "CompletingRebalance"


def test_reset_rebalance_delay_when_new_member_joins_group_during_initial_rebalance():
    c = Ctx()
    _, t1 = c.join_dynamic("g", rebalance=9000)
    c.advance(2999)
    _, t2 = c.join_dynamic("g", rebalance=9000)     # re-arms the delay
    c.advance(1)                                   # t=3000: extended to 6000
    assert c.answer(t1) is None and c.answer(t2) is None
    c.advance(2999)
    _, t3 = c.join_dynamic("g", rebalance=9000)    # t=5999
    c.advance(1)                                   # t=6000: extended to 9000 (the rebalance timeout)
    assert c.answer(t3) is None
    c.advance(2999)
    _, t4 = c.join_dynamic("g", rebalance=9000)    # t=8999: cannot extend past the rebalance timeout
    c.advance(1)                                   # t=9000
    answers = [c.answer(t) for t in (t1, t2, t3, t4)]
    assert all(a is not None and a.error_code == 0 and a.generation_id == 1 for a in answers)
    assert c.now == 9000


def test_delay_initial_rebalance_completes_at_delay_without_new_joiners():
    c = Ctx()
    _, t1 = c.join_dynamic("g", rebalance=60000)
    c.advance(3000)
    assert c.answer(t1).generation_id == 1


# -- KIP-394 member id required ---------------------------------------------------------------
def test_member_id_required_with_generated_client_id_uuid():
    c = Ctx()
    r = c.answer(c.join("g", client_id="my-app", version=4))
    assert r.error_code == E.MEMBER_ID_REQUIRED
    assert re.fullmatch(rf"my-app-{UUID}", r.member_id)
    assert c.group("g").is_pending_member(r.member_id)
    assert c.state("g") == "Empty"
    # Before v4 a new member is added directly.
    t = c.join("g3", version=3)
    assert c.answer(t) is None and len(c.group("g3").members) == 1


def test_heartbeat_expiration_should_remove_pending_member():
    c = Ctx()
    r = c.answer(c.join("g", session=10000))
    mid = r.member_id
    assert c.scheduler.deadline(pending_key("g", mid)) == 10000
    c.advance(9999)
    assert c.group("g").is_pending_member(mid)
    c.advance(1)
    assert not c.group("g").is_pending_member(mid)
    late = c.answer(c.join("g", mid))
    assert late.error_code == E.UNKNOWN_MEMBER_ID


def test_pending_member_rejoin_is_admitted_and_timer_replaced():
    c = Ctx()
    mid, tok = c.join_dynamic("g")
    assert not c.scheduler.deadline(pending_key("g", mid))
    assert heartbeat_key("g", mid) in c.scheduler
    assert mid in c.group("g").members


def test_new_member_join_expiration():
    """A new member parked in a long rebalance is expired after the new-member join timeout."""
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2, rebalance=600000, session=10000)
    c.leave("g", b)                                   # A is left alone, Stable -> Preparing
    assert c.state("g") == "PreparingRebalance"
    a_tok = c.join("g", a, rebalance=600000)          # A rejoins: completes at once (all joined)
    assert c.answer(a_tok).generation_id == gen + 1
    c.sync("g", a, gen + 1, {a: b""})
    new_id, new_tok = c.join_dynamic("g", rebalance=600000)   # new member: rebalance, A must rejoin
    assert c.state("g") == "PreparingRebalance"
    for _ in range(59):                                # A keeps its session but does not rejoin
        c.advance(5000)
        assert c.heartbeat("g", a, gen + 1) == E.REBALANCE_IN_PROGRESS
    c.advance(5000)                                    # t = +300000: the new member's join expires
    assert c.answer(new_tok).error_code == E.UNKNOWN_MEMBER_ID
    assert new_id not in c.group("g").members
    assert c.state("g") == "PreparingRebalance"


# -- leader election -------------------------------------------------------------------------
def test_first_joiner_is_leader_and_only_leader_gets_members():
    c = Ctx()
    ids = [c.join_dynamic("g") for _ in range(3)]
    c.advance(3000)
    c.advance(3000)
    c.advance(3000)
    resps = [c.answer(t) for _, t in ids]
    leader = ids[0][0]
    assert {r.leader for r in resps} == {leader}
    for (mid, _), r in zip(ids, resps):
        if mid == leader:
            assert {m.member_id for m in r.members} == {m for m, _ in ids}
            assert all(m.metadata == subscription("t") for m in r.members)
        else:
            assert r.members == []


def test_leader_leaves_another_member_becomes_leader():
    c = Ctx()
    gen, members, leader = c.stable_group("g", 3)
    c.leave("g", leader)
    rest = [m for m in members if m != leader]
    toks = [c.join("g", m) for m in rest]
    resps = [c.answer(t) for t in toks]
    assert all(r is not None and r.generation_id == gen + 1 for r in resps)
    new_leader = resps[0].leader
    assert new_leader in rest and new_leader == rest[0]
    for m, r in zip(rest, resps):
        assert (r.members != []) == (m == new_leader)


# -- protocol consistency --------------------------------------------------------------------
def test_join_group_inconsistent_protocol_type_and_empty_protocols():
    c = Ctx()
    assert c.answer(c.join("g", protocol_type="")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert c.answer(c.join("g", protos=[])).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    c.stable_group("h", 1)
    assert c.answer(c.join("h", protocol_type="connect")).error_code == E.INCONSISTENT_GROUP_PROTOCOL


def test_join_group_inconsistent_group_protocol():
    c = Ctx()
    c.stable_group("g", 2, protos=protocols("range", "roundrobin"))
    bad = c.answer(c.join("g", protos=protocols("sticky")))
    assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL and bad.member_id == ""
    ok = c.answer(c.join("g", protos=protocols("sticky", "roundrobin")))
    assert ok.error_code == E.MEMBER_ID_REQUIRED


# -- join phase completion --------------------------------------------------------------------
def test_join_completes_when_all_known_members_rejoined():
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2)
    ta = c.join("g", a, protos=protocols("range", topics=("t", "u")))   # changed metadata: rebalance
    assert c.answer(ta) is None
    tb = c.join("g", b)
    assert c.answer(ta).generation_id == c.answer(tb).generation_id == gen + 1


def test_complete_join_remove_not_yet_rejoined_dynamic_members():
    c = Ctx()
    gen, (a, b, d), leader = c.stable_group("g", 3, session=60000, rebalance=20000)
    ta = c.join("g", a, session=60000, rebalance=20000)     # the leader forces a rebalance
    tb = c.join("g", b, session=60000, rebalance=20000)
    c.advance(19999)
    assert c.answer(ta) is None
    c.advance(1)
    ra, rb = c.answer(ta), c.answer(tb)
    assert ra.generation_id == rb.generation_id == gen + 1
    assert set(c.group("g").members) == {a, b}
    assert {m.member_id for m in ra.members} == {a, b}


def test_static_member_that_did_not_rejoin_is_kept():
    c = Ctx()
    ts = c.join("g", instance_id="static-1", session=60000, rebalance=20000)
    mid_d, td = c.join_dynamic("g", session=60000, rebalance=20000)
    c.advance(3000)
    c.advance(3000)
    s_id = c.answer(ts).member_id
    gen = c.answer(ts).generation_id
    leader = c.answer(ts).leader
    c.sync("g", s_id, gen, {s_id: b"a", mid_d: b"b"}) if leader == s_id else None
    c.sync("g", mid_d, gen, {s_id: b"a", mid_d: b"b"} if leader == mid_d else None)
    if leader != s_id:
        c.sync("g", s_id, gen)
    # Only the dynamic member rejoins (new metadata forces the rebalance).
    t = c.join("g", mid_d, session=60000, rebalance=20000, protos=protocols("range", topics=("u",)))
    c.advance(19999)
    assert c.answer(t) is None
    c.advance(1)
    r = c.answer(t)
    assert r.generation_id == gen + 1 and set(c.group("g").members) == {s_id, mid_d}
    assert r.leader == mid_d        # the static leader did not rejoin: a joined member leads


# -- SyncGroup ---------------------------------------------------------------------------------
def _completing_group(c, n=2, **kw):
    toks = [c.join_dynamic("g", **kw) for _ in range(n)]
    while any(c.answer(t) is None for _, t in toks):
        c.advance(3000)
    r0 = c.answer(toks[0][1])
    return r0.generation_id, [m for m, _ in toks], r0.leader


def test_leader_assignment_written_before_anyone_is_answered():
    c = Ctx()
    gen, (a, b), leader = _completing_group(c)
    follower = b if leader == a else a
    tf = c.sync("g", follower, gen)
    assert c.answer(tf) is None
    from kgroup.protocol.messages.sync_group import SyncGroupRequest
    A = SyncGroupRequest.SyncGroupRequestAssignment
    req = SyncGroupRequest(group_id="g", generation_id=gen, member_id=leader, protocol_type="consumer",
                           protocol_name="range", assignments=[A(member_id=a, assignment=b"A"),
                                                               A(member_id=b, assignment=b"B")])
    res = c.shard.handle_sync_group(req, 5, c.now, "leader-sync")
    assert res.responses == [] and len(res.records) == 1 and res.records[0].key[:2] == b"\x00\x02"
    assert c.state("g") == "CompletingRebalance"
    c.run(res)
    assert c.answer("leader-sync").assignment == (b"A" if leader == a else b"B")
    assert c.answer(tf).assignment == (b"B" if leader == a else b"A")
    assert c.state("g") == "Stable"


def test_leader_assignment_write_failure_answers_everyone_with_the_mapped_error():
    c = Ctx()
    gen, (a, b), leader = _completing_group(c)
    follower = b if leader == a else a
    tf = c.sync("g", follower, gen)
    c.fail_writes = E.REQUEST_TIMED_OUT
    tl = c.sync("g", leader, gen, {a: b"A", b: b"B"})
    assert c.answer(tl).error_code == E.COORDINATOR_NOT_AVAILABLE
    assert c.answer(tf).error_code == E.COORDINATOR_NOT_AVAILABLE
    assert c.state("g") == "PreparingRebalance"
    assert c.shard.durable_state()["groups"]["g"]["generation"] == 0   # nothing durable changed
    c.fail_writes = None


def test_storage_error_maps_to_not_coordinator():
    c = Ctx()
    gen, (a, b), leader = _completing_group(c)
    c.fail_writes = E.KAFKA_STORAGE_ERROR
    assert c.answer(c.sync("g", leader, gen, {a: b"A"})).error_code == E.NOT_COORDINATOR


def test_rebalance_times_out_when_sync_request_is_not_received_from_followers():
    c = Ctx()
    gen, (a, b), leader = _completing_group(c, rebalance=20000, session=60000)
    follower = b if leader == a else a
    c.sync("g", leader, gen, {a: b"A", b: b"B"})
    assert c.state("g") == "Stable"
    c.advance(20000)                              # the sync timer (rebalance timeout) fires
    assert follower not in c.group("g").members
    assert c.state("g") == "PreparingRebalance"


def test_leader_failure_in_sync_group():
    c = Ctx()
    gen, (a, b, d), leader = _completing_group(c, 3, session=10000)
    followers = [m for m in (a, b, d) if m != leader]
    toks = [c.sync("g", m, gen) for m in followers]
    c.advance(10000)                              # the leader never syncs nor heartbeats
    assert leader not in c.group("g").members
    assert all(c.answer(t).error_code == E.REBALANCE_IN_PROGRESS for t in toks)
    assert c.state("g") == "PreparingRebalance"


def test_sync_group_errors():
    c = Ctx()
    assert c.answer(c.sync("nope", "m", 1)).error_code == E.UNKNOWN_MEMBER_ID
    gen, (a, b), leader = c.stable_group("g")
    assert c.answer(c.sync("g", "who", gen)).error_code == E.UNKNOWN_MEMBER_ID
    assert c.answer(c.sync("g", a, gen + 7)).error_code == E.ILLEGAL_GENERATION
    assert c.answer(c.sync("g", a, gen, protocol_name="rr")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert c.answer(c.sync("g", a, gen, protocol_name=None)).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert c.answer(c.sync("g", a, gen, version=4, protocol_name=None)).error_code == 0
    c.join("g", leader)                         # leader rejoin -> PreparingRebalance
    assert c.answer(c.sync("g", a, gen)).error_code == E.REBALANCE_IN_PROGRESS


# -- Heartbeat ----------------------------------------------------------------------------------
def test_heartbeat_state_rules():
    c = Ctx()
    gen, (a, b), leader = _completing_group(c)
    assert c.heartbeat("g", a, gen) == E.NONE                   # CompletingRebalance
    assert c.heartbeat("g", a, gen - 1) == E.ILLEGAL_GENERATION
    assert c.heartbeat("g", "ghost", gen) == E.UNKNOWN_MEMBER_ID
    assert c.heartbeat("nope", a, gen) == E.UNKNOWN_MEMBER_ID
    c.sync("g", leader, gen, {a: b"A", b: b"B"})
    assert c.heartbeat("g", b, gen) == E.NONE                   # Stable
    c.join("g", leader)
    assert c.heartbeat("g", a, gen) == E.REBALANCE_IN_PROGRESS  # PreparingRebalance
    c.group("g").transition_to(c.group("g").state.DEAD, c.now)
    assert c.heartbeat("g", a, gen) == E.COORDINATOR_NOT_AVAILABLE


# -- session expiry -----------------------------------------------------------------------------
def test_session_timeout_expiration():
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2, session=10000)
    for _ in range(2):
        c.advance(4000)
        assert c.heartbeat("g", a, gen) == E.NONE
    assert b in c.group("g").members
    c.advance(2000)
    assert b not in c.group("g").members           # b stopped: removed at t0 + 10000
    assert c.state("g") == "PreparingRebalance"
    assert c.heartbeat("g", a, gen) == E.REBALANCE_IN_PROGRESS
    r = c.answer(c.join("g", a, session=10000))
    assert r.generation_id == gen + 1 and [m.member_id for m in r.members] == [a]


# -- LeaveGroup ---------------------------------------------------------------------------------
def test_leave_group_batch_with_per_member_errors():
    c = Ctx()
    gen, (a, b, d), leader = c.stable_group("g", 3)
    r = c.leave("g", a, "ghost", (b, None), version=5)
    assert r.error_code == 0
    assert [(m.member_id, m.error_code) for m in r.members] == [(a, 0), ("ghost", E.UNKNOWN_MEMBER_ID), (b, 0)]
    assert c.state("g") == "PreparingRebalance"
    assert set(c.group("g").members) == {d}


def test_leave_group_old_versions_and_unknown_group():
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2)
    assert c.leave("g", "ghost", version=0).error_code == E.UNKNOWN_MEMBER_ID
    assert c.leave("g", a, version=2).error_code == 0
    r = c.leave("nope", "x", version=3)
    assert r.error_code == 0 and r.members[0].error_code == E.UNKNOWN_MEMBER_ID
    assert c.leave("", "x").error_code == E.INVALID_GROUP_ID


def test_last_member_leaving_empties_the_group_durably():
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2)
    c.leave("g", a, b)
    assert c.state("g") == "Empty"
    durable = c.shard.durable_state()["groups"]["g"]
    assert durable["generation"] == gen + 1 and durable["members"] == {}


def test_leave_group_pending_member():
    c = Ctx()
    r = c.answer(c.join("g"))
    assert c.leave("g", r.member_id).members[0].error_code == 0
    assert not c.group("g").is_pending_member(r.member_id)


# -- static membership (KIP-345) ---------------------------------------------------------------
def _static_stable(c, n=2, **kw):
    toks = [c.join("g", instance_id=f"i{k}", **kw) for k in range(n)]
    while any(c.answer(t) is None for t in toks):
        c.advance(3000)
    rs = [c.answer(t) for t in toks]
    gen, leader = rs[0].generation_id, rs[0].leader
    ids = [r.member_id for r in rs]
    for k, m in enumerate(ids):
        c.sync("g", m, gen, {x: assignment(t=[j]) for j, x in enumerate(ids)} if m == leader else None,
               instance_id=f"i{k}")
    assert c.state("g") == "Stable"
    return gen, ids, leader


def test_replace_static_member_in_stable_state_no_error():
    c = Ctx()
    gen, (m0, m1), leader = _static_stable(c)
    before = c.group("g").members[m1].assignment
    t = c.join("g", instance_id="i1")                        # restart: unknown member id, same protocols
    r = c.answer(t)
    assert r.error_code == 0 and r.generation_id == gen and r.member_id != m1
    assert c.state("g") == "Stable"                          # no rebalance
    assert c.group("g").members[r.member_id].assignment == before
    assert c.heartbeat("g", m1, gen, instance_id="i1") == E.FENCED_INSTANCE_ID
    assert c.heartbeat("g", r.member_id, gen, instance_id="i1") == E.NONE
    assert c.shard.durable_state()["groups"]["g"]["members"].keys() == {m0, r.member_id}
    s = c.answer(c.sync("g", r.member_id, gen, instance_id="i1"))
    assert s.assignment == before


def test_static_leader_rejoin_v9_skip_assignment():
    c = Ctx()
    gen, (m0, m1), leader = _static_stable(c)
    k = (m0, m1).index(leader)
    r = c.answer(c.join("g", instance_id=f"i{k}", version=9))
    assert r.skip_assignment is True and r.leader == r.member_id and len(r.members) == 2
    r8 = c.answer(c.join("g", instance_id=f"i{k}", version=8))
    assert r8.skip_assignment is False and r8.members == [] and r8.leader == r.member_id


def test_join_group_replace_static_member_fences_parked_join():
    c = Ctx()
    t_old = c.join("g", instance_id="i0")
    c.join("g", instance_id="i1")
    t_new = c.join("g", instance_id="i0")                   # same instance id, new member id
    old = c.answer(t_old)
    assert old.error_code == E.FENCED_INSTANCE_ID
    while c.answer(t_new) is None:
        c.advance(3000)
    assert c.answer(t_new).error_code == 0 and c.answer(t_new).member_id != old.member_id


def test_static_member_with_changed_protocols_in_stable_rebalances():
    c = Ctx()
    gen, (m0, m1), leader = _static_stable(c)
    c.join("g", instance_id="i1", protos=protocols("roundrobin", "range"))
    assert c.state("g") == "Stable"          # "range" is still the only candidate: no rebalance
    # A rejoin that changes the vote's outcome rebalances (here it completes at once).
    c2 = Ctx()
    t = c2.join("g", instance_id="i0", protos=protocols("range", "roundrobin"))
    c2.advance(3000)
    r = c2.answer(t)
    c2.sync("g", r.member_id, r.generation_id, {r.member_id: b"x"}, instance_id="i0")
    r2 = c2.answer(c2.join("g", instance_id="i0", protos=protocols("roundrobin", "range")))
    assert r2.generation_id == r.generation_id + 1 and r2.protocol_name == "roundrobin"
    assert c2.state("g") == "CompletingRebalance"


def test_leave_group_with_fenced_instance_id():
    c = Ctx()
    gen, (m0, m1), leader = _static_stable(c)
    r = c.leave("g", ("wrong-member", "i0"), ("", "i1"), ("x", "unknown-instance"))
    assert [m.error_code for m in r.members] == [E.FENCED_INSTANCE_ID, 0, E.UNKNOWN_MEMBER_ID]
    assert set(c.group("g").members) == {m0}


def test_static_replace_write_failure_restores_old_member():
    c = Ctx()
    gen, (m0, m1), leader = _static_stable(c)
    c.fail_writes = E.NOT_ENOUGH_REPLICAS
    r = c.answer(c.join("g", instance_id="i1"))
    assert r.error_code == E.COORDINATOR_NOT_AVAILABLE and r.member_id == ""
    c.fail_writes = None
    assert set(c.group("g").members) == {m0, m1} and c.group("g").static_members["i1"] == m1
    assert c.heartbeat("g", m1, gen, instance_id="i1") == E.NONE


# -- group.max.size ----------------------------------------------------------------------------
def test_group_max_size_reached():
    c = Ctx(**{"group.max.size": 2})
    gen, (a, b), leader = c.stable_group("g", 2)
    r = c.answer(c.join("g", version=3))
    assert r.error_code == E.GROUP_MAX_SIZE_REACHED
    assert c.state("g") == "Stable" and c.heartbeat("g", a, gen) == E.NONE
    assert c.answer(c.join("g", version=9)).error_code == E.GROUP_MAX_SIZE_REACHED


def test_group_max_size_during_initial_join():
    c = Ctx(**{"group.max.size": 2})
    toks = [c.join("g", version=3) for _ in range(3)]
    assert c.answer(toks[2]).error_code == E.GROUP_MAX_SIZE_REACHED
    c.advance(3000)
    c.advance(3000)
    assert [c.answer(t).error_code for t in toks[:2]] == [0, 0]


# -- request validation -------------------------------------------------------------------------
def test_invalid_session_timeout_and_group_id():
    c = Ctx()
    assert c.answer(c.join("g", session=5999)).error_code == E.INVALID_SESSION_TIMEOUT
    assert c.answer(c.join("g", session=1800001)).error_code == E.INVALID_SESSION_TIMEOUT
    assert c.answer(c.join("g", session=6000)).error_code == E.MEMBER_ID_REQUIRED
    assert c.answer(c.join("", session=10000)).error_code == E.INVALID_GROUP_ID
    assert c.heartbeat("", "m", 1) == E.INVALID_GROUP_ID
    assert c.answer(c.sync("", "m", 1)).error_code == E.INVALID_GROUP_ID


def test_configured_session_bounds():
    c = Ctx(**{"group.min.session.timeout.ms": "1000", "group.max.session.timeout.ms": "2000"})
    assert c.answer(c.join("g", session=999)).error_code == E.INVALID_SESSION_TIMEOUT
    assert c.answer(c.join("g", session=1500)).error_code == E.MEMBER_ID_REQUIRED


# -- versions and misc --------------------------------------------------------------------------------
def test_join_v6_and_older_get_an_empty_protocol_name_on_errors():
    c = Ctx()
    r = c.answer(c.join("g", session=1, version=6))
    assert r.protocol_name == "" and r.to_bytes(6)
    r7 = c.answer(c.join("g", session=1, version=7))
    assert r7.protocol_name is None and r7.to_bytes(7)


def test_join_v0_uses_session_timeout_as_rebalance_timeout():
    c = Ctx()
    c.join("g", version=0, session=7000, rebalance=99999)
    (m,) = c.group("g").members.values()
    assert m.rebalance_timeout_ms == 7000


def test_follower_rejoin_in_stable_with_same_metadata_returns_current_generation():
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2)
    follower = b if leader == a else a
    r = c.answer(c.join("g", follower))
    assert r.generation_id == gen and r.members == [] and c.state("g") == "Stable"


def test_new_group_write_failure_forgets_the_group():
    c = Ctx()
    c.fail_writes = E.NOT_LEADER_OR_FOLLOWER
    r = c.answer(c.join("g", version=3))
    assert r.error_code == E.NOT_COORDINATOR
    assert c.group("g") is None and c.scheduler.keys() == ["expire-group-metadata"]
    c.fail_writes = None
    r = c.answer(c.join("h", version=9))
    assert r.error_code == E.MEMBER_ID_REQUIRED and c.group("h") is not None
