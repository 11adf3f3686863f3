"""Transactions: committed transactions/s and EndTxn latency, kgroup against librdkafka's mock
cluster (the copy bundled with confluent-kafka, which implements transactions), the same client
workload on both in the same run.

Workload: --producers confluent-kafka transactional producers (one thread each, one client
process), each looping: begin_transaction; 10 records of 100 bytes on 2 partitions of the output
topic; send_offsets_to_transaction (its group's offset on an input topic); flush;
commit_transaction. Counted: transactions committed per second over --seconds, and the latency
of commit_transaction after the flush (its EndTxn round trip plus, on kgroup, the markers: the
broker answers EndTxn once the PrepareCommit record, then the markers, are fsynced).
librdkafka speaks transaction version 1 (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn v4 or
below). A second kgroup row runs the same workload with our own client's producers, which speak
transaction version 2 (KIP-890 part 2: Produce v12 and TxnOffsetCommit v5 add their partitions,
EndTxn v5 bumps the epoch), as Java 4.x's producer does once the broker finalizes
transaction.version 2 (a Java 4.3 producer is not run here: no JVM client in the test set-up);
they are ten asyncio tasks of one event loop in this process.
kgroup runs with its defaults (every coordinator write and acks=-1 produce fsynced before the
answer); the mock keeps everything in memory. Also printed: the CPU time (user + system, all
threads) per committed transaction over the counted seconds of the broker process (and its user
and system parts) and of this client process (the ten producers), and the machine's load.

Usage: .venv/bin/python benchmarks/transactions_bench.py [--producers 10] [--seconds 10] [--repeat 1]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kgroup.testing import rdkafka_mock  # noqa: E402
from tests.harness import BrokerProcess  # noqa: E402

OUT, SRC = "txn-out", "txn-in"
VALUE = b"x" * 100


def _producer_loop(bs, n, stop_at, results, errors):
    from confluent_kafka import Consumer, Producer, TopicPartition
    try:
        p = Producer({"bootstrap.servers": bs, "transactional.id": f"bench-{n}", "linger.ms": 0})
        p.init_transactions(30)
        meta = Consumer({"bootstrap.servers": bs, "group.id": f"bench-group-{n}"}).consumer_group_metadata()
        count, latencies, offset = 0, [], 0
        start_at = stop_at[0]
        while time.monotonic() < start_at:          # everyone initialized: start together
            time.sleep(0.001)
        stop = stop_at[1]
        while time.monotonic() < stop:
            p.begin_transaction()
            for i in range(10):
                p.produce(OUT, value=VALUE, partition=i % 2)
            offset += 10
            p.send_offsets_to_transaction([TopicPartition(SRC, n % 2, offset)], meta, 30)
            p.flush(30)
            t = time.perf_counter()
            p.commit_transaction(30)
            latencies.append(time.perf_counter() - t)
            count += 1
        results[n] = (count, latencies)
    except Exception as e:  # noqa: BLE001 - reported by the run
        errors.append(f"producer {n}: {e!r}")


async def _tv2_loops(bs, producers, stop_at, results, errors):
    """The same workload with our client, which speaks transaction version 2 (KIP-890 part 2:
    no AddPartitionsToTxn/AddOffsetsToTxn, EndTxn v5) when the broker finalizes it, as Java
    4.x's producer does; each producer an asyncio task of one event loop."""
    import asyncio

    from kgroup.client import TopicPartition as TP
    from kgroup.client.producer import Producer
    from kgroup.client.transactions import ConsumerGroupMetadata

    async def one(n):
        try:
            async with Producer(bootstrap_servers=bs, transactional_id=f"bench-tv2-{n}", linger_ms=0) as p:
                await p.init_transactions()
                if not p._txn.transaction_v2:
                    raise RuntimeError("the broker does not finalize transaction.version 2")
                count, latencies, offset = 0, [], 0
                await asyncio.sleep(max(0.0, stop_at[0] - time.monotonic()))
                while time.monotonic() < stop_at[1]:
                    p.begin_transaction()
                    for i in range(10):
                        await p.send(OUT, VALUE, partition=i % 2)
                    offset += 10
                    await p.send_offsets_to_transaction({TP(SRC, n % 2): offset},
                                                        ConsumerGroupMetadata(f"bench-group-{n}"))
                    await p.flush()
                    t = time.perf_counter()
                    await p.commit_transaction()
                    latencies.append(time.perf_counter() - t)
                    count += 1
                results[n] = (count, latencies)
        except Exception as e:  # noqa: BLE001 - reported by the run
            errors.append(f"producer {n}: {e!r}")
    await asyncio.gather(*(one(n) for n in range(producers)))


