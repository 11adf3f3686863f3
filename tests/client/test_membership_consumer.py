"""The KIP-848 membership machine (group.protocol=consumer) with a fake clock: joining with a
client-chosen member id, the heartbeat loop at the broker's interval, only changed fields,
reconciliation with revoke-before-assign callbacks and commit before revocation, fencing,
leaving with -1 / -2, the poll timeout, regex subscriptions and commits with the member epoch."""
import base64
import re

import pytest

from kgroup.client.config import ConfigError, ConsumerConfig
from kgroup.client.errors import CommitFailedError, UnsupportedVersionError
from kgroup.client.assignors import TopicPartition as TP
from kgroup.client.membership_consumer import ConsumerGroupMembership, ConsumerMemberState as S, random_member_id
from kgroup.client.membership_types import (CommitCompleted, GroupError, MembershipConfig, PartitionsAssigned,
                                            PartitionsLost, PartitionsRevoked, PendingRevocation, ResolveTopicIds,
                                            SendRequest)
from kgroup.client.types import OffsetAndMetadata
from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.consumer_group_heartbeat import (ConsumerGroupHeartbeatRequest as HbReq,
                                                               ConsumerGroupHeartbeatResponse as HbResp)
from kgroup.protocol.messages.find_coordinator import FindCoordinatorResponse
from kgroup.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse

GROUP = "g"
T1, T2 = b"\x01" * 16, b"\x02" * 16
NAMES = {T1: "t", T2: "u"}


def one(outs, kind):
    found = [o for o in outs if isinstance(o, kind)]
    assert len(found) == 1, outs
    return found[0]


def assignment(**topics):
    ids = {"t": T1, "u": T2}
    return HbResp.Assignment(topic_partitions=[HbResp.TopicPartitions(topic_id=ids[t], partitions=list(ps))
                                               for t, ps in topics.items()])


class Member:
    def __init__(self, offsets=None, **cfg):
        cfg.setdefault("enable_auto_commit", False)
        self.config = MembershipConfig(GROUP, group_protocol="consumer", **cfg)
        self.offsets = offsets if offsets is not None else {}
        self.m = ConsumerGroupMembership(self.config, random=lambda: 0.5, offsets_to_commit=lambda: self.offsets)
        self.now = 1000
        self.m.subscribe({"t"})

    def tick(self, ms=0, foreground=False):
        self.now += ms
        return self.m.poll(self.now, foreground)

    def fg(self, ms=0):
        return self.tick(ms, foreground=True)

    def reply(self, send, response):
        return self.m.on_response(send.token, response, self.now)

    def find(self):
        send = one(self.fg(), SendRequest)
        self.reply(send, FindCoordinatorResponse(error_code=0, node_id=1, host="h", port=9092))

    def heartbeat(self, outs=None) -> SendRequest:
        send = one(self.fg() if outs is None else outs, SendRequest)
        assert isinstance(send.request, HbReq)
        return send

    def ok(self, send, epoch, assigned=None, interval=5000):
        return self.reply(send, HbResp(error_code=0, member_epoch=epoch, heartbeat_interval_ms=interval,
                                       assignment=assigned))

    def stable(self, epoch=1, names=True, **topics):
        """Join, receive an assignment, run the callbacks, acknowledge: STABLE."""
        self.find()
        if names:
            self.m.on_topic_names(-1, NAMES, self.now)
        join = self.heartbeat()
        self.ok(join, epoch, assignment(**topics))
        callbacks = self.fg()
        ack = self.heartbeat()
        self.ok(ack, epoch)
        assert self.m.state == S.STABLE and self.m.is_stable()
        return callbacks, ack


def test_member_id_is_a_java_uuid_string():
    mid = random_member_id()
    assert len(mid) == 22 and "=" not in mid
    assert len(base64.urlsafe_b64decode(mid + "==")) == 16
    assert random_member_id(lambda n: b"\xff" * n) == "_____________________w"
    assert random_member_id() != random_member_id()


