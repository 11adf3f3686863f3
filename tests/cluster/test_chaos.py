"""A Jepsen-style run on 3 kgroup brokers over ZooKeeper: while an idempotent acks=all producer
writes to a topic with RF 3 and min.insync.replicas=2 and two groups of librdkafka consumers (a
classic group and a ``group.protocol=consumer`` group) consume it and commit, a nemesis SIGKILLs a
broker (then starts it again), SIGSTOPs one (for up to twice its ZooKeeper session, then SIGCONT)
or restarts ZooKeeper, at random, one fault at a time. Then tests/cluster/checker.py checks the
histories: every acknowledged record is in its partition once and in order; committed offsets never
go back (as OffsetFetch answered a single poller, in order, and as each consumer's commit callbacks
reported them, each in its own order); no partition has two owners in any DescribeGroups /
ConsumerGroupDescribe answer; each group consumed every acknowledged record.

KGROUP_CHAOS_SECONDS sets how long the nemesis runs (default 180); KGROUP_CHAOS_SEED its seed;
KGROUP_CHAOS_PRODUCER_DEBUG librdkafka's debug contexts for the producer (on stderr)."""
import os
import random
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kgroup.testing.cluster import KafkaCluster
from tests.cluster.checker import (acknowledged_once_in_order, commits_never_go_back, every_group_consumed_everything,
                                  one_owner_per_partition)

TOPIC, PARTITIONS, SESSION_MS = "events", 3, 6000
STALL_REPORT_S = 15
# Availability: one fault at a time, each over within about twice the session timeout (a broker
# paused for up to 2 sessions, or killed and back within 2 sessions; its leaderships move once
# its session expires), so no partition may go this long without an acknowledged write...
MAX_UNAVAILABLE_S = 60
# ...and nearly every record sent is acknowledged (failed deliveries: at most this share)
MAX_FAILED_SHARE = 0.01
GROUPS = {"chaos-classic": "classic", "chaos-consumer": "consumer"}


class History:
    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {p: [] for p in range(PARTITIONS)}
        self.ack_times = {p: [] for p in range(PARTITIONS)}     # monotonic time of each acknowledgement
        self.produce_errors = []
        self.fetched = []            # ("offsetfetch", group, partition, offset), in answer order
        self.callbacks = {}          # consumer name -> [(name, group, partition, offset)]
        self.views = []              # (group, state, {member: partitions})
        self.consumed = 0
        self.seen = {g: set() for g in GROUPS}     # group -> (partition, value) consumed
        self.faults = []
        self.unflushed = None        # records still unacknowledged when the producer gave up flushing


def produce(cluster, h, stop):
    conf = {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 300000}
    if os.environ.get("KGROUP_CHAOS_PRODUCER_DEBUG"):       # librdkafka's debug contexts, e.g. eos,broker
        conf["debug"] = os.environ["KGROUP_CHAOS_PRODUCER_DEBUG"]
    p = Producer(conf)

    def report(err, msg):
        with h.lock:
            if err:
                h.produce_errors.append((time.strftime("%H:%M:%S"), msg.partition(), err.name()))
            else:
                h.acked[msg.partition()].append(msg.value())
                h.ack_times[msg.partition()].append(time.monotonic())
    i = 0
    while not stop.is_set():
        try:
            p.produce(TOPIC, value=b"%d" % i, partition=i % PARTITIONS, on_delivery=report)
            i += 1
        except BufferError:
            pass
        p.poll(0.005)
    h.unflushed = p.flush(300)


def consume(cluster, h, stop, group, protocol, name):
    calls = h.callbacks.setdefault(name, [])

    def on_commit(err, partitions):
        if err is None:
            with h.lock:
                calls.extend((name, group, tp.partition, tp.offset) for tp in partitions if tp.error is None)
    conf = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "on_commit": on_commit, "client.id": name}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": 10000, "partition.assignment.strategy": "cooperative-sticky"})
    c = Consumer(conf)
    c.subscribe([TOPIC])
    n = 0
    while not stop.is_set():
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        n += 1
        with h.lock:
            h.consumed += 1
            h.seen[group].add((m.partition(), m.value()))
        if n % 100 == 0:
            try:
                done = c.commit(asynchronous=False)
            except Exception:       # noqa: BLE001 - a commit refused during a failover is retried later
                continue
            # a synchronous commit answers with the committed offsets instead of calling on_commit
            on_commit(None, done or [])
    c.close()