def _cpu_seconds(pid):
    """(user, system) CPU seconds of process ``pid`` (Linux /proc), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def run_workload(bs, producers, seconds, broker_pid=None, tv2=False):
    """(transactions/s, p50 ms, p99 ms, broker CPU µs per transaction or None, client CPU µs
    per transaction, the broker's (user, system) µs per transaction or None). ``tv2``: our client's producers (transaction version 2) instead of
    librdkafka's (transaction version 1)."""
    import asyncio

    from confluent_kafka import Consumer, Producer, TopicPartition
    # Before the counted seconds, on both brokers: the transaction and group coordinators exist
    # (kgroup creates __transaction_state and __consumer_offsets on first use).
    warm = Producer({"bootstrap.servers": bs, "transactional.id": "bench-warm"})
    warm.init_transactions(30)
    warm.begin_transaction()
    warm.send_offsets_to_transaction([TopicPartition(SRC, 0, 0)], Consumer(
        {"bootstrap.servers": bs, "group.id": "bench-warm"}).consumer_group_metadata(), 30)
    warm.abort_transaction(30)
    results, errors = {}, []
    start = time.monotonic() + 3.0          # time to initialize every producer, not counted
    stop_at = (start, start + seconds)
    if tv2:
        threads = [threading.Thread(target=lambda: asyncio.run(_tv2_loops(bs, producers, stop_at, results, errors)))]
    else:
        threads = [threading.Thread(target=_producer_loop, args=(bs, n, stop_at, results, errors))
                   for n in range(producers)]
    for t in threads:
        t.start()
    time.sleep(max(0.0, start - time.monotonic()))
    cpu0 = _cpu_seconds(broker_pid) if broker_pid else None
    client0 = time.process_time()
    time.sleep(max(0.0, stop_at[1] - time.monotonic()))
    cpu1 = _cpu_seconds(broker_pid) if broker_pid else None
    client = time.process_time() - client0
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    total = sum(c for c, _ in results.values())
    lat = sorted(x for _, ls in results.values() for x in ls)
    elapsed = seconds       # each producer's last transaction may end a little after: < 1 per producer
    p50 = statistics.median(lat) * 1000
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
    split = None if cpu0 is None or cpu1 is None or not total else \
        ((cpu1[0] - cpu0[0]) / total * 1e6, (cpu1[1] - cpu0[1]) / total * 1e6)
    cpu = None if split is None else split[0] + split[1]
    return total / elapsed, p50, p99, cpu, (client / total * 1e6 if total else None), split


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--producers", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--bootstrap", help="only this (already running) broker, with topics %s and %s" % (OUT, SRC))
    args = ap.parse_args(argv)
    if args.bootstrap:
        print("txn/s %.0f, EndTxn p50 %.2f ms, p99 %.2f ms" % run_workload(args.bootstrap, args.producers, args.seconds)[:3])
        return 0
    rows = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            broker = BrokerProcess(os.path.join(tmp, "data")).start()
            try:
                from confluent_kafka.admin import AdminClient, NewTopic
                a = AdminClient({"bootstrap.servers": broker.bootstrap})
                for f in a.create_topics([NewTopic(OUT, 2, 1), NewTopic(SRC, 2, 1)]).values():
                    f.result(10)
                rows.append(("kgroup TV1 (librdkafka)", *run_workload(broker.bootstrap, args.producers, args.seconds,
                                                             broker.proc.pid)))
                rows.append(("kgroup TV2 (kgroup client)", *run_workload(broker.bootstrap, args.producers,
                                                                         args.seconds, broker.proc.pid, tv2=True)))
            finally:
                broker.stop()
        proc, bs = rdkafka_mock.spawn(topics={OUT: 2, SRC: 2})
        try:
            rows.append(("librdkafka mock (memory)", *run_workload(bs, args.producers, args.seconds, proc.pid)))
        finally:
            proc.kill()
            proc.wait()
    print(f"transactions: {args.producers} producers, 10 records on 2 partitions + send_offsets_to_transaction "
          f"each, {args.seconds:g} s")
    print(f"{'broker':<26}{'txn/s':>10}{'EndTxn p50 ms':>16}{'EndTxn p99 ms':>16}{'broker CPU µs/txn':>20}"
          f"{'(user + system)':>18}{'client CPU µs/txn':>20}")
    for name, tps, p50, p99, cpu, client, split in rows:
        print(f"{name:<26}{tps:>10.0f}{p50:>16.2f}{p99:>16.2f}{'-' if cpu is None else f'{cpu:.0f}':>20}"
              f"{'-' if split is None else f'({split[0]:.0f} + {split[1]:.0f})':>18}"
              f"{'-' if client is None else f'{client:.0f}':>20}")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} (this machine's, at the end of the run)")
    best = {}
    for name, tps, *_ in rows:
        best[name] = max(best.get(name, 0), tps)
    k, m = best.get("kgroup TV1 (librdkafka)", 0), best.get("librdkafka mock (memory)", 0)
    if m:
        print(f"kgroup / mock: {k / m:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