def test_join_sends_every_field_with_epoch_zero_and_our_member_id():
    mb = Member(client_rack="r1", group_remote_assignor="uniform", rebalance_timeout_ms=60000)
    mb.find()
    assert mb.m.state == S.JOINING
    r = mb.heartbeat().request
    assert r.member_epoch == 0 and r.member_id == mb.m.member_id and len(r.member_id) == 22
    assert r.subscribed_topic_names == ["t"] and r.subscribed_topic_regex == ""
    assert r.rebalance_timeout_ms == 60000 and r.rack_id == "r1" and r.server_assignor == "uniform"
    assert r.topic_partitions == [] and r.instance_id is None


def test_assignment_with_unknown_topic_ids_asks_for_metadata_then_reconciles():
    mb = Member()
    mb.find()
    join = mb.heartbeat()
    mb.ok(join, 3, assignment(t=[0, 1]))
    assert mb.m.member_epoch == 3 and mb.m.state == S.RECONCILING
    outs = mb.fg()
    resolve = one(outs, ResolveTopicIds)
    assert resolve.topics == ("t",) and not any(isinstance(o, PartitionsAssigned) for o in outs)
    mb.m.on_topic_names(resolve.token, NAMES, mb.now)
    outs = mb.fg()
    assert one(outs, PartitionsAssigned).partitions == (TP("t", 0), TP("t", 1))
    assert not any(isinstance(o, SendRequest) for o in outs)  # the ack waits for the callbacks
    assert mb.m.assignment == {TP("t", 0), TP("t", 1)}
    ack = mb.heartbeat()
    r = ack.request
    assert r.member_epoch == 3 and r.topic_partitions == [HbReq.TopicPartitions(topic_id=T1, partitions=[0, 1])]
    assert r.subscribed_topic_names is None and r.rebalance_timeout_ms == -1 and r.rack_id is None
    assert not mb.m.is_stable()
    mb.ok(ack, 3)
    assert mb.m.state == S.STABLE and mb.m.is_stable()


def test_heartbeats_follow_the_brokers_interval_and_send_only_changes():
    mb = Member()
    mb.stable(t=[0])
    assert mb.tick(4999) == []
    hb = one(mb.tick(1), SendRequest).request
    assert (hb.subscribed_topic_names, hb.subscribed_topic_regex, hb.topic_partitions, hb.rebalance_timeout_ms,
            hb.server_assignor, hb.member_epoch) == (None, None, None, -1, None, 1)


def test_interval_comes_from_the_broker():
    mb = Member()
    mb.find()
    mb.m.on_topic_names(-1, NAMES, mb.now)
    join = mb.heartbeat()
    mb.ok(join, 1, assignment(t=[0]), interval=700)
    mb.fg()
    ack = mb.heartbeat()
    mb.ok(ack, 1, interval=700)
    assert mb.tick(699) == []
    assert isinstance(one(mb.tick(1), SendRequest).request, HbReq)


def test_revocation_runs_before_assignment_and_the_ack_reports_the_new_owned_set():
    mb = Member()
    mb.stable(t=[0, 1])
    hb = one(mb.tick(5000), SendRequest)
    mb.ok(hb, 2, assignment(t=[1], u=[0]))
    outs = mb.fg()
    kinds = [type(o) for o in outs if isinstance(o, (PartitionsRevoked, PartitionsAssigned))]
    assert kinds == [PartitionsRevoked, PartitionsAssigned]
    assert one(outs, PartitionsRevoked).partitions == (TP("t", 0),)
    assert one(outs, PartitionsAssigned).partitions == (TP("u", 0),)
    assert mb.m.assignment == {TP("t", 1), TP("u", 0)}
    # a background tick while the callbacks run does not report partitions yet
    assert mb.m.owned_ids == frozenset({(T1, 0), (T1, 1)})
    ack = mb.heartbeat()
    got = {(tp.topic_id, p) for tp in ack.request.topic_partitions for p in tp.partitions}
    assert got == {(T1, 1), (T2, 0)} and ack.request.member_epoch == 2
    mb.ok(ack, 2)
    assert mb.m.is_stable()