def observe(cluster, h, stop):
    """One poller (kgroup's own admin client), so its answers are in the coordinators' order:
    OffsetFetch of each group, DescribeGroups of the classic group, ConsumerGroupDescribe of the
    consumer-protocol group (with its group epoch). Not librdkafka's AdminClient: its coordinator
    requests abort the process when the connection drops mid-request (rd_kafka_enq_once_del_source_return
    assertion, confluentinc/librdkafka#4605), which a broker SIGKILL does."""
    from kgroup.client.sync import KafkaAdmin
    from kgroup.client.types import TopicPartition as TP
    admin = KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=5000,
                       default_api_timeout_ms=10000)
    tps = [TP(TOPIC, p) for p in range(PARTITIONS)]
    try:
        while not stop.is_set():
            for group, protocol in GROUPS.items():
                try:
                    got = admin.list_group_offsets(group, tps)
                    with h.lock:
                        h.fetched.extend(("offsetfetch", group, tp[1], om.offset)
                                         for tp, om in got.items() if om is not None)
                except Exception:       # noqa: BLE001 - no answer during a failover
                    pass
                try:
                    if protocol == "classic":
                        d = admin.describe_groups([group])[group]
                        view = f"{d.state}"
                    else:
                        d = admin.describe_consumer_groups([group])[group]
                        view = f"{d.state}, group epoch {d.group_epoch}"
                    if d.error == 0:
                        with h.lock:
                            h.views.append((group, view, {m.member_id: [tp[1] for tp in m.assignment if tp[0] == TOPIC]
                                                          for m in d.members}))
                except Exception:       # noqa: BLE001
                    pass
            time.sleep(0.3)
    finally:
        admin.close()


def nemesis(cluster, h, seconds, rng):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(rng.uniform(2, 6))
        fault = rng.choice(["kill", "pause", "zookeeper"])
        n = rng.choice(sorted(cluster.brokers))
        t0 = time.monotonic()
        if fault == "kill":
            cluster.kill(n)
            time.sleep(rng.uniform(0, 2 * SESSION_MS / 1000))
            cluster.start_broker(n)
        elif fault == "pause":
            held = rng.uniform(0.5, 2 * SESSION_MS / 1000)
            cluster.pause(n)
            time.sleep(held)
            cluster.resume(n)
            n = f"{n} for {held:.1f}s"
        else:
            cluster.restart_zookeeper(rng.uniform(0.2, 3))
            n = ""
        cluster.wait_for(lambda: cluster.live_brokers() == sorted(cluster.brokers) and cluster.controller(),
                         120, what="every broker registered and a controller")
        h.faults.append(f"{fault} {n}".strip() + f" ({time.monotonic() - t0:.1f}s)")
        print(f"{time.strftime('%H:%M:%S')} {h.faults[-1]}", flush=True)


def watch_availability(cluster, h, stop):
    """Print a partition that has had no acknowledgement for STALL_REPORT_S, with its state in
    ZooKeeper, once per stall (where to look when the availability bound fails)."""
    reported = set()
    while not stop.wait(1.0):
        now = time.monotonic()
        for p in range(PARTITIONS):
            with h.lock:
                last = h.ack_times[p][-1] if h.ack_times[p] else None
            if last is None or now - last < STALL_REPORT_S:
                reported.discard(p)
                continue
            if p not in reported:
                reported.add(p)
                try:
                    st, live = cluster.partition_state(TOPIC, p), cluster.live_brokers()
                except Exception as e:      # noqa: BLE001 - ZooKeeper restarting
                    st, live = repr(e), "?"
                print(f"{time.strftime('%H:%M:%S')} partition {p}: no acknowledgement for {now - last:.0f}s; "
                      f"state {st}; live brokers {live}", flush=True)


def longest_stretches(ack_times, start, end):
    """Per partition, the longest time within [start, end] without an acknowledgement."""
    out = {}
    for p, times in ack_times.items():
        points = [start] + [t for t in times if start < t < end] + [end]
        out[p] = max(b - a for a, b in zip(points, points[1:]))
    return out


def summary(errors):
    """Failed deliveries per (partition, error): how many, first and last time."""
    out = {}
    for t, p, name in errors:
        n, first, _ = out.get((p, name), (0, t, t))
        out[(p, name)] = (n + 1, first, t)
    return out


