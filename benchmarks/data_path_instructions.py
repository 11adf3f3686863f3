#!/usr/bin/env python3
"""Instructions per Produce (acks=1) and per Fetch on a single-node broker, for two source trees
side by side (this one and --baseline-src), counted by valgrind (cachegrind).

What it checks: that a change to the data path (e.g. replication, which a single node never
uses) adds nothing measurable to it. Instruction counts do not depend on what else this shared
machine runs, unlike data_path_bench.py's MB/s. Each tree runs in-process: a broker on 127.0.0.1
with one partition, then N frames handed straight to a server connection's ``_handle_frame``
(decode, dispatch, handler, log append or read, encode; no socket): Produce v9 with one batch of
10 records of 100 bytes at acks=1, or Fetch v12 of the first batch of a 100-batch log. Each runs
under cachegrind with N and 6N frames; the difference / 5N is the instructions per request,
start-up cancelled.

Usage (needs valgrind; a few minutes)::

    python benchmarks/data_path_instructions.py --baseline-src /path/to/other/tree [--n 1000] [--workload fetch]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child(n: int, workload: str) -> None:
    from kgroup.broker.broker import Broker
    from kgroup.broker.config import BrokerConfig
    from kgroup.broker.server import KafkaConnection
    from kgroup.protocol.api import encode_request
    from kgroup.protocol.messages.fetch import FetchRequest
    from kgroup.protocol.messages.produce import ProduceRequest
    from kgroup.protocol.records import Record, build_batch

    class Transport:        # what the connection writes goes nowhere
        def write(self, data): pass
        def writelines(self, data): pass
        def set_write_buffer_limits(self, high): pass
        def get_extra_info(self, name): return ("127.0.0.1", 1)
        def close(self): pass

    records = build_batch([Record(value=b"v" * 100) for _ in range(10)])
    P = ProduceRequest
    produce = b"".join(encode_request(P(transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
        P.TopicProduceData(name="bench", partition_data=[P.PartitionProduceData(index=0, records=records)])]),
        9, 1, "bench"))[4:]
    F = FetchRequest
    fetch = b"".join(encode_request(F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                                      session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                                      topics=[F.FetchTopic(topic="bench", partitions=[F.FetchPartition(
                                          partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]),
                                    12, 1, "bench"))[4:]

    async def main():
        with tempfile.TemporaryDirectory() as d:
            b = Broker(BrokerConfig.load(None, ["listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={d}",
                                                "kgroup.fault.injection.enable=false"]))
            await b.start()
            try:
                b.create_topic("bench", 1, 1, {})
                plog = b.data_path.log("bench", 0)
                for _ in range(100):
                    plog.append(records)
                conn = KafkaConnection(b)
                conn.connection_made(Transport())
                handle = conn._handle_frame
                frame = produce if workload == "produce" else fetch
                for _ in range(n):
                    handle(frame)
                    conn.out.clear()
                    await asyncio.sleep(0)
                assert not conn.closed
            finally:
                await b.stop()
    asyncio.run(main())


def instructions(src: str, n: int, workload: str) -> int:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=src)
        r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
                            sys.executable, os.path.abspath(__file__), "--child", workload, "--n", str(n)],
                           env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(r.stderr[-3000:])
        m = re.search(r"^summary:\s+(\d+)", open(out).read(), re.M)
        return int(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--baseline-src", required=False, help="the other source tree (e.g. a git worktree of main)")
    ap.add_argument("--child", choices=("produce", "fetch"))
    ap.add_argument("--workload", choices=("produce", "fetch", "both"), default="both")
    args = ap.parse_args()
    if args.child:
        child(args.n, args.child)
        return
    trees = {"this tree": _ROOT}
    if args.baseline_src:
        trees["baseline"] = os.path.abspath(args.baseline_src)
    for workload in ("produce", "fetch") if args.workload == "both" else (args.workload,):
        per = {}
        for name, src in trees.items():
            few, many = instructions(src, args.n, workload), instructions(src, 6 * args.n, workload)
            per[name] = (many - few) / (5 * args.n)
        base = per.get("baseline")
        print(f"instructions per {workload} request (cachegrind, in-process, {5 * args.n} requests)", flush=True)
        for name, value in per.items():
            diff = "" if base is None else f"  {value - base:>+7,.0f} ({(value / base - 1) * 100:+.2f} %)"
            print(f"  {name:<12} {value:>10,.0f}{diff}", flush=True)


if __name__ == "__main__":
    main()
