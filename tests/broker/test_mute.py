"""Muting a connection behind a parked request, as Kafka's socket server mutes a channel until
the response to its request is sent: over raw sockets, what a later request on the same
connection observes (the new generation behind a JoinGroup, a topic created while a long-poll
Fetch waited), that requests answered at once and requests waiting only for their own fsync
(OffsetCommit, acks=-1 Produce) keep being pipelined, and that frames kept behind a parked
request are bounded (reading pauses) and all answered in order afterwards."""
from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time

import pytest

from kgroup.broker.broker import Broker
from kgroup.broker.config import BrokerConfig
from kgroup.coordinator import group_partition
from kgroup.protocol.api import encode_request, parse_response
from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.api_versions import ApiVersionsRequest
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.heartbeat import HeartbeatRequest
from kgroup.protocol.messages.join_group import JoinGroupRequest
from kgroup.protocol.messages.metadata import MetadataRequest
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from kgroup.protocol.messages.sync_group import SyncGroupRequest
from kgroup.protocol.records import Record, build_batch
from tests.broker.test_data_path import fetch_request, produce_request
from tests.broker.test_groups import commit_request, create_topic, fetch_offsets
from tests.harness import BrokerProcess, RawClient

CT = CreateTopicsRequest.CreatableTopic
JP = JoinGroupRequest.JoinGroupRequestProtocol
SA = SyncGroupRequest.SyncGroupRequestAssignment
FT = OffsetFetchRequest.OffsetFetchRequestTopic
_SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"


def _join_request(group, member_id):
    return JoinGroupRequest(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=20000,
                            member_id=member_id, protocol_type="consumer",
                            protocols=[JP(name="range", metadata=_SUBSCRIPTION)])


def _recv(c, body, version, cid):
    got, resp = parse_response(type(body).API_KEY, version, c.recv_frame())
    assert got == cid
    return resp


def _nothing_to_read(c, seconds) -> bool:
    c.sock.settimeout(seconds)
    try:
        c.sock.recv(1, socket.MSG_PEEK)
    except socket.timeout:
        return True
    finally:
        c.sock.settimeout(10)
    return False


@pytest.fixture
def fast_broker(tmp_path):
    b = BrokerProcess(tmp_path / "data", ["group.initial.rebalance.delay.ms=0"]).start()
    yield b
    b.stop()


def _two_members_joined_generation_2(broker, group):
    """Topic t; a forms the group alone (generation 1), b joins, a rejoins: both have joined
    generation 2 (a the leader), neither has synced. Returns (a, b, a's id, b's id)."""
    a, b = RawClient(broker.port), RawClient(broker.port)
    create_topic(a, "t", 1)
    a_id = a.request(_join_request(group, ""), 9).member_id                 # KIP-394 first step
    joined = a.request(_join_request(group, a_id), 9)
    assert (joined.error_code, joined.generation_id) == (0, 1)
    assert a.request(SyncGroupRequest(group_id=group, generation_id=1, member_id=a_id, protocol_type="consumer",
                                      protocol_name="range", assignments=[SA(member_id=a_id, assignment=b"")]),
                     5).error_code == 0
    b_id = b.request(_join_request(group, ""), 9).member_id
    b_join = b.send(_join_request(group, b_id), 9)                          # parks: a must rejoin
    a_join = a.request(_join_request(group, a_id), 9)                       # completes generation 2
    assert (a_join.error_code, a_join.generation_id, a_join.leader) == (0, 2, a_id)
    assert _recv(b, _join_request(group, b_id), 9, b_join).generation_id == 2
    return a, b, a_id, b_id


def test_commit_behind_a_parked_follower_sync_sees_the_group_stable(fast_broker):
    """A follower's SyncGroup parks until the leader's; an OffsetCommit pipelined behind it is
    processed once the group is Stable (accepted), not in CompletingRebalance
    (REBALANCE_IN_PROGRESS, what dispatching it at once would answer)."""
    group = "synced"
    a, b, a_id, b_id = _two_members_joined_generation_2(fast_broker, group)
    sync = SyncGroupRequest(group_id=group, generation_id=2, member_id=b_id, protocol_type="consumer",
                            protocol_name="range", assignments=[])
    commit = commit_request(group, "t", {0: 5}, generation=2, member_id=b_id)
    frames = [encode_request(sync, 5, 201, "b"), encode_request(commit, 8, 202, "b")]
    b.sock.sendall(b"".join(p for f in frames for p in f))
    assert _nothing_to_read(b, 0.5)                         # parked: the leader has not synced
    assert a.request(SyncGroupRequest(group_id=group, generation_id=2, member_id=a_id, protocol_type="consumer",
                                      protocol_name="range", assignments=[SA(member_id=m, assignment=b"x")
                                                                          for m in (a_id, b_id)]),
                     5).error_code == 0
    synced = _recv(b, sync, 5, 201)
    assert (synced.error_code, synced.assignment) == (0, b"x")
    assert [p.error_code for t in _recv(b, commit, 8, 202).topics for p in t.partitions] == [0]
    assert fetch_offsets(a, group, "t", [0]) == (0, {0: 5})
    a.close()
    b.close()


