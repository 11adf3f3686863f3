"""The sans-IO membership machine with a fake clock: happy paths, then every error path of
Java's AbstractCoordinator/ConsumerCoordinator that the client must reproduce. No sockets, no
sleeping: time only moves when a test says so."""
import ast
import pathlib

import pytest

from kgroup.client.assignors import Assignment, TopicPartition as TP, get_assignor
from kgroup.client.consumer_protocol import decode_subscription, encode_assignment, encode_subscription
from kgroup.client.errors import CommitFailedError, FencedInstanceIdError, RebalanceInProgressError
from kgroup.client.membership import GroupMembership, MemberState
from kgroup.client.membership_types import (CommitCompleted, CoordinatorDiscovered, CoordinatorLost,
                                            FetchMetadata, GroupError, MembershipConfig, PartitionsAssigned,
                                            PartitionsLost, PartitionsRevoked, PendingRevocation, SendRequest)
from kgroup.client.assignors import ClusterMetadata, Subscription
from kgroup.client.types import OffsetAndMetadata
from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.find_coordinator import FindCoordinatorResponse
from kgroup.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kgroup.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kgroup.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from kgroup.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from kgroup.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

GROUP = "g"


class Member:
    """A machine, a fake clock and helpers to answer its requests."""

    def __init__(self, assignors=("range", "cooperative-sticky"), random=lambda: 0.5, offsets=None, **cfg):
        cfg.setdefault("enable_auto_commit", False)
        self.config = MembershipConfig(GROUP, **cfg)
        self.offsets = offsets if offsets is not None else {}
        self.m = GroupMembership(self.config, [get_assignor(a) for a in assignors], random=random,
                                 offsets_to_commit=lambda: self.offsets)
        self.now = 1000
        self.m.subscribe({"t"})

    def tick(self, ms=0, foreground=False):
        self.now += ms
        return self.m.poll(self.now, foreground)

    def fg(self, ms=0):
        return self.tick(ms, foreground=True)

    def reply(self, send, response):
        return self.m.on_response(send.token, response, self.now)

    def fail(self, send, exc=None):
        return self.m.on_failure(send.token, exc or ConnectionError("boom"), self.now)

    def find(self, outs=None):
        outs = self.fg() if outs is None else outs
        send = one(outs, SendRequest)
        assert not send.to_coordinator and send.request.key == GROUP
        outs = self.reply(send, FindCoordinatorResponse(error_code=0, node_id=1, host="h", port=9092))
        assert one(outs, CoordinatorDiscovered).node.port == 9092
        return outs

    def join(self, member_id="m1", generation=1, leader="other", protocol="range", assigned=(), prepare=True):
        """Drive one whole rebalance as a follower; returns the assignment callback outputs."""
        outs = self.fg()
        if prepare and isinstance(outs[0], PartitionsRevoked | PartitionsLost):
            outs = self.fg()
        join = one(outs, SendRequest)
        assert isinstance(join.request, JoinGroupRequest)
        outs = self.reply(join, JoinGroupResponse(error_code=0, generation_id=generation, protocol_name=protocol,
                                                  protocol_type="consumer", leader=leader, member_id=member_id))
        sync = one(outs, SendRequest)
        assert isinstance(sync.request, SyncGroupRequest) and sync.request.assignments == []
        assert self.m.state == MemberState.COMPLETING_REBALANCE
        self.reply(sync, SyncGroupResponse(error_code=0, assignment=encode_assignment(Assignment(list(assigned)))))
        assert self.m.state == MemberState.STABLE
        return self.fg()

    def stable(self, **kw):
        self.find()
        outs = self.join(**kw)
        assert isinstance(outs[-1], PartitionsAssigned)
        return outs


def one(outs, cls):
    found = [o for o in outs if isinstance(o, cls)]
    assert len(found) == 1, outs
    return found[0]


