"""Creating a topic must not stall the event loop. For a CreateTopics of 9,999 partitions (the
controller's cap of 10,000 records per request; 3 files each) the partition files are created
on a thread and opened in 5 ms slices, and the topic is saved, and visible in Metadata, once they all exist (meanwhile its
name is taken, and Metadata asking for it by name gets LEADER_NOT_AVAILABLE). A classic group's
member heartbeats on another connection and is answered quickly throughout; a restart loads
the topic."""
import threading
import time

from kgroup.protocol.api import parse_response
from kgroup.protocol.consumer_protocol import ConsumerProtocolSubscription
from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.heartbeat import HeartbeatRequest
from kgroup.protocol.messages.join_group import JoinGroupRequest
from kgroup.protocol.messages.metadata import MetadataRequest
from kgroup.protocol.messages.sync_group import SyncGroupRequest
from tests.broker.test_create_topics_limits import fds, produce
from tests.harness import BrokerProcess, RawClient

CT = CreateTopicsRequest.CreatableTopic
PARTITIONS = 9_999


def stable_member(c, group):
    meta = ConsumerProtocolSubscription(topics=["t"]).to_bytes(0)
    req = JoinGroupRequest(group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000, member_id="",
                           protocol_type="consumer",
                           protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=meta)])
    r = c.request(req, 9)
    assert r.error_code == ErrorCode.MEMBER_ID_REQUIRED
    req.member_id = r.member_id
    r = c.request(req, 9)
    assert r.error_code == 0
    A = SyncGroupRequest.SyncGroupRequestAssignment
    s = c.request(SyncGroupRequest(group_id=group, generation_id=r.generation_id, member_id=r.member_id,
                                   protocol_type="consumer", protocol_name="range",
                                   assignments=[A(member_id=r.member_id, assignment=b"")]), 5)
    assert s.error_code == 0
    return r.member_id, r.generation_id


def partitions_of(c, topic):
    found = [t for t in c.request(MetadataRequest(topics=None), 12).topics if t.name == topic]
    return len(found[0].partitions) if found else None


def test_heartbeats_are_answered_while_9999_partitions_are_created(tmp_path):
    data = tmp_path / "d"
    b = BrokerProcess(data, ["group.initial.rebalance.delay.ms=0"]).start()
    try:
        hb = RawClient(b.port)
        member, generation = stable_member(hb, "g")
        creating, done = threading.Event(), threading.Event()
        during = []             # heartbeat round trips (s) that overlapped the creation

        def heartbeats():
            while not done.is_set():
                t0 = time.perf_counter()
                r = hb.request(HeartbeatRequest(group_id="g", generation_id=generation, member_id=member), 4)
                if creating.is_set():
                    during.append(time.perf_counter() - t0)
                assert r.error_code == 0
                time.sleep(0.002)
        t = threading.Thread(target=heartbeats, daemon=True)
        t.start()
        time.sleep(0.2)
        c, watcher = RawClient(b.port), RawClient(b.port)
        creating.set()
        c.send(CreateTopicsRequest(topics=[CT(name="wide", num_partitions=PARTITIONS, replication_factor=1)],
                                   timeout_ms=60_000, validate_only=False), 7)
        time.sleep(0.1)
        # not visible until created (the name is taken meanwhile)
        seen_early = partitions_of(watcher, "wide")
        by_name = watcher.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="wide")]), 12)
        again = watcher.request(CreateTopicsRequest(topics=[CT(name="wide", num_partitions=1, replication_factor=1)],
                                                    timeout_ms=60_000, validate_only=False), 7)
        c.sock.settimeout(120)
        _, answer = parse_response(19, 7, c.recv_frame())
        creating.clear()
        done.set()
        t.join(10)
        assert [(x.name, x.error_code, x.num_partitions) for x in answer.topics] == [("wide", 0, PARTITIONS)]
        created = c.request(MetadataRequest(topics=None), 12)
        wide = [x for x in created.topics if x.name == "wide"]
        assert len(wide) == 1 and len(wide[0].partitions) == PARTITIONS
        assert seen_early is None, "the topic was visible before its partitions were created"
        assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        assert by_name.topics[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
        during.sort()
        p99 = during[int(len(during) * 0.99)] if during else float("inf")
        print(f"{len(during)} heartbeats during the creation, p50 {during[len(during) // 2] * 1e3:.1f} ms, "
              f"p99 {p99 * 1e3:.1f} ms, max {during[-1] * 1e3:.1f} ms; broker descriptors {fds(b.proc.pid)}")
        assert len(during) >= 20, f"only {len(during)} heartbeats were answered during the creation"
        assert p99 < 0.1, f"heartbeat p99 {p99 * 1e3:.0f} ms while the topic was created"
        assert fds(b.proc.pid) < 6000
        assert produce(c, "wide", PARTITIONS - 1, b"last") == 0
    finally:
        b.stop()
    b = BrokerProcess(data).start()
    try:
        c = RawClient(b.port)
        assert partitions_of(c, "wide") == PARTITIONS
        assert produce(c, "wide", 0, b"first") == 0
    finally:
        b.stop()
