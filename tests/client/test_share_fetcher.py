"""The sans-IO parts of our share consumer: acknowledgement batches, the share session handler
(epochs, added and forgotten partitions, resets, close), a partition's ShareFetch answer (only the
acquired records, their delivery counts, GAPs for acquired offsets without a record), the in-flight
records of a poll, and the share group membership's heartbeats (full join, changed fields only,
fencing -> epoch 0 with the same id, leave -1, a broker without share groups)."""
import pytest

from kgroup.client.assignors import TopicPartition as TP
from kgroup.client.errors import IllegalStateError, UnsupportedVersionError
from kgroup.client.membership_share import SHARE_PROTOCOL_NOT_SUPPORTED_MSG, ShareGroupMembership
from kgroup.client.membership_types import MembershipConfig, PartitionsAssigned, PartitionsLost, SendRequest
from kgroup.client.share_fetcher import (GAP, InFlightRecords, ShareCompletedFetch, ShareSessionHandler,
                                         acknowledgement_batches, next_epoch)
from kgroup.client.types import AcknowledgeType as A
from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.find_coordinator import FindCoordinatorResponse
from kgroup.protocol.messages.share_fetch import ShareFetchResponse
from kgroup.protocol.messages.share_group_heartbeat import (ShareGroupHeartbeatRequest as HbReq,
                                                            ShareGroupHeartbeatResponse as HbResp)
from kgroup.protocol.records import Record, build_batch, build_end_txn_marker_batch

T1, T2 = b"\x01" * 16, b"\x02" * 16
CONFIG = {"max.poll.records": 500, "fetch.max.wait.ms": 500, "fetch.min.bytes": 1, "fetch.max.bytes": 52428800,
          "max.partition.fetch.bytes": 1048576, "share.acquire.mode": "batch_optimized"}
Acquired = ShareFetchResponse.ShareFetchableTopicResponse.PartitionData.AcquiredRecords


def test_acknowledgement_batches_are_runs_of_one_type():
    assert acknowledgement_batches({}) == []
    acks = {5: 1, 6: 1, 7: 2, 9: 1, 10: 1, 11: 0, 3: 3}
    assert acknowledgement_batches(acks) == [(3, 3, [3]), (5, 6, [1]), (7, 7, [2]), (9, 10, [1]), (11, 11, [0])]


def test_session_epochs_added_and_forgotten_partitions():
    h = ShareSessionHandler(1, "m")
    a, b = (T1, 0), (T2, 3)
    h.add_partition_to_fetch(a, TP("t", 0))
    h.add_partition_to_fetch(b, TP("u", 3))
    req, acks = h.build_fetch("g", CONFIG)
    assert (req.share_session_epoch, req.member_id, req.max_wait_ms, req.max_records, acks) == (0, "m", 500, 500, {})
    assert sorted((t.topic_id, p.partition_index) for t in req.topics for p in t.partitions) == [a, b]
    assert h.handle_response(E.NONE) and h.epoch == 1
    # incremental: only changes; b forgotten, acknowledgements for a carried
    h.add_partition_to_fetch(a, TP("t", 0), {4: 1, 5: 1, 6: 2})
    req, acks = h.build_fetch("g", CONFIG)
    assert req.share_session_epoch == 1 and acks == {a: {4: 1, 5: 1, 6: 2}}
    [topic] = req.topics
    assert [(b.first_offset, b.last_offset, b.acknowledge_types) for b in topic.partitions[0].acknowledgement_batches] \
        == [(4, 5, [1]), (6, 6, [2])]
    assert [(f.topic_id, f.partitions) for f in req.forgotten_topics_data] == [(T2, [3])]
    assert h.handle_response(E.NONE) and h.epoch == 2 and list(h.session) == [a]
    # nothing changed: an unchanged request (it still fetches); skippable when asked
    h.add_partition_to_fetch(a, TP("t", 0))
    assert h.build_fetch("g", CONFIG, can_skip=True) == (None, {})
    # a ShareAcknowledge on the session; -1 closes it
    ack = h.build_acknowledge("g", {a: {7: 3}})
    assert (ack.share_session_epoch, ack.is_renew_ack) == (2, False)
    assert h.build_acknowledge("g", {}, close=True).share_session_epoch == -1


@pytest.mark.parametrize("error", [E.SHARE_SESSION_NOT_FOUND, E.INVALID_SHARE_SESSION_EPOCH,
                                   E.SHARE_SESSION_LIMIT_REACHED])
def test_session_errors_and_failures_open_a_new_session(error):
    h = ShareSessionHandler(1, "m")
    h.add_partition_to_fetch((T1, 0), TP("t", 0))
    h.build_fetch("g", CONFIG)
    assert h.handle_response(E.NONE) and h.epoch == 1
    assert not h.handle_response(error)
    assert h.is_new_session and h.session == {}
    assert h.build_acknowledge("g", {(T1, 0): {1: 1}}) is None      # cannot open a session
    h.epoch = 7
    h.handle_error(ConnectionError("lost"))
    assert h.is_new_session
    h.epoch = 7
    assert not h.handle_response(E.UNKNOWN_SERVER_ERROR) and h.epoch == 8      # other errors: next epoch
    assert next_epoch(2**31 - 1) == 1