def sends(outs, req_cls=None):
    return [o for o in outs if isinstance(o, SendRequest) and (req_cls is None or isinstance(o.request, req_cls))]


def hb_response(code=0):
    return HeartbeatResponse(error_code=code)


def commit_response(offsets, code=0):
    topics = {}
    for tp in offsets:
        topics.setdefault(tp.topic, []).append(OffsetCommitResponse.OffsetCommitResponsePartition(
            partition_index=tp.partition, error_code=code))
    return OffsetCommitResponse(topics=[OffsetCommitResponse.OffsetCommitResponseTopic(name=t, partitions=p)
                                        for t, p in topics.items()])


# --- happy paths -------------------------------------------------------------------------------

def test_follower_joins_syncs_and_gets_assignment():
    mb = Member()
    outs = mb.fg()
    assert mb.m.state == MemberState.UNJOINED
    mb.find(outs)
    join = one(mb.fg(), SendRequest).request  # first join: no generation, nothing to revoke
    assert mb.m.state == MemberState.PREPARING_REBALANCE
    assert (join.group_id, join.member_id, join.protocol_type) == (GROUP, "", "consumer")
    assert (join.session_timeout_ms, join.rebalance_timeout_ms) == (45000, 300000)
    assert [p.name for p in join.protocols] == ["range", "cooperative-sticky"]
    sub = decode_subscription(join.protocols[0].metadata)
    assert sub.topics == ["t"] and sub.generation_id == -1 and sub.owned_partitions == []
    assert join.protocols[0].metadata[:2] == b"\x00\x03"  # ConsumerProtocolSubscription v3, like Java
    # second half driven by hand to inspect SyncGroup
    mb2 = Member()
    mb2.find()
    outs = mb2.join(member_id="m1", generation=3, assigned=[TP("t", 1), TP("t", 0)])
    assert outs == [PartitionsAssigned((TP("t", 0), TP("t", 1)))]
    assert mb2.m.assignment == {TP("t", 0), TP("t", 1)}
    assert mb2.m.generation.generation_id == 3 and mb2.m.generation.member_id == "m1"
    assert mb2.m.is_stable()


def test_leader_runs_the_chosen_assignor_over_all_subscriptions():
    mb = Member()
    mb.find()
    join = one(mb.fg(), SendRequest)
    members = [JoinGroupResponse.JoinGroupResponseMember(member_id=m, metadata=encode_subscription(
        Subscription(["t"]))) for m in ("m1", "m2")]
    outs = mb.reply(join, JoinGroupResponse(error_code=0, generation_id=1, protocol_name="range", leader="m1",
                                            member_id="m1", members=members))
    need = one(outs, FetchMetadata)
    assert need.topics == ("t",)
    outs = mb.m.on_metadata(need.token, ClusterMetadata({"t": 4}), mb.now)
    sync = one(outs, SendRequest).request
    assert isinstance(sync, SyncGroupRequest) and sync.protocol_name == "range"
    from kgroup.client.consumer_protocol import decode_assignment
    got = {a.member_id: decode_assignment(a.assignment).partitions for a in sync.assignments}
    assert got == {"m1": [TP("t", 0), TP("t", 1)], "m2": [TP("t", 2), TP("t", 3)]}
    assert mb.m.is_leader
    mb.reply(one(outs, SendRequest), SyncGroupResponse(error_code=0, assignment=encode_assignment(
        Assignment(got["m1"]))))
    assert mb.fg() == [PartitionsAssigned((TP("t", 0), TP("t", 1)))]
    # the leader watches the group's topics: a partition-count change triggers a rejoin
    assert mb.m.metadata_topics() == {"t"}
    mb.m.update_metadata({"t": 4})
    assert mb.m.is_stable()
    mb.m.update_metadata({"t": 6})
    assert not mb.m.is_stable() and mb.m.rejoin_reason == "cached metadata has changed"


