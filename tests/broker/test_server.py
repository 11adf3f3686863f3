"""The asyncio shell against raw sockets: framing limits, bad input, ordering, ApiVersions
fallback, shutdown."""
import asyncio
import signal
import socket
import struct

import pytest

from kgroup.broker.broker import Broker
from kgroup.broker.config import BrokerConfig
from kgroup.protocol.api import API_BY_KEY, ApiKey
from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.api_versions import ApiVersionsRequest
from kgroup.protocol.messages.metadata import MetadataRequest
from kgroup.protocol.header_defs import RequestHeader
from kgroup.protocol.schema import parse_versions
from tests.harness import BrokerProcess, RawClient
from tests.kafka_spec import load_spec


def _api_versions_frame(version: int, correlation_id: int) -> bytes:
    header = RequestHeader(request_api_key=18, request_api_version=version, correlation_id=correlation_id,
                           client_id="fallback-test").to_bytes(2 if version >= 3 else 1)
    body = ApiVersionsRequest(client_software_name="raw", client_software_version="1").to_bytes(min(version, 4))
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


def test_api_versions_unknown_version_then_fallback(broker):
    """A client starting above our range gets error 35 in the v0 layout (header v0, int16 error,
    int32 count of entries, no throttle, no tags) listing ApiVersions, then retries lower."""
    c = RawClient(broker.port)
    c.sock.sendall(_api_versions_frame(5, 7))
    raw = c.recv_frame()
    corr, error, count = struct.unpack_from(">ihi", raw, 0)
    assert (corr, error) == (7, ErrorCode.UNSUPPORTED_VERSION)
    entries = [struct.unpack_from(">hhh", raw, 10 + 6 * i) for i in range(count)]
    assert (ApiKey.API_VERSIONS, 0, 4) in entries
    assert len(raw) == 10 + 6 * count  # exactly the v0 body, nothing after it
    retry = max(e[2] for e in entries if e[0] == ApiKey.API_VERSIONS)
    resp = c.request(ApiVersionsRequest(client_software_name="raw", client_software_version="1"), retry)
    assert resp.error_code == 0
    for v in (3, 2, 1, 0):  # every version we advertise answers
        r = c.request(ApiVersionsRequest(client_software_name="raw", client_software_version="1"), v)
        assert r.error_code == 0 and r.api_keys
    c.close()


def kafka_43_advertised(name: str) -> tuple[int, int]:
    """What a Kafka 4.3 broker advertises for an API: its valid versions, the last one left out
    while unstable (the facts table, tests/kafka_spec)."""
    spec = load_spec(name + "Request")
    lo, hi = parse_versions(spec["validVersions"])
    return lo, hi - 1 if spec.get("latestVersionUnstable") else hi


# APIs served below Kafka 4.3's range, and why
BELOW_KAFKA: dict[int, str] = {}


def test_advertised_versions_only_implemented(broker):
    c = RawClient(broker.port)
    resp = c.request(ApiVersionsRequest(client_software_name="raw", client_software_version="1"), 4)
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert got == {0: (3, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6),
                   11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 18: (0, 4),
                   19: (2, 7), 20: (1, 6), 21: (0, 2), 22: (0, 5), 32: (1, 4), 33: (0, 2), 37: (0, 3),
                   42: (0, 2), 44: (0, 1), 47: (0, 0), 57: (0, 2), 60: (0, 2), 68: (0, 1), 69: (0, 1),
                   24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 2), 28: (0, 5), 65: (0, 0), 66: (0, 2),
                   23: (2, 4), 61: (0, 0), 74: (0, 1), 75: (0, 0),  # 71/72 need metrics.listener
                   45: (0, 1), 46: (0, 0),      # partition reassignments (one node: nothing ever moves)
                   43: (0, 2),      # ElectLeaders (the cluster's controller; one node: ELECTION_NOT_NEEDED)
                   35: (1, 5),      # DescribeLogDirs
                   # security: SASL, ACLs (Kafka 4.x: v1-3), SCRAM credentials
                   17: (0, 1), 36: (0, 2), 29: (1, 3), 30: (1, 3), 31: (1, 3), 50: (0, 0), 51: (0, 0),
                   # share groups (KIP-932)
                   76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0),
                   87: (0, 1), 90: (0, 1), 91: (0, 0), 92: (0, 0)}
    # every range is Kafka 4.3's (KIP-896's removals included), but for the few listed
    for key, rng in got.items():
        kafka = kafka_43_advertised(API_BY_KEY[key].request.__name__[:-len("Request")])
        if key in BELOW_KAFKA:
            assert rng[0] == kafka[0] and rng[1] < kafka[1], BELOW_KAFKA[key]
        else:
            assert rng == kafka, key