def test_renew_acknowledgements_acquire_nothing():
    h = ShareSessionHandler(1, "m")
    h.add_partition_to_fetch((T1, 0), TP("t", 0))
    h.build_fetch("g", CONFIG)
    h.handle_response(E.NONE)
    h.add_partition_to_fetch((T1, 0), TP("t", 0), {3: int(A.RENEW)})
    req, _ = h.build_fetch("g", CONFIG)
    assert (req.is_renew_ack, req.max_wait_ms, req.max_records, req.max_bytes) == (True, 0, 0, 0)
    assert h.build_acknowledge("g", {(T1, 0): {3: int(A.RENEW)}}).is_renew_ack


def batch(first, n, **kw):
    return build_batch([Record(value=b"v%d" % (first + i), offset=first + i, timestamp=1000 + i) for i in range(n)],
                       base_offset=first, partition_leader_epoch=3, **kw)


def test_completed_fetch_returns_only_acquired_records_and_gaps():
    records = batch(0, 5) + build_end_txn_marker_batch(7, 0, True, 0, 1005, base_offset=5) + batch(6, 4)
    acquired = [Acquired(first_offset=1, last_offset=2, delivery_count=2),
                Acquired(first_offset=4, last_offset=8, delivery_count=1)]
    cf = ShareCompletedFetch(1, TP("t", 0), (T1, 0), records, acquired)
    got, gaps = cf.take(3)          # whole batches: the first one gives 1, 2, 4
    assert [(r.offset, r.delivery_count, r.value, r.leader_epoch) for r in got] == \
        [(1, 2, b"v1", 3), (2, 2, b"v2", 3), (4, 1, b"v4", 3)]
    assert gaps == [] and not cf.consumed
    got, gaps = cf.take(10)
    assert [r.offset for r in got] == [6, 7, 8] and gaps == [5]      # 5 is the control record
    assert cf.consumed and cf.take(10) == ([], [])


def test_completed_fetch_acquired_beyond_the_records_are_gaps():
    cf = ShareCompletedFetch(1, TP("t", 0), (T1, 0), batch(0, 2), [Acquired(first_offset=0, last_offset=3,
                                                                          delivery_count=1)])
    got, gaps = cf.take(10)
    assert [r.offset for r in got] == [0, 1] and gaps == [2, 3] and cf.consumed
    assert ShareCompletedFetch(1, TP("t", 0), (T1, 0), b"", []).consumed


def test_in_flight_records_acknowledgement():
    cf = ShareCompletedFetch(4, TP("t", 0), (T1, 0), batch(0, 3), [Acquired(first_offset=0, last_offset=3,
                                                                          delivery_count=1)])
    fetch = InFlightRecords()
    got, gaps = cf.take(10)
    fetch.add(cf, got, gaps)
    assert len(fetch) == 3 and not fetch.all_acknowledged()
    fetch.acknowledge(TP("t", 0), 0, A.RELEASE)
    fetch.acknowledge(TP("t", 0), 1, A.RENEW)
    with pytest.raises(IllegalStateError, match="already been acknowledged"):
        fetch.acknowledge(TP("t", 0), 0, A.ACCEPT)
    with pytest.raises(IllegalStateError, match="not in flight"):
        fetch.acknowledge(TP("t", 0), 3, A.ACCEPT)       # a GAP is the client's own
    with pytest.raises(IllegalStateError, match="not in flight"):
        fetch.acknowledge(TP("t", 1), 0, A.ACCEPT)
    fetch.acknowledge_all(A.ACCEPT)
    assert fetch.all_acknowledged()
    assert fetch.take_acknowledged() == {4: {(T1, 0): {0: 2, 1: 4, 2: 1, 3: GAP}}}
    # the RENEWed record stays in flight, unacknowledged again
    assert [r.offset for r in fetch.records] == [1] and not fetch.all_acknowledged()
    fetch.acknowledge(TP("t", 0), 1, A.ACCEPT)
    assert fetch.take_acknowledged() == {4: {(T1, 0): {1: 1}}} and len(fetch) == 0


class Member:
    def __init__(self):
        self.m = ShareGroupMembership(MembershipConfig("g", rebalance_timeout_ms=300000, enable_auto_commit=False,
                                                       client_rack="r1", group_protocol="share"),
                                      random=lambda: 0.5)
        self.now = 1000
        self.m.subscribe({"t"})

    def fg(self, ms=0):
        self.now += ms
        return self.m.poll(self.now, True)

    def sends(self, outs):
        return [o for o in outs if isinstance(o, SendRequest)]

    def heartbeat(self, ms=0):
        [send] = self.sends(self.fg(ms))
        assert isinstance(send.request, HbReq)
        return send

    def reply(self, send, **kw):
        return self.m.on_response(send.token, HbResp(**{"error_code": 0, "heartbeat_interval_ms": 500, **kw}), self.now)


