#!/usr/bin/env python3
"""How long the log cleaner holds the broker's event loop: Heartbeat round trips measured back
to back while a large compacted log is cleaned.

A broker process gets a compacted topic (segment.bytes 8 MiB, min.compaction.lag.ms holding
everything back until the produce is done, log.cleaner.backoff.ms 100) and ``--records`` keyed
records of 100 bytes (``--keys`` distinct keys, 100 records a batch, acks=1, all with the
produce's start as timestamp), which leaves two full closed segments to clean in one pass. One member of a Stable group then sends Heartbeat v4 after
Heartbeat v4, each as soon as the previous answer arrived, until the cleaned segments are in
place (the first segment's file shrank) and half a second after: a clean that runs on the event
loop shows as one round trip as long as the clean. Printed, over the round trips from the end of
min.compaction.lag.ms on: their number, p50, p99 and the longest, and when the cleaned segments
were in place.

``--baseline-rev REV`` runs the same against the kgroup of commit REV of this repository (taken
with ``git archive``, e.g. ``HEAD~3``; ``make bench BASELINE_REV=REV`` passes it),
``--baseline DIR`` against another checkout, in the same run, printed side by side; without
either, only this tree runs.

Usage (from the repo root; about half a minute per broker)::

    python benchmarks/cleaner_stall_bench.py [--records 200000] [--keys 10000]
        [--baseline-rev REV | --baseline DIR]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from coordinator_bench import Broker, Conn, single_member_group  # noqa: E402
from kgroup.protocol.messages.create_topics import CreateTopicsRequest  # noqa: E402
from kgroup.protocol.messages.heartbeat import HeartbeatRequest  # noqa: E402
from kgroup.protocol.messages.produce import ProduceRequest  # noqa: E402
from kgroup.protocol.records import Record, build_batch  # noqa: E402

TOPIC = "compacted"
SEGMENT_BYTES = 8 * 1024 * 1024
LAG_MS = 6000           # min.compaction.lag.ms: nothing is cleanable until the produce is done


def first_segment_size(broker) -> int:
    try:
        return os.path.getsize(os.path.join(broker.data, f"{TOPIC}-0", f"{0:020d}.log"))
    except FileNotFoundError:
        return 0


async def produce(conn, records: int, keys: int) -> None:
    TPD = ProduceRequest.TopicProduceData
    PPD = TPD.PartitionProduceData
    value = b"v" * 100
    pending = []
    now = int(time.time() * 1000)   # one timestamp: every segment passes min.compaction.lag.ms at once
    for start in range(0, records, 100):
        batch = build_batch([Record(b"k%d" % ((start + i) % keys), value, (), now) for i in range(100)])
        req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30000,
                             topic_data=[TPD(name=TOPIC, partition_data=[PPD(index=0, records=batch)])])
        pending.append(asyncio.ensure_future(conn.request(req, 9)))
        if len(pending) >= 32:
            for r in await asyncio.gather(*pending):
                assert r.responses[0].partition_responses[0].error_code == 0, r
            pending.clear()
    for r in await asyncio.gather(*pending):
        assert r.responses[0].partition_responses[0].error_code == 0, r


async def measure(root: str, records: int, keys: int) -> dict:
    broker = Broker(overrides=["log.cleaner.backoff.ms=100"], root=root)
    try:
        conn = await Conn.open(broker.port)
        CT = CreateTopicsRequest.CreatableTopic
        CC = CT.CreatableTopicConfig
        configs = {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
                   "min.compaction.lag.ms": str(LAG_MS), "min.cleanable.dirty.ratio": "0.5"}
        r = await conn.request(CreateTopicsRequest(
            topics=[CT(name=TOPIC, num_partitions=1, replication_factor=1,
                       configs=[CC(name=k, value=v) for k, v in configs.items()])], timeout_ms=30000), 7)
        assert r.topics[0].error_code == 0, r.topics[0]
        started = time.monotonic()
        await produce(conn, records, keys)
        produced_s = time.monotonic() - started
        before = first_segment_size(broker)
        member, generation = await single_member_group(conn, "stall-probe")
        hb = HeartbeatRequest(group_id="stall-probe", generation_id=generation, member_id=member)
        rtts = []
        cleaned_at = None
        lag_end = started + LAG_MS / 1000.0
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            t = time.perf_counter()
            resp = await conn.request(hb, 4)
            rtt = time.perf_counter() - t
            assert resp.error_code == 0, resp
            now = time.monotonic()
            if now >= lag_end:          # the clean can start from here
                rtts.append(rtt)
            if cleaned_at is None and first_segment_size(broker) < before:
                cleaned_at = now
            if cleaned_at is not None and now - cleaned_at > 0.5:
                break
        assert cleaned_at is not None, "the log was not cleaned within 120 s"
        rtts.sort()
        return {"records": records, "produced_s": produced_s, "segment_before": before,
                "segment_after": first_segment_size(broker), "round_trips": len(rtts),
                "p50_ms": rtts[len(rtts) // 2] * 1000, "p99_ms": rtts[int(len(rtts) * 0.99)] * 1000,
                "max_ms": rtts[-1] * 1000, "clean_s": cleaned_at - lag_end}
    finally:
        broker.stop()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--baseline", help="root of another kgroup checkout, measured in the same run")
    parser.add_argument("--baseline-rev", help="a commit of this repository, measured in the same run")
    args = parser.parse_args(argv)
    runs = [("this tree", _ROOT)]
    scratch = None
    if args.baseline_rev:
        scratch = tempfile.mkdtemp(prefix="kgroup-baseline-")
        archive = subprocess.run(["git", "archive", args.baseline_rev, "kgroup"], cwd=_ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", scratch], input=archive, check=True)
        runs.append((args.baseline_rev[:10], scratch))
    elif args.baseline:
        runs.append(("baseline", os.path.abspath(args.baseline)))
    results = []
    try:
        for name, root in runs:
            print(f"... {name}: {root}", file=sys.stderr)
            results.append((name, asyncio.run(measure(root, args.records, args.keys))))
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    rows = [("first segment before -> after the clean", lambda r: f"{r['segment_before'] / 2**20:.1f} -> "
             f"{r['segment_after'] / 2**20:.1f} MiB"),
            ("heartbeat round trips from the lag's end", lambda r: f"{r['round_trips']:,}"),
            ("heartbeat round trip p50", lambda r: f"{r['p50_ms']:.2f} ms"),
            ("heartbeat round trip p99", lambda r: f"{r['p99_ms']:.2f} ms"),
            ("longest heartbeat round trip (event-loop stall)", lambda r: f"{r['max_ms']:.1f} ms"),
            ("clean done after the lag's end (about)", lambda r: f"{r['clean_s']:.2f} s")]
    print(f"{args.records:,} records of 100 bytes, {args.keys:,} keys, segment.bytes {SEGMENT_BYTES // 2**20} MiB")
    print(f"{'':50s}" + "".join(f"{name:>20s}" for name, _ in results))
    for label, fmt in rows:
        print(f"{label:50s}" + "".join(f"{fmt(r):>20s}" for _, r in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
