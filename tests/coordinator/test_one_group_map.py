"""One group map for every group type (fake clock, live == replayed after every operation):
TxnOffsetCommit, OffsetDelete, offset expiry and empty-group cleanup ask the group, whatever its
type, as Kafka's OffsetMetadataManager and GroupCoordinatorShard.cleanupGroupMetadata do."""
from kgroup.coordinator.group import GroupType
from kgroup.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from tests.coordinator.support import E, CgCtx, assert_replay_consistent

T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
P = T.TxnOffsetCommitRequestPartition
PID = 4000


class Ctx(CgCtx):
    def txn_commit(self, group_id, offsets, *, member_id="", generation=-1, version=4):
        token = self.token()
        by_topic: dict = {}
        for (t, p), o in offsets.items():
            by_topic.setdefault(t, []).append(P(partition_index=p, committed_offset=o, committed_metadata=""))
        req = TxnOffsetCommitRequest(transactional_id="tx", group_id=group_id, producer_id=PID, producer_epoch=0,
                                     generation_id=generation, member_id=member_id, group_instance_id=None,
                                     topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])
        result = self.shard.handle_txn_offset_commit(req, version, self.now, token)
        self.log.extend(("txn", PID, r.key, r.value) for r in result.records)
        self.sent.extend(self.shard.commit(result, PID))
        assert_replay_consistent(self.shard, self.log, self.now)
        resp = self.answer(token)
        return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    def marker(self, committed):
        self.log.append(("marker", PID, committed))
        self.shard.replay_end_transaction_marker(PID, committed)
        assert_replay_consistent(self.shard, self.log, self.now)


def consumer_group(c, gid="g", mid="m1", topics=("a",)):
    r = c.hb(gid, mid, 0, topics=list(topics))
    assert r.error_code == 0, r
    return r.member_epoch


def test_txn_offset_commit_from_a_consumer_group_member():
    c = Ctx({"a": 2})
    epoch = consumer_group(c)
    assert c.txn_commit("g", {("a", 0): 7}, member_id="m1", generation=epoch) == {("a", 0): E.NONE}
    # the pending offsets belong to the consumer group: no classic twin appears beside it
    assert [g.type for g in c.shard.groups.values()] == [GroupType.CONSUMER]
    c.marker(committed=True)
    assert [g.type for g in c.shard.groups.values()] == [GroupType.CONSUMER]
    assert c.fetched("g", {"a": [0]}) == {("a", 0): (7, 0)}
    assert [g.group_id for g in c.list_groups().groups] == ["g"]


def test_txn_offset_commit_fencing_against_a_consumer_group():
    c = Ctx({"a": 2})
    epoch = consumer_group(c)
    # a stale member epoch is ILLEGAL_GENERATION for TxnOffsetCommit (it has no STALE_MEMBER_EPOCH)
    assert c.txn_commit("g", {("a", 0): 7}, member_id="m1", generation=epoch + 1) == {("a", 0): E.ILLEGAL_GENERATION}
    assert c.txn_commit("g", {("a", 0): 7}, member_id="zz", generation=epoch) == {("a", 0): E.UNKNOWN_MEMBER_ID}
    # below v3 no member is named: accepted
    assert c.txn_commit("g", {("a", 0): 7}, version=2) == {("a", 0): E.NONE}