def test_auto_commit_happens_before_revocation():
    offsets = {TP("t", 0): OffsetAndMetadata(5)}
    mb = Member(offsets=offsets, enable_auto_commit=True)
    mb.stable(t=[0, 1])
    hb = one(mb.tick(5000), SendRequest)
    mb.ok(hb, 2, assignment(t=[1]))
    outs = mb.fg()
    assert one(outs, PendingRevocation).partitions == (TP("t", 0),)
    commit = one(outs, SendRequest)
    assert isinstance(commit.request, OffsetCommitRequest)
    assert commit.request.generation_id_or_member_epoch == 2 and commit.request.member_id == mb.m.member_id
    assert not any(isinstance(o, PartitionsRevoked) for o in outs)
    assert not any(isinstance(o, PartitionsRevoked) for o in mb.fg())  # still waiting for the commit
    assert mb.m.next_deadline(mb.now, foreground=True) > mb.now  # no busy loop meanwhile
    done = mb.reply(commit, OffsetCommitResponse(topics=[OffsetCommitResponse.OffsetCommitResponseTopic(
        name="t", partitions=[OffsetCommitResponse.OffsetCommitResponsePartition(partition_index=0, error_code=0)])]))
    assert one(done, CommitCompleted).kind == "prepare"
    outs = mb.fg()
    assert one(outs, PartitionsRevoked).partitions == (TP("t", 0),)


@pytest.mark.parametrize("error", [E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID])
def test_fenced_member_loses_its_partitions_and_rejoins_with_epoch_zero(error):
    mb = Member()
    mb.stable(epoch=4, t=[0, 1])
    member_id = mb.m.member_id
    hb = one(mb.tick(5000), SendRequest)
    mb.reply(hb, HbResp(error_code=error, member_epoch=-1))
    assert mb.m.state == S.FENCED and mb.m.member_epoch == 0
    outs = mb.fg()
    assert one(outs, PartitionsLost).partitions == (TP("t", 0), TP("t", 1))
    assert not any(isinstance(o, SendRequest) for o in outs)
    assert mb.m.assignment == set()
    join = mb.heartbeat()
    assert join.request.member_epoch == 0 and join.request.member_id == member_id  # KIP-1082: same id
    assert join.request.topic_partitions == [] and join.request.subscribed_topic_names == ["t"]
    assert join.request.rebalance_timeout_ms == 300000


def test_fenced_while_committing_before_revocation_loses_instead_of_revoking():
    mb = Member(offsets={TP("t", 0): OffsetAndMetadata(5)}, enable_auto_commit=True)
    mb.stable(t=[0, 1])
    hb = one(mb.tick(5000), SendRequest)
    mb.ok(hb, 2, assignment(t=[1]))
    commit = next(o for o in mb.fg() if isinstance(o, SendRequest) and isinstance(o.request, OffsetCommitRequest))
    hb = one(mb.tick(5000), SendRequest)
    mb.reply(hb, HbResp(error_code=E.FENCED_MEMBER_EPOCH, member_epoch=-1))
    outs = mb.fg()
    assert one(outs, PartitionsLost).partitions == (TP("t", 0), TP("t", 1))
    assert not any(isinstance(o, PartitionsRevoked) for o in outs)
    mb.reply(commit, OffsetCommitResponse(topics=[]))  # the late answer changes nothing
    join = mb.heartbeat()
    assert join.request.member_epoch == 0 and mb.m.assignment == set()


