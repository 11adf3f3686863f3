#!/usr/bin/env python3
"""Share groups (KIP-932): acknowledged records per second with real share consumers, next to a
classic consumer group and next to librdkafka's mock cluster, in one run.

Four confluent-kafka 2.16.1 ShareConsumers (implicit acknowledgement: each poll acknowledges the
previous one's records) in one group consume a 2-partition topic: once they are assigned (a warm-up
record each way), ``--records`` records are produced and the rate is records / (time from the start
of production until the last record is received); the rate counts records delivered and (but for
the last poll's, acknowledged on close) acknowledged. Beside it, the same measurement for four
classic consumers (group.protocol=classic) on the same broker, and for the four share consumers
against librdkafka's mock cluster. Production is in the measured time for every side, so no side
drains records prefetched before the clock starts. Goal: share >= 100k acknowledged records/s and
>= 0.5x the classic group.

Usage (from the repo root; about half a minute)::

    python benchmarks/share_group_bench.py [--records 200000] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from confluent_kafka import Consumer, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kgroup.testing.broker import KafkaBroker  # noqa: E402
from kgroup.testing.rdkafka_mock import spawn  # noqa: E402

MEMBERS = 4


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 1000000})
    value = b"x" * 100
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, partition=i % 2)
                break
            except BufferError:
                p.poll(0.01)
    p.flush()


def consume(make, n: int, bootstrap: str, topic: str, warmup_s: float, timeout: float = 120.0) -> tuple[float, int]:
    consumers = [make(i) for i in range(MEMBERS)]
    counts = [0] * MEMBERS
    started = [None]
    done = threading.Event()
    warm = threading.Event()

    def run(i):
        c = consumers[i]
        while not done.is_set():
            batch = c.poll(0.2)
            if isinstance(batch, list) or hasattr(batch, "__len__"):
                k = sum(1 for m in batch if m.error() is None)
            else:
                k = 0 if batch is None or batch.error() is not None else 1
            if k and warm.is_set():
                counts[i] += k
                if sum(counts) >= n:
                    done.set()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(MEMBERS)]
    for t in threads:
        t.start()
    time.sleep(warmup_s)          # every member joined and got its partitions
    warm.set()
    started[0] = time.perf_counter()
    produce(bootstrap, topic, n)
    done.wait(timeout)
    end = time.perf_counter()
    done.set()
    for t in threads:
        t.join()
    for c in consumers:
        c.close()
    total = sum(counts)
    elapsed = end - (started[0] or end)
    return (total / elapsed if elapsed > 0 else 0.0), total


def share_rate(bootstrap: str, topic: str, group: str, n: int, warmup_s: float) -> tuple[float, int]:
    return consume(lambda i: _subscribed(ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group}), topic),
                   n, bootstrap, topic, warmup_s)


def classic_rate(bootstrap: str, topic: str, n: int, warmup_s: float) -> tuple[float, int]:
    conf = {"bootstrap.servers": bootstrap, "group.id": "classic", "auto.offset.reset": "latest",
            "group.protocol": "classic"}
    return consume(lambda i: _subscribed(Consumer(conf), topic, batch=True), n, bootstrap, topic, warmup_s)


class _Batched:
    """A classic Consumer whose poll returns a list, as the share consumer's does."""

    def __init__(self, c):
        self.c = c

    def poll(self, timeout):
        return self.c.consume(500, timeout)

    def close(self):
        self.c.close()


def _subscribed(c, topic, batch=False):
    c.subscribe([topic])
    return _Batched(c) if batch else c


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    n = args.records
    out = {}
    with KafkaBroker() as b:
        bs = b.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic("share", 2, 1), NewTopic("classic", 2, 1)]).values():
            f.result()
        out["kgroup_share_records_per_s"], out["kgroup_share_records"] = share_rate(bs, "share", "sg", n, 8.0)
        out["kgroup_classic_records_per_s"], out["kgroup_classic_records"] = classic_rate(bs, "classic", n, 8.0)
    proc, mock_bs = spawn(topics={"share": 2})
    try:
        out["mock_share_records_per_s"], out["mock_share_records"] = share_rate(mock_bs, "share", "sg", n, 8.0)
    finally:
        proc.kill()
    out["share_vs_classic"] = out["kgroup_share_records_per_s"] / max(1.0, out["kgroup_classic_records_per_s"])
    if args.json:
        print(json.dumps(out))
        return
    print(f"share group, 4 ShareConsumers, 2 partitions, {n} records (implicit acknowledgement)")
    print(f"  kgroup share group     {out['kgroup_share_records_per_s']:>10.0f} records/s  ({out['kgroup_share_records']} received)")
    print(f"  kgroup classic group   {out['kgroup_classic_records_per_s']:>10.0f} records/s  ({out['kgroup_classic_records']} received)")
    print(f"  librdkafka mock share  {out['mock_share_records_per_s']:>10.0f} records/s  ({out['mock_share_records']} received)")
    print(f"  share / classic        {out['share_vs_classic']:.2f}x   (goal >= 100000 records/s and >= 0.5x)")


if __name__ == "__main__":
    main()
