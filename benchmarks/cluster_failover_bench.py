"""A kgroup cluster over ZooKeeper: a group's coordinator failover, and replication's cost.

Failover (the default mode). Three `kgroup serve` brokers and a ZooKeeper on 127.0.0.1
(kgroup.testing.KafkaCluster), `__consumer_offsets` with 3 partitions at RF 3, a topic of 3
partitions at RF 3. A confluent-kafka producer (acks=all) writes a record every 5 ms round-robin
over the partitions, each carrying the monotonic time of its produce() call; a classic group of 3
confluent-kafka consumers (one thread each) reads the topic and auto-commits every 100 ms. Once
every member has consumed, the broker leading the group's `__consumer_offsets` partition (its
coordinator) is sent SIGKILL (or SIGTERM: a controlled shutdown), at time 0. Measured from that
signal:
  - first record: the first record consumed whose produce() call came after the signal, on any
    partition;
  - every partition: the latest, over the 3 partitions, of the first such record consumed on
    each (the partitions the dead broker led need their new leader too);
  - first commit: the first offset commit answered without error after the old coordinator's
    process has exited (so by the new coordinator, which has loaded the group);
  - exited: when the signalled broker's process was seen gone (SIGTERM: after its controlled
    shutdown);
  - acked, every partition: the same for the producer's delivery reports (where the time goes:
    producing or consuming);
  - group back = max(every partition, first commit): the group consumes everything and commits.
On the first session timeout's cluster the signals come in the order --signals gives (default
SIGTERM, SIGKILL, SIGTERM): a SIGTERM before any SIGKILL is on a fresh cluster, one after it on a
cluster whose SIGKILLed broker was restarted (its leaderships stay with the others until the
preferred-leader check), reported as "SIGTERM after a SIGKILL", side by side.
Goals: after SIGKILL, group back <= 2 x zookeeper.session.timeout.ms + 2 s; after SIGTERM <= 2 s.
Kafka (ZooKeeper mode) cannot react to a SIGKILLed broker before ZooKeeper expires its session,
so its figure for the same scenario is bounded below by the session timeout; its controlled
shutdown moves leadership before the broker goes, with no session wait. Kafka's own broker is not
run here (no JVM broker in the set-up): its column is that bound. The killed broker is restarted
between rounds; the next round waits until every ISR is full again, then librdkafka's
reconnect.backoff.max.ms (10 s), so that the clients' backoff from the restart is not measured,
and until the producer's backlog is drained (under 20 records unacknowledged; at most 30 s, the
backlog at the signal is printed with each round).

Replication (--mode replication). On one fresh 3-broker cluster, in the same run: a confluent-kafka
producer sends --records records of --size bytes to a 1-partition topic at RF 1 with acks=all, at
RF 3 with acks=all, and at RF 3 with acks=1 (for reference), alternating --repeat times; MB/s and
records/s from the first produce() to the last delivery report, the brokers' CPU seconds (user +
system of the three processes) over it, and RF 3's ratio to RF 1.

Usage: .venv/bin/python benchmarks/cluster_failover_bench.py [--rounds 3] [--session-timeouts 6000,18000]
       .venv/bin/python benchmarks/cluster_failover_bench.py --mode replication [--records 50000] [--size 1024]
"""
from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from kgroup.coordinator import group_partition  # noqa: E402
from kgroup.testing.cluster import KafkaCluster  # noqa: E402

TOPIC, GROUP, PARTITIONS = "bench", "bench-group", 3
STAMP = struct.Struct(">d")
RECONNECT_BACKOFF_MAX_S = 10.0


