"""ConsumerGroupHeartbeat / ConsumerGroupDescribe on the shard (KIP-848), on the fake clock. Every
operation is checked by the harness: live durable state == a shard replayed from the log."""
import pytest

from kgroup.coordinator import GroupCoordinatorConfig
from kgroup.coordinator.consumer_group.member import MemberState
from kgroup.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest

from .support import E, CgCtx


def join(c, gid, mid, **kw):
    r = c.hb(gid, mid, 0, **kw)
    assert r.error_code == 0, r
    return r


def settle(c, gid, owned):
    """Heartbeat every member with what it owns until nothing moves; ``owned``: member -> (epoch,
    {topic: parts}). Returns the final map."""
    for _ in range(10):
        moved = False
        for mid in list(owned):
            epoch, have = owned[mid]
            r = c.hb(gid, mid, epoch, owned=have)
            assert r.error_code == 0, r
            c.owned_check(gid)
            new = c.names(r) if r.assignment is not None else have
            if r.member_epoch != epoch or new != have:
                moved = True
            owned[mid] = (r.member_epoch, new)
        if not moved:
            return owned
    raise AssertionError("did not settle")


def test_first_member_gets_everything_and_group_is_stable():
    c = CgCtx({"a": 4})
    r = join(c, "g", "m1", topics=["a"])
    assert r.member_epoch == 1 and c.names(r) == {"a": [0, 1, 2, 3]}
    assert r.heartbeat_interval_ms == 5000
    g = c.cg("g")
    assert g.group_epoch == 1 and g.assignment_epoch == 1 and g.state.value == "Stable"


def test_v0_join_gets_a_generated_member_id_and_v1_keeps_the_clients():
    c = CgCtx({"a": 1})
    r = c.hb("g", "", 0, topics=["a"], version=0)
    assert r.error_code == 0 and r.member_id == "00000000-0000-0000-0000-000000000001"
    r = c.hb("g", "", 0, topics=["a"], version=1)
    assert r.error_code == E.INVALID_REQUEST
    r = join(c, "g", "client-chosen", topics=["a"])
    assert r.member_id == "client-chosen"


def test_second_member_waits_until_the_first_revokes():
    c = CgCtx({"a": 4})
    r1 = join(c, "g", "m1", topics=["a"])
    r2 = join(c, "g", "m2", topics=["a"])
    assert r2.member_epoch == 2 and c.names(r2) == {}          # its partitions are still m1's
    assert c.cg("g").members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    # m1 learns it keeps two: still epoch 1, in UNREVOKED_PARTITIONS
    r1 = c.hb("g", "m1", 1, owned={"a": [0, 1, 2, 3]})
    kept = c.names(r1)["a"]
    assert r1.member_epoch == 1 and len(kept) == 2
    assert c.cg("g").state.value == "Reconciling"
    # m2 heartbeats before m1 revoked: still nothing
    r2 = c.hb("g", "m2", 2, owned={})
    assert r2.member_epoch == 2 and (r2.assignment is None or c.names(r2) == {})
    # m1 revokes: epoch 2; then m2 receives the rest
    r1 = c.hb("g", "m1", 1, owned={"a": kept})
    assert r1.member_epoch == 2
    r2 = c.hb("g", "m2", 2, owned={})
    assert sorted(c.names(r2)["a"] + kept) == [0, 1, 2, 3]
    assert c.cg("g").state.value == "Stable"
    c.owned_check("g")


def test_many_members_settle_with_every_partition_owned_once():
    c = CgCtx({"a": 7, "b": 5})
    owned = {}
    for i in range(5):
        r = join(c, "g", f"m{i}", topics=["a", "b"])
        owned[f"m{i}"] = (r.member_epoch, c.names(r))
        owned = settle(c, "g", owned)
    all_parts = sorted((t, p) for _, a in owned.values() for t, ps in a.items() for p in ps)
    assert all_parts == sorted([("a", p) for p in range(7)] + [("b", p) for p in range(5)])
    assert c.cg("g").state.value == "Stable"