def test_heartbeats_every_interval_only_when_joined():
    mb = Member(heartbeat_interval_ms=3000)
    mb.find()
    assert sends(mb.tick(10_000), HeartbeatRequest) == []  # not joined: no heartbeats
    mb.join()
    assert sends(mb.tick(2999), HeartbeatRequest) == []
    hb = sends(mb.tick(1), HeartbeatRequest)
    assert len(hb) == 1 and hb[0].request.generation_id == 1 and hb[0].request.member_id == "m1"
    assert sends(mb.tick(3000), HeartbeatRequest) == []  # one in flight at a time
    mb.reply(hb[0], hb_response())
    assert len(sends(mb.tick(0), HeartbeatRequest)) == 1
    assert mb.m.next_deadline(mb.now) is not None


# --- KIP-394 and join errors --------------------------------------------------------------------

def test_member_id_required_retries_at_once_with_the_given_id():
    mb = Member()
    mb.find()
    join = one(mb.fg(), SendRequest)
    outs = mb.reply(join, JoinGroupResponse(error_code=E.MEMBER_ID_REQUIRED, member_id="m-42"))
    assert outs == []  # not an application-visible error
    again = one(mb.fg(), SendRequest).request  # no backoff, no second revocation
    assert isinstance(again, JoinGroupRequest) and again.member_id == "m-42"


def test_unknown_member_id_on_join_resets_member_id():
    mb = Member()
    mb.stable(assigned=[TP("t", 0)])
    mb.m.request_rejoin("test")
    assert isinstance(mb.fg()[0], PartitionsRevoked)
    join = one(mb.fg(), SendRequest)
    assert join.request.member_id == "m1"
    mb.reply(join, JoinGroupResponse(error_code=E.UNKNOWN_MEMBER_ID))
    assert mb.m.generation.member_id == "" and mb.m.state == MemberState.UNJOINED
    outs = mb.fg()  # prepare runs again (generation reset), nothing left to lose
    join = one(outs, SendRequest)
    assert join.request.member_id == ""


@pytest.mark.parametrize("code", [E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR])
def test_coordinator_errors_on_join_rediscover_after_backoff(code):
    mb = Member()
    mb.find()
    join = one(mb.fg(), SendRequest)
    outs = mb.reply(join, JoinGroupResponse(error_code=code))
    assert one(outs, CoordinatorLost).node.port == 9092 and mb.m.coordinator is None
    find = one(mb.fg(), SendRequest)
    assert not find.to_coordinator
    mb.reply(find, FindCoordinatorResponse(error_code=0, node_id=2, host="h2", port=9093))
    assert mb.fg() == []  # join backoff: 100 ms (jitter factor 1.0)
    assert mb.m.next_deadline(mb.now, foreground=True) == 1100
    join = one(mb.fg(100), SendRequest)
    assert isinstance(join.request, JoinGroupRequest)


def test_coordinator_load_in_progress_backs_off_with_jitter():
    mb = Member(random=lambda: 0.0)  # jitter factor 0.8
    mb.find()
    delays = []
    for _ in range(6):
        join = one(mb.fg(), SendRequest)
        start = mb.now
        outs = mb.reply(join, JoinGroupResponse(error_code=E.COORDINATOR_LOAD_IN_PROGRESS))
        assert outs == [] and mb.m.coordinator is not None
        assert sends(mb.fg(mb.m.next_deadline(mb.now, True) - mb.now - 1)) == []
        delays.append(mb.m.next_deadline(mb.now, True) - start)
        mb.now = mb.m.next_deadline(mb.now, True)
    assert delays == [80, 160, 320, 640, 800, 800]  # min(100 * 2^min(n, log2(10)) * 0.8, 1000), as Java


def test_find_coordinator_retriable_error_backs_off():
    mb = Member(random=lambda: 1.0)  # jitter factor 1.2
    find = one(mb.fg(), SendRequest)
    mb.reply(find, FindCoordinatorResponse(error_code=E.COORDINATOR_NOT_AVAILABLE))
    assert mb.fg(119) == []
    assert one(mb.fg(1), SendRequest).request.key == GROUP