def assignment(*parts):
    return HbResp.Assignment(topic_partitions=[HbResp.TopicPartitions(topic_id=T1, partitions=list(parts))])


def test_share_membership_heartbeats_fencing_and_leaving():
    mb = Member()
    [find] = mb.sends(mb.fg())
    mb.m.on_response(find.token, FindCoordinatorResponse(error_code=0, node_id=1, host="h", port=9092), mb.now)
    mb.m.on_topic_names(-1, {T1: "t"}, mb.now)
    join = mb.heartbeat()
    r = join.request
    assert (r.group_id, r.member_epoch, r.rack_id, r.subscribed_topic_names) == ("g", 0, "r1", ["t"])
    member_id = r.member_id
    assert len(member_id) == 22                     # KIP-1082: Uuid.toString, chosen by the client
    mb.reply(join, member_epoch=3, assignment=assignment(0, 1))
    assert [type(o) for o in mb.fg()] == [PartitionsAssigned] and mb.m.assignment == {TP("t", 0), TP("t", 1)}
    ack = mb.heartbeat()                            # reports the reconciliation at once
    assert (ack.request.member_epoch, ack.request.rack_id, ack.request.subscribed_topic_names) == (3, None, None)
    mb.reply(ack, member_epoch=3)
    assert mb.m.is_stable()
    assert mb.sends(mb.fg(100)) == []               # next one at the broker's interval
    hb = mb.heartbeat(500)
    assert hb.request.subscribed_topic_names is None
    mb.reply(hb, member_epoch=3)
    mb.m.subscribe({"t", "u"})                      # a changed subscription goes at once
    changed = mb.heartbeat()
    assert sorted(changed.request.subscribed_topic_names) == ["t", "u"]
    mb.m.on_response(changed.token, HbResp(error_code=int(E.FENCED_MEMBER_EPOCH)), mb.now)
    outs = mb.fg()
    assert [type(o) for o in outs if not isinstance(o, SendRequest)] == [PartitionsLost]
    rejoin = mb.sends(outs)[0] if mb.sends(outs) else mb.heartbeat()
    assert (rejoin.request.member_id, rejoin.request.member_epoch, rejoin.request.rack_id) == (member_id, 0, "r1")
    assert sorted(rejoin.request.subscribed_topic_names) == ["t", "u"]
    mb.reply(rejoin, member_epoch=5, assignment=assignment(0))
    mb.fg()
    [leave] = mb.sends(mb.m.maybe_leave_group(mb.now))
    assert isinstance(leave.request, HbReq) and (leave.request.member_id, leave.request.member_epoch) == (member_id, -1)


def test_a_broker_without_share_groups_is_fatal():
    mb = Member()
    [find] = mb.sends(mb.fg())
    mb.m.on_response(find.token, FindCoordinatorResponse(error_code=0, node_id=1, host="h", port=9092), mb.now)
    join = mb.heartbeat()
    mb.m.on_response(join.token, HbResp(error_code=int(E.UNSUPPORTED_VERSION)), mb.now)
    assert str(mb.m.fatal_error).endswith(SHARE_PROTOCOL_NOT_SUPPORTED_MSG)
    mb = Member()
    [find] = mb.sends(mb.fg())
    mb.m.on_response(find.token, FindCoordinatorResponse(error_code=0, node_id=1, host="h", port=9092), mb.now)
    join = mb.heartbeat()
    mb.m.on_failure(join.token, UnsupportedVersionError("node 1 does not support API SHARE_GROUP_HEARTBEAT"), mb.now)
    assert isinstance(mb.m.fatal_error, UnsupportedVersionError)
    assert "ShareGroupHeartbeat API version 1" in str(mb.m.fatal_error)


def test_a_stored_batch_is_decoded_once_across_fetches(monkeypatch):
    """Each ShareFetch answer carries the whole stored batch; the consumer's cache decodes it once."""
    from kgroup.client import share_fetcher
    calls = []
    real = share_fetcher.decode_records
    monkeypatch.setattr(share_fetcher, "decode_records", lambda b, h: calls.append(h.base_offset) or real(b, h))
    records, cache = batch(0, 10), {}
    out = []
    for first in (0, 4, 8):
        cf = ShareCompletedFetch(1, TP("t", 0), (T1, 0), records,
                                 [Acquired(first_offset=first, last_offset=min(first + 3, 9), delivery_count=1)], cache)
        got, gaps = cf.take(500)
        assert gaps == []
        out += [r.offset for r in got]
    assert out == list(range(10)) and calls == [0]
    other = batch(10, 2)          # another batch replaces it
    cf = ShareCompletedFetch(1, TP("t", 0), (T1, 0), other, [Acquired(first_offset=10, last_offset=11,
                                                                       delivery_count=1)], cache)
    assert [r.offset for r in cf.take(500)[0]] == [10, 11] and calls == [0, 10]