def test_fenced_member_epoch_rules():
    c = CgCtx({"a": 2})
    join(c, "g", "m1", topics=["a"])
    assert c.hb("g", "m1", 5, owned={"a": [0, 1]}).error_code == E.FENCED_MEMBER_EPOCH   # ahead
    join(c, "g", "m2", topics=["a"])
    r = c.hb("g", "m1", 1, owned={"a": [0, 1]})
    kept = c.names(r)["a"]
    r = c.hb("g", "m1", 1, owned={"a": kept})
    assert r.member_epoch == 2
    # one epoch behind, owning a subset of its partitions: the previous response was lost
    assert c.hb("g", "m1", 1, owned={"a": kept}).error_code == 0
    # one epoch behind but owning something else: fenced
    other = [p for p in (0, 1) if p not in kept]
    assert c.hb("g", "m1", 1, owned={"a": other}).error_code == E.FENCED_MEMBER_EPOCH
    assert c.hb("g", "nobody", 1, owned={}).error_code == E.UNKNOWN_MEMBER_ID
    assert c.hb("nogroup", "m1", 1, owned={}).error_code == E.GROUP_ID_NOT_FOUND


def test_leave_bumps_the_group_epoch_and_frees_partitions():
    c = CgCtx({"a": 4})
    owned = {"m1": (join(c, "g", "m1", topics=["a"]).member_epoch, None)}
    owned["m1"] = (owned["m1"][0], {"a": [0, 1, 2, 3]})
    r = join(c, "g", "m2", topics=["a"])
    owned["m2"] = (r.member_epoch, c.names(r))
    owned = settle(c, "g", owned)
    epoch = c.cg("g").group_epoch
    r = c.hb("g", "m1", owned["m1"][0])
    r = c.hb("g", "m1", -1)
    assert r.error_code == 0 and r.member_epoch == -1
    assert "m1" not in c.cg("g").members and c.cg("g").group_epoch == epoch + 1
    r = c.hb("g", "m2", owned["m2"][0], owned=owned["m2"][1])
    assert c.names(r) == {"a": [0, 1, 2, 3]} and r.member_epoch == epoch + 1
    assert c.hb("g", "m2", -1).error_code == 0
    assert c.cg("g").state.value == "Empty"


def test_session_timeout_fences_a_silent_member():
    c = CgCtx({"a": 2})
    join(c, "g", "m1", topics=["a"])
    r = join(c, "g", "m2", topics=["a"])
    for _ in range(4):                  # m2 keeps heartbeating, m1 is silent
        c.advance(10_000)
        r = c.hb("g", "m2", r.member_epoch, owned=c.names(r) or {})
    assert "m1" in c.cg("g").members
    c.advance(10_000)                   # 50 s > 45 s since m1's last heartbeat
    assert "m1" not in c.cg("g").members
    r = c.hb("g", "m2", r.member_epoch, owned=c.names(r) or {})
    assert c.names(r) == {"a": [0, 1]}


def test_group_configs_set_the_heartbeat_interval_and_session_timeout():
    """Kafka 4.0's GROUP configs (GroupConfigManager): a group's consumer.heartbeat.interval.ms is
    answered and its consumer.session.timeout.ms fences a silent member; a group without them
    keeps the broker's (5 s, 45 s). A change applies from each member's next heartbeat on."""
    from kgroup.coordinator.timer import session_key
    from .support import fresh_shard
    c = CgCtx({"a": 2})
    c.group_configs["g"] = {"consumer.heartbeat.interval.ms": 8000, "consumer.session.timeout.ms": 50000}
    r = join(c, "g", "m1", topics=["a"])
    assert r.heartbeat_interval_ms == 8000
    assert join(c, "other", "o1", topics=["a"]).heartbeat_interval_ms == 5000
    r = c.hb("g", "m1", r.member_epoch)                    # the steady-heartbeat path
    assert r.error_code == 0 and r.heartbeat_interval_ms == 8000
    # a reloaded shard (same configuration) restarts the member's session with the group's timeout
    assert fresh_shard(c.shard, c.log, c.now).timer.deadline(session_key("g", "m1")) == c.now + 50000
    c.advance(46_000)                                      # both silent: the broker's 45 s fences o1 only
    assert c.cg("other").members == {} and "m1" in c.cg("g").members
    c.advance(4_000)
    assert "m1" not in c.cg("g").members
    # AlterConfigs replaced the group's set: the heartbeat interval is the broker's again
    c.group_configs["g"] = {"consumer.session.timeout.ms": 60000}
    r = join(c, "g", "m2", topics=["a"])
    assert r.heartbeat_interval_ms == 5000
    c.advance(59_000)
    r = c.hb("g", "m2", r.member_epoch)
    c.group_configs.pop("g")                               # deleted: a running session keeps its deadline
    c.advance(59_000)
    assert "m2" in c.cg("g").members
    assert c.hb("g", "m2", r.member_epoch).heartbeat_interval_ms == 5000
    c.advance(45_000)
    assert "m2" not in c.cg("g").members