def test_offset_delete_on_a_consumer_group():
    c = Ctx({"a": 2, "b": 1})
    epoch = consumer_group(c, topics=["a"])
    assert c.commit("g", {("a", 0): 5, ("b", 0): 3}, member_id="m1", generation=epoch) == {("a", 0): 0, ("b", 0): 0}
    resp = c.delete_offsets("g", {"a": [0], "b": [0]})
    assert resp.error_code == 0
    assert {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions} == {
        ("a", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("b", 0): E.NONE}
    assert c.fetched("g", {"a": [0], "b": [0]}) == {("a", 0): (5, 0), ("b", 0): (-1, 0)}
    assert c.delete_offsets("missing", {"a": [0]}).error_code == E.GROUP_ID_NOT_FOUND


RETENTION = {"offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 10_000}


def keep_alive(c, epoch, ms, gid="g", mid="m1"):
    """Advance ``ms`` with the member heartbeating every 10 s."""
    for _ in range(ms // 10_000):
        c.advance(10_000)
        assert c.hb(gid, mid, epoch).error_code == 0


def test_consumer_group_offsets_expire_and_the_empty_group_is_deleted():
    c = Ctx({"a": 2, "b": 1}, **RETENTION)
    epoch = consumer_group(c, topics=["a"])
    c.commit("g", {("a", 0): 5, ("b", 0): 3}, member_id="m1", generation=epoch)
    keep_alive(c, epoch, 50_000)
    assert c.fetched("g", {"a": [0], "b": [0]}) == {("a", 0): (5, 0), ("b", 0): (3, 0)}
    # past the retention: the unsubscribed topic's offset expires, the subscribed one stays
    keep_alive(c, epoch, 20_000)
    assert c.fetched("g", {"a": [0], "b": [0]}) == {("a", 0): (5, 0), ("b", 0): (-1, 0)}
    assert c.cg("g") is not None
    # the member leaves: the group is Empty, its offsets expire and the group is deleted
    assert c.hb("g", "m1", -1).error_code == 0
    assert c.cg("g").is_empty()
    c.advance(10_000)
    assert c.cg("g") is None and "g" not in c.shard.groups
    assert c.fetched("g", {"a": [0]}) == {("a", 0): (-1, 0)}


def test_expiry_does_not_fire_early_for_an_empty_consumer_group_with_offsets():
    c = Ctx({"a": 1}, **RETENTION)
    consumer_group(c)
    assert c.hb("g", "m1", -1).error_code == 0
    c.commit("g", {("a", 0): 5})            # an admin commit into the empty group
    c.advance(50_000)
    assert c.cg("g") is not None and c.fetched("g", {"a": [0]}) == {("a", 0): (5, 0)}
    c.advance(20_000)
    assert c.cg("g") is None and c.fetched("g", {"a": [0]}) == {("a", 0): (-1, 0)}


def test_one_namespace_across_types():
    c = Ctx({"a": 1})
    c.stable_group("classic", 1)
    consumer_group(c, gid="modern")
    by_type = {g.group_id: g.group_type for g in c.list_groups().groups}
    assert by_type == {"classic": "classic", "modern": "consumer"}
    assert [g.group_id for g in c.list_groups(types=["CONSUMER"]).groups] == ["modern"]
    assert [g.group_id for g in c.list_groups(types=["nope"]).groups] == []
    assert [g.group_id for g in c.list_groups(states=["stable"]).groups] == ["classic", "modern"]
    # DeleteGroups asks each group
    assert c.delete_groups("classic", "modern", "missing") == {
        "classic": E.NON_EMPTY_GROUP, "modern": E.NON_EMPTY_GROUP, "missing": E.GROUP_ID_NOT_FOUND}


def test_a_consumer_group_takes_over_an_empty_classic_group_with_a_tombstone():
    c = Ctx({"a": 1})
    c.commit("g", {("a", 0): 4})            # a simple classic group holding offsets
    assert c.shard.groups["g"].type is GroupType.CLASSIC
    consumer_group(c)
    assert c.shard.groups["g"].type is GroupType.CONSUMER
    from kgroup.coordinator import coordinator_records as rec
    assert any(rec.decode_record(k, v).record_type == rec.GROUP_METADATA and v is None
               for k, v in c.log if k[:2] == (2).to_bytes(2, "big"))
    assert c.fetched("g", {"a": [0]}) == {("a", 0): (4, 0)}


def test_two_session_timeouts_due_together_each_see_the_other_replayed():
    """Each expired timer is its own write (Kafka schedules each as a write operation): two
    members whose sessions end in the same poll bump the group epoch twice, to two epochs."""
    from kgroup.coordinator.consumer_group import consumer_group_records as cg_rec
    c = Ctx({"a": 3})
    consumer_group(c, mid="m1")
    consumer_group(c, mid="m2")
    epoch = consumer_group(c, mid="m3")
    before = c.cg("g").group_epoch
    for _ in range(5):                  # m3 heartbeats, m1 and m2 are silent
        c.advance(10_000)
        assert c.hb("g", "m3", c.cg("g").members["m3"].member_epoch).error_code == 0
    assert set(c.cg("g").members) == {"m3"}
    epochs = [cg_rec.decode_record(k, v).value_struct.epoch for k, v in c.log
              if k[:2] == (cg_rec.GROUP_METADATA).to_bytes(2, "big") and v is not None]
    assert epochs[-2:] == [before + 1, before + 2], epochs
    assert epoch > 0