class Workload:
    """The producer and the group's three consumers, each on its own thread, recording what
    the failover measures relative to ``mark()``."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.t0: float | None = None
        self.exited: float | None = None
        self.first_record: dict[int, float] = {}
        self.first_ack: dict[int, float] = {}
        self.first_commit: float | None = None
        self.consumed = [0, 0, 0]
        self.backlog = 0       # the producer's records not yet acknowledged
        self.errors: list[str] = []
        self.threads = [threading.Thread(target=self._produce, daemon=True)]
        self.threads += [threading.Thread(target=self._consume, args=(i,), daemon=True) for i in range(3)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def mark(self) -> float:
        with self.lock:
            self.first_record, self.first_ack, self.first_commit, self.exited = {}, {}, None, None
            self.t0 = time.monotonic()
            return self.t0

    def mark_exited(self) -> float:
        with self.lock:
            self.exited = time.monotonic()
            return self.exited - self.t0

    def _produce(self) -> None:
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 1})
        n = 0
        while not self.stop.is_set():
            p.produce(TOPIC, value=STAMP.pack(time.monotonic()) + b"x" * 92, partition=n % PARTITIONS,
                      on_delivery=self._on_delivery)
            n += 1
            p.poll(0.005)
            self.backlog = len(p)
        p.flush(10)

    def _on_delivery(self, err, m) -> None:
        now = time.monotonic()
        if err is None:
            with self.lock:
                if (self.t0 is not None and m.partition() not in self.first_ack
                        and STAMP.unpack_from(m.value())[0] > self.t0):
                    self.first_ack[m.partition()] = now - self.t0

    def _on_commit(self, err, partitions) -> None:
        now = time.monotonic()
        if err is None and any(tp.error is None for tp in partitions):
            with self.lock:
                if self.exited is not None and now > self.exited and self.first_commit is None:
                    self.first_commit = now - self.t0

    def _consume(self, i: int) -> None:
        from confluent_kafka import Consumer
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP, "auto.offset.reset": "latest",
                      "enable.auto.commit": True, "auto.commit.interval.ms": 100, "on_commit": self._on_commit,
                      "client.id": f"bench-consumer-{i}"})
        c.subscribe([TOPIC])
        while not self.stop.is_set():
            m = c.poll(0.05)
            if m is None:
                continue
            if m.error():
                continue
            now = time.monotonic()
            self.consumed[i] += 1
            produced_at = STAMP.unpack_from(m.value())[0]
            with self.lock:
                if self.t0 is not None and produced_at > self.t0 and m.partition() not in self.first_record:
                    self.first_record[m.partition()] = now - self.t0
        c.close()

    def result(self) -> dict | None:
        with self.lock:
            if len(self.first_record) < PARTITIONS or self.first_commit is None:
                return None
            every = max(self.first_record.values())
            return {"first record": min(self.first_record.values()), "every partition": every,
                    "acked, every partition": max(self.first_ack.values(), default=float("nan")),
                    "first commit": self.first_commit, "group back": max(every, self.first_commit)}


def full_isrs(cluster: KafkaCluster) -> bool:
    running = {n for n, b in cluster.brokers.items() if b.running}
    for topic, count in ((TOPIC, PARTITIONS), ("__consumer_offsets", 3)):
        for p in range(count):
            st = cluster.partition_state(topic, p)
            if st is None or st.leader < 0 or set(st.isr) != running:
                return False
    return True


def failover_rounds(session_ms: int, rounds: int, signals: list[str], keep: str | None) -> dict[str, list[dict]]:
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="kgroup-failover-bench-", dir=keep) as work, \
            KafkaCluster(3, work, {"zookeeper.session.timeout.ms": session_ms, "offsets.topic.num.partitions": 3,
                                   "offsets.topic.replication.factor": 3}) as cluster:
        cluster.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        w = Workload(cluster.bootstrap_servers)
        w.start()
        try:
            cluster.wait_for(lambda: all(w.consumed), 60, what="every member consuming")
            cluster.wait_for(lambda: full_isrs(cluster), 60, what="full ISRs")
            killed = False
            for sig in signals:
                # a SIGTERM on a cluster where a broker was SIGKILLed (and restarted) before is
                # reported apart from one on a fresh cluster
                label = "SIGTERM after a SIGKILL" if sig == "SIGTERM" and killed else sig
                killed = killed or sig == "SIGKILL"
                runs = results.setdefault(label, [])
                for r in range(rounds):
                    coordinator = cluster.leader("__consumer_offsets", group_partition(GROUP, 3))
                    was_controller = cluster.controller() == coordinator
                    # the producer's backlog from the previous round drained: a record produced
                    # after the signal waits for the failover, not behind older records
                    # (given 30 s: one that does not drain is reported with the round)
                    drain_until = time.monotonic() + 30
                    while w.backlog >= 20 and time.monotonic() < drain_until:
                        time.sleep(0.1)
                    backlog = w.backlog
                    w.mark()
                    (cluster.kill if sig == "SIGKILL" else cluster.stop)(coordinator)
                    exited = w.mark_exited()
                    cluster.wait_for(lambda: w.result() is not None, 4 * session_ms / 1000 + 60,
                                     what="the group consuming and committing again")
                    res = {**w.result(), "broker": coordinator, "controller": was_controller,
                           "exited": exited, "backlog": backlog}
                    runs.append(res)
                    print(f"  session {session_ms} ms, {label} round {r + 1}: broker {coordinator}"
                          f"{' (the controller)' if was_controller else ''}: "
                          + ", ".join(f"{k} {v:.2f} s" for k, v in res.items()
                                      if k not in ("broker", "controller", "backlog"))
                          + f"; producer backlog at the signal {backlog} records", flush=True)
                    cluster.start_broker(coordinator)
                    cluster.wait_for(lambda: full_isrs(cluster), 120, what="full ISRs again")
                    # librdkafka backs off reconnecting to a broker it failed to reach, up to
                    # reconnect.backoff.max.ms (10 s): the next round starts once that has passed,
                    # so it measures the failover and not the previous round's restart
                    time.sleep(RECONNECT_BACKOFF_MAX_S)
                    before = list(w.consumed)
                    cluster.wait_for(lambda before=before: all(a > b for a, b in zip(w.consumed, before)), 60,
                                     what="every member consuming again")
        finally:
            w.close()
    return results


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def failover(args) -> None:
    print(f"failover: 3 brokers + ZooKeeper on 127.0.0.1, a classic group of 3 confluent-kafka "
          f"{__import__('confluent_kafka').__version__} consumers, {args.rounds} rounds; load: "
          f"{os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}", flush=True)
    rows = []
    for i, session_ms in enumerate(args.session_timeouts):
        signals = [s for s in args.signals if s == "SIGKILL" or i == 0]
        got = failover_rounds(session_ms, args.rounds, signals, args.keep)
        for sig, runs in got.items():
            rows.append((session_ms, sig, runs))
    print()
    print(f"{'signal':24} {'zk session':>10}  {'kgroup: group back (median, range)':38} {'goal':>9}  "
          f"{'met':4} Kafka (same scenario)")
    for session_ms, sig, runs in rows:
        back = [r["group back"] for r in runs]
        goal = 2 * session_ms / 1000 + 2 if sig == "SIGKILL" else 2.0
        kafka = (f">= {session_ms / 1000:.0f} s (session expiry)" if sig == "SIGKILL"
                 else "no session wait (controlled shutdown)")
        print(f"{sig:24} {session_ms:>7} ms  {summary(back):38} {'<= %.0f s' % goal:>9}  "
              f"{'yes' if statistics.median(back) <= goal else 'NO':4} {kafka}")
        for k in ("first record", "every partition", "acked, every partition", "first commit", "exited"):
            print(f"{'':24} {'':>10}    {k}: {summary([r[k] for r in runs])}")
        print(f"{'':24} {'':>10}    producer backlog at the signal: {[r['backlog'] for r in runs]} records")
    print(f"load: {' '.join('%.2f' % x for x in os.getloadavg())}")


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def replication(args) -> None:
    from confluent_kafka import Producer
    print(f"replication: 3 brokers + ZooKeeper on 127.0.0.1, {args.records} records of {args.size} bytes, "
          f"1 partition, confluent-kafka producer (linger.ms 5); load: "
          f"{' '.join('%.2f' % x for x in os.getloadavg())}", flush=True)
    cases = [("RF 1, acks=all", 1, "all"), ("RF 3, acks=all", 3, "all"), ("RF 3, acks=1", 3, "1")]
    value = b"v" * args.size
    got: dict[str, list[tuple[float, float]]] = {c[0]: [] for c in cases}
    with tempfile.TemporaryDirectory(prefix="kgroup-replication-bench-") as work, \
            KafkaCluster(3, work, {"offsets.topic.replication.factor": 3}) as cluster:
        pids = [b.proc.pid for b in cluster.brokers.values()]
        for rep in range(args.repeat):
            for name, rf, acks in cases:
                topic = f"repl-rf{rf}-acks{acks}-{rep}"
                cluster.create_topic(topic, partitions=1, replication_factor=rf)
                if rf == 3:
                    cluster.wait_for(lambda t=topic: len(cluster.partition_state(t, 0).isr) == 3, 60)
                p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": acks, "linger.ms": 5,
                              "queue.buffering.max.messages": 1000000, "queue.buffering.max.kbytes": 1048576})
                failed: list = []

                def on_delivery(err, _msg, failed=failed):
                    if err is not None:
                        failed.append(err)
                p.produce(topic, value=b"warm-up")
                p.flush(30)
                cpu0 = sum(_cpu_seconds(pid) for pid in pids)
                t0 = time.perf_counter()
                for _ in range(args.records):
                    while True:
                        try:
                            p.produce(topic, value=value, on_delivery=on_delivery)
                            break
                        except BufferError:
                            p.poll(0.01)
                assert p.flush(120) == 0 and not failed, failed[:3]
                elapsed = time.perf_counter() - t0
                cpu = sum(_cpu_seconds(pid) for pid in pids) - cpu0
                got[name].append((elapsed, cpu))
                del p
                print(f"  {name}: {args.records / elapsed:,.0f} records/s, "
                      f"{args.records * args.size / elapsed / 1e6:.1f} MB/s, brokers' CPU {cpu:.2f} s", flush=True)
    print()
    base = statistics.median(e for e, _ in got["RF 1, acks=all"])
    print(f"{'case':16} {'records/s':>10} {'MB/s':>7} {'vs RF 1':>8} {'brokers CPU s':>14}")
    for name, _, _ in cases:
        e = statistics.median(x for x, _ in got[name])
        cpu = statistics.median(c for _, c in got[name])
        print(f"{name:16} {args.records / e:>10,.0f} {args.records * args.size / e / 1e6:>7.1f} "
              f"{base / e:>7.2f}x {cpu:>14.2f}")
    print(f"load: {' '.join('%.2f' % x for x in os.getloadavg())}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["failover", "replication", "both"], default="both")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--session-timeouts", default="6000,18000",
                    type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--signals", default="SIGTERM,SIGKILL,SIGTERM", type=lambda s: s.split(","),
                    help="in this order on the first session timeout's cluster (a SIGTERM before any SIGKILL "
                         "is on a fresh cluster, one after it is reported as 'SIGTERM after a SIGKILL')")
    ap.add_argument("--keep", help="a directory for the clusters' data and logs (removed at the end)")
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    if args.mode in ("replication", "both"):
        replication(args)
    if args.mode in ("failover", "both"):
        failover(args)


if __name__ == "__main__":
    main()