def test_rebalance_timeout_fences_a_member_that_does_not_revoke():
    c = CgCtx({"a": 2})
    join(c, "g", "m1", topics=["a"], rebalance=20_000)
    r2 = join(c, "g", "m2", topics=["a"])
    r1 = c.hb("g", "m1", 1, owned={"a": [0, 1]})       # must revoke one
    assert c.cg("g").members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    for _ in range(3):                                  # it keeps heartbeating but never revokes
        c.advance(8_000)
        r1 = c.hb("g", "m1", 1, owned={"a": [0, 1]})
        if r1.error_code:
            break
        c.hb("g", "m2", r2.member_epoch, owned={})
    assert "m1" not in c.cg("g").members             # fenced mid-revocation at 24 s > 20 s
    assert c.hb("g", "m1", 1, owned={"a": [0, 1]}).error_code == E.UNKNOWN_MEMBER_ID
    r2 = c.hb("g", "m2", r2.member_epoch, owned={})
    assert c.names(r2) == {"a": [0, 1]}
    c.owned_check("g")


def test_static_member_leaves_temporarily_and_comes_back_with_its_partitions():
    c = CgCtx({"a": 4})
    r1 = join(c, "g", "m1", topics=["a"], instance_id="i1")
    r2 = join(c, "g", "m2", topics=["a"], instance_id="i2")
    owned = settle(c, "g", {"m1": (r1.member_epoch, c.names(r1)), "m2": (r2.member_epoch, c.names(r2))})
    mine = owned["m1"][1]
    epoch = c.cg("g").group_epoch
    r = c.hb("g", "m1", -2, instance_id="i1")
    assert r.error_code == 0 and r.member_epoch == -2
    assert c.cg("g").group_epoch == epoch             # no rebalance
    # a new process with the same instance id and a new member id takes the partitions back
    r = join(c, "g", "m1b", topics=["a"], instance_id="i1")
    assert c.names(r) == mine and "m1" not in c.cg("g").members
    assert c.cg("g").static_members["i1"] == "m1b" and c.cg("g").group_epoch == epoch
    c.owned_check("g")


def test_unreleased_instance_id_and_fenced_instance_id():
    c = CgCtx({"a": 1})
    join(c, "g", "m1", topics=["a"], instance_id="i1")
    assert c.hb("g", "m9", 0, topics=["a"], instance_id="i1").error_code == E.UNRELEASED_INSTANCE_ID
    assert c.hb("g", "m9", 1, instance_id="i1", owned={}).error_code in (E.UNKNOWN_MEMBER_ID,
                                                                            E.FENCED_INSTANCE_ID)


def test_group_max_size():
    c = CgCtx({"a": 1}, **{"group.consumer.max.size": 2})
    join(c, "g", "m1", topics=["a"])
    join(c, "g", "m2", topics=["a"])
    assert c.hb("g", "m3", 0, topics=["a"]).error_code == E.GROUP_MAX_SIZE_REACHED
    assert "m3" not in c.cg("g").members


def test_subscription_change_bumps_the_epoch_and_moves_partitions():
    c = CgCtx({"a": 2, "b": 2})
    r = join(c, "g", "m1", topics=["a"])
    assert r.member_epoch == 1
    r = c.hb("g", "m1", 1, topics=["a", "b"], owned={"a": [0, 1]})
    assert r.member_epoch == 2 and c.names(r) == {"a": [0, 1], "b": [0, 1]}
    r = c.hb("g", "m1", 2, topics=["b"], owned={"a": [0, 1], "b": [0, 1]})
    assert r.member_epoch == 2 and c.names(r) == {"b": [0, 1]}      # revoke a first
    r = c.hb("g", "m1", 2, owned={"b": [0, 1]})
    assert r.member_epoch == 3