def test_find_coordinator_v4_batched_answer():
    mb = Member()
    find = one(mb.fg(), SendRequest)
    assert find.request.coordinator_keys == [GROUP]
    coord = FindCoordinatorResponse.Coordinator(key=GROUP, node_id=7, host="c", port=1, error_code=0)
    outs = mb.reply(find, FindCoordinatorResponse(coordinators=[coord]))
    assert one(outs, CoordinatorDiscovered).node.node_id == 7


@pytest.mark.parametrize("code", [E.INVALID_SESSION_TIMEOUT, E.GROUP_MAX_SIZE_REACHED, E.INCONSISTENT_GROUP_PROTOCOL])
def test_non_retriable_join_errors_surface_but_member_retries(code):
    mb = Member()
    mb.find()
    outs = mb.reply(one(mb.fg(), SendRequest), JoinGroupResponse(error_code=code))
    err = one(outs, GroupError)
    assert not err.fatal and err.error.code == code
    assert isinstance(one(mb.fg(100), SendRequest).request, JoinGroupRequest)


def test_disconnect_during_join_marks_coordinator_unknown_and_retries():
    mb = Member()
    mb.find()
    outs = mb.fail(one(mb.fg(), SendRequest))
    assert one(outs, CoordinatorLost)
    assert not any(isinstance(o, GroupError) for o in outs)
    mb.find()
    assert isinstance(one(mb.fg(100), SendRequest).request, JoinGroupRequest)


@pytest.mark.parametrize("where", ["join", "sync", "heartbeat"])
def test_fenced_instance_id_is_fatal_with_a_clear_error(where):
    mb = Member(group_instance_id="instance-1")
    mb.find()
    join = one(mb.fg(), SendRequest)
    assert join.request.group_instance_id == "instance-1"
    if where == "join":
        outs = mb.reply(join, JoinGroupResponse(error_code=E.FENCED_INSTANCE_ID))
    else:
        sync = one(mb.reply(join, JoinGroupResponse(error_code=0, generation_id=1, protocol_name="range",
                                                    leader="x", member_id="m1")), SendRequest)
        assert sync.request.group_instance_id == "instance-1"
        if where == "sync":
            outs = mb.reply(sync, SyncGroupResponse(error_code=E.FENCED_INSTANCE_ID))
        else:
            hb = sends(mb.tick(3000), HeartbeatRequest)[0]
            assert hb.request.group_instance_id == "instance-1"
            outs = mb.reply(hb, hb_response(E.FENCED_INSTANCE_ID))
    err = one(outs, GroupError)
    assert err.fatal and isinstance(err.error, FencedInstanceIdError)
    assert "instance-1" in str(err.error) and "fenced" in str(err.error)
    assert mb.fg(10_000) == [] and mb.tick(10_000) == []


# --- SyncGroup errors ----------------------------------------------------------------------------

def _to_sync(mb, generation=1):
    mb.find()
    join = one(mb.fg(), SendRequest)
    return one(mb.reply(join, JoinGroupResponse(error_code=0, generation_id=generation, protocol_name="range",
                                                leader="x", member_id="m1")), SendRequest)


def test_sync_rebalance_in_progress_rejoins_without_new_revocation():
    mb = Member()
    sync = _to_sync(mb)
    assert mb.reply(sync, SyncGroupResponse(error_code=E.REBALANCE_IN_PROGRESS)) == []
    join = one(mb.fg(), SendRequest).request  # straight to JoinGroup: no second onJoinPrepare
    assert isinstance(join, JoinGroupRequest) and join.member_id == "m1"


