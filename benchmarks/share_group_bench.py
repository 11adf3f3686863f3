#!/usr/bin/env python3
"""Share groups (KIP-932): acknowledged records per second with real share consumers, next to a
classic consumer group and next to librdkafka's mock cluster, in one run, and the broker's CPU
time per acknowledged record.

Four confluent-kafka 2.16.1 ShareConsumers (explicit acknowledgement: each record is ACCEPTed, and
the acknowledgements go with the next poll's ShareFetch) in one group consume a 2-partition topic
of 100-byte records: once they are assigned, ``--records`` records are produced and the rate is
records / (time from the start of production until the last record is received); the rate counts
records delivered and (but for the last poll's, acknowledged on close) acknowledged. Beside it, the
same measurement for four classic consumers (group.protocol=classic) on the same broker, and for
the four share consumers against librdkafka's mock cluster (``--mock-records``, fewer: the mock
serves share consumers slowly). Production is in the measured time for every side, so no side
drains records prefetched before the clock starts; the producer is a process of its own, so the
consumers' Python threads (and their GIL) do not slow production down. The broker is a
``kgroup serve`` process, so its CPU time (user + system, from /proc) over each measurement
divided by the records is the CPU per acknowledged record. ``--backlog``: both groups also drain
that many records produced before they start (the clock from the first record received to the
last). Goal: share >= 100k acknowledged records/s and >= 0.5x the classic group.

Usage (from the repo root; about a minute)::

    python benchmarks/share_group_bench.py [--records 100000] [--backlog 100000] [--mock-records 5000] [--json]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from confluent_kafka import Consumer, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,  # noqa: E402
                                   NewTopic, ResourceType)

from kgroup.testing.broker import KafkaBroker  # noqa: E402
from kgroup.testing.rdkafka_mock import spawn  # noqa: E402

MEMBERS = 4
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def produce(bootstrap: str, topic: str, n: int, ready=None, go=None) -> None:
    """``n`` records, round robin over the 2 partitions. In a process of its own (``ready`` set
    once connected, producing on ``go``), so the consumers' Python threads do not slow it down."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 1000000})
    value = b"x" * 100
    if ready is not None:
        p.list_topics(topic, timeout=10)
        ready.set()
        go.wait()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value=value, partition=i % 2)
                break
            except BufferError:
                p.poll(0.01)
    p.flush()


def consume(make, n: int, bootstrap: str, topic: str, warmup_s: float, timeout: float = 120.0,
            pid: int | None = None, backlog: bool = False) -> tuple[float, int, float]:
    """(records/s, records received, broker CPU seconds over the measurement). ``backlog``: the
    records are produced first and the clock runs from the first record received to the last."""
    if backlog:
        produce(bootstrap, topic, n)
    cpu0 = cpu_seconds(pid) if pid is not None else 0.0
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
                k = 0
                for m in batch:
                    if m.error() is None:
                        k += 1
                        c.acknowledge(m)
            else:
                k = 0 if batch is None or batch.error() is not None else 1
            if k and warm.is_set():
                if started[0] is None:
                    started[0] = time.perf_counter()
                counts[i] += k
                if sum(counts) >= n:
                    done.set()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(MEMBERS)]
    for t in threads:
        t.start()
    producer = None
    if backlog:
        warm.set()
    else:
        ctx = multiprocessing.get_context("spawn")
        ready, go = ctx.Event(), ctx.Event()
        producer = ctx.Process(target=produce, args=(bootstrap, topic, n, ready, go))
        producer.start()
        time.sleep(warmup_s)          # every member joined and got its partitions
        ready.wait(30)
        warm.set()
        cpu0 = cpu_seconds(pid) if pid is not None else 0.0
        started[0] = time.perf_counter()
        go.set()
    done.wait(timeout)
    end = time.perf_counter()
    cpu = (cpu_seconds(pid) - cpu0) if pid is not None else 0.0
    done.set()
    if producer is not None:
        producer.join(30)
    for t in threads:
        t.join()
    for c in consumers:
        c.close()
    total = sum(counts)
    elapsed = end - (started[0] or end)
    return (total / elapsed if elapsed > 0 else 0.0), total, cpu


def share_rate(bootstrap: str, topic: str, group: str, n: int, warmup_s: float, pid=None, timeout=120.0,
               backlog=False):
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    if backlog:     # the group starts at the log start (share.auto.offset.reset=earliest)
        r = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
            "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.incremental_alter_configs([r]).values():
            f.result()
    return consume(lambda i: _subscribed(ShareConsumer(conf), topic), n, bootstrap, topic, warmup_s, timeout, pid,
                   backlog)


