"""Share groups (KIP-932) on the shard, on the fake clock: ShareGroupHeartbeat membership and epochs,
the initialization of share-partitions before they are assigned, the simple assignor's sharing,
session timeouts, subscription and topic changes, group.share.max.size, ShareGroupDescribe,
ListGroups/DescribeGroups/DeleteGroups/OffsetFetch/OffsetCommit/OffsetDelete answers for a share group,
the records' bytes and replay. Every operation is checked by the harness: live durable state == a
shard replayed from the log."""
from kgroup.coordinator.share_group import share_group_records as srec
from kgroup.coordinator.share_group.group import compute_group_hash, compute_topic_hash
from kgroup.coordinator.share_group.manager import ShareStateInitialized
from kgroup.coordinator.share_group.simple_assignor import assign
from kgroup.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from kgroup.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest

from .support import E, S, CgCtx, topic_id


class ShCtx(CgCtx):
    def sg(self, group_id):
        return self.shard.share_group_manager.share_group(group_id)

    def shb(self, group_id, member_id, epoch, topics=None, rack=None):
        token = self.token()
        req = ShareGroupHeartbeatRequest(group_id=group_id, member_id=member_id, member_epoch=epoch,
                                         rack_id=rack, subscribed_topic_names=None if topics is None else list(topics))
        self.handle(S.handle_share_group_heartbeat, req, 1, token, "client", "/127.0.0.1")
        return self.answer(token)

    def initialize_all(self):
        """What the runtime does with the share coordinator's answers: every queued initialization
        succeeds."""
        for init in self.shard.share_group_manager.drain_initializations():
            self.initialized(init.group_id, init.topics)

    def initialized(self, group_id, topics, succeeded=True):
        self.handle(S.handle_initialize_share_group_state, ShareStateInitialized(group_id, topics, succeeded), 0,
                    self.token())

    def describe_share(self, *group_ids):
        token = self.token()
        self.handle(S.handle_share_group_describe, ShareGroupDescribeRequest(group_ids=list(group_ids)), 1, token)
        return self.answer(token).groups


def parts(c, resp):
    return c.names(resp) if resp.assignment is not None else None


def test_join_initializes_partitions_before_assigning_them():
    c = ShCtx({"a": 3})
    r = c.shb("g", "m1", 0, topics=["a"])
    assert r.error_code == 0 and r.member_epoch == 1 and r.heartbeat_interval_ms == 5000
    assert parts(c, r) == {}            # no share-partition has state yet: nothing is assignable
    sp = c.sg("g").state_partitions
    assert set(sp.initializing[topic_id("a")].partitions) == {0, 1, 2} and not sp.initialized
    inits = c.shard.share_group_manager.drain_initializations()
    assert [(i.group_id, i.group_epoch, dict(i.topics)) for i in inits] == [("g", 1, {topic_id("a"): {0, 1, 2}})]
    c.initialized("g", inits[0].topics)
    sp = c.sg("g").state_partitions
    assert not sp.initializing and set(sp.initialized[topic_id("a")].partitions) == {0, 1, 2}
    # the next heartbeat sees initialized partitions the target does not assign: a new epoch
    r = c.shb("g", "m1", 1)
    assert r.member_epoch == 2 and parts(c, r) == {"a": [0, 1, 2]}
    assert c.sg("g").state_partitions is not None and c.sg("g").group_epoch == 2
    # a steady heartbeat: same epoch, no assignment, nothing written
    n = len(c.log)
    r = c.shb("g", "m1", 2)
    assert r.member_epoch == 2 and r.assignment is None and len(c.log) == n
    assert c.shard.share_group_manager.drain_initializations() == []


def test_failed_initialization_is_asked_again():
    c = ShCtx({"a": 2})
    c.shb("g", "m1", 0, topics=["a"])
    inits = c.shard.share_group_manager.drain_initializations()
    c.initialized("g", inits[0].topics, succeeded=False)
    assert not c.sg("g").state_partitions.initializing
    c.shb("g", "m1", 1)
    again = c.shard.share_group_manager.drain_initializations()
    assert [dict(i.topics) for i in again] == [{topic_id("a"): {0, 1}}]


def test_initializing_too_long_is_retried_after_the_retry_interval():
    c = ShCtx({"a": 1})
    c.shb("g", "m1", 0, topics=["a"])
    c.shard.share_group_manager.drain_initializations()
    c.now += 10_000
    c.shb("g", "m1", 1)
    assert c.shard.share_group_manager.drain_initializations() == []
    c.now += 25_000             # group.share.initialize.retry.interval.ms (30 s) since it was written
    c.shb("g", "m1", 1)
    assert [dict(i.topics) for i in c.shard.share_group_manager.drain_initializations()] == [{topic_id("a"): {0}}]


