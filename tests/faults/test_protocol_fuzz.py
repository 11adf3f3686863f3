"""A protocol fuzzer seeded with frames recorded from real clients (kafka-python and
confluent-kafka, through a small recording proxy), mutating sizes, counts, strings, versions and
correlation ids. Afterwards the broker still serves a normal client, its memory stayed bounded,
and a restart shows the topics and offsets written before intact. A few thousand frames here;
1M in the long run (``--long``)."""
import os
import random
import socket
import struct
import threading
import time

import pytest

from kgroup.protocol.messages.metadata import MetadataRequest
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from tests.faults.test_disk_faults import commit, produce, values_in
from tests.harness import BrokerProcess, RawClient

FT = OffsetFetchRequest.OffsetFetchRequestTopic


class RecordingProxy:
    """Forwards 127.0.0.1:port to the broker and records every client-to-broker frame."""

    def __init__(self):
        self.upstream = None    # the broker's port, set once it has started
        self.frames: list[bytes] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            up = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._pump, args=(client, up, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(up, client, False), daemon=True).start()

    def _pump(self, src, dst, record):
        buf = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                if record:
                    buf += data
                    while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                        n = 4 + struct.unpack_from(">i", buf)[0]
                        self.frames.append(buf[:n])
                        buf = buf[n:]
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.server.close()


def record_real_clients(proxy):
    """kafka-python and confluent-kafka produce, consume in a group and commit via the proxy
    (the broker advertises the proxy, so every connection goes through it)."""
    from confluent_kafka import Consumer, Producer
    from kafka import KafkaConsumer, KafkaProducer
    bootstrap = f"127.0.0.1:{proxy.port}"
    try:
        p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
        for i in range(5):
            p.send("fz", key=b"k%d" % i, value=b"v%d" % i)
        p.flush()
        p.close()
        c = KafkaConsumer("fz", bootstrap_servers=bootstrap, group_id="fzg", auto_offset_reset="earliest",
                          enable_auto_commit=False, consumer_timeout_ms=8000)
        got = 0
        for _ in c:
            got += 1
            if got == 5:
                break
        c.commit()
        c.close()
        cp = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
        for i in range(5):
            cp.produce("fz", key=b"c%d" % i, value=b"w%d" % i)
        cp.flush(10)
        cc = Consumer({"bootstrap.servers": bootstrap, "group.id": "fzg2", "auto.offset.reset": "earliest",
                       "enable.auto.commit": False})
        cc.subscribe(["fz"])
        deadline, seen = time.monotonic() + 15, 0
        while seen < 10 and time.monotonic() < deadline:
            m = cc.poll(0.5)
            if m is not None and not m.error():
                seen += 1
        cc.commit(asynchronous=False)
        cc.close()
    finally:
        proxy.close()
    return proxy.frames


_EXTREMES32 = (-1, 0, 1, 0x7FFFFFFF, -0x80000000, 0x10000, 67_108_867, 104_857_599)
_EXTREMES16 = (-1, 0, 0x7FFF, -0x8000, 1000)