def test_oversized_frame_closes_connection_before_reading_it(tmp_path):
    b = BrokerProcess(tmp_path / "d", ["socket.request.max.bytes=1000"]).start()
    try:
        c = RawClient(b.port)
        c.sock.sendall(struct.pack(">i", 200 * 1024 * 1024))  # announce 200 MiB, send none of it
        assert c.is_closed_by_peer()
        c2 = RawClient(b.port)
        c2.sock.sendall(struct.pack(">i", 1001) + b"\0" * 1001)
        assert c2.is_closed_by_peer()
        c3 = RawClient(b.port)  # the server lives on
        assert c3.request(MetadataRequest(topics=[]), 1).brokers
        assert "exceeds socket.request.max.bytes=1000" in b.log_text()
    finally:
        b.stop()


@pytest.mark.parametrize("payload,reason", [
    (struct.pack(">i", -5), "invalid frame size"),
    (struct.pack(">i", 3) + b"abc", "shorter than a request header"),
    (struct.pack(">i", 12) + struct.pack(">hhih", 3, 1, 1, -1) + b"\x00\x00", "cannot decode"),  # truncated body
    (struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, -1), "api key 999"),
    (struct.pack(">i", 10) + struct.pack(">hhih", 3, 99, 1, -1), "api key 3 (Metadata) version 99"),
])
def test_bad_input_closes_only_that_connection(broker, payload, reason):
    other = RawClient(broker.port)
    bad = RawClient(broker.port)
    bad.sock.sendall(payload)
    assert bad.is_closed_by_peer()
    assert other.request(MetadataRequest(topics=[]), 1).cluster_id is None  # v1 has no cluster id
    assert reason in broker.log_text()
    assert "WARNING" in broker.log_text()


def test_trailing_bytes_after_body_are_ignored_like_kafka(broker):
    """librdkafka 2.16 sends MetadataRequest v12 with 3 extra bytes after the body; Kafka's
    readers ignore what follows the message, so must we."""
    c = RawClient(broker.port)
    header = RequestHeader(request_api_key=3, request_api_version=12, correlation_id=1, client_id="x").to_bytes(2)
    frame = header + MetadataRequest(topics=None).to_bytes(12) + b"\x00\x00\x00"
    c.sock.sendall(struct.pack(">i", len(frame)) + frame)
    from kgroup.protocol.api import parse_response
    cid, resp = parse_response(3, 12, c.recv_frame())
    assert cid == 1 and resp.brokers[0].port == broker.port


def test_pipelined_requests_answered_in_order(broker):
    c = RawClient(broker.port)
    ids = [c.send(MetadataRequest(topics=None), 12) if i % 2 else
           c.send(ApiVersionsRequest(), 3) for i in range(50)]
    from kgroup.protocol.api import parse_response
    for i, cid in enumerate(ids):
        key = 3 if i % 2 else 18
        got, _ = parse_response(key, 12 if i % 2 else 3, c.recv_frame())
        assert got == cid


def test_sigterm_exits_zero(tmp_path):
    b = BrokerProcess(tmp_path / "d").start()
    c = RawClient(b.port)
    assert c.request(MetadataRequest(topics=[]), 1).brokers
    assert b.stop(signal.SIGTERM) == 0
    assert "shutting down" in b.log_text()


def test_unknown_config_key_is_an_error_naming_it(tmp_path):
    import subprocess
    import sys
    from tests.conftest import ROOT
    r = subprocess.run([sys.executable, "-m", "kgroup", "serve", "--override", "no.such.key=1",
                        "--override", f"log.dirs={tmp_path}"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "no.such.key" in r.stderr


def test_accepted_connections_disable_nagle(tmp_path):
    """Every accepted connection has TCP_NODELAY, as asyncio's own server sets it: with Nagle a
    small response written while the previous one is unacknowledged waits for the client's
    delayed ACK (~40 ms), which made pipelined transactional requests 40 ms each."""
    async def main():
        b = Broker(BrokerConfig.load(None, ["listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={tmp_path / 'd'}"]))
        await b.start()
        try:
            writers = [(await asyncio.open_connection("127.0.0.1", b.bound_port))[1] for _ in range(3)]
            for _ in range(100):
                if len(b.connections) == 3:
                    break
                await asyncio.sleep(0.01)
            socks = [c.transport.get_extra_info("socket") for c in b.connections]
            assert len(socks) == 3
            assert all(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in socks)
            for w in writers:
                w.close()
        finally:
            await b.stop()
    asyncio.run(asyncio.wait_for(main(), 30))
