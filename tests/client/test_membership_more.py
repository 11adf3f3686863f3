"""More error paths of the membership machine: coordinator and authorization errors, the
leader's metadata and assignor failures, KIP-814 skip-assignment, unsubscribe, commit fencing."""

from kgroup.client.assignors import (Assignment, ClusterMetadata, ConsumerPartitionAssignor, RebalanceProtocol,
                                     Subscription, TopicPartition as TP)
from kgroup.client.consumer_protocol import encode_assignment, encode_subscription
from kgroup.client.errors import FencedInstanceIdError, RebalanceInProgressError
from kgroup.client.membership import GroupMembership, MemberState
from kgroup.client.membership_types import (CommitCompleted, CoordinatorLost, FetchMetadata, GroupError,
                                            MembershipConfig, PartitionsAssigned, PartitionsRevoked, SendRequest)
from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.find_coordinator import FindCoordinatorResponse
from kgroup.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kgroup.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kgroup.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from kgroup.protocol.messages.sync_group import SyncGroupResponse
from tests.client.test_membership import Member, commit_response, one, sends


def joined_as_leader(mb, members=("m1", "m2"), protocol="range", skip=False):
    mb.find()
    join = one(mb.fg(), SendRequest)
    resp = JoinGroupResponse(error_code=0, generation_id=1, protocol_name=protocol, leader="m1", member_id="m1",
                             skip_assignment=skip, members=[JoinGroupResponse.JoinGroupResponseMember(
                                 member_id=m, metadata=encode_subscription(Subscription(["t"]))) for m in members])
    return one(mb.reply(join, resp), FetchMetadata)


def test_sync_coordinator_error_rediscovers_and_rejoins_without_revoking():
    mb = Member()
    mb.stable(assigned=[TP("t", 0)])
    mb.m.request_rejoin("x")
    assert mb.fg() == [PartitionsRevoked((TP("t", 0),))]
    join = one(mb.fg(), SendRequest)
    sync = one(mb.reply(join, JoinGroupResponse(error_code=0, generation_id=2, protocol_name="range", leader="x",
                                                member_id="m1")), SendRequest)
    assert one(mb.reply(sync, SyncGroupResponse(error_code=E.COORDINATOR_NOT_AVAILABLE)), CoordinatorLost)
    mb.find(mb.fg())
    assert isinstance(one(mb.fg(100), SendRequest).request, JoinGroupRequest)  # straight to JoinGroup


def test_sync_protocol_name_mismatch_is_an_error():
    mb = Member()
    mb.find()
    join = one(mb.fg(), SendRequest)
    sync = one(mb.reply(join, JoinGroupResponse(error_code=0, generation_id=1, protocol_name="range", leader="x",
                                                member_id="m1")), SendRequest)
    outs = mb.reply(sync, SyncGroupResponse(error_code=0, protocol_type="consumer", protocol_name="roundrobin",
                                            assignment=encode_assignment(Assignment([]))))
    assert one(outs, GroupError).error.code == E.INCONSISTENT_GROUP_PROTOCOL
    assert mb.m.rejoin_needed


def test_group_authorization_failed_is_fatal():
    mb = Member()
    outs = mb.reply(one(mb.fg(), SendRequest), FindCoordinatorResponse(error_code=E.GROUP_AUTHORIZATION_FAILED))
    assert one(outs, GroupError).fatal
    mb2 = Member()
    mb2.stable()
    hb = sends(mb2.tick(3000), HeartbeatRequest)[0]
    assert one(mb2.reply(hb, HeartbeatResponse(error_code=E.GROUP_AUTHORIZATION_FAILED)), GroupError).fatal


def test_leader_metadata_failure_retries_the_join():
    mb = Member()
    need = joined_as_leader(mb)
    outs = mb.m.on_failure(need.token, ConnectionError("metadata"), mb.now)
    assert not any(isinstance(o, GroupError) for o in outs)
    assert isinstance(one(mb.fg(100), SendRequest).request, JoinGroupRequest)


def test_static_leader_skip_assignment_sends_empty_sync():
    mb = Member(group_instance_id="i1")
    need = joined_as_leader(mb, skip=True)
    sync = one(mb.m.on_metadata(need.token, ClusterMetadata({"t": 2}), mb.now), SendRequest)
    assert sync.request.assignments == [] and mb.m.is_leader


class Broken(ConsumerPartitionAssignor):
    name = "broken"

    def assign(self, cluster, subscriptions):
        raise RuntimeError("assignor bug")


class GreedyCooperative(ConsumerPartitionAssignor):
    """Claims to be cooperative but hands owned partitions straight to another member."""
    name = "greedy"

    def supported_protocols(self):
        return [RebalanceProtocol.COOPERATIVE]

    def assign(self, cluster, subscriptions):
        members = sorted(subscriptions)
        return {members[0]: Assignment([]), members[1]: Assignment([TP("t", 0)])}


def test_assignor_failures_surface_and_the_member_retries():
    mb = Member()
    mb.m.assignors = [Broken()]
    need = joined_as_leader(mb, protocol="broken")
    outs = mb.m.on_metadata(need.token, ClusterMetadata({"t": 1}), mb.now)
    assert isinstance(one(outs, GroupError).error, RuntimeError)
    assert isinstance(one(mb.fg(100), SendRequest).request, JoinGroupRequest)