def test_four_members_share_one_partition():
    c = ShCtx({"a": 1})
    epochs = {}
    for m in ("m1", "m2", "m3", "m4"):
        epochs[m] = c.shb("g", m, 0, topics=["a"]).member_epoch
        c.initialize_all()
    got = {}
    for m in epochs:
        r = c.shb("g", m, epochs[m], topics=["a"])
        assert r.error_code == 0
        got[m] = parts(c, r)
    assert got == {m: {"a": [0]} for m in epochs}     # every member gets the one partition
    assert c.sg("g").state.value == "Stable"


def test_partitions_are_balanced_and_each_assigned_once_when_members_are_fewer():
    c = ShCtx({"a": 6})
    c.shb("g", "m1", 0, topics=["a"])
    c.initialize_all()
    c.shb("g", "m1", 1)
    r2 = c.shb("g", "m2", 0, topics=["a"])
    r1 = c.shb("g", "m1", 2)
    a1, a2 = set(c.names(r1)["a"]), set(c.names(r2)["a"])
    assert len(a1) == len(a2) == 3 and a1 | a2 == set(range(6)) and not a1 & a2
    # m1 kept half of what it had (stickiness): the target only moved what m2 needed
    assert r1.member_epoch == r2.member_epoch == 3


def test_simple_assignor_sharing_and_counts():
    t = b"\x01" * 16
    # 3 members, 2 partitions: sharing 2, counts ceil-split of 4 slots over 3 members
    out = assign({"a": frozenset({"x"}), "b": frozenset({"x"}), "c": frozenset({"x"})}, {}, {"x": t},
                 {t: frozenset({0, 1})})
    counts = sorted(len(v.get(t, ())) for v in out.values())
    per_partition = [sum(p in v.get(t, ()) for v in out.values()) for p in (0, 1)]
    assert counts == [1, 1, 2] and per_partition == [2, 2]
    # sticky: the same input with its own output as the previous target changes nothing
    assert assign({"a": frozenset({"x"}), "b": frozenset({"x"}), "c": frozenset({"x"})}, out, {"x": t},
                  {t: frozenset({0, 1})}) == out
    # only assignable (initialized) partitions go out
    out = assign({"a": frozenset({"x"})}, {}, {"x": t}, {t: frozenset({1})})
    assert out == {"a": {t: frozenset({1})}}


def test_heterogeneous_subscriptions_balance_topic_by_topic():
    t1, t2 = b"\x01" * 16, b"\x02" * 16
    out = assign({"m1": frozenset({"x"}), "m2": frozenset({"y"}), "m3": frozenset({"x", "y"})}, {},
                 {"x": t1, "y": t2}, {t1: frozenset(range(4)), t2: frozenset(range(4))})
    assert set(out["m1"]) == {t1} and set(out["m2"]) == {t2}
    assert len(out["m3"][t1]) == 2 and len(out["m3"][t2]) == 2
    assert out["m1"][t1] | out["m3"][t1] == frozenset(range(4))


def test_member_epoch_checks():
    c = ShCtx({"a": 1})
    c.shb("g", "m1", 0, topics=["a"])
    c.initialize_all()
    r = c.shb("g", "m1", 1)
    assert r.member_epoch == 2
    assert c.shb("g", "m1", 3).error_code == E.FENCED_MEMBER_EPOCH
    assert c.shb("g", "m1", 1).error_code == 0           # the previous epoch: the bump may have been lost
    c.shb("g", "m2", 0, topics=["a"])                     # epoch 3
    assert c.shb("g", "m1", 2).member_epoch == 3
    assert c.shb("g", "m1", 1).error_code == E.FENCED_MEMBER_EPOCH
    assert c.shb("g", "zz", 3).error_code == E.UNKNOWN_MEMBER_ID
    assert c.shb("nope", "m1", 1).error_code == E.GROUP_ID_NOT_FOUND


def test_request_validation():
    c = ShCtx({"a": 1})
    for args, message in ((("g", " ", 0, ["a"]), "MemberId can't be empty."),
                          (("", "m", 0, ["a"]), None), (("g", "m", 0, []), "SubscribedTopicNames must be set in first request."),
                          (("g", "m", 0, None), "SubscribedTopicNames must be set in first request."),
                          (("g", "m", -2, None), "MemberEpoch is invalid.")):
        r = c.shb(*args)
        assert r.error_code == E.INVALID_REQUEST, args
        if message:
            assert r.error_message == message
    assert c.shb("g", "m", 0, ["a"], rack=" ").error_message == "RackId can't be empty."
    assert c.log == []                  # nothing refused was written
    assert c.sg("g") is None