def test_regex_subscription_and_topic_creation():
    c = CgCtx({"pre-1": 2, "other": 2})
    r = join(c, "g", "m1", regex="pre-.*")
    assert c.names(r) == {"pre-1": [0, 1]}
    assert c.hb("g", "m2", 0, regex="(?=x)").error_code == E.INVALID_REGULAR_EXPRESSION
    c.add_topic("pre-2", 1)
    c.topics_changed()
    # as Kafka: the regex is resolved again at a heartbeat once REGEX_BATCH_REFRESH_INTERVAL_MS
    # passed since its last resolution, not when the topic appears
    assert c.cg("g").group_epoch == 1
    c.advance(5000)
    r = c.hb("g", "m1", 1, owned={"pre-1": [0, 1]})
    assert r.assignment is None and c.cg("g").group_epoch == 1
    c.advance(5001)
    r = c.hb("g", "m1", 1, owned={"pre-1": [0, 1]})
    assert c.names(r) == {"pre-1": [0, 1], "pre-2": [0]} and r.member_epoch == 2
    assert c.cg("g").resolved_regexes["pre-.*"] == (frozenset({"pre-1", "pre-2"}), c.topics_version, 10001)
    del c.topics["pre-2"]
    c.topics_changed()
    r = c.hb("g", "m1", 2, owned={"pre-1": [0, 1], "pre-2": [0]})
    assert c.names(r) == {"pre-1": [0, 1]}


def test_partitions_added_bump_the_epoch():
    c = CgCtx({"a": 1})
    join(c, "g", "m1", topics=["a"])
    c.add_topic("a", 3)
    c.topics_changed()
    r = c.hb("g", "m1", 1, owned={"a": [0]})
    assert c.names(r) == {"a": [0, 1, 2]}


def test_server_assignor_and_unsupported_assignor():
    c = CgCtx({"a": 2, "b": 2})
    assert c.hb("g", "m1", 0, topics=["a"], assignor="sticky").error_code == E.UNSUPPORTED_ASSIGNOR
    r = join(c, "g", "m1", topics=["a", "b"], assignor="range")
    r2 = join(c, "g", "m2", topics=["a", "b"], assignor="range")
    assert c.cg("g").preferred_server_assignor("uniform") == "range"
    owned = settle(c, "g", {"m1": (r.member_epoch, c.names(r)), "m2": (r2.member_epoch, c.names(r2))})
    # range: co-partitioned, each member gets the same partition index of both topics
    assert sorted(sorted((t, tuple(p)) for t, p in a.items()) for _, a in owned.values()) == [
        [("a", (0,)), ("b", (0,))], [("a", (1,)), ("b", (1,))]]


def test_classic_group_id_is_not_a_consumer_group():
    # with online migration disabled (KIP-848's group.consumer.migration.policy); see test_migration.py
    c = CgCtx({"t": 1}, **{"group.consumer.migration.policy": "disabled"})
    c.stable_group("classic", 1)
    r = c.hb("classic", "m1", 0, topics=["t"])
    assert r.error_code == E.GROUP_ID_NOT_FOUND


def test_describe():
    c = CgCtx({"a": 2})
    join(c, "g", "m1", topics=["a"], instance_id="i1")
    token = c.token()
    c.run(c.shard.handle_consumer_group_describe(ConsumerGroupDescribeRequest(group_ids=["g", "x"]), 0, c.now,
                                                 token))
    g, x = c.answer(token).groups
    assert g.error_code == 0 and g.group_state == "Stable" and g.group_epoch == 1 and g.assignor_name == "uniform"
    m = g.members[0]
    assert m.member_id == "m1" and m.instance_id == "i1" and m.member_epoch == 1
    assert m.assignment.topic_partitions[0].topic_name == "a"
    assert x.error_code == E.GROUP_ID_NOT_FOUND


def test_offset_commit_and_fetch_check_the_member_epoch():
    c = CgCtx({"a": 2})
    join(c, "g", "m1", topics=["a"])
    assert c.commit("g", {("a", 0): 5}, member_id="m1", generation=1) == {("a", 0): 0}
    assert c.commit("g", {("a", 0): 6}, member_id="m1", generation=0) == {("a", 0): E.STALE_MEMBER_EPOCH}
    assert c.commit("g", {("a", 0): 6}, member_id="zz", generation=1) == {("a", 0): E.UNKNOWN_MEMBER_ID}
    assert c.commit("g", {("a", 0): 6}, member_id="m1", generation=1, version=8) == {
        ("a", 0): E.UNSUPPORTED_VERSION}
    assert c.fetched("g", {"a": [0]}) == {("a", 0): (5, 0)}
    assert c.shard.group_metadata_manager.classic_group("g") is None      # one namespace: no classic twin


