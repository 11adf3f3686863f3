"""Share group administration over the wire, without a client library: DescribeShareGroupOffsets
(90) v0-1, AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92) as Kafka 4.3 answers them
(response layouts, topic ids, errors, share.version 0), and the other group APIs on a share group:
ListGroups (type share), DescribeGroups, OffsetFetch, OffsetDelete, DeleteGroups (its share state
deleted first; a non-empty group refused)."""
from __future__ import annotations

import pytest

from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from kgroup.protocol.messages.api_versions import ApiVersionsRequest
from kgroup.protocol.messages.delete_groups import DeleteGroupsRequest
from kgroup.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest
from kgroup.protocol.messages.describe_groups import DescribeGroupsRequest
from kgroup.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from kgroup.protocol.messages.list_groups import ListGroupsRequest
from kgroup.protocol.messages.offset_delete import OffsetDeleteRequest
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from kgroup.protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from kgroup.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from kgroup.protocol.messages.update_features import UpdateFeaturesRequest
from kgroup.testing.broker import KafkaBroker
from tests.harness import RawClient

AT = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
DG = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
DT = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
ZERO = bytes(16)
UNKNOWN = (E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")


@pytest.fixture
def b(tmp_path):
    with KafkaBroker(tmp_path / "d") as broker:
        broker.create_topic("t", partitions=2)
        broker.produce("t", [b"v%d" % i for i in range(10)], partition=0)
        yield broker


def alter(c, group, offsets):
    return c.request(AlterShareGroupOffsetsRequest(group_id=group, topics=[
        AT(topic_name=t, partitions=[AT.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=o)
                                     for p, o in ps.items()]) for t, ps in offsets.items()]), 0)


def describe(c, group, topics=None, version=1):
    req = DescribeShareGroupOffsetsRequest(groups=[DG(group_id=group, topics=None if topics is None else [
        DG.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps) for t, ps in topics.items()])])
    [g] = c.request(req, version).groups
    return g


def offsets(g):
    return {(t.topic_name, p.partition_index): (p.start_offset, p.leader_epoch, p.lag, p.error_code)
            for t in g.topics for p in t.partitions}


def delete_offsets(c, group, *topics):
    return c.request(DeleteShareGroupOffsetsRequest(group_id=group, topics=[DT(topic_name=t) for t in topics]), 0)


def topic_id(b, name):
    return b.call(lambda broker: broker.metadata.get(name).topic_id)


