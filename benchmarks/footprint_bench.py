"""Connection and membership footprint of a kgroup broker process, next to the goals:

- RSS per idle connection, holding N connections (default 10,000; goal <= 4 KB each);
- the time to load R records of ``__consumer_offsets`` at start-up (default 1M commits of 1,000
  groups x 10 partitions, written straight into the log; goal <= 3 s);
- RSS per idle Stable member, holding M members (default 5,000, one group each with its own
  member owning partition 0 of topic ``t``, all Stable; goal <= 2 KB each), for classic groups
  (JoinGroup + SyncGroup) and for consumer groups (KIP-848: ConsumerGroupHeartbeat); again
  after one heartbeat each, and the heartbeat round-trip p50/p99 while the broker holds them
  (sequential on one connection);
- the event-loop stall of one CreateTopics of P partitions (default 9,999, the controller's cap
  of 10,000 records): the longest and p99 heartbeat round trip of a Stable member on another
  connection while it runs, how long it takes, and the broker's open descriptors after it.

    python benchmarks/footprint_bench.py            # 10,000 connections, 5,000 members
    python benchmarks/footprint_bench.py --short    # 1,000 connections, 500 members
    python benchmarks/footprint_bench.py --only connections,classic,consumer
    python benchmarks/footprint_bench.py --only-create [--create-partitions P]

RSS is the broker's VmRSS from /proc, before and after, divided by the count. Every figure is
taken on a broker process of its own, started for it: memory a process freed is kept by its
allocator and reused, so a figure measured after another workload would count only what that
workload did not leave behind. Each member kind's broker first makes one member of a warm-up
group, so ``__consumer_offsets`` exists and its shards are loaded before the figure's "before".
The soft descriptor limit of this process is raised to the hard limit (the broker raises its own).
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
from kgroup.protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription  # noqa: E402
from kgroup.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest  # noqa: E402
from kgroup.protocol.messages.create_topics import CreateTopicsRequest  # noqa: E402
from kgroup.protocol.messages.metadata import MetadataRequest  # noqa: E402
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


# A consumer-protocol member's session is the broker's: long enough that none expires while
# thousands are made one after the other.
BROKER_OVERRIDES = ("group.initial.rebalance.delay.ms=0", "group.consumer.session.timeout.ms=1800000",
                    "group.consumer.max.session.timeout.ms=1800000")


def start_broker(data_dir: str) -> tuple[subprocess.Popen, int, str]:
    log_path = data_dir + ".log"
    log = open(log_path, "wb")
    overrides = [a for o in BROKER_OVERRIDES for a in ("--override", o)]
    proc = subprocess.Popen([sys.executable, "-m", "kgroup", "serve",
                             "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                             "--override", f"log.dirs={data_dir}", *overrides],
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


TOPIC = "t"


def create_topic(c: Client) -> bytes:
    """Create topic ``t`` (one partition); its topic id."""
    CT = CreateTopicsRequest.CreatableTopic
    r = c.request(CreateTopicsRequest(topics=[CT(name=TOPIC, num_partitions=1, replication_factor=1)],
                                      timeout_ms=30_000, validate_only=False), 7)
    assert r.topics[0].error_code == 0, r
    m = c.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                  allow_auto_topic_creation=False), 12)
    return m.topics[0].topic_id


def join_classic(c: Client, g: str) -> tuple[str, int]:
    """One Stable member of classic group ``g`` owning t-0, as a consumer leaves it: its member
    id and generation."""
    meta = ConsumerProtocolSubscription(topics=[TOPIC]).to_bytes(0)
    req = JoinGroupRequest(group_id=g, session_timeout_ms=1_800_000, rebalance_timeout_ms=60_000, member_id="",
                           protocol_type="consumer",
                           protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=meta)])
    r = c.request(req, 9)
    assert r.error_code == MEMBER_ID_REQUIRED, r
    req.member_id = r.member_id
    r = c.request(req, 9)
    assert r.error_code == 0, r
    TP = ConsumerProtocolAssignment.TopicPartition
    assignment = ConsumerProtocolAssignment(assigned_partitions=[TP(topic=TOPIC, partitions=[0])]).to_bytes(0)
    A = SyncGroupRequest.SyncGroupRequestAssignment
    s = c.request(SyncGroupRequest(group_id=g, generation_id=r.generation_id, member_id=r.member_id,
                                   protocol_type="consumer", protocol_name="range",
                                   assignments=[A(member_id=r.member_id, assignment=assignment)]), 5)
    assert s.error_code == 0, s
    return r.member_id, r.generation_id


def heartbeat_classic(c: Client, g: str, member: tuple[str, int]) -> None:
    h = c.request(HeartbeatRequest(group_id=g, generation_id=member[1], member_id=member[0]), 4)
    assert h.error_code == 0, h


def join_consumer(c: Client, g: str, topic_id: bytes) -> tuple[str, int]:
    """One Stable member of consumer group ``g`` (KIP-848) owning t-0: it joins, gets t-0 and
    reports owning it, as a consumer does. Its member id and epoch."""
    member_id = f"member-{g}"
    r = c.request(ConsumerGroupHeartbeatRequest(group_id=g, member_id=member_id, member_epoch=0,
                                                rebalance_timeout_ms=60_000, subscribed_topic_names=[TOPIC],
                                                topic_partitions=[]), 1)
    assert r.error_code == 0 and r.assignment is not None, r
    owned = [ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=tp.topic_id, partitions=list(tp.partitions))
             for tp in r.assignment.topic_partitions]
    assert [(tp.topic_id, tp.partitions) for tp in owned] == [(topic_id, [0])], r
    r = c.request(ConsumerGroupHeartbeatRequest(group_id=g, member_id=member_id, member_epoch=r.member_epoch,
                                                topic_partitions=owned), 1)
    assert r.error_code == 0, r
    return member_id, r.member_epoch


def heartbeat_consumer(c: Client, g: str, member: tuple[str, int]) -> None:
    h = c.request(ConsumerGroupHeartbeatRequest(group_id=g, member_id=member[0], member_epoch=member[1]), 1)
    assert h.error_code == 0 and h.member_epoch == member[1], h


def stable_members(port: int, pid: int, m: int, kind: str) -> tuple[float, float, float, float]:
    """(RSS per member once all are Stable, RSS per member after one heartbeat each, heartbeat
    p50 ms, p99 ms) of ``m`` one-member groups of ``kind`` (classic or consumer)."""
    c = Client(port)
    topic_id = create_topic(c)
    if kind == "classic":
        join, heartbeat = join_classic, heartbeat_classic
    else:
        join, heartbeat = (lambda c, g: join_consumer(c, g, topic_id)), heartbeat_consumer
    heartbeat(c, "warm-up", join(c, "warm-up"))       # __consumer_offsets created, its shards loaded
    time.sleep(0.3)
    before = rss(pid)
    members = []
    for i in range(m):
        g = f"group-{i:06d}"
        members.append((g, join(c, g)))
    time.sleep(0.5)
    per = (rss(pid) - before) / m
    lat = []
    for g, member in members:
        t0 = time.perf_counter()
        heartbeat(c, g, member)
        lat.append(time.perf_counter() - t0)
    time.sleep(0.5)
    per_after = (rss(pid) - before) / m
    lat.sort()
    return per, per_after, lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3


def creation_stall(port: int, pid: int, partitions: int) -> tuple:
    """(CreateTopics seconds, its error code, heartbeat p99 ms, max ms, heartbeats, descriptors):
    a Stable member heartbeats every 2 ms on its own connection while another creates a topic
    of ``partitions`` partitions."""
    import threading
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


KINDS = ("connections", "classic", "consumer", "load", "create")


def on_fresh_broker(tmp: str, name: str, measure):
    """``measure(port, pid)`` on a broker process started for it alone."""
    proc, port, _ = start_broker(os.path.join(tmp, name))
    try:
        return measure(port, proc.pid)
    finally:
        proc.terminate()
        proc.wait(60)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--connections", type=int, default=10_000)
    ap.add_argument("--members", type=int, default=5_000)
    ap.add_argument("--load-records", type=int, default=1_000_000)
    ap.add_argument("--create-partitions", type=int, default=9_999)
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--only", default=",".join(KINDS), help="comma-separated: " + ", ".join(KINDS))
    ap.add_argument("--only-create", action="store_true", help="only the CreateTopics stall")
    a = ap.parse_args()
    if a.short:
        a.connections, a.members, a.load_records = 1_000, 500, 100_000
    kinds = ["create"] if a.only_create else a.only.split(",")
    unknown = set(kinds) - set(KINDS)
    if unknown:
        ap.error(f"unknown --only {sorted(unknown)}")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(f"{'measure (each on a fresh broker process)':<58} {'kgroup':>14} {'goal':>10}")
    with tempfile.TemporaryDirectory(prefix="kgroup-footprint-") as tmp:
        if "connections" in kinds:
            per_conn = on_fresh_broker(tmp, "connections", lambda port, pid: idle_connections(port, pid, a.connections))
            print(f"{f'RSS per idle connection ({a.connections:,})':<58} {per_conn / 1024:>11.2f} KB {'<= 4 KB':>10}",
                  flush=True)
        for kind in ("classic", "consumer"):
            if kind not in kinds:
                continue
            per, per_after, p50, p99 = on_fresh_broker(
                tmp, kind, lambda port, pid, kind=kind: stable_members(port, pid, a.members, kind))
            label = "classic" if kind == "classic" else "consumer (KIP-848)"
            print(f"{f'RSS per idle Stable {label} member ({a.members:,} groups)':<58} {per / 1024:>11.2f} KB "
                  f"{'<= 2 KB':>10}")
            print(f"{'  the same after one heartbeat each':<58} {per_after / 1024:>11.2f} KB {'<= 2 KB':>10}")
            print(f"{'  heartbeat round trip p50 / p99 (ms)':<58} {p50:>7.2f}/{p99:<6.2f}", flush=True)
        if "load" in kinds:
            load_s = load_time(tmp, a.load_records)
            print(f"{f'__consumer_offsets load ({a.load_records:,} records)':<58} {load_s:>12.2f} s {'<= 3 s':>10}",
                  flush=True)
        if "create" in kinds:
            print_create(a, on_fresh_broker(tmp, "create",
                                            lambda port, pid: creation_stall(port, pid, a.create_partitions)))


def print_create(a, create):
    elapsed, code, p99, worst, n, fds = create
    print(f"{f'CreateTopics of {a.create_partitions:,} partitions':<58} {elapsed:>12.2f} s  (error code {code})")
    print(f"{'  heartbeat p99 / max while it runs (ms)':<58} {p99:>8.1f}/{worst:<7.1f} ({n} heartbeats)")
    print(f"{'  broker descriptors after it':<58} {fds:>14,}")


if __name__ == "__main__":
    main()