def classic_rate(bootstrap: str, topic: str, n: int, warmup_s: float, pid=None, backlog=False):
    conf = {"bootstrap.servers": bootstrap, "group.id": "classic-backlog" if backlog else "classic",
            "auto.offset.reset": "earliest" if backlog else "latest", "group.protocol": "classic"}
    return consume(lambda i: _subscribed(Consumer(conf), topic, batch=True), n, bootstrap, topic, warmup_s, pid=pid,
                   backlog=backlog)


class _Batched:
    """A classic Consumer whose poll returns a list, as the share consumer's does."""

    def __init__(self, c):
        self.c = c

    def poll(self, timeout):
        return self.c.consume(500, timeout)

    def acknowledge(self, m):
        pass

    def close(self):
        self.c.close()


def _subscribed(c, topic, batch=False):
    c.subscribe([topic])
    return _Batched(c) if batch else c


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--mock-records", type=int, default=5000)
    ap.add_argument("--backlog", type=int, default=100000,
                    help="also drain a backlog of this many records produced before the consumers start (0: no)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    n = args.records
    out = {"load_before": os.getloadavg()[0]}
    with KafkaBroker(process=True) as b:
        bs = b.bootstrap_servers
        pid = b.proc.pid
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic(t, 2, 1) for t in ("share", "classic", "share-backlog",
                                                                    "classic-backlog")]).values():
            f.result()
        rate, got, cpu = share_rate(bs, "share", "sg", n, 8.0, pid)
        out.update(kgroup_share_records_per_s=rate, kgroup_share_records=got,
                   kgroup_share_cpu_us_per_record=cpu * 1e6 / max(1, got))
        rate, got, cpu = classic_rate(bs, "classic", n, 8.0, pid)
        out.update(kgroup_classic_records_per_s=rate, kgroup_classic_records=got,
                   kgroup_classic_cpu_us_per_record=cpu * 1e6 / max(1, got))
        if args.backlog:
            rate, got, cpu = share_rate(bs, "share-backlog", "sg-backlog", args.backlog, 8.0, pid, backlog=True)
            out.update(backlog_share_records_per_s=rate, backlog_share_records=got,
                       backlog_share_cpu_us_per_record=cpu * 1e6 / max(1, got))
            rate, got, cpu = classic_rate(bs, "classic-backlog", args.backlog, 8.0, pid, backlog=True)
            out.update(backlog_classic_records_per_s=rate, backlog_classic_records=got,
                       backlog_classic_cpu_us_per_record=cpu * 1e6 / max(1, got))
    proc, mock_bs = spawn(topics={"share": 2})
    try:
        out["mock_share_records_per_s"], out["mock_share_records"], _ = share_rate(
            mock_bs, "share", "sg", args.mock_records, 8.0, timeout=60.0)
    finally:
        proc.kill()
    out["share_vs_classic"] = out["kgroup_share_records_per_s"] / max(1.0, out["kgroup_classic_records_per_s"])
    out["load_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(out))
        return
    print(f"share group, 4 ShareConsumers, 2 partitions, {n} records (explicit ACCEPT); "
          f"load {out['load_before']:.1f} -> {out['load_after']:.1f}")
    print(f"  kgroup share group     {out['kgroup_share_records_per_s']:>10.0f} records/s  "
          f"({out['kgroup_share_records']} received; broker CPU {out['kgroup_share_cpu_us_per_record']:.1f} us/record)")
    print(f"  kgroup classic group   {out['kgroup_classic_records_per_s']:>10.0f} records/s  "
          f"({out['kgroup_classic_records']} received; broker CPU {out['kgroup_classic_cpu_us_per_record']:.1f} us/record)")
    if args.backlog:
        print(f"  backlog of {args.backlog}: share {out['backlog_share_records_per_s']:.0f} records/s "
              f"(broker CPU {out['backlog_share_cpu_us_per_record']:.1f} us/record), classic "
              f"{out['backlog_classic_records_per_s']:.0f} records/s "
              f"(broker CPU {out['backlog_classic_cpu_us_per_record']:.1f} us/record)")
    print(f"  librdkafka mock share  {out['mock_share_records_per_s']:>10.0f} records/s  "
          f"({out['mock_share_records']} of {args.mock_records} received)")
    print(f"  share / classic        {out['share_vs_classic']:.2f}x   (goal >= 100000 records/s and >= 0.5x)")


if __name__ == "__main__":
    main()
