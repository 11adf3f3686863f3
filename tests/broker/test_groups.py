"""The group coordinator end to end over raw sockets (our codec, a real broker process):
FindCoordinator v0-6, COORDINATOR_LOAD_IN_PROGRESS while a large ``__consumer_offsets`` loads,
durability of acknowledged OffsetCommits across SIGKILL, and the ``__consumer_offsets`` records
read back over Fetch and decoded by an independent decoder built from the facts of Kafka's record
specs (``tests/kafka_spec``) rather than from kgroup's own definitions.
"""
from __future__ import annotations

import time

import pytest

from kgroup.clock import now_ms
from kgroup.coordinator import group_partition
from kgroup.protocol.api import parse_response
from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.delete_groups import DeleteGroupsRequest
from kgroup.protocol.messages.describe_groups import DescribeGroupsRequest
from kgroup.protocol.messages.fetch import FetchRequest
from kgroup.protocol.messages.find_coordinator import FindCoordinatorRequest
from kgroup.protocol.messages.heartbeat import HeartbeatRequest
from kgroup.protocol.messages.join_group import JoinGroupRequest
from kgroup.protocol.messages.leave_group import LeaveGroupRequest
from kgroup.protocol.messages.list_groups import ListGroupsRequest
from kgroup.protocol.messages.metadata import MetadataRequest
from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
from kgroup.protocol.messages.offset_delete import OffsetDeleteRequest
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from kgroup.protocol.messages.sync_group import SyncGroupRequest
from tests.kafka_spec import spec_decode_offsets_record, spec_iter_records
from tests.harness import BrokerProcess, RawClient

CT = CreateTopicsRequest.CreatableTopic
OT = OffsetCommitRequest.OffsetCommitRequestTopic
OP = OT.OffsetCommitRequestPartition
FT = OffsetFetchRequest.OffsetFetchRequestTopic


def create_topic(c, name, partitions):
    resp = c.request(CreateTopicsRequest(topics=[CT(name=name, num_partitions=partitions, replication_factor=1)]), 5)
    assert resp.topics[0].error_code == 0


def commit_request(group, topic, offsets, *, generation=-1, member_id="", metadata="", leader_epoch=-1,
                   retention=-1):
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                               retention_time_ms=retention, topics=[OT(name=topic, partitions=[
                                   OP(partition_index=p, committed_offset=o, committed_leader_epoch=leader_epoch,
                                      committed_metadata=metadata) for p, o in offsets.items()])])


def fetch_offsets(c, group, topic, partitions, version=7):
    resp = c.request(OffsetFetchRequest(group_id=group, topics=[FT(name=topic, partition_indexes=list(partitions))]),
                     version)
    return resp.error_code, {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}


# == FindCoordinator ==============================================================================

@pytest.mark.parametrize("version", range(7))
def test_find_coordinator_every_version(broker, version):
    c = RawClient(broker.port)
    if version >= 4:
        resp = c.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["g1", "g2", ""]), version)
        assert [x.key for x in resp.coordinators] == ["g1", "g2", ""]
        for x in resp.coordinators:
            assert (x.error_code, x.node_id, x.host, x.port) == (0, 1, "127.0.0.1", broker.port)
    else:
        resp = c.request(FindCoordinatorRequest(key="g1", key_type=0), version)
        assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, 1, "127.0.0.1", broker.port)
    # The first lookup creates __consumer_offsets: compacted, internal, 50 partitions.
    md = c.request(MetadataRequest(topics=None), 12)
    (t,) = [t for t in md.topics if t.name == "__consumer_offsets"]
    assert t.is_internal and len(t.partitions) == 50