def test_alter_describe_delete_offsets(b):
    c = RawClient(b.port)
    tid = topic_id(b, "t")
    keys = {k.api_key: (k.min_version, k.max_version) for k in
            c.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3).api_keys}
    assert (keys[90], keys[91], keys[92]) == ((0, 1), (0, 0), (0, 0))
    # AlterShareGroupOffsets creates the missing group empty; unknown topics come first, then the
    # group coordinator's answer, with the topic ids
    r = alter(c, "sg", {"t": {0: 4, 7: 1}, "nope": {0: 1}})
    assert r.error_code == 0
    assert [(t.topic_name, t.topic_id, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
            for t in r.responses] == [("nope", ZERO, [(0, *UNKNOWN)]), ("t", tid, [(0, 0, None), (7, *UNKNOWN)])]
    # every share-partition with state: start offset 4, leader epoch -1 (initialized), lag 10 - 4
    g = describe(c, "sg")
    assert (g.error_code, offsets(g)) == (0, {("t", 0): (4, -1, 6, 0)})
    assert g.topics[0].topic_id == tid
    # named: a partition without state is -1, a topic the broker does not have too (id zero); v0 has no lag
    g = describe(c, "sg", {"t": [0, 1], "nope": [3]}, version=0)
    assert offsets(g) == {("t", 0): (4, -1, -1, 0), ("t", 1): (-1, 0, -1, 0), ("nope", 3): (-1, 0, -1, 0)}
    assert [t.topic_id for t in g.topics] == [tid, ZERO]
    assert describe(c, "sg", {}).topics == []
    assert (describe(c, "missing").error_code, describe(c, "missing").topics) == (0, [])
    # DeleteShareGroupOffsets: the deleted topics, then the refused ones
    r = delete_offsets(c, "sg", "t", "nope")
    assert r.error_code == 0
    assert [(t.topic_name, t.topic_id, t.error_code, t.error_message) for t in r.responses] == [
        ("t", tid, 0, None), ("nope", ZERO, *UNKNOWN)]
    assert describe(c, "sg").topics == []
    R = ReadShareGroupStateRequest.ReadStateData
    read = c.request(ReadShareGroupStateRequest(group_id="sg", topics=[R(topic_id=tid, partitions=[
        R.PartitionData(partition=0, leader_epoch=0)])]), 0)
    assert read.results[0].partitions[0].error_code == E.INVALID_REQUEST       # the state is gone
    r = delete_offsets(c, "sg", "t")
    assert [(t.topic_name, t.error_code, t.error_message) for t in r.responses] == [
        ("t", E.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete.")]
    r = delete_offsets(c, "missing", "t")
    assert (r.error_code, r.error_message, r.responses) == (E.GROUP_ID_NOT_FOUND, "Group missing not found.", [])
    assert delete_offsets(c, "", "t").error_code == E.INVALID_GROUP_ID
    assert alter(c, "", {"t": {0: 1}}).error_code == E.INVALID_GROUP_ID


def test_a_group_with_a_member_is_refused(b):
    c = RawClient(b.port)
    hb = c.request(ShareGroupHeartbeatRequest(group_id="live", member_id="m1", member_epoch=0,
                                              subscribed_topic_names=["t"]), 1)
    assert hb.error_code == 0
    r = alter(c, "live", {"t": {0: 1}})
    assert (r.error_code, r.error_message, r.responses) == (E.NON_EMPTY_GROUP, "The group is not empty.", [])
    r = delete_offsets(c, "live", "t")
    assert (r.error_code, r.error_message) == (E.NON_EMPTY_GROUP, "The group is not empty.")
    r = c.request(DeleteGroupsRequest(groups_names=["live"]), 2)
    assert [(x.group_id, x.error_code) for x in r.results] == [("live", E.NON_EMPTY_GROUP)]
    # the member leaves: the group and its share state go
    c.request(ShareGroupHeartbeatRequest(group_id="live", member_id="m1", member_epoch=-1), 1)
    r = c.request(DeleteGroupsRequest(groups_names=["live", "nope"]), 2)
    assert sorted((x.group_id, x.error_code) for x in r.results) == [("live", 0), ("nope", E.GROUP_ID_NOT_FOUND)]
    assert describe(c, "live").topics == []


def test_other_group_apis_on_a_share_group(b):
    c = RawClient(b.port)
    alter(c, "sg", {"t": {0: 2}})
    listed = c.request(ListGroupsRequest(states_filter=["Empty"], types_filter=["share"]), 5).groups
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed] == [
        ("sg", "share", "Empty", "share")]
    assert c.request(ListGroupsRequest(states_filter=[], types_filter=["consumer", "classic"]), 5).groups == []
    [d] = c.request(DescribeGroupsRequest(groups=["sg"]), 6).groups
    assert (d.group_state, d.error_code, d.error_message) == ("Dead", E.GROUP_ID_NOT_FOUND,
                                                              "Group sg is not a classic group.")
    [d] = c.request(DescribeGroupsRequest(groups=["sg"]), 5).groups
    assert (d.group_state, d.error_code) == ("Dead", 0)
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    f = c.request(OffsetFetchRequest(groups=[G(group_id="sg", topics=None)], require_stable=False), 9)
    assert (f.groups[0].error_code, f.groups[0].topics) == (0, [])
    f = c.request(OffsetFetchRequest(groups=[G(group_id="sg", topics=[G.OffsetFetchRequestTopics(
        name="t", partition_indexes=[0])])], require_stable=False), 9)
    assert [(p.partition_index, p.committed_offset, p.error_code) for p in f.groups[0].topics[0].partitions] == [
        (0, -1, 0)]
    OT = OffsetDeleteRequest.OffsetDeleteRequestTopic
    r = c.request(OffsetDeleteRequest(group_id="sg", topics=[OT(name="t", partitions=[
        OT.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
    assert r.error_code == E.GROUP_ID_NOT_FOUND
    r = c.request(DeleteGroupsRequest(groups_names=["sg"]), 2)
    assert [(x.group_id, x.error_code) for x in r.results] == [("sg", 0)]
    assert c.request(ListGroupsRequest(states_filter=[], types_filter=["share"]), 5).groups == []


def test_share_version_0_turns_them_off(b):
    c = RawClient(b.port)
    U = UpdateFeaturesRequest.FeatureUpdateKey
    assert c.request(UpdateFeaturesRequest(feature_updates=[U(feature="share.version", max_version_level=0,
                                                              upgrade_type=2, allow_downgrade=True)]), 1).error_code == 0
    assert describe(c, "sg").error_code == E.UNSUPPORTED_VERSION
    assert alter(c, "sg", {"t": {0: 1}}).error_code == E.UNSUPPORTED_VERSION
    assert delete_offsets(c, "sg", "t").error_code == E.UNSUPPORTED_VERSION


def _failing_share_coordinator(broker, api, error=None):
    """The share coordinator's ``api`` answers every partition ``error`` (None: the call itself
    fails); returns the undo."""
    from kgroup.broker.pending import PendingResponse
    from kgroup.share_coordinator.shard import delete_answer, initialize_answer
    rt = broker.share_coordinator
    real = rt.call
    answer = {"delete": delete_answer, "initialize": initialize_answer}[api]

    def call(name, req, version=1):
        if name != api:
            return real(name, req, version)
        out = PendingResponse()
        if error is None:
            out.fail(RuntimeError("share coordinator down"))
            return out
        resp = answer(req.topics[0].topic_id, 0).__class__(results=[])
        for t in req.topics:
            part = answer(t.topic_id, 0)
            part.results[0].partitions = [answer(t.topic_id, p.partition, error, error.message).results[0].partitions[0]
                                          for p in t.partitions]
            resp.results.extend(part.results)
        out.answer(resp)
        return out
    rt.call = call
    return lambda b: setattr(rt, "call", real)


def test_a_failing_share_coordinator(b):
    """Kafka's answers when the persister fails: DeleteGroups keeps the share group and answers the
    partition's error (its share-partitions stay deleting, retried by the next DeleteGroups);
    AlterShareGroupOffsets answers each refused partition's error and leaves them initializing;
    a DeleteShareGroupOffsets whose call fails as a whole is UNKNOWN_SERVER_ERROR."""
    c = RawClient(b.port)
    tid = topic_id(b, "t")
    alter(c, "sg", {"t": {0: 2}})
    undo = b.call(lambda broker: _failing_share_coordinator(broker, "delete", E.COORDINATOR_LOAD_IN_PROGRESS))
    r = c.request(DeleteGroupsRequest(groups_names=["sg"]), 2)
    assert [(x.group_id, x.error_code) for x in r.results] == [("sg", E.COORDINATOR_LOAD_IN_PROGRESS)]
    deleting = b.call(lambda broker: set(broker.group_coordinator.shards[broker.group_coordinator.shard_for("sg")]
                                         .share_group_manager.share_group("sg").state_partitions.deleting))
    assert deleting == {tid}
    b.call(undo)
    r = c.request(DeleteGroupsRequest(groups_names=["sg"]), 2)
    assert [(x.group_id, x.error_code) for x in r.results] == [("sg", 0)]
    undo = b.call(lambda broker: _failing_share_coordinator(broker, "initialize", E.FENCED_STATE_EPOCH))
    r = alter(c, "sg2", {"t": {0: 2, 1: 0}})
    assert r.error_code == 0
    assert [(p.partition_index, p.error_code) for p in r.responses[0].partitions] == [
        (0, E.FENCED_STATE_EPOCH), (1, E.FENCED_STATE_EPOCH)]
    assert describe(c, "sg2").topics == []          # not initialized
    b.call(undo)
    alter(c, "sg3", {"t": {0: 1}})
    undo = b.call(lambda broker: _failing_share_coordinator(broker, "delete", None))
    r = delete_offsets(c, "sg3", "t")
    assert (r.error_code, r.error_message, r.responses) == (E.UNKNOWN_SERVER_ERROR, E.UNKNOWN_SERVER_ERROR.message, [])
    b.call(undo)
    assert [(t.topic_name, t.error_code) for t in delete_offsets(c, "sg3", "t").responses] == [("t", 0)]


def test_admin_rides_through_coordinator_errors(kafka_broker):
    """Our Admin retries what Java's share group handlers retry: a DescribeShareGroupOffsets group
    answered COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR (injected) is asked again; an
    AlterShareGroupOffsets answered COORDINATOR_NOT_AVAILABLE too."""
    import asyncio
    from kgroup.client.admin import Admin, SharePartitionOffsetInfo
    from kgroup.client.assignors import TopicPartition as TP
    kafka_broker.create_topic("t")
    kafka_broker.produce("t", [b"x"] * 3)

    async def go():
        async with Admin(bootstrap_servers=kafka_broker.bootstrap_servers) as a:
            kafka_broker.inject_errors("AlterShareGroupOffsets", ["COORDINATOR_NOT_AVAILABLE"], group="sg")
            assert await a.alter_share_group_offsets("sg", {TP("t", 0): 1}) == {TP("t", 0): None}
            kafka_broker.inject_errors("DescribeShareGroupOffsets", ["COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"],
                                       group="sg")
            return await a.list_share_group_offsets("sg")
    assert asyncio.run(go()) == {TP("t", 0): SharePartitionOffsetInfo(1, None, 2)}