def test_answer_to_a_heartbeat_sent_before_fencing_is_ignored():
    mb = Member()
    mb.stable(t=[0])
    hb = one(mb.tick(5000), SendRequest)
    mb.m._fence("test")
    mb.ok(hb, 9, assignment(t=[0, 1]))
    assert mb.m.member_epoch == 0 and mb.m.target is None


def test_close_revokes_then_leaves_with_epoch_minus_one():
    mb = Member()
    mb.stable(t=[0])
    assert one(mb.m.on_leave_prepare(mb.now), PartitionsRevoked).partitions == (TP("t", 0),)
    leave = one(mb.m.maybe_leave_group(mb.now), SendRequest)
    assert leave.request.member_epoch == -1 and leave.request.member_id == mb.m.member_id
    assert mb.m.state == S.UNSUBSCRIBED
    assert mb.tick(60000) == []  # no more heartbeats


def test_static_member_leaves_with_epoch_minus_two():
    mb = Member(group_instance_id="i1")
    mb.stable(t=[0])
    mb.m.on_leave_prepare(mb.now)
    leave = one(mb.m.maybe_leave_group(mb.now), SendRequest)
    assert leave.request.member_epoch == -2 and leave.request.instance_id == "i1"


def test_static_member_sends_its_instance_id():
    mb = Member(group_instance_id="i1")
    mb.find()
    assert mb.heartbeat().request.instance_id == "i1"


def test_poll_timeout_leaves_then_rejoins_on_the_next_poll():
    mb = Member(rebalance_timeout_ms=20000)
    mb.stable(t=[0])
    leave = None
    for _ in range(5):
        outs = mb.tick(5000)
        for o in outs:
            if isinstance(o, SendRequest) and o.request.member_epoch == -1:
                leave = o
            elif isinstance(o, SendRequest):
                mb.ok(o, 1)
    assert leave is not None and mb.m.state == S.STALE
    outs = mb.fg()
    assert one(outs, PartitionsLost).partitions == (TP("t", 0),)
    join = mb.heartbeat()
    assert join.request.member_epoch == 0


def test_regex_subscription_is_sent_to_the_broker():
    mb = Member()
    mb.m.subscribe(set(), re.compile("t.*"))
    mb.find()
    join = mb.heartbeat()
    r = join.request
    assert r.subscribed_topic_regex == "t.*" and r.subscribed_topic_names == []
    mb.ok(join, 1, assignment())
    mb.m.subscribe({"t"})  # back to names: the regex is cleared with ""
    hb = one(mb.fg(), SendRequest).request
    assert hb.subscribed_topic_names == ["t"] and hb.subscribed_topic_regex == ""


def test_regex_resolution_asks_for_every_topic():
    mb = Member()
    mb.m.subscribe(set(), re.compile("t.*"))
    mb.find()
    join = mb.heartbeat()
    mb.ok(join, 1, assignment(t=[0]))
    assert one(mb.fg(), ResolveTopicIds).topics is None


def test_subscription_change_is_sent_at_once():
    mb = Member()
    mb.stable(t=[0])
    mb.m.subscribe({"t", "u"})
    hb = one(mb.fg(), SendRequest).request
    assert hb.subscribed_topic_names == ["t", "u"] and hb.topic_partitions is None
    assert hb.subscribed_topic_regex == ""


def test_failed_heartbeat_backs_off_then_resends_every_field():
    mb = Member()
    mb.stable(t=[0])
    hb = one(mb.tick(5000), SendRequest)
    mb.reply(hb, HbResp(error_code=E.COORDINATOR_LOAD_IN_PROGRESS))
    assert mb.tick(0) == []
    again = one(mb.tick(200), SendRequest).request
    assert again.subscribed_topic_names == ["t"] and again.rebalance_timeout_ms == 300000
    assert again.topic_partitions == [HbReq.TopicPartitions(topic_id=T1, partitions=[0])]