def test_find_coordinator_transaction_key_and_unknown_key_type(broker):
    c = RawClient(broker.port)
    resp = c.request(FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"]), 4)
    assert resp.coordinators[0].error_code == 0 and resp.coordinators[0].node_id == 1
    resp = c.request(FindCoordinatorRequest(key="tx", key_type=1), 3)
    assert resp.error_code == 0 and resp.port == broker.port
    # The first transactional lookup creates __transaction_state: internal, 50 partitions.
    md = c.request(MetadataRequest(topics=None), 12)
    (t,) = [t for t in md.topics if t.name == "__transaction_state"]
    assert t.is_internal and len(t.partitions) == 50
    resp = c.request(FindCoordinatorRequest(key_type=7, coordinator_keys=["a", "b"]), 6)
    assert [x.error_code for x in resp.coordinators] == [E.INVALID_REQUEST] * 2


# == a classic group over the wire ==================================================================

def join(c, group, member_id="", version=9, instance_id=None, session=10000):
    P = JoinGroupRequest.JoinGroupRequestProtocol
    return c.request(JoinGroupRequest(group_id=group, session_timeout_ms=session, rebalance_timeout_ms=20000,
                                      member_id=member_id, group_instance_id=instance_id, protocol_type="consumer",
                                      protocols=[P(name="range", metadata=b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff")]),
                     version)


def test_join_sync_heartbeat_leave_over_the_wire(tmp_path):
    b = BrokerProcess(tmp_path / "data", ["group.initial.rebalance.delay.ms=0"]).start()
    try:
        c = RawClient(b.port)
        first = join(c, "wire")
        assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id.startswith("raw-test-")
        j = join(c, "wire", first.member_id)
        assert (j.error_code, j.generation_id, j.leader, j.protocol_name) == (0, 1, first.member_id, "range")
        A = SyncGroupRequest.SyncGroupRequestAssignment
        s = c.request(SyncGroupRequest(group_id="wire", generation_id=1, member_id=j.member_id, protocol_type="consumer",
                                       protocol_name="range", assignments=[A(member_id=j.member_id, assignment=b"xyz")]), 5)
        assert (s.error_code, s.assignment) == (0, b"xyz")
        hb = c.request(HeartbeatRequest(group_id="wire", generation_id=1, member_id=j.member_id), 4)
        assert hb.error_code == 0
        hb = c.request(HeartbeatRequest(group_id="wire", generation_id=0, member_id=j.member_id), 4)
        assert hb.error_code == E.ILLEGAL_GENERATION
        (g,) = c.request(DescribeGroupsRequest(groups=["wire"]), 5).groups
        assert (g.group_state, g.protocol_data, [m.member_id for m in g.members]) == ("Stable", "range", [j.member_id])
        M = LeaveGroupRequest.MemberIdentity
        lv = c.request(LeaveGroupRequest(group_id="wire", members=[M(member_id=j.member_id, reason="done")]), 5)
        assert lv.error_code == 0 and lv.members[0].error_code == 0
        (g,) = c.request(DescribeGroupsRequest(groups=["wire"]), 5).groups
        assert g.group_state == "Empty"
        assert [x.group_id for x in c.request(ListGroupsRequest(), 4).groups] == ["wire"]
        assert c.request(DeleteGroupsRequest(groups_names=["wire"]), 2).results[0].error_code == 0
    finally:
        b.stop()


# == loading =========================================================================================

def test_coordinator_load_in_progress_while_a_large_offsets_topic_loads(tmp_path):
    """~200k commit records; right after a restart the group APIs answer
    COORDINATOR_LOAD_IN_PROGRESS (Heartbeat answers NONE, as Kafka does), then the offsets are back.
    The records are commits of 2,000 groups sharing the group's partition (distinct keys: the
    loader skips overwritten records, so one group's repeated commits would load at once)."""
    b = BrokerProcess(tmp_path / "data").start()
    group, topic, n_parts, n_requests = "loading-group", "big", 100, 2000
    home = group_partition(group, 50)
    neighbours = [g for g in (f"neighbour-{i}" for i in range(200_000)) if group_partition(g, 50) == home]
    committer = [*neighbours[:n_requests - 1], group]
    try:
        c = RawClient(b.port)
        create_topic(c, topic, n_parts)
        for start in range(0, n_requests, 200):   # pipelined, 200 in flight
            cids = [c.send(commit_request(committer[i], topic, {p: i for p in range(n_parts)}), 8)
                    for i in range(start, start + 200)]
            for cid in cids:
                got, resp = parse_response(8, 8, c.recv_frame())
                assert got == cid and all(p.error_code == 0 for t in resp.topics for p in t.partitions)
    finally:
        b.kill()
    b = BrokerProcess(tmp_path / "data").start()
    try:
        c = RawClient(b.port)
        error, _ = fetch_offsets(c, group, topic, [0])
        assert error == E.COORDINATOR_LOAD_IN_PROGRESS
        assert join(c, group).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        resp = c.request(commit_request(group, topic, {0: 1}), 8)
        assert resp.topics[0].partitions[0].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        (g,) = c.request(DescribeGroupsRequest(groups=[group]), 5).groups
        assert g.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        assert c.request(ListGroupsRequest(), 4).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
        hb = c.request(HeartbeatRequest(group_id=group, generation_id=1, member_id="m"), 4)
        assert hb.error_code == 0
        # The load yields every few milliseconds: requests keep being answered while it runs
        # (it once replayed 200 batches between yields, and a request waited for most of the load).
        deadline = time.monotonic() + 60
        loading_answers = 0
        while True:
            error, offsets = fetch_offsets(c, group, topic, range(n_parts))
            if error != E.COORDINATOR_LOAD_IN_PROGRESS:
                break
            loading_answers += 1
            assert time.monotonic() < deadline
        assert error == 0 and offsets == {p: n_requests - 1 for p in range(n_parts)}
        assert loading_answers >= 10, loading_answers
        while "loaded 50 partition(s) of __consumer_offsets" not in b.log_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        b.stop()


# == durability ======================================================================================

def test_acknowledged_commits_survive_sigkill(tmp_path):
    """600 pipelined commits on 3 connections; the broker is SIGKILLed while
    commits are still in flight. After the restart every partition holds at least the last
    acknowledged offset, and only an offset that was sent."""
    b = BrokerProcess(tmp_path / "data").start()
    topic, n = "durable", 600
    acked: dict[tuple[str, int], int] = {}
    try:
        admin = RawClient(b.port)
        create_topic(admin, topic, 4)
        conns = [RawClient(b.port) for _ in range(3)]
        sent = {}
        for i, c in enumerate(conns):
            sent[c] = [c.send(commit_request(f"dur-{i}", topic, {p: k * 10 + p for p in range(4)}), 8)
                       for k in range(n)]
        for i, c in enumerate(conns):       # read about half the answers, then kill
            for k in range(n // 2 + 37 * i):
                got, resp = parse_response(8, 8, c.recv_frame())
                assert got == sent[c][k] and all(p.error_code == 0 for t in resp.topics for p in t.partitions)
                for p in range(4):
                    acked[(f"dur-{i}", p)] = k * 10 + p
    finally:
        b.kill()
    b = BrokerProcess(tmp_path / "data").start()
    try:
        c = RawClient(b.port)
        for i in range(3):
            deadline = time.monotonic() + 30
            while (r := fetch_offsets(c, f"dur-{i}", topic, range(4)))[0] == E.COORDINATOR_LOAD_IN_PROGRESS:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            error, offsets = r
            assert error == 0
            for p, o in offsets.items():
                assert o >= acked[(f"dur-{i}", p)] and o % 10 == p and o < n * 10, (i, p, o)
    finally:
        b.stop()


# == __consumer_offsets records, decoded independently (tests/kafka_spec) ========================

def fetch_partition(c, topic, partition, version=12):
    F = FetchRequest.FetchTopic
    resp = c.request(FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 24, isolation_level=0, topics=[
        F(topic=topic, partitions=[F.FetchPartition(partition=partition, fetch_offset=0,
                                                    partition_max_bytes=1 << 24)])]), version)
    p = resp.responses[0].partitions[0]
    assert p.error_code == 0
    return b"".join(bytes(x) for x in p.records) if isinstance(p.records, list) else bytes(p.records or b"")


def test_offsets_records_decode_with_an_independent_decoder(tmp_path):
    b = BrokerProcess(tmp_path / "data", ["group.initial.rebalance.delay.ms=0"]).start()
    group = "decoded"
    try:
        c = RawClient(b.port)
        create_topic(c, "dt", 3)
        assert c.request(commit_request(group, "dt", {0: 5, 1: 6}, metadata="meta-ü", leader_epoch=3), 8)
        assert c.request(commit_request(group, "dt", {2: 7}, retention=60000), 4)  # v1 value with expiry
        first = join(c, group, instance_id=None)
        j = join(c, group, first.member_id)
        A = SyncGroupRequest.SyncGroupRequestAssignment
        c.request(SyncGroupRequest(group_id=group, generation_id=j.generation_id, member_id=j.member_id,
                                   assignments=[A(member_id=j.member_id, assignment=b"\x00\x00asg")]), 3)
        M = LeaveGroupRequest.MemberIdentity
        c.request(LeaveGroupRequest(group_id=group, members=[M(member_id=j.member_id)]), 4)
        D = OffsetDeleteRequest.OffsetDeleteRequestTopic
        od = c.request(OffsetDeleteRequest(group_id=group, topics=[D(name="dt", partitions=[
            D.OffsetDeleteRequestPartition(partition_index=1)])]), 0)
        assert od.error_code == 0
        data = fetch_partition(c, "__consumer_offsets", group_partition(group, 50))
    finally:
        b.stop()
    decoded = [(o,) + spec_decode_offsets_record(k, v) for o, k, v in spec_iter_records(data)]
    assert [o for o, *_ in decoded] == list(range(len(decoded)))
    commits = [(k["topic"], k["partition"], v and (v["_version"], v["offset"], v["leaderEpoch"], v["metadata"],
                                                    v["expireTimestamp"] > 0))
               for _, kind, k, v in decoded if kind == "offset_commit"]
    assert commits == [("dt", 0, (3, 5, 3, "meta-ü", False)), ("dt", 1, (3, 6, 3, "meta-ü", False)),
                       ("dt", 2, (1, 7, -1, "", True)), ("dt", 1, None)]
    groups = [(v["_version"], v["protocolType"], v["generation"], v["protocol"], v["leader"],
               [(m["memberId"], m["clientId"], m["clientHost"], m["sessionTimeout"], m["rebalanceTimeout"],
                 m["assignment"]) for m in v["members"]])
              for _, kind, k, v in decoded if kind == "group_metadata" and k["group"] == group]
    mid = j.member_id
    assert groups == [   # the commits made it a simple group: JoinGroup writes no empty record
        (3, "consumer", 1, "range", mid, [(mid, "raw-test", "/127.0.0.1", 10000, 20000, b"\x00\x00asg")]),
        (3, "consumer", 2, None, None, []),                           # left: Empty, generation 2
    ]


# == the coordinator runtime in-process: batched offset commits ======================================
# GroupRuntime holds consecutive OffsetCommits of a shard and writes them as one RecordBatch at the
# end of the event-loop iteration; these pin that it behaves exactly as one write per commit would.

import asyncio  # noqa: E402

from kgroup.protocol.messages.heartbeat import HeartbeatResponse  # noqa: E402
from kgroup.storage.errors import KafkaStorageError  # noqa: E402
from kgroup.broker.pending import PendingResponse  # noqa: E402
from tests.broker.support import answer_of, inproc, submit  # noqa: E402


_submit, _answer, _inproc = submit, answer_of, inproc


def _offsets_batches(b, group):
    plog = b.data_path.log("__consumer_offsets", group_partition(group, 50))
    return [h.records_count for h, _ in plog.iter_batches()]


def _errors(resp):
    return [p.error_code for t in resp.topics for p in t.partitions]


def test_runtime_batches_commits_of_one_iteration_into_one_record_batch(tmp_path):
    async def scenario(b):
        await _answer(_submit(b, commit_request("batched", "t", {0: 1}), 8))   # creates the group
        before = _offsets_batches(b, "batched")
        pending = [_submit(b, commit_request("batched", "t", {p: 10 + k}), 8) for k in range(5) for p in (1, 2)]
        answers = [await _answer(x) for x in pending]
        assert all(_errors(a) == [0] for a in answers)
        after = _offsets_batches(b, "batched")
        assert after[:len(before)] == before and after[len(before):] == [10]    # one batch, ten records
        fetched = await _answer(_submit(b, OffsetFetchRequest(group_id="batched", topics=[
            FT(name="t", partition_indexes=[0, 1, 2])]), 7))
        assert {p.partition_index: p.committed_offset for p in fetched.topics[0].partitions} == {0: 1, 1: 14, 2: 14}
    _inproc(tmp_path, scenario)


def test_runtime_fetch_pipelined_after_a_held_commit_sees_it(tmp_path):
    async def scenario(b):
        await _answer(_submit(b, commit_request("seen", "t", {0: 1}), 8))
        commit = _submit(b, commit_request("seen", "t", {0: 42}), 8)
        fetch = _submit(b, OffsetFetchRequest(group_id="seen", topics=[FT(name="t", partition_indexes=[0])]), 7)
        assert _errors(await _answer(commit)) == [0]
        assert (await _answer(fetch)).topics[0].partitions[0].committed_offset == 42
    _inproc(tmp_path, scenario)


def test_runtime_commit_to_a_group_created_by_a_held_commit_is_not_validated_before_it(tmp_path):
    """An admin commit (generation -1) creates the group on replay; a member commit right behind it
    must see that group (UNKNOWN_MEMBER_ID, as one write per commit gives), not an unknown group."""
    async def scenario(b):
        first = _submit(b, commit_request("fresh", "t", {0: 1}), 9)
        second = _submit(b, commit_request("fresh", "t", {0: 2}, generation=3, member_id="m-1"), 9)
        assert _errors(await _answer(first)) == [0]
        assert _errors(await _answer(second)) == [E.UNKNOWN_MEMBER_ID]
    _inproc(tmp_path, scenario)


def test_runtime_failed_write_of_held_commits_aborts_each_and_changes_nothing(tmp_path):
    """A failed write of a batch of commits: each gets NOT_COORDINATOR (Kafka's
    mapping of KAFKA_STORAGE_ERROR), the offsets stay as they were, later commits work."""
    async def scenario(b):
        await _answer(_submit(b, commit_request("fails", "t", {0: 1}), 8))
        plog = b.data_path.log("__consumer_offsets", group_partition("fails", 50))
        real_append = plog.append

        def broken(*a, **kw):
            raise KafkaStorageError("disk on fire")
        plog.append = broken
        pending = [_submit(b, commit_request("fails", "t", {0: 100 + k}), 8) for k in range(3)]
        assert [_errors(await _answer(x)) for x in pending] == [[E.NOT_COORDINATOR]] * 3
        def buggy(*a, **kw):
            raise RuntimeError("a bug, not a disk error")
        plog.append = buggy     # answered (UNKNOWN_SERVER_ERROR), never left hanging
        pending = [_submit(b, commit_request("fails", "t", {0: 200 + k}), 8) for k in range(2)]
        assert [_errors(await asyncio.wait_for(_answer(x), 5)) for x in pending] == [[E.UNKNOWN_SERVER_ERROR]] * 2
        plog.append = real_append
        fetched = await _answer(_submit(b, OffsetFetchRequest(group_id="fails", topics=[
            FT(name="t", partition_indexes=[0])]), 7))
        assert fetched.error_code == 0 and fetched.topics[0].partitions[0].committed_offset == 1
        assert _errors(await _answer(_submit(b, commit_request("fails", "t", {0: 7}), 8))) == [0]
    _inproc(tmp_path, scenario)


def test_runtime_answers_immediate_operations_without_a_future(tmp_path):
    async def scenario(b):
        answer = _submit(b, HeartbeatRequest(group_id="nobody", generation_id=1, member_id="m"), 4)
        assert isinstance(answer, HeartbeatResponse) and answer.error_code == E.UNKNOWN_MEMBER_ID
        parked = _submit(b, JoinGroupRequest(group_id="parks", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                             member_id="", protocol_type="consumer", protocols=[
                                                 JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]), 4)
        assert (await _answer(parked)).error_code == E.MEMBER_ID_REQUIRED
    _inproc(tmp_path, scenario)


def test_runtime_held_commits_stay_under_a_small_max_message_bytes(tmp_path):
    """Batching must never make a write too large that one commit per write would not: with
    message.max.bytes=2000, 60 commits in one iteration are written as several batches, all ok."""
    async def scenario(b):
        await _answer(_submit(b, commit_request("small", "t", {0: 1}), 8))
        pending = [_submit(b, commit_request("small", "t", {k % 4: k}), 8) for k in range(60)]
        assert [_errors(await _answer(x)) for x in pending] == [[0]] * 60
        sizes = _offsets_batches(b, "small")
        assert sum(sizes) == 61 and len(sizes) > 2
    _inproc(tmp_path, scenario, overrides=("group.initial.rebalance.delay.ms=0", "message.max.bytes=2000"))


def test_runtime_rearms_its_wakeup_only_for_an_earlier_deadline(tmp_path):
    """The runtime's loop timer per shard follows the earliest deadline: a key added or moved
    earlier (a heap push) re-arms it; a key moved later (a heartbeat) leaves it alone."""
    async def scenario(b):
        b.group_coordinator.ensure_offsets_topic()
        rt = b.group_coordinator.runtime
        shard = rt.shards[0]
        base = shard.timer.now = now_ms()
        shard.timer.schedule("late", 600_000, lambda res: None)
        rt._reschedule(shard)
        first = rt._timers[0].handle
        assert rt._timers[0].deadline <= base + 600_000
        shard.timer.schedule("early", 1_000, lambda res: None)        # earlier: re-armed
        rt._reschedule(shard)
        assert rt._timers[0].deadline == base + 1_000 and rt._timers[0].handle is not first
        armed = rt._timers[0].handle
        shard.timer.schedule("early", 5_000, lambda res: None)        # later (a heartbeat): kept
        rt._reschedule(shard)
        assert rt._timers[0].handle is armed and rt._timers[0].deadline == base + 1_000
        await asyncio.sleep(1.2)                                       # fires, re-arms for the rest
        assert 0 in rt._timers and rt._timers[0].deadline == shard.next_deadline()
    _inproc(tmp_path, scenario)


def test_multi_group_requests_are_split_by_owning_shard_and_answer_every_group(tmp_path):
    """DescribeGroups, OffsetFetch v8, DeleteGroups and ListGroups over groups on several shards:
    every group is answered once, grouped by shard in order of first mention, request order
    within a shard; DeleteGroups' tombstones make it wait for their fsync (a gathered answer)."""
    groups = ["a", "d", "b", "a2", "e", "d2"]
    shard_of = {g: group_partition(g, 50) for g in groups}
    assert len(set(shard_of.values())) >= 4
    by_shard = [g for p in dict.fromkeys(shard_of[g] for g in groups) for g in groups if shard_of[g] == p]
    Group = OffsetFetchRequest.OffsetFetchRequestGroup

    async def scenario(b):
        for g in groups:
            await _answer(_submit(b, commit_request(g, "t", {0: len(g)}), 8))
        described = await _answer(_submit(b, DescribeGroupsRequest(groups=groups), 5))
        assert [(g.group_id, g.group_state) for g in described.groups] == [(g, "Empty") for g in by_shard]
        fetched = await _answer(_submit(b, OffsetFetchRequest(groups=[Group(group_id=g, topics=None)
                                                                      for g in groups]), 8))
        assert [(g.group_id, [p.committed_offset for t in g.topics for p in t.partitions])
                for g in fetched.groups] == [(g, [len(g)]) for g in by_shard]
        deleted = _submit(b, DeleteGroupsRequest(groups_names=groups), 2)
        assert type(deleted) is PendingResponse
        deleted = await _answer(deleted)
        assert [(r.group_id, r.error_code) for r in deleted.results] == [(g, 0) for g in by_shard]
        assert (await _answer(_submit(b, ListGroupsRequest(), 4))).groups == []
    _inproc(tmp_path, scenario)
