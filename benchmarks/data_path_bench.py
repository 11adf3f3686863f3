"""Data-path throughput: produce, fetch and produce+fetch MB/s on one partition, kgroup against
librdkafka's mock cluster (the copy bundled with confluent-kafka), the same client workload on
both in the same run.

Workload: 1 MiB RecordBatches of 100-byte records (no key, no compression), built once with
kgroup.protocol.records.build_batch and sent as-is by a raw-socket client speaking our codec
(it works against both brokers, and a Python client can push prebuilt batches far faster than
either broker can take them):
- produce: one connection, acks=1 (and a kgroup row at acks=-1: fsync per group commit),
  WINDOW requests pipelined, one batch per request;
- fetch: one connection reading the partition from offset 0, max.partition.fetch.bytes = one
  batch (the Java consumer's 1 MiB default), WINDOW fetches pipelined while they are below the
  high watermark, one long poll (max_wait 500 ms) when caught up;
- produce+fetch: the two at once, in two client processes, on a fresh topic: the consumer tails
  the producer. MB/s there is the data carried end to end (each byte counted once, produced and
  fetched); the broker moves twice that through its sockets.

Each workload runs --repeat times (best counts: the 2-core machine is shared) on --mib MiB.
Usage: .venv/bin/python benchmarks/data_path_bench.py [--mib 128] [--repeat 3] [--window 8]
                                                      [--kgroup-src DIR  (a patched copy of the tree)]
                                                      [--crc crcmod  (the broker on crcmod's CRC-32C)]
Finishes in well under 2 minutes on the 2-core dev machine.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kgroup.protocol.api import encode_request, parse_response  # noqa: E402
from kgroup.protocol.messages.api_versions import ApiVersionsRequest  # noqa: E402
from kgroup.protocol.messages.create_topics import CreateTopicsRequest  # noqa: E402
from kgroup.protocol.messages.fetch import FetchRequest  # noqa: E402
from kgroup.protocol.messages.metadata import MetadataRequest  # noqa: E402
from kgroup.protocol.messages.produce import ProduceRequest  # noqa: E402
from kgroup.protocol.records import Record, build_batch, iter_batches  # noqa: E402
from kgroup.testing import rdkafka_mock  # noqa: E402

MIB = 1024 * 1024
RECORD_VALUE = 100
KGROUP_PRODUCE, KGROUP_FETCH = (3, 11), (4, 17)
FETCH_MAX_VERSION = 12  # topic names (v13+ wants topic ids); same cost on both brokers


# -- a raw pipelined client ----------------------------------------------------------------------------

class Conn:
    def __init__(self, bootstrap: str):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            self.sock.setsockopt(socket.SOL_SOCKET, opt, 4 * MIB)
        self.cid = 0
        self.buf = bytearray(4 * MIB)

    def send(self, body, version: int) -> None:
        self.cid += 1
        self.sock.sendall(b"".join(encode_request(body, version, self.cid, "bench")))

    def recv(self, body_type, version: int):
        size, = struct.unpack(">i", self._exact(4))
        _, resp = parse_response(body_type.API_KEY, version, self._exact(size))
        return resp

    def request(self, body, version: int):
        self.send(body, version)
        return self.recv(type(body), version)

    def _exact(self, n: int) -> memoryview:
        if len(self.buf) < n:
            self.buf = bytearray(n)
        view = memoryview(self.buf)[:n]
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if not k:
                raise ConnectionError("closed by the broker")
            got += k
        return view

    def close(self):
        self.sock.close()


def versions(bootstrap: str) -> tuple[int, int]:
    """The highest Produce and Fetch versions both we and the broker speak."""
    c = Conn(bootstrap)
    try:
        api = {a.api_key: (a.min_version, a.max_version) for a in c.request(ApiVersionsRequest(), 2).api_keys}
    finally:
        c.close()
    return min(api[0][1], KGROUP_PRODUCE[1]), min(api[1][1], KGROUP_FETCH[1], FETCH_MAX_VERSION)


def make_batch() -> tuple[bytes, int]:
    """A ≤ 1 MiB batch of 100-byte records: (bytes, records per batch)."""
    value = b"x" * RECORD_VALUE
    n = MIB // (RECORD_VALUE + 8)
    while True:
        batch = build_batch([Record(value=value, timestamp=int(time.time() * 1000))] * n)
        if len(batch) <= MIB:
            return batch, n
        n -= 16


def produce(bootstrap, topic, batches, batch, version, acks, window, go=None, consumed=None, lag=0):
    """Send ``batches`` copies of ``batch``; with ``consumed`` (a shared counter), never more
    than ``lag`` batches ahead of the consumer. Returns seconds."""
    c = Conn(bootstrap)
    req = ProduceRequest(transactional_id=None, acks=acks, timeout_ms=30000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=batch)])])
    if go is not None:
        go.wait()
    t0 = time.perf_counter()
    inflight = 0
    for sent in range(batches):
        while consumed is not None and sent - consumed.value >= lag:
            if inflight:
                _check_produce(c.recv(ProduceRequest, version))
                inflight -= 1
            else:
                time.sleep(0.0002)
        c.send(req, version)
        inflight += 1
        if inflight >= window:
            _check_produce(c.recv(ProduceRequest, version))
            inflight -= 1
    while inflight:
        _check_produce(c.recv(ProduceRequest, version))
        inflight -= 1
    elapsed = time.perf_counter() - t0
    c.close()
    return elapsed


def _check_produce(resp):
    pr = resp.responses[0].partition_responses[0]
    if pr.error_code:
        raise RuntimeError(f"produce failed: error {pr.error_code} {pr.error_message}")


def fetch(bootstrap, topic, indexes, batch_size, per_batch, version, window, go=None, consumed=None):
    """Fetch the batches at ``indexes`` (batch numbers, in order), one batch per request,
    ``window`` requests in flight among those below the high watermark and a lone long poll
    when caught up. Returns (seconds, bytes)."""
    c = Conn(bootstrap)
    FT, FP = FetchRequest.FetchTopic, FetchRequest.FetchTopic.FetchPartition

    def send(index, wait_ms):
        c.send(FetchRequest(replica_id=-1, max_wait_ms=wait_ms, min_bytes=1, max_bytes=64 * MIB,
                            isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                FT(topic=topic, partitions=[FP(partition=0, fetch_offset=index * per_batch,
                                                              log_start_offset=-1,
                                                              partition_max_bytes=batch_size)])],
                            forgotten_topics_data=[], rack_id=""), version)

    if go is not None:
        go.wait()
    t0 = time.perf_counter()
    inflight: list[int] = []  # positions in ``indexes``
    next_req = received = total = hw_batches = 0
    while received < len(indexes):
        while len(inflight) < window and next_req < len(indexes) and (
                indexes[next_req] < hw_batches or not inflight):
            send(indexes[next_req], 0 if indexes[next_req] < hw_batches else 500)
            inflight.append(next_req)
            next_req += 1
        position = inflight.pop(0)
        pd = c.recv(FetchRequest, version).responses[0].partitions[0]
        if pd.error_code:
            raise RuntimeError(f"fetch of batch {indexes[position]} failed: error {pd.error_code}")
        hw_batches = pd.high_watermark // per_batch
        records = pd.records or b""
        if not records:
            next_req = min(next_req, position)  # an empty long poll: ask again
            inflight = [i for i in inflight if i < next_req]
            continue
        n = sum(1 for _ in iter_batches(memoryview(records)))
        if n != 1 or len(records) != batch_size:
            raise RuntimeError(f"fetch of batch {indexes[position]}: {n} batches, {len(records)} bytes")
        received += 1
        total += len(records)
        if consumed is not None:
            consumed.value = received
    elapsed = time.perf_counter() - t0
    c.close()
    return elapsed, total


def _in_process(ctx, fn, *args):
    """Run fn(*args) in a forked process; returns (process, queue holding the result)."""
    q = ctx.Queue()

    def target():
        try:
            q.put(("ok", fn(*args)))
        except BaseException as e:  # report, don't hang the parent
            q.put(("error", repr(e)))
    p = ctx.Process(target=target)
    p.start()
    return p, q


def _result(pq, timeout=120):
    p, q = pq
    status, value = q.get(timeout=timeout)
    p.join()
    if status != "ok":
        raise RuntimeError(value)
    return value


# -- the two brokers -----------------------------------------------------------------------------------

def start_kgroup(data_dir, src=ROOT, crc="auto"):
    """The broker in a subprocess: (process, bootstrap, the CRC-32C implementation it logged)."""
    log = open(os.path.join(os.path.dirname(data_dir), "kgroup-bench.log"), "wb")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p))
    if crc == "crcmod":
        env["KGROUP_CRC32C"] = "crcmod"
    proc = subprocess.Popen([sys.executable, "-m", "kgroup", "serve", "--override",
                             "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={data_dir}"],
                            cwd=src, env=env, stdout=log, stderr=subprocess.STDOUT)
    path = log.name
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        m = re.search(r"serving on 127\.0\.0\.1:(\d+).*CRC-32C by (.*)", open(path).read())
        if m:
            return proc, f"127.0.0.1:{m.group(1)}", m.group(2).strip()
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError("kgroup did not start: " + open(path).read())


def start_mock(topics):
    proc, bootstrap = rdkafka_mock.spawn(1, {t: 1 for t in topics}, seconds=600)
    return proc, bootstrap.split(",")[0]


def create_topics(bootstrap, topics):
    c = Conn(bootstrap)
    CT = CreateTopicsRequest.CreatableTopic
    r = c.request(CreateTopicsRequest(topics=[CT(name=t, num_partitions=1, replication_factor=1, configs=[])
                                              for t in topics], timeout_ms=10000, validate_only=False), 5)
    assert all(t.error_code == 0 for t in r.topics), r
    c.close()


def wait_metadata(bootstrap, topics):
    c = Conn(bootstrap)
    MT = MetadataRequest.MetadataRequestTopic
    r = c.request(MetadataRequest(topics=[MT(name=t) for t in topics], allow_auto_topic_creation=False), 4)
    assert all(t.error_code == 0 for t in r.topics), r
    c.close()


def topics_for(repeat):
    return ["bench"] + [f"{kind}-{r}" for r in range(repeat) for kind in ("e2e", "acks")]


def run_target(name, bootstrap, batches, window, pv, fv, repeat):
    """The three workloads (and produce at acks=-1) against one broker, each the best of
    ``repeat`` runs (the machine is shared): {row: MB/s}."""
    batch, per_batch = make_batch()
    ctx = mp.get_context("fork")
    res: dict[str, float] = {}
    mb = batches * len(batch) / 1e6

    def best(row, seconds):
        res[row] = max(res.get(row, 0.0), mb / seconds)

    for r in range(repeat):
        best("produce (acks=1)", _result(_in_process(ctx, produce, bootstrap, "bench", batches, batch, pv, 1,
                                                     window)))
        # The mock keeps only the last 5 MiB of a partition, so both brokers serve the fetch
        # phase from the last 4 batches, cycling (kgroup reads them from its segment file).
        end = (r + 1) * batches
        hot = [end - 4 + i % 4 for i in range(batches)]
        t, total = _result(_in_process(ctx, fetch, bootstrap, "bench", hot, len(batch), per_batch, fv, window))
        assert total == batches * len(batch)
        best("fetch", t)
        # Both at once on a fresh topic; the producer stays at most 4 batches ahead of the
        # consumer (the mock's retention again), so every batch is produced, then fetched.
        go, consumed = ctx.Event(), ctx.Value("q", 0, lock=False)
        prod = _in_process(ctx, produce, bootstrap, f"e2e-{r}", batches, batch, pv, 1, window, go, consumed, 4)
        cons = _in_process(ctx, fetch, bootstrap, f"e2e-{r}", list(range(batches)), len(batch), per_batch, fv,
                           window, go, consumed)
        time.sleep(0.5)  # both connected and waiting
        t0 = time.perf_counter()
        go.set()
        _result(prod)
        _, total = _result(cons)
        t = time.perf_counter() - t0
        assert total == batches * len(batch)
        best("produce+fetch (end to end)", t)
        best("produce (acks=-1)", _result(_in_process(ctx, produce, bootstrap, f"acks-{r}", batches, batch, pv,
                                                      -1, window)))
    print(f"  {name}: Produce v{pv}, Fetch v{fv}, {batches} x {len(batch):,} B batches "
          f"({per_batch:,} records of {RECORD_VALUE} B) per workload, best of {repeat}", flush=True)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=128, help="MiB per workload run (1 MiB batches)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per workload; the best counts")
    ap.add_argument("--window", type=int, default=8, help="requests in flight per connection")
    ap.add_argument("--kgroup-src", default=ROOT, help="run the broker from this source tree (a patched copy)")
    ap.add_argument("--crc", choices=("auto", "crcmod"), default="auto",
                    help="the broker's CRC-32C: the crc32c package when installed (auto), or crcmod")
    args = ap.parse_args()
    topics = topics_for(args.repeat)
    tmp = tempfile.mkdtemp(prefix="kgroup-bench-")
    results = {}
    kproc = mproc = None
    try:
        kproc, kboot, crc = start_kgroup(os.path.join(tmp, "data"), args.kgroup_src, args.crc)
        create_topics(kboot, topics)
        mproc, mboot = start_mock(topics)
        wait_metadata(mboot, topics)
        (kp, kf), (mp_, mf) = versions(kboot), versions(mboot)
        pv, fv = min(kp, mp_), min(kf, mf)  # the same requests to both
        results["kgroup"] = run_target(f"kgroup (CRC-32C by {crc})", kboot, args.mib, args.window, pv, fv,
                                       args.repeat)
        kproc.terminate()
        kproc.wait(30)
        results["rdkafka mock"] = run_target("rdkafka mock", mboot, args.mib, args.window, pv, fv, args.repeat)
    finally:
        for p in (kproc, mproc):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    k, m = results["kgroup"], results["rdkafka mock"]
    print()
    print("| workload (1 partition, 1 MiB batches) | kgroup MB/s | rdkafka mock MB/s | kgroup / mock |")
    print("|---|---:|---:|---:|")
    for row in k:
        print(f"| {row} | {k[row]:,.0f} | {m[row]:,.0f} | {k[row] / m[row]:.2f}x |")


if __name__ == "__main__":
    main()