@pytest.mark.parametrize("code,keeps_member_id", [(E.ILLEGAL_GENERATION, True), (E.UNKNOWN_MEMBER_ID, False)])
def test_sync_generation_errors_reset_like_java(code, keeps_member_id):
    mb = Member()
    sync = _to_sync(mb)
    mb.reply(sync, SyncGroupResponse(error_code=code))
    assert mb.m.state == MemberState.UNJOINED and mb.m.generation.generation_id == -1
    assert mb.m.generation.member_id == ("m1" if keeps_member_id else "")
    join = one(mb.fg(), SendRequest).request
    assert join.member_id == ("m1" if keeps_member_id else "")


def test_assignment_not_matching_subscription_requests_rejoin():
    mb = Member()
    mb.find()
    outs = mb.join(assigned=[TP("other", 0)])
    assert outs == [] and mb.m.assignment == set()
    assert mb.m.rejoin_needed


# --- heartbeat errors ------------------------------------------------------------------------------

def test_heartbeat_rebalance_in_progress_triggers_eager_revocation_and_rejoin():
    mb = Member()
    mb.stable(assigned=[TP("t", 0)])
    hb = sends(mb.tick(3000), HeartbeatRequest)[0]
    assert mb.reply(hb, hb_response(E.REBALANCE_IN_PROGRESS)) == []
    assert mb.m.rejoin_reason == "group is already rebalancing"
    assert mb.tick() == []  # the background never rejoins: only the application's poll does
    assert mb.fg() == [PartitionsRevoked((TP("t", 0),))]
    join = one(mb.fg(), SendRequest).request
    assert join.member_id == "m1"
    assert decode_subscription(join.protocols[0].metadata).owned_partitions == []  # eager gave all up


@pytest.mark.parametrize("code,keeps_member_id", [(E.ILLEGAL_GENERATION, True), (E.UNKNOWN_MEMBER_ID, False)])
def test_heartbeat_generation_errors_lose_partitions(code, keeps_member_id):
    mb = Member()
    mb.stable(assigned=[TP("t", 0)])
    hb = sends(mb.tick(3000), HeartbeatRequest)[0]
    mb.reply(hb, hb_response(code))
    assert mb.m.generation.member_id == ("m1" if keeps_member_id else "")
    assert mb.fg() == [PartitionsLost((TP("t", 0),))]
    assert one(mb.fg(), SendRequest).request.member_id == ("m1" if keeps_member_id else "")


def test_stale_heartbeat_error_is_ignored():
    mb = Member()
    mb.stable(assigned=[TP("t", 0)])
    hb = sends(mb.tick(3000), HeartbeatRequest)[0]
    mb.m.request_rejoin("x")
    mb.fg()
    join = one(mb.fg(), SendRequest)
    mb.reply(join, JoinGroupResponse(error_code=0, generation_id=2, protocol_name="range", leader="x",
                                     member_id="m1"))
    mb.reply(hb, hb_response(E.ILLEGAL_GENERATION))  # answers generation 1: stale
    assert mb.m.generation.generation_id == 2 and mb.m.state == MemberState.COMPLETING_REBALANCE


@pytest.mark.parametrize("code", [E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR])
def test_heartbeat_coordinator_errors(code):
    mb = Member()
    mb.stable()
    hb = sends(mb.tick(3000), HeartbeatRequest)[0]
    outs = mb.reply(hb, hb_response(code))
    assert one(outs, CoordinatorLost)
    assert mb.m.generation.generation_id == 1  # membership survives a coordinator move
    find = one(mb.tick(), SendRequest)
    mb.reply(find, FindCoordinatorResponse(error_code=0, node_id=1, host="h", port=9092))
    assert len(sends(mb.tick(100), HeartbeatRequest)) == 1  # heartbeat backoff 100 ms


def test_session_timeout_without_heartbeat_response_marks_coordinator_unknown():
    mb = Member(session_timeout_ms=10_000, heartbeat_interval_ms=3000)
    mb.stable()
    sends(mb.tick(3000), HeartbeatRequest)  # never answered
    assert not any(isinstance(o, CoordinatorLost) for o in mb.tick(6999))
    assert one(mb.tick(1), CoordinatorLost).reason.startswith("session timed out")


