"""What a hostile or idle peer may cost the broker. A request's memory
grows with the bytes that arrive (never its announced size), queued.max.request.bytes bounds
requests being read, an idle connection costs little, connections.max.idle.ms closes idle
connections, max.connections / max.connections.per.ip close new connections at once, and the
broker keeps descriptors for its own files."""
import resource
import socket
import struct
import time

import pytest

from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.metadata import MetadataRequest
from kgroup.protocol.messages.produce import ProduceRequest
from kgroup.protocol.api import encode_request, parse_response
from kgroup.protocol.records import Record, build_batch
from tests.harness import BrokerProcess, RawClient

CT = CreateTopicsRequest.CreatableTopic
TPD = ProduceRequest.TopicProduceData
PPD = TPD.PartitionProduceData


def rss(pid) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def settle_rss(pid, seconds=0.5) -> int:
    time.sleep(seconds)
    return rss(pid)


def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def closed_by_peer(sock, timeout=5.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def create_topic(c, name, partitions=1):
    r = c.request(CreateTopicsRequest(topics=[CT(name=name, num_partitions=partitions, replication_factor=1)]), 7)
    assert r.topics[0].error_code == 0, r.topics[0]


def big_produce_frame(topic, value_bytes, correlation_id=1) -> bytes:
    records = build_batch([Record(key=b"k", value=b"x" * value_bytes, timestamp=int(time.time() * 1000))])
    req = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000,
                         topic_data=[TPD(name=topic, partition_data=[PPD(index=0, records=records)])])
    return b"".join(encode_request(req, 9, correlation_id, "big"))


def read_produce_response(sock):
    sock.settimeout(20)
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
        chunk = sock.recv(65536)
        assert chunk, "connection closed by the broker"
        buf += chunk
    _, resp = parse_response(0, 9, buf[4:])
    return resp.responses[0].partition_responses[0]


@pytest.fixture
def server(tmp_path):
    b = BrokerProcess(tmp_path / "d").start()
    yield b
    b.stop()


def test_announced_size_without_bytes_pins_no_memory(server):
    """A size prefix just under socket.request.max.bytes and a 14-byte header, then silence,
    must not allocate the whole 100 MiB frame."""
    before = settle_rss(server.proc.pid, 0.2)
    socks = []
    for i in range(8):
        s = connect(server.port)
        s.sendall(struct.pack(">i", 104857600 - 1) + struct.pack(">hhih", 0, 9, i, 2) + b"ab" + b"\0" * 4)
        socks.append(s)
    grown = settle_rss(server.proc.pid) - before
    assert grown < 16 * 2**20, f"8 announced 100 MiB frames cost {grown} bytes"
    assert RawClient(server.port).request(MetadataRequest(topics=[]), 1).brokers
    for s in socks:
        s.close()


def test_large_frame_arriving_slowly_in_pieces_is_served(server):
    """The large-frame path still works when its buffer grows piece by piece."""
    create_topic(RawClient(server.port), "big")
    frame = big_produce_frame("big", 900_000)
    s = connect(server.port)
    for i in range(0, len(frame), 50_000):
        s.sendall(frame[i:i + 50_000])
        time.sleep(0.005)
    assert read_produce_response(s).error_code == 0
    # and two pipelined: a small frame's tail and a large frame's head in one read
    small = b"".join(encode_request(MetadataRequest(topics=[]), 1, 5, "x"))
    s.sendall(small + big_produce_frame("big", 300_000, 6)[:1000])
    s.settimeout(10)
    size, = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))
    cid, = struct.unpack(">i", s.recv(size, socket.MSG_WAITALL)[:4])
    assert cid == 5
    s.sendall(big_produce_frame("big", 300_000, 6)[1000:])
    assert read_produce_response(s).base_offset == 1


def test_queued_max_request_bytes_bounds_requests_being_read(tmp_path):
    """With a 2 MiB pool, stalled large requests hold at most about the pool, and another large
    request waits (muted, as Kafka). A muted connection is not read, so it cannot see its client
    leave: idle expiry reclaims the stalled ones and their memory, after which large requests
    are read again."""
    b = BrokerProcess(tmp_path / "d", ["queued.max.request.bytes=2097152", "connections.max.idle.ms=1500"]).start()
    try:
        create_topic(RawClient(b.port), "t")
        before = settle_rss(b.proc.pid, 0.2)
        hogs = []
        for _i in range(6):      # each announces 90 MB and sends 3 MB of it
            s = connect(b.port)
            s.sendall(struct.pack(">i", 90_000_000) + b"\0" * 3_000_000)
            hogs.append(s)
        time.sleep(0.5)
        grown = rss(b.proc.pid) - before
        assert grown < 12 * 2**20, f"stalled requests hold {grown} bytes despite a 2 MiB pool"
        waiter = connect(b.port)
        waiter.sendall(big_produce_frame("t", 400_000))
        waiter.settimeout(0.5)
        with pytest.raises(socket.timeout):       # muted: its request cannot be read yet
            waiter.recv(1)
        for s in hogs + [waiter]:
            s.close()
        time.sleep(5)       # every muted connection expired, its memory back in the pool
        late = connect(b.port)
        late.sendall(big_produce_frame("t", 400_000))
        assert read_produce_response(late).error_code == 0
    finally:
        b.stop()