def read_log(cluster):
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "chaos-check",
                  "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    log = {}
    for p in range(PARTITIONS):
        _, high = c.get_watermark_offsets(TopicPartition(TOPIC, p), 30)
        c.assign([TopicPartition(TOPIC, p, 0)])
        got, deadline = [], time.monotonic() + 120
        while len(got) < high and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        log[p] = got
    c.close()
    return log


def run(tmp_path, seconds, seed):
    rng = random.Random(seed)
    h = History()
    with KafkaCluster(3, tmp_path, {"zookeeper.session.timeout.ms": SESSION_MS, "replica.lag.time.max.ms": 5000,
                                    "offsets.topic.num.partitions": 3, "offsets.topic.replication.factor": 3}) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        c.wait_for(lambda: all(c.leader(TOPIC, p) is not None for p in range(PARTITIONS)), what="leaders")
        stop_produce, stop_consume = threading.Event(), threading.Event()
        threads = [threading.Thread(target=produce, args=(c, h, stop_produce), daemon=True)]
        threads += [threading.Thread(target=consume, args=(c, h, stop_consume, g, proto, f"{g}-{i}"), daemon=True)
                    for g, proto in GROUPS.items() for i in range(2)]
        threads.append(threading.Thread(target=observe, args=(c, h, stop_consume), daemon=True))
        threads.append(threading.Thread(target=watch_availability, args=(c, h, stop_produce), daemon=True))
        for t in threads:
            t.start()
        try:
            time.sleep(3)
            faults_from = time.monotonic()
            nemesis(c, h, seconds, rng)
            time.sleep(5)
        finally:
            faults_to = time.monotonic()
            stop_produce.set()
            print(f"{time.strftime('%H:%M:%S')} faults over; flushing the producer", flush=True)
            threads[0].join(300)
            print(f"{time.strftime('%H:%M:%S')} waiting for the groups to consume everything", flush=True)
            c.wait_for(lambda: not every_group_consumed_everything(h.acked, h.seen), 120,
                       what="both groups to consume every acknowledged record")
            stop_consume.set()
            for t in threads[1:]:
                t.join(60)
        print(f"{time.strftime('%H:%M:%S')} reading the log back", flush=True)
        log = read_log(c)
    stretches = longest_stretches(h.ack_times, faults_from, faults_to)
    print(f"seed {seed}, {seconds}s: faults {h.faults}")
    print("longest stretch without an acknowledgement per partition: "
          + ", ".join(f"{p}: {s:.1f}s" for p, s in stretches.items()))
    print(f"acknowledged {sum(map(len, h.acked.values()))}, in the log {sum(map(len, log.values()))}, "
          f"produce errors {len(h.produce_errors)} {summary(h.produce_errors)}, unflushed {h.unflushed}, consumed {h.consumed}, "
          f"OffsetFetch answers {len(h.fetched)}, commit callbacks {sum(map(len, h.callbacks.values()))}, "
          f"group views {len(h.views)}")
    bad = acknowledged_once_in_order(h.acked, log)
    bad += commits_never_go_back(h.fetched)
    for calls in h.callbacks.values():
        bad += commits_never_go_back(calls)
    bad += one_owner_per_partition(h.views)
    bad += every_group_consumed_everything(h.acked, h.seen)
    assert h.unflushed == 0, f"{h.unflushed} records never acknowledged nor failed"
    assert h.faults and all(h.acked.values()) and h.fetched and h.views and all(h.callbacks.values())
    assert bad == [], bad[:20]
    acked = sum(map(len, h.acked.values()))
    assert len(h.produce_errors) <= MAX_FAILED_SHARE * (acked + len(h.produce_errors)), summary(h.produce_errors)
    assert max(stretches.values()) <= MAX_UNAVAILABLE_S, stretches


@pytest.mark.interop
@pytest.mark.long
def test_chaos(tmp_path):
    seed = int(os.environ.get("KGROUP_CHAOS_SEED", random.randrange(1 << 30)))
    print(f"chaos seed {seed} (KGROUP_CHAOS_SEED={seed} runs it again)", flush=True)
    run(tmp_path, float(os.environ.get("KGROUP_CHAOS_SECONDS", "180")), seed)
