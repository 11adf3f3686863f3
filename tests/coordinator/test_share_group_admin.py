"""Share group administration on the shard, on the fake clock (Kafka's GroupMetadataManager /
GroupCoordinatorShard share paths): the initialized partitions DescribeShareGroupOffsets reads,
AlterShareGroupOffsets (a missing group created empty, NON_EMPTY_GROUP, unknown topics and
partitions, record 15 and the initialization asked of the share coordinator),
DeleteShareGroupOffsets in its two steps (to deleting, then done), the share-partition deletions
DeleteGroups asks for, and the heartbeat taking a deleting topic back. Every operation is checked
by the harness: live durable state == a shard replayed from the log."""
from kgroup.coordinator.share_group.manager import AlterOffsets, DeleteOffsetsPlan, ShareOffsetsDeleted
from kgroup.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from kgroup.protocol.messages.delete_groups import DeleteGroupsRequest
from kgroup.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest
from kgroup.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest

from .support import E, S, topic_id
from .test_share_group import ShCtx

AT = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
AP = AT.AlterShareGroupOffsetsRequestPartition
DG = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup


class AdminCtx(ShCtx):
    def stable(self, group_id="g", topics=("a",), member="m1"):
        """A one-member share group whose share-partitions are initialized and assigned."""
        r = self.shb(group_id, member, 0, topics=list(topics))
        self.initialize_all()
        return self.shb(group_id, member, r.member_epoch)

    def leave(self, group_id="g", member="m1"):
        return self.shb(group_id, member, -1)

    def initialized(self, group_id, topics=None, succeeded=True):
        if topics is None:
            return self.ask(S.handle_share_group_initialized_partitions, DG(group_id=group_id), 0)
        return super().initialized(group_id, topics, succeeded)

    def ask(self, handler, req, version=0):
        token = self.token()
        self.handle(handler, req, version, token)
        return self.answer(token)

    def alter(self, group_id, offsets):
        """``offsets``: {topic: {partition: start offset}}."""
        req = AlterShareGroupOffsetsRequest(group_id=group_id, topics=[
            AT(topic_name=t, partitions=[AP(partition_index=p, start_offset=o) for p, o in ps.items()])
            for t, ps in offsets.items()])
        return self.ask(S.handle_alter_share_group_offsets, req)

    def initiate_delete(self, group_id, *topics):
        T = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
        return self.ask(S.handle_initiate_delete_share_group_offsets,
                        DeleteShareGroupOffsetsRequest(group_id=group_id, topics=[T(topic_name=t) for t in topics]))

    def complete_delete(self, group_id, deleted, errors=()):
        return self.ask(S.handle_complete_delete_share_group_offsets, ShareOffsetsDeleted(group_id, deleted, list(errors)))

    def delete_requests(self, *group_ids):
        return self.ask(S.handle_share_group_delete_requests, DeleteGroupsRequest(groups_names=list(group_ids)), 2)

    def sp(self, group_id="g"):
        sp = self.sg(group_id).state_partitions
        return ({t: set(v.partitions) for t, v in sp.initializing.items()},
                {t: set(v.partitions) for t, v in sp.initialized.items()}, set(sp.deleting))


A, B = topic_id("a"), topic_id("b")


def test_initialized_partitions_are_what_describe_reads():
    c = AdminCtx({"a": 2, "b": 1})
    assert c.initialized("g") == {}                  # no group: nothing (not an error, as Kafka)
    c.shb("g", "m1", 0, topics=["a", "b"])
    assert c.initialized("g") == {}                  # initializing is not initialized
    c.initialize_all()
    assert c.initialized("g") == {A: {0, 1}, B: {0}}
    c.hb("cg", "x", 0, topics=["a"])
    assert c.initialized("cg") == {}                 # a consumer group has no share state


def test_alter_needs_an_empty_share_group():
    c = AdminCtx({"a": 2})
    c.stable()
    n = len(c.log)
    r = c.alter("g", {"a": {0: 5}})
    assert (r.error_code, r.error_message) == (E.NON_EMPTY_GROUP, "The group is not empty.")
    assert len(c.log) == n                          # refused: nothing written
    c.hb("cg", "x", 0, topics=["a"])
    r = c.alter("cg", {"a": {0: 5}})
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Group cg is not a share group.")
    r = c.alter("", {"a": {0: 5}})
    assert r.error_code == E.INVALID_GROUP_ID