def test_heartbeat_and_commit_behind_a_parked_join_see_the_new_generation(fast_broker):
    """Members a and b are Stable in generation 1. a pipelines a rejoin (which starts a rebalance
    and parks until b rejoins), a Heartbeat and an OffsetCommit of generation 1. With Kafka the
    channel is muted behind the JoinGroup, so both are processed in generation 2: ILLEGAL_GENERATION
    and nothing committed. (Dispatched at once they would see generation 1 in PreparingRebalance:
    REBALANCE_IN_PROGRESS and an accepted commit.)"""
    group = "muted"
    a, b, a_id, b_id = _two_members_joined_generation_2(fast_broker, group)
    for c, mid in ((a, a_id), (b, b_id)):
        assignments = [SA(member_id=m, assignment=b"") for m in (a_id, b_id)] if c is a else []
        assert c.request(SyncGroupRequest(group_id=group, generation_id=2, member_id=mid, protocol_type="consumer",
                                          protocol_name="range", assignments=assignments), 5).error_code == 0

    # a rejoins: generation 3 starts, a parks until b rejoins; a Heartbeat and an OffsetCommit of
    # generation 2 follow in the same write.
    heartbeat = HeartbeatRequest(group_id=group, generation_id=2, member_id=a_id)
    commit = commit_request(group, "t", {0: 7}, generation=2, member_id=a_id)
    frames = [encode_request(_join_request(group, a_id), 9, 101, "a"), encode_request(heartbeat, 4, 102, "a"),
              encode_request(commit, 8, 103, "a")]
    a.sock.sendall(b"".join(p for f in frames for p in f))
    assert _nothing_to_read(a, 0.5)                         # parked: the join waits for b
    assert b.request(HeartbeatRequest(group_id=group, generation_id=2, member_id=b_id), 4).error_code == \
        E.REBALANCE_IN_PROGRESS                             # the rebalance did start
    b_join = b.send(_join_request(group, b_id), 9)
    assert _recv(b, _join_request(group, b_id), 9, b_join).generation_id == 3
    assert _recv(a, _join_request(group, a_id), 9, 101).generation_id == 3
    assert _recv(a, heartbeat, 4, 102).error_code == E.ILLEGAL_GENERATION
    assert [p.error_code for t in _recv(a, commit, 8, 103).topics for p in t.partitions] == [E.ILLEGAL_GENERATION]
    assert fetch_offsets(a, group, "t", [0]) == (0, {0: -1})
    a.close()
    b.close()


def test_metadata_behind_a_long_poll_fetch_is_processed_after_its_answer(fast_broker):
    """A Fetch parked on an empty partition mutes its connection: a Metadata pipelined behind it
    is processed only once the Fetch is answered, so it lists a topic created meanwhile."""
    c, other = RawClient(fast_broker.port), RawClient(fast_broker.port)
    create_topic(c, "quiet", 1)
    started = time.monotonic()
    frames = [encode_request(fetch_request("quiet", max_wait_ms=1500), 12, 1, "c"),
              encode_request(MetadataRequest(topics=None), 12, 2, "c")]
    c.sock.sendall(b"".join(p for f in frames for p in f))
    assert _nothing_to_read(c, 0.3)
    create_topic(other, "created-meanwhile", 1)
    fetched = _recv(c, fetch_request("quiet"), 12, 1)
    assert fetched.responses[0].partitions[0].error_code == 0
    assert time.monotonic() - started >= 1.4                # answered at its max wait
    md = _recv(c, MetadataRequest(topics=None), 12, 2)
    assert "created-meanwhile" in {t.name for t in md.topics}
    c.close()
    other.close()