def test_not_coordinator_rediscovers():
    mb = Member()
    mb.stable(t=[0])
    hb = one(mb.tick(5000), SendRequest)
    mb.reply(hb, HbResp(error_code=E.NOT_COORDINATOR))
    assert mb.m.coordinator is None
    send = one(mb.tick(1000), SendRequest)
    assert send.to_coordinator is False


@pytest.mark.parametrize("error", [E.UNSUPPORTED_ASSIGNOR, E.GROUP_MAX_SIZE_REACHED, E.UNRELEASED_INSTANCE_ID,
                                   E.GROUP_AUTHORIZATION_FAILED, E.INVALID_REQUEST])
def test_fatal_errors_stop_the_member(error):
    mb = Member()
    mb.find()
    join = mb.heartbeat()
    outs = mb.reply(join, HbResp(error_code=error, error_message="no"))
    assert one(outs, GroupError).fatal and mb.m.state == S.FATAL
    assert mb.fg() == [] and mb.m.fatal_error.code == error


def test_commit_carries_member_id_and_epoch_and_stale_epoch_fails_it():
    mb = Member()
    mb.stable(epoch=7, t=[0])
    token, outs = mb.m.commit({TP("t", 0): 3}, mb.now)
    send = one(outs, SendRequest)
    assert send.request.generation_id_or_member_epoch == 7 and send.request.member_id == mb.m.member_id
    done = mb.reply(send, OffsetCommitResponse(topics=[OffsetCommitResponse.OffsetCommitResponseTopic(
        name="t", partitions=[OffsetCommitResponse.OffsetCommitResponsePartition(
            partition_index=0, error_code=E.STALE_MEMBER_EPOCH)])]))
    assert isinstance(one(done, CommitCompleted).error, CommitFailedError)


def test_commit_before_joining_fails_like_java():
    mb = Member()
    mb.find()
    _, outs = mb.m.commit({TP("t", 0): 3}, mb.now)
    assert one(outs, CommitCompleted).error is not None


def test_config_keys_and_checks():
    c = ConsumerConfig({"bootstrap.servers": "h:1", "group.id": "g", "group.protocol": "CONSUMER", "group.remote.assignor": "range"})
    assert c["group.protocol"] == "consumer" and c["group.remote.assignor"] == "range"
    assert ConsumerConfig({"bootstrap.servers": "h:1", "group.id": "g"})["group.protocol"] == "classic"
    m = MembershipConfig.from_consumer_config(c)
    assert m.group_protocol == "consumer" and m.group_remote_assignor == "range"
    for key, value in [("session.timeout.ms", 10000), ("heartbeat.interval.ms", 1000),
                       ("partition.assignment.strategy", "range")]:
        with pytest.raises(ConfigError, match=key):
            ConsumerConfig({"bootstrap.servers": "h:1", "group.id": "g", "group.protocol": "consumer", key: value})
    with pytest.raises(ConfigError):
        ConsumerConfig({"bootstrap.servers": "h:1", "group.id": "g", "group.remote.assignor": "uniform"})
    with pytest.raises(ConfigError):
        ConsumerConfig({"bootstrap.servers": "h:1", "group.id": "g", "group.protocol": "eager"})


def test_regex_needs_version_one_and_a_cluster_without_the_protocol_is_fatal():
    mb = Member()
    mb.find()
    join = mb.heartbeat()
    assert join.min_version is None  # topic names: any version
    outs = mb.m.on_failure(join.token, UnsupportedVersionError("node 1 does not support API"), mb.now)
    err = one(outs, GroupError)
    assert err.fatal and "group.protocol=classic" in str(err.error) and mb.m.state == S.FATAL

    mb = Member()
    mb.m.subscribe(set(), re.compile("t.*"))
    mb.find()
    join = mb.heartbeat()
    assert join.min_version == 1  # v0 has no regex field: never send it there
    outs = mb.m.on_failure(join.token, UnsupportedVersionError("up to v0"), mb.now)
    assert "regular expressions" in str(one(outs, GroupError).error)