def test_leave_and_session_timeout_fence_the_member():
    c = ShCtx({"a": 2})
    c.shb("g", "m1", 0, topics=["a"])
    c.initialize_all()
    c.shb("g", "m2", 0, topics=["a"])
    epoch = c.sg("g").group_epoch
    r = c.shb("g", "m1", -1)
    assert r.error_code == 0 and r.member_epoch == -1 and r.member_id == "m1"
    assert set(c.sg("g").members) == {"m2"} and c.sg("g").group_epoch == epoch + 1
    assert c.shb("g", "m1", -1).error_code == E.UNKNOWN_MEMBER_ID
    # m2 stops heartbeating: fenced after group.share.session.timeout.ms
    c.advance(44_999)
    assert "m2" in c.sg("g").members
    c.advance(1)
    g = c.sg("g")
    assert g.members == {} and g.state.value == "Empty" and g.group_epoch == epoch + 2
    assert c.advance(60_000) == [] and c.sg("g").group_epoch == epoch + 2     # no timer left to fire


def test_group_config_overrides_session_timeout_and_heartbeat_interval():
    c = ShCtx({"a": 1})
    c.group_configs["g"] = {"share.session.timeout.ms": 50_000, "share.heartbeat.interval.ms": 7000}
    assert c.shb("g", "m1", 0, topics=["a"]).heartbeat_interval_ms == 7000
    c.advance(49_999)
    assert "m1" in c.sg("g").members
    c.advance(1)
    assert not c.sg("g").members


def test_subscription_change_bumps_the_epoch_and_filters_the_assignment():
    c = ShCtx({"a": 2, "b": 2})
    c.shb("g", "m1", 0, topics=["a", "b"])
    c.initialize_all()
    r = c.shb("g", "m1", 1)
    assert c.names(r) == {"a": [0, 1], "b": [0, 1]}
    r = c.shb("g", "m1", r.member_epoch, topics=["b"])
    assert c.names(r) == {"b": [0, 1]} and r.member_epoch == 3
    assert c.sg("g").subscribed_topic_names == {"b": 1}


def test_new_partitions_are_initialized_then_assigned_after_a_topic_change():
    c = ShCtx({"a": 1})
    c.shb("g", "m1", 0, topics=["a"])
    c.initialize_all()
    r = c.shb("g", "m1", 1)
    assert c.names(r) == {"a": [0]}
    c.add_topic("a", 3)
    c.topics_changed()
    r = c.shb("g", "m1", r.member_epoch)
    assert r.member_epoch == 3 and (r.assignment is None or c.names(r) == {"a": [0]})   # the hash changed
    inits = c.shard.share_group_manager.drain_initializations()
    assert [dict(i.topics) for i in inits] == [{topic_id("a"): {1, 2}}]
    c.initialized("g", inits[0].topics)
    r = c.shb("g", "m1", 3)
    assert r.member_epoch == 4 and c.names(r) == {"a": [0, 1, 2]}


def test_group_share_max_size():
    c = ShCtx({"a": 1}, **{"group.share.max.size": 2})
    assert c.shb("g", "m1", 0, topics=["a"]).error_code == 0
    assert c.shb("g", "m2", 0, topics=["a"]).error_code == 0
    r = c.shb("g", "m3", 0, topics=["a"])
    assert r.error_code == E.GROUP_MAX_SIZE_REACHED
    assert r.error_message == "The share group has reached its maximum capacity of 2 members."
    assert c.shb("g", "m1", 0, topics=["a"]).error_code == 0     # a member may rejoin