def test_frames_behind_a_parked_fetch_are_bounded_then_all_answered_in_order(fast_broker):
    """Over 1 MiB of produce requests behind a parked Fetch: reading pauses (Kafka's muted
    channel reads nothing), and every request is answered, in order, once the Fetch is."""
    c = RawClient(fast_broker.port)
    create_topic(c, "parked", 1)
    create_topic(c, "behind", 1)
    value = b"x" * 100_000
    produces = [produce_request("behind", build_batch([Record(key=b"k", value=value, timestamp=0)]), acks=1)
                for _ in range(30)]
    frames = [encode_request(fetch_request("parked", max_wait_ms=1000), 12, 1, "c")]
    frames += [encode_request(p, 9, 2 + i, "c") for i, p in enumerate(produces)]
    # sendall may block while the broker reads nothing: send from a thread
    sender = threading.Thread(target=c.sock.sendall, args=(b"".join(p for f in frames for p in f),))
    sender.start()
    assert _recv(c, fetch_request("parked"), 12, 1).responses[0].partitions[0].error_code == 0
    offsets = [_recv(c, p, 9, 2 + i).responses[0].partition_responses[0].base_offset
               for i, p in enumerate(produces)]
    sender.join(10)
    assert offsets == list(range(30))
    c.close()


# == requests that wait only for their own fsync keep being pipelined ==================================
# In process (a real listener, raw frames over asyncio streams) to count the group-commit rounds.

def _inproc(tmp_path, scenario):
    async def main():
        cfg = BrokerConfig.load(None, ["listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={tmp_path / 'data'}",
                                       "group.initial.rebalance.delay.ms=0"])
        b = Broker(cfg)
        await b.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", b.bound_port)
            try:
                return await scenario(b, reader, writer)
            finally:
                writer.close()
        finally:
            await b.stop()
    asyncio.run(asyncio.wait_for(main(), 60))


async def _roundtrip(reader, writer, requests):
    """Send ``[(body, version)]`` in one write; the answers in order (checking correlation ids)."""
    writer.write(b"".join(p for i, (body, v) in enumerate(requests) for p in encode_request(body, v, i, "x")))
    answers = []
    for i, (body, v) in enumerate(requests):
        size, = struct.unpack(">i", await reader.readexactly(4))
        cid, resp = parse_response(type(body).API_KEY, v, await reader.readexactly(size))
        assert cid == i
        answers.append(resp)
    return answers


def test_pipelined_offset_commits_on_one_connection_share_writes_and_fsyncs(tmp_path):
    """200 OffsetCommits in one write: each waits only for the fsync of its own record, which later
    requests cannot observe, so they are not serialized (one write and fsync each, as muting would
    do) but batched; answered in order, the last offset committed."""
    async def scenario(b, reader, writer):
        await _roundtrip(reader, writer, [(CreateTopicsRequest(topics=[CT(name="t", num_partitions=1,
                                                                          replication_factor=1)]), 5)])
        await _roundtrip(reader, writer, [(commit_request("g", "t", {0: 0}), 8)])   # creates the group
        plog = b.data_path.log("__consumer_offsets", group_partition("g", 50))
        batches_before = sum(1 for _ in plog.iter_batches())
        rounds = []
        b.data_path.flush_observer = rounds.append
        answers = await _roundtrip(reader, writer, [(commit_request("g", "t", {0: k}), 8) for k in range(1, 201)])
        assert all(p.error_code == 0 for a in answers for t in a.topics for p in t.partitions)
        batches = sum(1 for _ in plog.iter_batches()) - batches_before
        assert 1 <= batches < 20 and 1 <= len(rounds) < 20, (batches, len(rounds))
        fetched = await _roundtrip(reader, writer, [(OffsetFetchRequest(group_id="g", topics=[
            FT(name="t", partition_indexes=[0])]), 7)])
        assert fetched[0].topics[0].partitions[0].committed_offset == 200
        assert not next(iter(b.connections)).muted
    _inproc(tmp_path, scenario)


def test_pipelined_acks_all_produces_on_one_connection_share_fsyncs(tmp_path):
    """acks=-1 produces in one write: appended at once (below the high watermark, as with Kafka's
    one replica), so only their answers wait for the fsync; they share group-commit rounds instead
    of one each, and are answered in order with consecutive offsets. A Metadata and an
    ApiVersions in between are answered in their places."""
    async def scenario(b, reader, writer):
        await _roundtrip(reader, writer, [(CreateTopicsRequest(topics=[CT(name="p", num_partitions=1,
                                                                          replication_factor=1)]), 5)])
        rounds = []
        b.data_path.flush_observer = rounds.append
        requests = []
        for i in range(100):
            requests.append((produce_request("p", build_batch([Record(key=b"k", value=b"v%d" % i, timestamp=0)]),
                                             acks=-1), 9))
            if i % 25 == 0:
                requests += [(MetadataRequest(topics=None), 12), (ApiVersionsRequest(), 3)]
        answers = await _roundtrip(reader, writer, requests)
        offsets = [a.responses[0].partition_responses[0].base_offset for a in answers if hasattr(a, "responses")]
        assert offsets == list(range(100))
        assert 1 <= len(rounds) < 20, len(rounds)
    _inproc(tmp_path, scenario)