def test_cooperative_assignment_moving_owned_partitions_is_rejected():
    config = MembershipConfig("g", enable_auto_commit=False)
    m = GroupMembership(config, [GreedyCooperative()], random=lambda: 0.5)
    m.subscribe({"t"})
    mb = Member()
    mb.m = m
    mb.find()
    join = one(mb.fg(), SendRequest)
    owner = encode_subscription(Subscription(["t"], None, [TP("t", 0)], 1))
    resp = JoinGroupResponse(error_code=0, generation_id=2, protocol_name="greedy", leader="m1", member_id="m1",
                             members=[JoinGroupResponse.JoinGroupResponseMember(member_id="m1", metadata=owner),
                                      JoinGroupResponse.JoinGroupResponseMember(
                                          member_id="m2", metadata=encode_subscription(Subscription(["t"])))])
    need = one(mb.reply(join, resp), FetchMetadata)
    err = one(m.on_metadata(need.token, ClusterMetadata({"t": 1}), mb.now), GroupError).error
    assert "COOPERATIVE" in str(err)


def test_join_answer_after_leaving_is_ignored_and_retried():
    mb = Member()
    mb.find()
    join = one(mb.fg(), SendRequest)
    mb.m.leave(mb.now)  # state UNJOINED while the JoinGroup is in flight
    outs = mb.reply(join, JoinGroupResponse(error_code=0, generation_id=1, protocol_name="range", leader="x",
                                            member_id="m1"))
    assert not any(isinstance(o, GroupError) for o in outs) and mb.m.state == MemberState.UNJOINED


def test_unsubscribe_revokes_and_leaves():
    mb = Member()
    mb.stable(assigned=[TP("t", 0)])
    assert mb.m.unsubscribe(mb.now) == [PartitionsRevoked((TP("t", 0),))]
    leave = one(mb.m.maybe_leave_group(mb.now, "the consumer unsubscribed from all topics"), SendRequest)
    assert isinstance(leave.request, LeaveGroupRequest)
    assert mb.reply(leave, LeaveGroupResponse(error_code=E.UNKNOWN_MEMBER_ID)) == []  # only logged
    assert mb.fg(10_000) == [] and mb.tick(10_000) == []  # no group: no joins, no heartbeats


def test_commit_fenced_instance_id_and_stale_generation():
    mb = Member(group_instance_id="i1")
    mb.stable(assigned=[TP("t", 0)])
    _, outs = mb.m.commit({TP("t", 0): 1}, mb.now)
    assert one(outs, SendRequest).request.group_instance_id == "i1"
    done = one(mb.reply(one(outs, SendRequest), commit_response({TP("t", 0): 1}, E.FENCED_INSTANCE_ID)),
               CommitCompleted)
    assert isinstance(done.error, FencedInstanceIdError)
    # a commit answered after the member moved on to a new rebalance
    mb2 = Member()
    mb2.stable(assigned=[TP("t", 0)])
    _, outs = mb2.m.commit({TP("t", 0): 1}, mb2.now)
    commit = one(outs, SendRequest)
    mb2.m.request_rejoin("x")
    mb2.fg()
    join = one(mb2.fg(), SendRequest)
    mb2.reply(join, JoinGroupResponse(error_code=E.MEMBER_ID_REQUIRED, member_id="m9"))
    one(mb2.fg(), SendRequest)  # PREPARING_REBALANCE with another member id
    done = one(mb2.reply(commit, commit_response({TP("t", 0): 1}, E.UNKNOWN_MEMBER_ID)), CommitCompleted)
    assert isinstance(done.error, RebalanceInProgressError)
    assert mb2.m.generation.member_id == "m9"  # not reset by the stale answer


def test_partitions_assigned_lists_only_new_partitions_on_eager_rejoin():
    mb = Member()
    mb.stable(assigned=[TP("t", 0)])
    mb.m.request_rejoin("x")
    outs = mb.join(generation=2, assigned=[TP("t", 0), TP("t", 1)])
    assert outs == [PartitionsAssigned((TP("t", 0), TP("t", 1)))]  # eager revoked all: all are new


def test_manual_assignment_auto_commits_without_generation():
    from kgroup.client.types import OffsetAndMetadata
    mb = Member(enable_auto_commit=True, auto_commit_interval_ms=1000, offsets={TP("t", 0): OffsetAndMetadata(9)})
    mb.m.subscription = None  # assign(): no group membership
    assert mb.fg() == [] and mb.fg(500) == []  # no subscription: no coordinator needed yet
    assert mb.fg(500) == []  # interval elapsed: the commit waits for the coordinator...
    find = one(mb.tick(), SendRequest)  # ...which the next tick looks up
    mb.reply(find, FindCoordinatorResponse(error_code=0, node_id=1, host="h", port=1))
    commit = one(mb.tick(), SendRequest).request
    assert commit.generation_id_or_member_epoch == -1 and commit.member_id == ""
    assert commit.topics[0].partitions[0].committed_offset == 9