def mutate(frame: bytes, rng: random.Random) -> bytes:
    body = bytearray(frame[4:])
    kind = rng.randrange(7)
    if kind == 0 and len(body) >= 4:            # the API version
        struct.pack_into(">h", body, 2, rng.choice((-1, 0, 1, 3, 9, 12, 17, 99, 0x7FFF)))
    elif kind == 1 and len(body) >= 8:          # the correlation id
        struct.pack_into(">i", body, 4, rng.choice(_EXTREMES32))
    elif kind == 2 and len(body) >= 12:         # a count or length (int32) anywhere
        struct.pack_into(">i", body, rng.randrange(len(body) - 3), rng.choice(_EXTREMES32))
    elif kind == 3 and len(body) >= 10:         # a string length (int16) anywhere
        struct.pack_into(">h", body, rng.randrange(len(body) - 1), rng.choice(_EXTREMES16))
    elif kind == 4 and body:                    # random bytes
        for _ in range(rng.randint(1, 8)):
            body[rng.randrange(len(body))] = rng.randrange(256)
    elif kind == 5:                             # truncated or extended body, size kept honest
        body = body[:rng.randrange(len(body) + 1)] if rng.random() < 0.5 else body + rng.randbytes(rng.randint(1, 64))
    else:                                       # a lying size prefix
        size = rng.choice((len(body) + rng.randint(1, 4096), max(len(body) - rng.randint(1, 16), 0), -7,
                           104_857_599, 0x7FFFFFFF))
        return struct.pack(">i", size) + bytes(body)
    return struct.pack(">i", len(body)) + bytes(body)


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def fuzz(port, seeds, n, rng):
    """``n`` mutated frames, each on a connection of its own after 0-2 intact recorded frames
    (a bad frame closes its connection, so each is read in some realistic state); waits briefly
    for the answer or the close before resetting the connection."""
    for _ in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            time.sleep(0.05)
            continue
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))   # RST on close
        frames = [rng.choice(seeds) for _ in range(rng.randrange(3))] + [mutate(rng.choice(seeds), rng)]
        try:
            s.sendall(b"".join(frames))
            s.settimeout(0.005)
            while s.recv(65536):
                pass
        except OSError:
            pass
        s.close()


@pytest.fixture
def frames_to_send(request):
    """2,500; 1M with --long; KGROUP_FUZZ_FRAMES=N sends N (a proportionally shorter long run)."""
    if os.environ.get("KGROUP_FUZZ_FRAMES"):
        return int(os.environ["KGROUP_FUZZ_FRAMES"])
    return 1_000_000 if request.config.getoption("--long") else 2_500


def test_fuzzed_frames_from_real_clients(tmp_path, frames_to_send):
    data = tmp_path / "d"
    proxy = RecordingProxy()
    b = BrokerProcess(data, ["group.initial.rebalance.delay.ms=0", "connections.max.idle.ms=5000",
                             f"advertised.listeners=PLAINTEXT://127.0.0.1:{proxy.port}"]).start()
    proxy.upstream = b.port
    try:
        c = RawClient(b.port)
        from tests.faults.test_disk_faults import set_up
        set_up(b)       # topic "t" with a1, a2; group "g" committed 5
        seeds = record_real_clients(proxy)
        apis = {struct.unpack_from(">h", f, 4)[0] for f in seeds}
        assert len(seeds) >= 30 and {0, 1, 3, 8, 9, 10, 11, 12, 14, 18} <= apis, sorted(apis)
        before = rss(b.proc.pid)
        rng = random.Random(17)
        t0 = time.monotonic()
        fuzz(b.port, seeds, frames_to_send, rng)
        elapsed = time.monotonic() - t0
        assert b.proc.poll() is None, "the broker died"
        grown = rss(b.proc.pid) - before
        assert grown < 200 * 2**20, f"RSS grew by {grown} bytes over {frames_to_send} fuzzed frames"
        c = RawClient(b.port)           # a normal client is served
        assert c.request(MetadataRequest(topics=None), 12).brokers
        assert values_in(c, "t")[:2] == [b"a1", b"a2"]
        assert produce(c, "t", [b"after"]).error_code == 0
        log = b.log_text()
        assert "Traceback" not in log, log[log.index("Traceback") - 500:][:4000]
        print(f"{frames_to_send} fuzzed frames in {elapsed:.1f}s, RSS +{grown / 2**20:.1f} MiB")
    finally:
        b.stop()
    b = BrokerProcess(data).start()
    try:
        c = RawClient(b.port)
        values = values_in(c, "t")
        assert values[:2] == [b"a1", b"a2"] and b"after" in values
        r = c.request(OffsetFetchRequest(group_id="g", topics=[FT(name="t", partition_indexes=[0])]), 7)
        assert r.topics[0].partitions[0].committed_offset == 5
        assert commit(c, "g", "t", 6) == 0
    finally:
        b.stop()