def test_max_poll_interval_exceeded_leaves_the_group():
    mb = Member(rebalance_timeout_ms=60_000, session_timeout_ms=100_000)
    mb.stable(assigned=[TP("t", 0)])
    for _ in range(19):  # background heartbeats keep the session alive, but nobody polls
        for hb in sends(mb.tick(3000), HeartbeatRequest):
            mb.reply(hb, hb_response())
    outs = mb.tick(3000)
    leave = one(outs, SendRequest).request
    assert isinstance(leave, LeaveGroupRequest) and leave.members[0].member_id == "m1"
    assert leave.members[0].reason == "consumer poll timeout has expired."
    assert mb.m.state == MemberState.UNJOINED and mb.m.generation.member_id == ""
    assert mb.tick(100_000) == []  # no rejoin until the application polls again
    assert mb.fg() == [PartitionsLost((TP("t", 0),))]
    assert one(mb.fg(), SendRequest).request.member_id == ""


def test_static_member_poll_timeout_and_close_send_no_leave_group():
    mb = Member(group_instance_id="i1", rebalance_timeout_ms=10_000)
    mb.stable(assigned=[TP("t", 0)])
    outs = []
    for _ in range(5):
        outs = mb.tick(3000)
        for hb in sends(outs, HeartbeatRequest):
            mb.reply(hb, hb_response())
    assert sends(outs, LeaveGroupRequest) == [] and mb.m.state == MemberState.UNJOINED
    mb2 = Member(group_instance_id="i1")
    mb2.stable(assigned=[TP("t", 0)])
    assert mb2.m.leave(mb2.now) == [PartitionsRevoked((TP("t", 0),))]


def test_close_revokes_then_leaves_dynamic_member():
    mb = Member()
    mb.stable(assigned=[TP("t", 0)])
    outs = mb.m.leave(mb.now)
    assert outs[0] == PartitionsRevoked((TP("t", 0),))
    leave = one(outs, SendRequest)
    assert leave.request.member_id == "m1" and leave.request.members[0].reason == "the consumer is being closed"
    assert mb.reply(leave, LeaveGroupResponse(error_code=0)) == []


def test_close_during_rebalance_reports_partitions_lost():
    mb = Member(assignors=["cooperative-sticky"])
    mb.stable(protocol="cooperative-sticky", assigned=[TP("t", 0)])
    mb.m.request_rejoin("x")
    one(mb.fg(), SendRequest)  # cooperative: no revocation, JoinGroup at once
    outs = mb.m.leave(mb.now)
    assert outs[0] == PartitionsLost((TP("t", 0),))


# --- commit before revocation (eager) --------------------------------------------------------------

def test_eager_commits_consumed_offsets_before_revoking():
    offsets = {TP("t", 0): OffsetAndMetadata(42)}
    mb = Member(enable_auto_commit=True, offsets=offsets)
    mb.stable(assigned=[TP("t", 0)])
    mb.m.request_rejoin("test")
    outs = mb.fg()
    assert outs[0] == PendingRevocation((TP("t", 0),))
    commit = one(outs, SendRequest)
    req = commit.request
    assert isinstance(req, OffsetCommitRequest) and req.generation_id_or_member_epoch == 1
    assert req.member_id == "m1" and req.topics[0].partitions[0].committed_offset == 42
    assert mb.fg(50) == []  # no revocation until the commit is answered
    assert mb.m.next_deadline(mb.now, foreground=True) > mb.now  # nothing to do but wait: no busy loop
    outs = mb.reply(commit, commit_response(offsets))
    assert one(outs, CommitCompleted).kind == "prepare"
    assert mb.fg() == [PartitionsRevoked((TP("t", 0),))]
    assert isinstance(one(mb.fg(), SendRequest).request, JoinGroupRequest)


