#!/usr/bin/env python3
"""Our ShareConsumer next to confluent-kafka 2.16.1's ShareConsumer, in one run: each alone in its
own share group reads the same ``--records`` records (100 bytes, one partition, produced before)
from a kgroup broker process with implicit acknowledgement, and commits at the end. Printed:
records/s from the first record received to the last (the first poll's records are not counted:
joining is not measured) and the consumer process's CPU seconds over the same span, for both.

Usage (from the repo root; a few seconds)::

    python benchmarks/share_consumer_bench.py [--records 20000] [--json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from confluent_kafka import Producer, ShareConsumer as ConfluentShareConsumer  # noqa: E402

from kgroup.client import ShareConsumer  # noqa: E402
from kgroup.testing.broker import KafkaBroker  # noqa: E402

GROUP_RESOURCE = 32


def ours(bootstrap: str, n: int) -> tuple[float, float]:
    async def run():
        async with ShareConsumer(bootstrap_servers=bootstrap, group_id="ours") as c:
            c.subscribe(["t"])
            got, first, t0, c0 = 0, 0, 0.0, 0.0
            while got < n:
                records = await c.poll(500)
                if records and not first:
                    first, t0, c0 = len(records), time.perf_counter(), time.process_time()
                got += len(records)
            await c.commit_sync()
            return (n - first) / (time.perf_counter() - t0), time.process_time() - c0
    return asyncio.run(run())


def theirs(bootstrap: str, n: int) -> tuple[float, float]:
    c = ConfluentShareConsumer({"bootstrap.servers": bootstrap, "group.id": "theirs"})
    c.subscribe(["t"])
    try:
        got, first, t0, c0 = 0, 0, 0.0, 0.0
        while got < n:
            records = list(c.poll(0.5))
            if records and not first:
                first, t0, c0 = len(records), time.perf_counter(), time.process_time()
            got += len(records)
        c.commit_sync()
        return (n - first) / (time.perf_counter() - t0), time.process_time() - c0
    finally:
        c.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with KafkaBroker(overrides={"group.share.heartbeat.interval.ms": 500,
                                "group.share.min.heartbeat.interval.ms": 500}, process=True) as broker:
        broker.create_topic("t")
        with broker.admin() as admin:
            for group in ("ours", "theirs"):
                admin.incremental_alter_configs(GROUP_RESOURCE, group, [("share.auto.offset.reset", 0, "earliest")])
        p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
        for _ in range(args.records):
            p.produce("t", value=b"x" * 100, partition=0)
        p.flush()
        rate_ours, cpu_ours = ours(broker.bootstrap_servers, args.records)
        rate_theirs, cpu_theirs = theirs(broker.bootstrap_servers, args.records)
    result = {"records": args.records, "ours_records_per_s": round(rate_ours), "ours_cpu_s": round(cpu_ours, 3),
              "confluent_records_per_s": round(rate_theirs), "confluent_cpu_s": round(cpu_theirs, 3),
              "ratio": round(rate_ours / rate_theirs, 2), "load": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"share consumer, {args.records} records, implicit acknowledgement (load {result['load']:.1f}):")
        print(f"  kgroup ShareConsumer           {result['ours_records_per_s']:>9,} records/s  CPU {cpu_ours:.2f} s")
        print(f"  confluent-kafka ShareConsumer  {result['confluent_records_per_s']:>9,} records/s  CPU {cpu_theirs:.2f} s")
        print(f"  ratio {result['ratio']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