def test_config_bounds():
    with pytest.raises(ValueError):
        GroupCoordinatorConfig.from_props({"group.consumer.session.timeout.ms": 1000})
    with pytest.raises(ValueError):
        GroupCoordinatorConfig.from_props({"group.consumer.assignors": "sticky"})
    cfg = GroupCoordinatorConfig.from_props({"group.consumer.assignors": "range,uniform"})
    assert cfg.consumer_assignors == ("range", "uniform")


def test_reload_restarts_sessions():
    c = CgCtx({"a": 2})
    join(c, "g", "m1", topics=["a"])
    from .support import fresh_shard
    other = fresh_shard(c.shard, c.log, c.now)
    assert other.consumer_group_manager.consumer_group("g").members["m1"].member_epoch == 1
    assert other.next_deadline() is not None


def test_list_groups_reports_consumer_groups_with_kafkas_states():
    c = CgCtx({"a": 2, "t": 1})
    c.stable_group("classic", 1)
    join(c, "g", "m1", topics=["a"])
    join(c, "g", "m2", topics=["a"])
    listed = {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in c.list_groups().groups}
    assert listed["g"] == ("consumer", "Reconciling", "consumer")
    assert listed["classic"][2] == "classic"
    assert [g.group_id for g in c.list_groups(types=["consumer"]).groups] == ["g"]
    assert [g.group_id for g in c.list_groups(states=["reconciling"]).groups] == ["g"]
    assert c.list_groups(states=["stable"], types=["consumer"]).groups == []
    # DescribeGroups (v0-5) shows a consumer-protocol group as Dead, as Kafka does
    assert c.describe("g")[0].group_state == "Dead"


def test_delete_consumer_group_tombstones_every_record():
    c = CgCtx({"a": 2})
    r = join(c, "g", "m1", topics=["a"])
    c.commit("g", {("a", 0): 3}, member_id="m1", generation=r.member_epoch)
    assert c.delete_groups("g") == {"g": E.NON_EMPTY_GROUP}
    c.hb("g", "m1", -1)
    assert c.delete_groups("g") == {"g": 0}
    assert c.cg("g") is None and c.shard.offset_metadata_manager.offsets.get("g") is None
    assert c.delete_groups("g") == {"g": E.GROUP_ID_NOT_FOUND}
    # every key the group wrote ends with a tombstone: compaction would leave nothing
    last = {}
    for k, v in c.log:
        last[k] = v
    assert all(v is None for v in last.values())


def test_classic_join_on_a_consumer_group():
    c = CgCtx({"a": 2, "t": 1})
    join(c, "g", "m1", topics=["a"])
    token = c.join("g")     # a classic member joins the consumer group (online migration)
    assert c.answer(token).error_code == E.MEMBER_ID_REQUIRED and c.shard.consumer_group_manager.consumer_group("g") is not None
    c.hb("g", "m1", -1)
    c.stable_group("g", 1)            # an empty consumer group becomes a classic group
    assert c.cg("g") is None and c.state("g") == "Stable"


def test_steady_heartbeat_answers_like_the_full_path():
    c = CgCtx({"a": 2})
    r = join(c, "g", "m1", topics=["a"], instance_id="i1")
    n = len(c.log)
    r2 = c.hb("g", "m1", r.member_epoch, instance_id="i1")
    assert r2.error_code == 0 and r2.member_epoch == r.member_epoch and r2.assignment is None
    assert len(c.log) == n
    c.advance(40_000)
    c.hb("g", "m1", r.member_epoch)                     # the session restarts on the fast path too
    c.advance(40_000)
    assert "m1" in c.cg("g").members
    # a topic deleted while the shard was not loaded bumps the epoch when it loads
    from .support import fresh_shard
    del c.topics["a"]
    other = fresh_shard(c.shard, c.log, c.now)
    res = other.on_loaded(c.now)
    assert [r.record_type for r in res.records] == [4, 3]


def test_an_empty_classic_group_with_offsets_becomes_a_consumer_group():
    c = CgCtx({"a": 1})
    c.commit("g", {("a", 0): 4})                  # a simple (empty classic) group with an offset
    assert c.state("g") == "Empty"
    r = join(c, "g", "m1", topics=["a"])
    assert c.group("g") is None and c.cg("g").members["m1"].member_epoch == r.member_epoch
    assert c.fetched("g", {"a": [0]}) == {("a", 0): (4, 0)}