def test_eager_prepare_commit_retries_retriable_errors_then_gives_up_at_rebalance_timeout():
    offsets = {TP("t", 0): OffsetAndMetadata(7)}
    mb = Member(enable_auto_commit=True, offsets=offsets, rebalance_timeout_ms=1000)
    mb.stable(assigned=[TP("t", 0)])
    mb.m.request_rejoin("test")
    commit = one(mb.fg(), SendRequest)
    mb.reply(commit, commit_response(offsets, E.COORDINATOR_LOAD_IN_PROGRESS))
    assert mb.fg(99) == []
    commit = one(mb.fg(1), SendRequest)  # retried after retry.backoff.ms
    assert isinstance(commit.request, OffsetCommitRequest)
    assert mb.fg(1000) == [PartitionsRevoked((TP("t", 0),))]  # rebalance timeout: revoke anyway


def test_auto_commit_every_interval_in_foreground_only():
    offsets = {TP("t", 0): OffsetAndMetadata(5)}
    mb = Member(enable_auto_commit=True, offsets=offsets, auto_commit_interval_ms=5000)
    mb.stable(assigned=[TP("t", 0)])
    assert sends(mb.tick(6000), OffsetCommitRequest) == []
    commit = sends(mb.fg(), OffsetCommitRequest)
    assert len(commit) == 1
    outs = mb.reply(commit[0], commit_response(offsets, E.COORDINATOR_LOAD_IN_PROGRESS))
    assert one(outs, CommitCompleted).kind == "auto"
    assert len(sends(mb.fg(100), OffsetCommitRequest)) == 1  # retriable: retry after backoff


# --- cooperative (KIP-429) ---------------------------------------------------------------------------

def test_cooperative_keeps_partitions_and_rebalances_twice_when_revoking():
    mb = Member(assignors=["cooperative-sticky"])
    mb.find()
    outs = mb.join(protocol="cooperative-sticky", assigned=[TP("t", 0), TP("t", 1)])
    assert outs == [PartitionsAssigned((TP("t", 0), TP("t", 1)))]
    mb.m.request_rejoin("new member")
    join = one(mb.fg(), SendRequest)  # no revocation callback
    sub = decode_subscription(join.request.protocols[0].metadata)
    assert sub.owned_partitions == [TP("t", 0), TP("t", 1)] and sub.generation_id == 1
    assert mb.m.assignment == {TP("t", 0), TP("t", 1)}
    sync = one(mb.reply(join, JoinGroupResponse(error_code=0, generation_id=2, protocol_name="cooperative-sticky",
                                                leader="x", member_id="m1")), SendRequest)
    mb.reply(sync, SyncGroupResponse(error_code=0, assignment=encode_assignment(Assignment([TP("t", 0)]))))
    outs = mb.fg()
    assert outs == [PartitionsRevoked((TP("t", 1),)), PartitionsAssigned(())]
    assert mb.m.rejoin_needed  # the follow-up rebalance hands t-1 to its new owner
    join = one(mb.fg(), SendRequest)
    assert decode_subscription(join.request.protocols[0].metadata).owned_partitions == [TP("t", 0)]


def test_cooperative_revokes_unsubscribed_topics_before_join():
    mb = Member(assignors=["cooperative-sticky"])
    mb.m.subscribe({"t", "u"})
    mb.stable(protocol="cooperative-sticky", assigned=[TP("t", 0), TP("u", 0)])
    mb.m.subscribe({"t"})
    assert not mb.m.is_stable()  # subscription change means rejoin
    assert mb.fg() == [PartitionsRevoked((TP("u", 0),))]
    join = one(mb.fg(), SendRequest)
    assert decode_subscription(join.request.protocols[0].metadata).topics == ["t"]