def test_describe_list_and_other_group_apis():
    c = ShCtx({"a": 2})
    c.shb("g", "m1", 0, topics=["a"])
    c.initialize_all()
    c.shb("g", "m1", 1)
    c.hb("cg", "c1", 0, topics=["a"])
    [d, missing, other] = c.describe_share("g", "nope", "cg")
    assert d.error_code == 0 and d.group_state == "Stable" and d.assignor_name == "simple"
    assert d.group_epoch == 2 and d.assignment_epoch == 2
    [m] = d.members
    assert (m.member_id, m.member_epoch, m.client_id, m.client_host, m.subscribed_topic_names) == \
        ("m1", 2, "client", "/127.0.0.1", ["a"])
    assert [(t.topic_name, t.partitions) for t in m.assignment.topic_partitions] == [("a", [0, 1])]
    assert (missing.error_code, missing.error_message) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")
    assert (other.error_code, other.error_message) == (E.GROUP_ID_NOT_FOUND, "Group cg is not a share group.")
    listed = {g.group_id: (g.protocol_type, g.group_state, g.group_type) for g in c.list_groups().groups}
    assert listed["g"] == ("share", "Stable", "share")
    assert [g.group_id for g in c.list_groups(types=["share"]).groups] == ["g"]
    assert [g.group_id for g in c.list_groups(types=["SHARE"], states=["stable"]).groups] == ["g"]
    # a consumer group heartbeat for a share group's id
    assert c.hb("g", "x", 0, topics=["a"]).error_code == E.GROUP_ID_NOT_FOUND
    assert c.shb("cg", "x", 0, topics=["a"]).error_message == "Group cg is not a share group."
    # DescribeGroups shows it as Dead (not a classic group); OffsetFetch answers as for a group with
    # no offsets (Kafka's failAllPartitions); OffsetCommit and OffsetDelete refuse it
    assert c.describe("g")[0].group_state == "Dead"
    assert c.fetched("g", {"a": [0]}) == {("a", 0): (-1, 0)}
    assert set(c.commit("g", {("a", 0): 5}).values()) == {E.GROUP_ID_NOT_FOUND}
    assert c.delete_offsets("g", {"a": [0]}).error_code == E.GROUP_ID_NOT_FOUND
    assert c.delete_groups("g") == {"g": E.NON_EMPTY_GROUP}
    c.shb("g", "m1", -1)
    assert c.delete_groups("g") == {"g": 0}
    assert c.sg("g") is None and "g" not in c.shard.groups


def test_offsets_cleanup_never_deletes_a_share_group():
    c = ShCtx({"a": 1})
    c.shb("g", "m1", 0, topics=["a"])
    c.shb("g", "m1", -1)
    c.advance(c.config.offsets_retention_check_interval_ms)
    assert c.sg("g") is not None and c.sg("g").state.value == "Empty"


def test_load_gives_members_new_sessions():
    c = ShCtx({"a": 1})
    c.shb("g", "m1", 0, topics=["a"])
    from .support import fresh_shard
    other = fresh_shard(c.shard, c.log, c.now)
    g = other.share_group_manager.share_group("g")
    assert set(g.members) == {"m1"} and g.members["m1"].subscribed_topic_names == {"a"}
    assert other.next_deadline() is not None


def test_record_bytes_are_kafkas():
    tid = bytes(range(16))
    r = srec.group_epoch_record("g", 3, -5)
    # key: int16 type 11, string "g"; value: int16 version 0, int32 epoch, int64 hash, empty tagged fields
    assert r.key == b"\x00\x0b\x00\x01g"
    assert r.value == b"\x00\x00" + (3).to_bytes(4, "big") + (-5).to_bytes(8, "big", signed=True) + b"\x00"
    r = srec.target_assignment_epoch_record("g", 2, 7)
    assert r.value == b"\x00\x00" + (2).to_bytes(4, "big") + b"\x01\x00\x08" + (7).to_bytes(8, "big")
    r = srec.target_assignment_epoch_record("g", 2, 0)
    assert r.value == b"\x00\x00" + (2).to_bytes(4, "big") + b"\x00"   # the default timestamp is not written
    r = srec.target_assignment_record("g", "m", {tid: frozenset({1, 0})})
    assert r.key == b"\x00\x0d\x00\x01g\x00\x01m"
    assert r.value == b"\x00\x00" + b"\x02" + tid + b"\x03" + (0).to_bytes(4, "big") + (1).to_bytes(4, "big") \
        + b"\x00" + b"\x00"
    for r in (srec.member_subscription_tombstone("g", "m"), srec.state_partition_metadata_tombstone("g")):
        assert r.value is None and srec.decode_record(r.key, None).value_struct is None
    assert srec.decode_record(r.key, None).record_type == 15


def test_metadata_hash():
    from kgroup.coordinator.consumer_group.group import TopicMetadata
    a = TopicMetadata(topic_id("a"), "a", 2)
    assert compute_topic_hash(None) == 0 and compute_group_hash({}) == 0
    h = compute_topic_hash(a)
    assert h == compute_topic_hash(TopicMetadata(topic_id("a"), "a", 2)) and -2**63 <= h < 2**63
    assert h != compute_topic_hash(TopicMetadata(topic_id("a"), "a", 3))
    assert h != compute_topic_hash(TopicMetadata(topic_id("a"), "a", 2, ((0, ("r1",)),)))
    assert compute_group_hash({"a": 1, "b": 2}) == compute_group_hash({"b": 2, "a": 1})