def test_an_idle_connection_costs_under_20_kb(server):
    """An idle connection holds no receive buffer of its own."""
    n = 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * n)), hard))
    c = RawClient(server.port)
    assert c.request(MetadataRequest(topics=[]), 1).brokers
    before = settle_rss(server.proc.pid, 0.2)
    socks = [connect(server.port) for _ in range(n)]
    for s in socks:         # every connection has read something (the shared buffer is used)
        s.sendall(struct.pack(">i", 10))
    time.sleep(0.5)
    assert c.request(MetadataRequest(topics=[]), 1).brokers   # all accepted by now
    per_conn = (settle_rss(server.proc.pid) - before) / n
    for s in socks:
        s.close()
    assert per_conn < 20_000, f"{per_conn:.0f} bytes per idle connection"


def test_idle_connections_are_closed_after_connections_max_idle_ms(tmp_path):
    b = BrokerProcess(tmp_path / "d", ["connections.max.idle.ms=600"]).start()
    try:
        silent = connect(b.port)
        stalled = connect(b.port)
        stalled.sendall(struct.pack(">i", 100) + b"abc")     # a request that never finishes
        busy = RawClient(b.port)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:       # active: one request every 150 ms
            assert busy.request(MetadataRequest(topics=[]), 1).brokers
            time.sleep(0.15)
        assert closed_by_peer(silent, 0.1) and closed_by_peer(stalled, 0.1)
        assert busy.request(MetadataRequest(topics=[]), 1).brokers
    finally:
        b.stop()


def test_connections_max_idle_ms_is_a_known_key_with_kafkas_default():
    from kgroup.broker.config import BrokerConfig
    c = BrokerConfig({})
    assert c["connections.max.idle.ms"] == 600000
    assert c["max.connections"] == c["max.connections.per.ip"] == 2**31 - 1
    assert c["queued.max.request.bytes"] == -1


def test_max_connections_per_ip_and_max_connections_close_new_connections_at_once(tmp_path):
    b = BrokerProcess(tmp_path / "d", ["max.connections.per.ip=3"]).start()
    try:
        kept = [RawClient(b.port) for _ in range(3)]
        for c in kept:
            assert c.request(MetadataRequest(topics=[]), 1).brokers
        t0 = time.monotonic()
        refused = [connect(b.port) for _ in range(30)]
        assert all(closed_by_peer(s, 2.0) for s in refused)
        assert time.monotonic() - t0 < 5
        kept[0].close()
        time.sleep(0.2)
        assert RawClient(b.port).request(MetadataRequest(topics=[]), 1).brokers   # room again
        log = b.log_text()
        warnings = [line for line in log.splitlines() if "refusing connection" in line]
        assert 1 <= len(warnings) <= 2 and "WARNING" in warnings[0], warnings
        assert "max.connections.per.ip=3" in warnings[0]
        assert "Traceback" not in log
    finally:
        b.stop()
    b2 = BrokerProcess(tmp_path / "d2", ["max.connections=2"]).start()
    try:
        kept = [RawClient(b2.port) for _ in range(2)]
        assert kept[1].request(MetadataRequest(topics=[]), 1).brokers
        assert closed_by_peer(connect(b2.port), 2.0)
        assert "max.connections=2 reached" in b2.log_text()
    finally:
        b2.stop()


def _low_nofile(n):
    def lower():
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return lower


def test_descriptors_are_kept_for_the_brokers_own_files(tmp_path):
    """With the descriptor limit reached by connections, connections stop short of the limit
    (no accept() traceback, no 'Too many open files' in log housekeeping), and the broker still
    creates topics."""
    b = BrokerProcess(tmp_path / "d", ["log.retention.check.interval.ms=200"],
                      preexec_fn=_low_nofile(600)).start()
    try:
        socks = [connect(b.port) for _ in range(700)]
        time.sleep(0.5)
        open_ = [s for s in socks if not closed_by_peer(s, 0.01)]
        assert 100 < len(open_) < 600, len(open_)
        for s in socks:
            if s not in open_:
                s.close()
        # the broker can still open files: a topic with 40 partitions (120+ descriptors)
        open_.pop().close()
        time.sleep(0.2)
        c = RawClient(b.port)
        create_topic(c, "many", 40)
        time.sleep(1.5)       # a housekeeping round (flush, checkpoint) with every connection open
        log = b.log_text()
        assert "Traceback" not in log and "Too many open files" not in log, log[-3000:]
        assert "refusing connection" in log
        for s in open_:
            s.close()
    finally:
        b.stop()


def test_soft_descriptor_limit_is_raised_to_the_hard_limit(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(hard, 4096)

    def lower_soft():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, target))
    b = BrokerProcess(tmp_path / "d", preexec_fn=lower_soft).start()
    try:
        with open(f"/proc/{b.proc.pid}/limits") as f:
            line = next(ln for ln in f if ln.startswith("Max open files"))
        assert line.split()[3:5] == [str(target), str(target)], line
    finally:
        b.stop()