def test_protocol_is_eager_unless_every_assignor_is_cooperative():
    from kgroup.client.assignors import RebalanceProtocol
    assert Member().m.protocol == RebalanceProtocol.EAGER
    assert Member(assignors=["cooperative-sticky"]).m.protocol == RebalanceProtocol.COOPERATIVE


# --- user commits ------------------------------------------------------------------------------------

def test_commit_waits_for_coordinator_then_sends():
    mb = Member()
    mb.m.subscription = None      # manual mode: no subscription
    token, outs = mb.m.commit({TP("t", 0): 3}, mb.now)
    assert outs == []
    find = one(mb.tick(), SendRequest)
    mb.reply(find, FindCoordinatorResponse(error_code=0, node_id=1, host="h", port=1))
    commit = one(mb.tick(), SendRequest)
    assert commit.token == token and commit.request.generation_id_or_member_epoch == -1
    assert commit.request.member_id == ""
    done = one(mb.reply(commit, commit_response({TP("t", 0): 3})), CommitCompleted)
    assert done.error is None and done.offsets == {TP("t", 0): OffsetAndMetadata(3)}


@pytest.mark.parametrize("code,exc,resets", [
    (E.UNKNOWN_MEMBER_ID, CommitFailedError, True),
    (E.ILLEGAL_GENERATION, CommitFailedError, True),
    (E.REBALANCE_IN_PROGRESS, RebalanceInProgressError, False),
])
def test_commit_generation_errors(code, exc, resets):
    mb = Member()
    mb.stable(assigned=[TP("t", 0)])
    token, outs = mb.m.commit({TP("t", 0): 1}, mb.now)
    done = one(mb.reply(one(outs, SendRequest), commit_response({TP("t", 0): 1}, code)), CommitCompleted)
    assert isinstance(done.error, exc)
    assert (mb.m.state == MemberState.UNJOINED) == resets
    assert mb.m.rejoin_needed


def test_commit_coordinator_error_marks_coordinator_unknown():
    mb = Member()
    mb.stable()
    _, outs = mb.m.commit({TP("t", 0): 1}, mb.now)
    outs = mb.reply(one(outs, SendRequest), commit_response({TP("t", 0): 1}, E.NOT_COORDINATOR))
    assert one(outs, CoordinatorLost) and one(outs, CommitCompleted).error.code == E.NOT_COORDINATOR


def test_commit_during_rebalance_fails_fast():
    mb = Member()
    mb.find()
    one(mb.fg(), SendRequest)  # JoinGroup in flight
    _, outs = mb.m.commit({TP("t", 0): 1}, mb.now)
    assert isinstance(one(outs, CommitCompleted).error, RebalanceInProgressError)


def test_commit_on_disconnect_is_retriable():
    mb = Member()
    mb.stable()
    _, outs = mb.m.commit({TP("t", 0): 1}, mb.now)
    outs = mb.fail(one(outs, SendRequest))
    assert one(outs, CoordinatorLost)
    assert isinstance(one(outs, CommitCompleted).error, ConnectionError)


# --- the sans-IO rule -------------------------------------------------------------------------------

def test_membership_imports_no_io():
    root = pathlib.Path(__file__).resolve().parents[2] / "kgroup"
    seen, todo = set(), ["kgroup.client.membership", "kgroup.client.membership_consumer", "kgroup.client.partitioner"]
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        path = root.parent / (mod.replace(".", "/") + ".py")
        if not path.exists():
            path = root.parent / mod.replace(".", "/") / "__init__.py"
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = mod.split(".")[: -node.level] if not path.name == "__init__.py" else \
                        mod.split(".")[: len(mod.split(".")) - node.level + 1]
                    base = ".".join(pkg + ([base] if base else []))
                names = [base]
            for n in names:
                assert n.split(".")[0] not in {"asyncio", "socket", "time", "selectors", "threading", "subprocess"}, (mod, n)
                if n.startswith("kgroup"):
                    todo.append(n)