def test_alter_an_empty_group_marks_initializing_and_asks_the_share_coordinator():
    c = AdminCtx({"a": 3})
    c.stable()
    c.leave()
    epoch = c.sg("g").group_epoch
    plan = c.alter("g", {"a": {0: 5, 2: 7, 9: 1}, "nope": {0: 1}})
    assert isinstance(plan, AlterOffsets)
    got = {t.topic_name: [(p.partition_index, p.error_code, p.error_message) for p in t.partitions]
           for t in plan.response.responses}
    unknown = (E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
    assert got == {"a": [(0, 0, None), (2, 0, None), (9, *unknown)], "nope": [(0, *unknown)]}
    assert [t.topic_id for t in plan.response.responses] == [A, bytes(16)]
    init = plan.initialize
    assert (init.group_id, init.group_epoch, init.topics, init.start_offsets) == (
        "g", epoch, {A: {0, 2}}, {A: {0: 5, 2: 7}})
    initializing, initialized, deleting = c.sp()
    assert initializing == {A: {0, 2}} and initialized == {A: {0, 1, 2}} and not deleting
    # the share coordinator answered: initialized again, nothing initializing
    c.initialized("g", init.topics)
    assert c.sp() == ({}, {A: {0, 1, 2}}, set())


def test_alter_creates_a_missing_group_empty():
    c = AdminCtx({"a": 2})
    plan = c.alter("new", {"a": {1: 4}})
    assert plan.initialize.group_epoch == 0 and plan.initialize.start_offsets == {A: {1: 4}}
    g = c.sg("new")
    assert g is not None and g.state.value == "Empty" and not g.members
    assert c.list_groups(types=["share"]).groups[0].group_id == "new"
    c.initialized("new", plan.initialize.topics)
    assert c.initialized("new") == {A: {1}}
    # a member joining later initializes the rest only
    c.shb("new", "m1", 0, topics=["a"])
    [init] = c.shard.share_group_manager.drain_initializations()
    assert dict(init.topics) == {A: {0}} and init.start_offsets is None
    # an alter of unknown topics only writes nothing to ask
    plan = c.alter("other", {"nope": {0: 1}})
    assert plan.initialize is None and c.sg("other") is None


def test_delete_offsets_in_two_steps():
    c = AdminCtx({"a": 2, "b": 1})
    c.stable(topics=("a", "b"))
    plan = c.initiate_delete("g", "a")
    assert plan == DeleteOffsetsPlan(E.NON_EMPTY_GROUP, "The group is not empty.")
    c.leave()
    plan = c.initiate_delete("g", "a", "nope")
    assert (plan.error_code, plan.delete) == (0, {A: {0, 1}})
    assert [(t.topic_name, t.error_code, t.error_message) for t in plan.error_topics] == [
        ("nope", E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")]
    assert c.sp() == ({}, {B: {0}}, {A})
    # a topic already deleting is asked again, with all its partitions; one without state is refused
    plan = c.initiate_delete("g", "a")
    assert plan.delete == {A: {0, 1}} and plan.error_topics == []
    c.add_topic("c", 1)
    plan = c.initiate_delete("g", "c")
    assert plan.delete is None
    assert [(t.topic_name, t.error_message) for t in plan.error_topics] == [
        ("c", "There is no offset information to delete.")]
    # the share coordinator deleted A: it leaves deleting; the answer lists it, then the refused ones
    resp = c.complete_delete("g", {A: "a"}, plan.error_topics)
    assert [(t.topic_name, t.topic_id, t.error_code) for t in resp.responses] == [
        ("a", A, 0), ("c", bytes(16), E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert c.sp() == ({}, {B: {0}}, set())


def test_delete_offsets_errors():
    c = AdminCtx({"a": 1})
    assert c.initiate_delete("g", "a") == DeleteOffsetsPlan(E.GROUP_ID_NOT_FOUND, "Group g not found.")
    c.hb("cg", "x", 0, topics=["a"])
    assert c.initiate_delete("cg", "a").error_message == "Group cg is not a share group."
    assert c.initiate_delete("", "a").error_code == E.INVALID_GROUP_ID
    # a share group without any state metadata: nothing to do, nothing answered per topic
    c.shb("g", "m1", 0, topics=["nope"])
    c.leave()
    n = len(c.log)
    assert c.initiate_delete("g", "a") == DeleteOffsetsPlan(0, None, [], None)
    assert len(c.log) == n


def test_a_heartbeat_takes_a_deleting_topic_back():
    c = AdminCtx({"a": 2})
    c.stable()
    c.leave()
    c.initiate_delete("g", "a")
    assert c.sp() == ({}, {}, {A})
    r = c.shb("g", "m2", 0, topics=["a"])
    assert r.error_code == 0
    assert c.sp() == ({A: {0, 1}}, {}, set())        # initializing again, no longer deleting


def test_delete_group_requests():
    c = AdminCtx({"a": 2, "b": 1})
    c.stable("g1", topics=("a",))
    c.stable("g2", topics=("a", "b"))
    c.leave("g2")
    c.shb("g3", "m1", 0, topics=["b"])               # initializing only
    c.leave("g3")
    c.hb("cg", "x", 0, topics=["a"])
    out = c.delete_requests("g1", "g2", "g3", "cg", "missing")
    assert out == {"g1": (None, E.NON_EMPTY_GROUP), "g2": ({A: {0, 1}, B: {0}}, E.NONE), "g3": ({B: {0}}, E.NONE)}
    assert c.sp("g2") == ({}, {}, {A, B}) and c.sp("g3") == ({}, {}, {B})
    # a deletion that did not complete is retried with every partition of the topic
    assert c.delete_requests("g2") == {"g2": ({A: {0, 1}, B: {0}}, E.NONE)}
    # then the group itself goes (its record 15 tombstoned with the rest)
    assert c.delete_groups("g2") == {"g2": 0}
    assert c.sg("g2") is None


def test_requests_while_loading_answer_in_each_api_form():
    c = AdminCtx({"a": 1})
    c.shard.is_loaded = False
    assert c.initialized("g").error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    r = c.alter("g", {"a": {0: 1}})
    assert (r.error_code, r.error_message) == (E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_LOAD_IN_PROGRESS.message)
    assert c.initiate_delete("g", "a").error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert c.complete_delete("g", {A: "a"}).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert c.delete_requests("g", "h") == {"g": (None, E.COORDINATOR_LOAD_IN_PROGRESS),
                                           "h": (None, E.COORDINATOR_LOAD_IN_PROGRESS)}


def test_a_failed_write_answers_the_error():
    c = AdminCtx({"a": 1})
    c.stable()
    c.leave()
    c.fail_writes = E.NOT_LEADER_OR_FOLLOWER
    r = c.alter("g", {"a": {0: 1}})
    assert r.error_code == E.NOT_COORDINATOR
    assert c.initiate_delete("g", "a").error_code == E.NOT_COORDINATOR
    c.fail_writes = None
    assert c.sp() == ({}, {A: {0}}, set())           # nothing changed


def test_classic_protocol_requests_for_a_share_group_id():
    """Kafka's getOrMaybeCreateClassicGroup: a share group is not a classic group, so a JoinGroup
    (new member or not), SyncGroup, Heartbeat or LeaveGroup for its id answers UNKNOWN_MEMBER_ID and
    the share group stays as it was."""
    from .support import Ctx
    c = AdminCtx({"a": 1})
    c.stable()
    before = c.sg("g").durable_view()
    n = len(c.log)
    for member in ("", "m1"):
        r = c.answer(c.join("g", member))
        assert (r.error_code, r.member_id) == (E.UNKNOWN_MEMBER_ID, member)
    assert c.answer(c.sync("g", "m1", 1)).error_code == E.UNKNOWN_MEMBER_ID
    assert c.heartbeat("g", "m1", 1) == E.UNKNOWN_MEMBER_ID
    r = Ctx.leave(c, "g", "m1")
    assert (r.error_code, [(m.member_id, m.error_code) for m in r.members]) == (0, [("m1", E.UNKNOWN_MEMBER_ID)])
    assert len(c.log) == n and c.sg("g").durable_view() == before
