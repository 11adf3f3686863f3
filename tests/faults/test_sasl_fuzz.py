"""The protocol fuzzer against a SASL listener: mutated frames of every kind (ApiVersions,
SaslHandshake and SaslAuthenticate with real PLAIN/SCRAM tokens, and requests that would write:
Produce, CreateTopics, OffsetCommit, Metadata with auto-creation, JoinGroup) sent to
SASL_PLAINTEXT before any authentication. Nothing but the three SASL-phase APIs is handled (no
topic, record or offset appears), the broker does not crash, its memory stays bounded, and an
authenticated client is then served. KGROUP_FUZZ_FRAMES=N sends N frames (default 2,000)."""
import os
import random
import time

from kgroup.protocol.api import encode_request
from kgroup.protocol.messages.api_versions import ApiVersionsRequest
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.join_group import JoinGroupRequest
from kgroup.protocol.messages.metadata import MetadataRequest
from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
from kgroup.protocol.messages.produce import ProduceRequest
from kgroup.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kgroup.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kgroup.protocol.records import Record, build_batch
from kgroup.security.scram import SCRAM_SHA_512, ScramClient
from kgroup.testing.broker import KafkaBroker
from tests.faults.test_protocol_fuzz import fuzz, mutate, rss


def _frame(req, version, corr=7):
    return b"".join(encode_request(req, version, corr, "fuzz"))


def seeds() -> list[bytes]:
    P = ProduceRequest.TopicProduceData
    C = OffsetCommitRequest.OffsetCommitRequestTopic
    batch = build_batch([Record(value=b"fuzzed")])
    return [
        _frame(ApiVersionsRequest(client_software_name="fuzz", client_software_version="1"), 3),
        _frame(ApiVersionsRequest(), 0),
        _frame(SaslHandshakeRequest(mechanism="PLAIN"), 1),
        _frame(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1),
        _frame(SaslHandshakeRequest(mechanism="PLAIN"), 0),
        _frame(SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"), 2),
        _frame(SaslAuthenticateRequest(auth_bytes=ScramClient(SCRAM_SHA_512, "alice", "x").first()), 1),
        _frame(SaslAuthenticateRequest(auth_bytes=b"c=biws,r=abc,p=AAAA"), 0),
        _frame(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto-x")],
                               allow_auto_topic_creation=True), 12),
        _frame(ProduceRequest(acks=1, timeout_ms=1000, topic_data=[P(name="t", partition_data=[
            P.PartitionProduceData(index=0, records=batch)])]), 9),
        _frame(CreateTopicsRequest(timeout_ms=1000, topics=[CreateTopicsRequest.CreatableTopic(
            name="fuzz-new", num_partitions=1, replication_factor=1)]), 7),
        _frame(OffsetCommitRequest(group_id="fz", generation_id_or_member_epoch=-1, topics=[C(name="t", partitions=[
            C.OffsetCommitRequestPartition(partition_index=0, committed_offset=3)])]), 8),
        _frame(JoinGroupRequest(group_id="fz", session_timeout_ms=6000, rebalance_timeout_ms=6000, member_id="",
                                protocol_type="consumer", protocols=[]), 5),
    ]


def test_fuzzed_frames_before_sasl_authentication(tmp_path):
    n = int(os.environ.get("KGROUP_FUZZ_FRAMES", "2000"))
    with KafkaBroker(tmp_path / "d", process=True, security=True, users={"alice": "alice-secret"},
                     overrides={"connections.max.idle.ms": "5000",
                                "connection.failed.authentication.delay.ms": "0"}) as b:
        b.create_topic("t")
        b.produce("t", [b"a1"])
        frames = seeds()
        rng = random.Random(24)
        # each connection: 0-2 intact seeds then one mutated one, never authenticated
        mixed = frames + [mutate(f, rng) for f in frames for _ in range(3)]
        before = rss(b.proc.pid)
        t0 = time.monotonic()
        fuzz(b.port_of("SASL_PLAINTEXT"), mixed, n, rng)
        elapsed = time.monotonic() - t0
        assert b.proc.poll() is None, "the broker died"
        grown = rss(b.proc.pid) - before
        assert grown < 100 * 2**20, f"RSS grew by {grown} bytes over {n} frames"
        # nothing but ApiVersions / SaslHandshake / SaslAuthenticate was handled
        from kgroup.client.sync import KafkaAdmin
        with KafkaAdmin({"bootstrap.servers": b.bootstrap()}) as admin:
            topics = set(admin.list_topics())
            assert "fuzz-new" not in topics and "auto-x" not in topics, topics
            assert [g.group_id for g in admin.list_groups()] == []
        assert [r.value for r in b.consume("t", 1)] == [b"a1"] and len(b.consume("t", 1)) == 1
        from kgroup.client.assignors import TopicPartition
        from kgroup.client.sync import KafkaConsumer
        with KafkaConsumer(config={"bootstrap.servers": b.bootstrap()}) as c:
            assert c.end_offsets([TopicPartition("t", 0)])[TopicPartition("t", 0)] == 1
        # an authenticated client is served
        cfg = b.security_config("SASL_PLAINTEXT", "alice", "SCRAM-SHA-512")
        assert len(b.produce("t", [b"after"], **cfg)) == 1
        log = b.log_text()
        assert "Traceback" not in log, log[log.index("Traceback") - 500:][:4000]
        print(f"{n} fuzzed frames before authentication in {elapsed:.1f}s, RSS +{grown / 2**20:.1f} MiB")
