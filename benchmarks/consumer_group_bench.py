#!/usr/bin/env python3
"""The consumer group protocol (KIP-848) next to the classic one, in one run, on one broker.

Figures:

- rebalance latency with real librdkafka consumers (confluent-kafka 2.16.1): 10 members share a
  topic of 900 partitions (Kafka's published KIP-848 scenario); an 11th member subscribes. Measured
  from its ``subscribe()`` until every partition is owned by exactly one member again (from the
  assign/revoke callbacks) and the new member has received a record from every partition it got.
  ``group.protocol=consumer`` vs ``classic`` (librdkafka's default eager ``range,roundrobin``).
  Both sides heartbeat every 250 ms (``--heartbeat-ms``: the broker's documented
  group.consumer.heartbeat.interval.ms, with group.consumer.min.heartbeat.interval.ms to allow it,
  and the classic clients' heartbeat.interval.ms), since under either protocol a member learns of
  a rebalance only from its next heartbeat. Goal: consumer protocol <= 1 s.

  Where a consumer-protocol rebalance's time goes (librdkafka debug logs of the new member,
  11th member joining 10 on 900 partitions): the owners learn of the revocation at their next
  heartbeat (up to one interval), revoke in their callback and confirm at once (librdkafka
  expedites that heartbeat); the new member receives the released partitions at its own next
  heartbeat, one interval after it joined (a second interval when an owner's confirmation comes
  just after it); then librdkafka fetches committed offsets (one round trip), starts its offset
  resets about 100 ms later, and sends one ListOffsets per partition. The broker's share is small:
  the join heartbeat (new target for 900 partitions, written and fsynced) takes ~40 ms, the others
  under 3 ms. One client-side race adds up to fetch.wait.max.ms (500 ms): when librdkafka's second
  Fetch goes out with only the first few partitions (all read already) before the other
  partitions' offsets are reset, that Fetch waits the full long poll before the others join it (a
  Kafka broker parks it the same way). So the latency is about two heartbeat intervals plus
  ~150 ms, sometimes plus that race: with a 500 ms interval 0.63-0.78 s typically and 1.1-1.2 s in
  the tail, with 250 ms 0.37-0.45 s and 0.9-1.0 s with the race. So the consumers here set
  ``fetch.wait.max.ms`` to 100 ms (``--fetch-wait-ms``; a documented client config, Java's
  fetch.max.wait.ms), as a user who wants newly assigned partitions consumed at once would; both
  protocols get the same. The time until every partition is owned again is printed too.
- heartbeats/s with 50 connections, each one member of its own group, pipelined (``--window`` in
  flight per connection): ConsumerGroupHeartbeat v1 (a steady member: its epoch, nothing else)
  next to the classic Heartbeat v4, alternating rounds; plus the broker's CPU time per heartbeat.

Usage (from the repo root; about a minute)::

    python benchmarks/consumer_group_bench.py [--members 10] [--partitions 900] [--rounds 3]
        [--duration 2] [--connections 50] [--window 32] [--heartbeat-ms 250] [--json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
sys.path.insert(0, os.path.join(_ROOT, "benchmarks"))

from coordinator_bench import Broker, Conn, pipeline, progress, single_member_group  # noqa: E402

from kgroup.protocol.api import encode_request  # noqa: E402
from kgroup.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest  # noqa: E402
from kgroup.protocol.messages.create_topics import CreateTopicsRequest  # noqa: E402
from kgroup.protocol.messages.heartbeat import HeartbeatRequest  # noqa: E402

HB_INTERVAL_MS = 250
FETCH_WAIT_MS = 100


# -- rebalance latency with librdkafka ------------------------------------------------------------

class Member(threading.Thread):
    def __init__(self, bootstrap, group, topic, protocol):
        super().__init__(daemon=True)
        from confluent_kafka import Consumer
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "group.protocol": protocol, "fetch.wait.max.ms": FETCH_WAIT_MS}
        if protocol == "classic":
            conf.update({"heartbeat.interval.ms": HB_INTERVAL_MS, "session.timeout.ms": 10000})
        self.consumer = Consumer(conf)
        self.topic = topic
        self.owned: set = set()
        self.got: set = set()
        self.lock = threading.Lock()
        self.stop_flag = False
        self.subscribed_at = None

    def _assign(self, c, ps):
        with self.lock:
            self.owned |= {p.partition for p in ps}

    def _revoke(self, c, ps):
        with self.lock:
            self.owned -= {p.partition for p in ps}

    def run(self):
        self.subscribed_at = time.perf_counter()
        self.consumer.subscribe([self.topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)
        while not self.stop_flag:
            m = self.consumer.poll(0.05)
            if m is not None and not m.error():
                with self.lock:
                    self.got.add(m.partition())
        self.consumer.close()

    def snapshot(self):
        with self.lock:
            return set(self.owned), set(self.got)


def settled(members, n_partitions) -> bool:
    owned = [m.snapshot()[0] for m in members]
    total = sum(len(o) for o in owned)
    return total == n_partitions and len(set().union(*owned)) == n_partitions and all(owned)


def rebalance_latency(bootstrap, protocol, n_members, n_partitions, topic, run) -> tuple[float, float]:
    """(seconds until every partition is owned by exactly one member again, seconds until the new
    member also has a record from each of its partitions), both from its ``subscribe()``."""
    group = f"rb-{protocol}-{run}"
    members = [Member(bootstrap, group, topic, protocol) for _ in range(n_members)]
    try:
        for m in members:
            m.start()
        deadline = time.monotonic() + 120
        while not settled(members, n_partitions):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{protocol}: {n_members} members did not settle")
            time.sleep(0.05)
        time.sleep(1.0)                 # steady
        new = Member(bootstrap, group, topic, protocol)
        members.append(new)
        new.start()
        deadline = time.monotonic() + 120
        owned_at = None
        while True:
            now = time.perf_counter()
            if settled(members, n_partitions):
                owned, got = new.snapshot()
                if owned and owned_at is None:
                    owned_at = now
                if owned and owned <= got:
                    return owned_at - new.subscribed_at, now - new.subscribed_at
            if time.monotonic() > deadline:
                raise RuntimeError(f"{protocol}: the new member did not settle")
            time.sleep(0.005)
    finally:
        for m in members:
            m.stop_flag = True
        for m in members:
            m.join(30)


def produce_one_per_partition(bootstrap, topic, n_partitions):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part in range(n_partitions):
        p.produce(topic, b"x", partition=part)
    p.flush(30)


# -- heartbeat throughput ---------------------------------------------------------------------------

async def heartbeat_rounds(port, pid, n_conns, window, duration, rounds) -> dict:
    conns = [await Conn.open(port) for _ in range(n_conns)]
    CT = CreateTopicsRequest.CreatableTopic
    await conns[0].request(CreateTopicsRequest(topics=[CT(name="hb-topic", num_partitions=n_conns,
                                                          replication_factor=1)]), 5)
    classic = await asyncio.gather(*[single_member_group(c, f"hb-{i}") for i, c in enumerate(conns)])
    classic_frames = {c: b"".join(encode_request(HeartbeatRequest(group_id=f"hb-{i}", generation_id=gen,
                                                                  member_id=mid), 4, 1, "bench"))
                      for i, (c, (mid, gen)) in enumerate(zip(conns, classic))}
    cconns = [await Conn.open(port) for _ in range(n_conns)]
    cg_frames = {}
    R = ConsumerGroupHeartbeatRequest
    for i, c in enumerate(cconns):
        join = await c.request(R(group_id=f"cg-{i}", member_id=f"member-{i}", member_epoch=0,
                                 rebalance_timeout_ms=60000, subscribed_topic_names=["hb-topic"], topic_partitions=[]),
                               1)
        assert join.error_code == 0, join
        owned = [R.TopicPartitions(topic_id=t.topic_id, partitions=t.partitions)
                 for t in join.assignment.topic_partitions]
        ack = await c.request(R(group_id=f"cg-{i}", member_id=f"member-{i}", member_epoch=join.member_epoch,
                                topic_partitions=owned), 1)
        assert ack.error_code == 0, ack
        cg_frames[c] = b"".join(encode_request(R(group_id=f"cg-{i}", member_id=f"member-{i}",
                                                 member_epoch=ack.member_epoch), 1, 1, "bench"))

    def classic_ok(frame):
        return frame[9:11] == b"\x00\x00"

    def cg_ok(frame):       # header v1 (4 + 1 tag byte), throttle (4), then the error code
        return frame[9:11] == b"\x00\x00"

    out = {"classic": [], "consumer": [], "classic_cpu_us": [], "consumer_cpu_us": []}
    for r in range(rounds):
        out["classic"].append(await pipeline(conns, lambda c, n: classic_frames[c] * n, window, duration,
                                             classic_ok, pid=pid, cpu=out["classic_cpu_us"]))
        out["consumer"].append(await pipeline(cconns, lambda c, n: cg_frames[c] * n, window, duration, cg_ok,
                                              pid=pid, cpu=out["consumer_cpu_us"]))
        progress(f"round {r + 1}: Heartbeat {out['classic'][-1]:,.0f}/s, "
                 f"ConsumerGroupHeartbeat {out['consumer'][-1]:,.0f}/s")
    for c in conns + cconns:
        c.transport.close()
    return out


def main(argv=None) -> int:
    global HB_INTERVAL_MS, FETCH_WAIT_MS        # read by Member
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=900)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=2.0)
    ap.add_argument("--connections", type=int, default=50)
    ap.add_argument("--window", type=int, default=32)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--heartbeat-ms", type=int, default=HB_INTERVAL_MS,
                    help="heartbeat interval of both protocols (the broker's for consumer, the clients' for classic)")
    ap.add_argument("--fetch-wait-ms", type=int, default=FETCH_WAIT_MS,
                    help="the consumers' fetch.wait.max.ms (librdkafka's default: 500)")
    args = ap.parse_args(argv)
    HB_INTERVAL_MS, FETCH_WAIT_MS = args.heartbeat_ms, args.fetch_wait_ms

    broker = Broker(overrides=[f"group.consumer.min.heartbeat.interval.ms={HB_INTERVAL_MS}",
                     f"group.consumer.heartbeat.interval.ms={HB_INTERVAL_MS}"])
    out = {}
    try:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic("rb", args.partitions, 1)]).values():
            f.result(60)
        produce_one_per_partition(broker.bootstrap, "rb", args.partitions)
        lat = {"consumer": [], "classic": []}
        owned = {"consumer": [], "classic": []}
        for r in range(args.rounds):
            for protocol in ("consumer", "classic"):
                o, c = rebalance_latency(broker.bootstrap, protocol, args.members, args.partitions, "rb", r)
                owned[protocol].append(o)
                lat[protocol].append(c)
            progress(f"round {r + 1}: rebalance consumer {lat['consumer'][-1]:.3f} s, "
                     f"classic {lat['classic'][-1]:.3f} s")
        out["rebalance_s"] = lat
        out["owned_s"] = owned
        out["heartbeats_per_s"] = asyncio.run(heartbeat_rounds(broker.port, broker.proc.pid, args.connections, args.window,
                                                               args.duration, args.rounds))
    finally:
        broker.stop()

    if args.json:
        print(json.dumps(out, indent=1))
    lat, hb = out["rebalance_s"], out["heartbeats_per_s"]
    med = lambda xs: sorted(xs)[len(xs) // 2]     # noqa: E731
    print(f"rebalance, {args.members} librdkafka members on {args.partitions} partitions, one joins "
          f"(median of {args.rounds}; heartbeats every {HB_INTERVAL_MS} ms, "
          f"fetch.wait.max.ms {FETCH_WAIT_MS}):")
    print(f"  group.protocol=consumer  {med(lat['consumer']):6.3f} s   (all: "
          f"{', '.join(f'{x:.3f}' for x in lat['consumer'])})   goal <= 1 s: "
          f"{'met' if med(lat['consumer']) <= 1.0 else 'NOT met'}")
    print(f"  group.protocol=classic   {med(lat['classic']):6.3f} s   (all: "
          f"{', '.join(f'{x:.3f}' for x in lat['classic'])})")
    own = out["owned_s"]
    print(f"  of which until every partition is owned again: consumer {med(own['consumer']):.3f} s, "
          f"classic {med(own['classic']):.3f} s")
    print(f"heartbeats/s, {args.connections} connections, window {args.window} (best of {args.rounds}):")
    print(f"  ConsumerGroupHeartbeat v1  {max(hb['consumer']):10,.0f}/s   broker CPU "
          f"{min(hb['consumer_cpu_us']):5.1f} us/heartbeat")
    print(f"  Heartbeat v4 (classic)     {max(hb['classic']):10,.0f}/s   broker CPU "
          f"{min(hb['classic_cpu_us']):5.1f} us/heartbeat")
    return 0


if __name__ == "__main__":
    sys.exit(main())
