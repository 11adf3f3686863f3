"""Connection and membership footprint of a kgroup broker process, next to the goals:

- RSS per idle connection, holding N connections (default 10,000; goal <= 20 KB each);
- the time to load R records of ``__consumer_offsets`` at start-up (default 1M commits of 1,000
  groups x 10 partitions, written straight into the log; goal <= 3 s);
- RSS per idle Stable classic member, holding M members (default 5,000, one group each with
  its own member, all Stable; goal <= 2 KB each), and the heartbeat round-trip p50/p99 while
  the broker holds them (one heartbeat per member, sequential on one connection);
- the event-loop stall of one CreateTopics of P partitions (default 9,999, the controller's cap
  of 10,000 records): the longest and p99 heartbeat round trip of a Stable member on another
  connection while it runs, how long it takes, and the broker's open descriptors after it.

    python benchmarks/footprint_bench.py            # 10,000 connections, 5,000 members
    python benchmarks/footprint_bench.py --short    # 1,000 connections, 500 members
    python benchmarks/footprint_bench.py --only-create [--create-partitions P]

RSS is the broker's VmRSS from /proc, before and after, divided by the count. The soft
descriptor limit of this process is raised to the hard limit (the broker raises its own).
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kgroup.protocol.api import encode_request, parse_response  # noqa: E402
from kgroup.protocol.consumer_protocol import ConsumerProtocolSubscription  # noqa: E402
from kgroup.protocol.messages.heartbeat import HeartbeatRequest  # noqa: E402
from kgroup.protocol.messages.join_group import JoinGroupRequest  # noqa: E402
from kgroup.protocol.messages.sync_group import SyncGroupRequest  # noqa: E402

MEMBER_ID_REQUIRED = 79


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def start_broker(data_dir: str) -> tuple[subprocess.Popen, int, str]:
    log_path = data_dir + ".log"
    log = open(log_path, "wb")
    proc = subprocess.Popen([sys.executable, "-m", "kgroup", "serve",
                             "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                             "--override", f"log.dirs={data_dir}",
                             "--override", "group.initial.rebalance.delay.ms=0"],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = re.search(r"serving on 127\.0\.0\.1:(\d+)", open(log_path, errors="replace").read())
        if m:
            return proc, int(m.group(1)), log_path
        time.sleep(0.05)
    raise RuntimeError("broker did not start")


class Client:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0

    def request(self, body, version):
        self.cid += 1
        self.sock.sendall(b"".join(encode_request(body, version, self.cid, "footprint")))
        size, = struct.unpack(">i", self._exact(4))
        cid, resp = parse_response(type(body).API_KEY, version, self._exact(size))
        assert cid == self.cid
        return resp

    def _exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf


def idle_connections(port: int, pid: int, n: int) -> float:
    Client(port)        # warm up
    time.sleep(0.3)
    before = rss(pid)
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(struct.pack(">i", 10))        # a read happened: the shared buffer is in use
        socks.append(s)
    time.sleep(1.0)
    Client(port).request(HeartbeatRequest(group_id="x", generation_id=-1, member_id="m"), 4)   # all accepted
    per = (rss(pid) - before) / n
    for s in socks:
        s.close()
    return per


def stable_members(port: int, pid: int, m: int) -> tuple[float, float, float]:
    c = Client(port)
    meta = ConsumerProtocolSubscription(topics=["t"]).to_bytes(0)
    protos = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=meta)]
    time.sleep(0.3)
    before = rss(pid)
    members = []
    for i in range(m):
        g = f"group-{i:06d}"
        req = JoinGroupRequest(group_id=g, session_timeout_ms=1_800_000, rebalance_timeout_ms=60_000, member_id="",
                               protocol_type="consumer", protocols=protos)
        r = c.request(req, 9)
        assert r.error_code == MEMBER_ID_REQUIRED, r
        req.member_id = r.member_id
        r = c.request(req, 9)
        assert r.error_code == 0, r
        A = SyncGroupRequest.SyncGroupRequestAssignment
        s = c.request(SyncGroupRequest(group_id=g, generation_id=r.generation_id, member_id=r.member_id,
                                       protocol_type="consumer", protocol_name="range",
                                       assignments=[A(member_id=r.member_id, assignment=b"")]), 5)
        assert s.error_code == 0, s
        members.append((g, r.member_id, r.generation_id))
    time.sleep(0.5)
    per = (rss(pid) - before) / m
    lat = []
    for g, member, gen in members:
        t0 = time.perf_counter()
        h = c.request(HeartbeatRequest(group_id=g, generation_id=gen, member_id=member), 4)
        lat.append(time.perf_counter() - t0)
        assert h.error_code == 0, h
    lat.sort()
    return per, lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3


def creation_stall(port: int, pid: int, partitions: int) -> tuple:
    """(CreateTopics seconds, its error code, heartbeat p99 ms, max ms, heartbeats, descriptors):
    a Stable member heartbeats every 2 ms on its own connection while another creates a topic
    of ``partitions`` partitions."""
    import threading
    from kgroup.protocol.messages.create_topics import CreateTopicsRequest
    c = Client(port)
    meta = ConsumerProtocolSubscription(topics=["t"]).to_bytes(0)
    req = JoinGroupRequest(group_id="stall", session_timeout_ms=60_000, rebalance_timeout_ms=60_000, member_id="",
                           protocol_type="consumer",
                           protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=meta)])
    req.member_id = c.request(req, 9).member_id
    r = c.request(req, 9)
    A = SyncGroupRequest.SyncGroupRequestAssignment
    c.request(SyncGroupRequest(group_id="stall", generation_id=r.generation_id, member_id=r.member_id,
                               protocol_type="consumer", protocol_name="range",
                               assignments=[A(member_id=r.member_id, assignment=b"")]), 5)
    lat, stop = [], threading.Event()

    def heartbeats():
        while not stop.is_set():
            t0 = time.perf_counter()
            c.request(HeartbeatRequest(group_id="stall", generation_id=r.generation_id, member_id=r.member_id), 4)
            lat.append(time.perf_counter() - t0)
            time.sleep(0.002)
    t = threading.Thread(target=heartbeats)
    t.start()
    time.sleep(0.2)
    del lat[:]
    admin = Client(port)
    admin.sock.settimeout(600)
    CT = CreateTopicsRequest.CreatableTopic
    t0 = time.perf_counter()
    resp = admin.request(CreateTopicsRequest(topics=[CT(name="wide", num_partitions=partitions, replication_factor=1)],
                                             timeout_ms=600_000, validate_only=False), 7)
    elapsed = time.perf_counter() - t0
    stop.set()
    t.join()
    lat.sort()
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return (elapsed, resp.topics[0].error_code, lat[int(len(lat) * 0.99)] * 1e3, lat[-1] * 1e3, len(lat), fds)


def load_time(tmp: str, records: int) -> float:
    """Write ``records`` offset commits into a stopped broker's __consumer_offsets, restart it,
    and return the load time it logs."""
    from kgroup.coordinator import group_partition
    from kgroup.coordinator.coordinator_records import offset_commit_record
    from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
    from kgroup.protocol.records import Record, build_batch
    from kgroup.storage.manager import LogManager
    from kgroup.storage.producer_state import AppendOrigin
    data = os.path.join(tmp, "load")
    proc, port, _ = start_broker(data)
    try:      # any commit creates __consumer_offsets
        Client(port).request(OffsetCommitRequest(group_id="warm", generation_id_or_member_epoch=-1, member_id="",
                                                 retention_time_ms=-1, topics=[]), 8)
    finally:
        proc.terminate()
        proc.wait(30)
    logs = LogManager(data)
    groups = [f"group-{i}" for i in range(1000)]
    now = int(time.time() * 1000)
    for start in range(0, records, 1000):
        by_partition: dict = {}
        for i in range(start, min(start + 1000, records)):
            g = groups[i % len(groups)]
            r = offset_commit_record(g, "topic", i % 10, i, -1, "", now, None)
            by_partition.setdefault(group_partition(g, 50), []).append(Record(key=r.key, value=r.value, timestamp=now))
        for p, recs in by_partition.items():
            logs.get_or_create("__consumer_offsets", p).append(build_batch(recs), origin=AppendOrigin.COORDINATOR)
    logs.close_all(clean=True)
    proc, port, log_path = start_broker(data)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            m = re.search(r"loaded \d+ partition\(s\) of __consumer_offsets in ([\d.]+) s", open(log_path).read())
            if m:
                return float(m.group(1))
            time.sleep(0.05)
        raise RuntimeError("the load did not finish")
    finally:
        proc.terminate()
        proc.wait(30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=10_000)
    ap.add_argument("--members", type=int, default=5_000)
    ap.add_argument("--load-records", type=int, default=1_000_000)
    ap.add_argument("--create-partitions", type=int, default=9_999)
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--only-create", action="store_true", help="only the CreateTopics stall")
    a = ap.parse_args()
    if a.short:
        a.connections, a.members, a.load_records = 1_000, 500, 100_000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory(prefix="kgroup-footprint-") as tmp:
        proc, port, _ = start_broker(os.path.join(tmp, "create"))
        try:
            create = creation_stall(port, proc.pid, a.create_partitions)
        finally:
            proc.terminate()
            proc.wait(60)
        if a.only_create:
            print_create(a, create)
            return
        proc, port, _ = start_broker(os.path.join(tmp, "data"))
        try:
            per_conn = idle_connections(port, proc.pid, a.connections)
            per_member, p50, p99 = stable_members(port, proc.pid, a.members)
        finally:
            proc.terminate()
            proc.wait(30)
        load_s = load_time(tmp, a.load_records)
    print(f"{'measure':<44} {'kgroup':>12} {'goal':>10}")
    print(f"{f'RSS per idle connection ({a.connections:,})':<44} {per_conn / 1024:>9.1f} KB {'<= 20 KB':>10}")
    print(f"{f'RSS per idle Stable member ({a.members:,})':<44} {per_member / 1024:>9.2f} KB {'<= 2 KB':>10}")
    print(f"{'heartbeat round trip p50 / p99 (ms)':<44} {p50:>5.2f}/{p99:<6.2f}")
    print(f"{f'__consumer_offsets load ({a.load_records:,} records)':<44} {load_s:>10.2f} s {'<= 3 s':>10}")
    print_create(a, create)


def print_create(a, create):
    elapsed, code, p99, worst, n, fds = create
    print(f"{f'CreateTopics of {a.create_partitions:,} partitions':<44} {elapsed:>10.2f} s  (error code {code})")
    print(f"{'  heartbeat p99 / max while it runs (ms)':<44} {p99:>6.1f}/{worst:<7.1f} ({n} heartbeats)")
    print(f"{'  broker descriptors after it':<44} {fds:>12,}")


if __name__ == "__main__":
    main()
