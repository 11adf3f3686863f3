"""Our ShareConsumer and confluent-kafka 2.16.1's ShareConsumer (librdkafka 2.16) in one share group
on one partition of a kgroup broker: both receive records, every record is accepted exactly once,
and what ours RELEASEs is delivered again (delivery count 2) to one of the two. None of it may skip."""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer, ShareConsumer as ConfluentShareConsumer

from kgroup.client import AcknowledgeType, KafkaShareConsumer
from kgroup.testing.broker import KafkaBroker

pytestmark = pytest.mark.interop

OVERRIDES = {"group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 500}


def test_ours_and_confluents_share_one_partition(tmp_path):
    n = 200
    with KafkaBroker(tmp_path / "data", OVERRIDES) as broker:
        broker.create_topic("t")
        with broker.admin() as admin:
            admin.incremental_alter_configs(32, "mixed", [("share.auto.offset.reset", 0, "earliest")])
        ours = KafkaShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "mixed",
                                   "share.acknowledgement.mode": "explicit", "max.poll.records": 10})
        theirs = ConfluentShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "mixed"})
        ours.subscribe(["t"])
        theirs.subscribe(["t"])
        accepted: dict[str, list] = {"ours": [], "theirs": []}
        released: list[int] = []
        stop = threading.Event()
        errors: list = []
        assigned = threading.Event()

        def run_ours():
            try:
                while not stop.is_set():
                    if ours.assignment():
                        assigned.set()
                    for r in ours.poll(100):
                        if r.offset % 5 == 0 and r.delivery_count == 1:
                            ours.acknowledge(r, AcknowledgeType.RELEASE)
                            released.append(r.offset)
                        else:
                            ours.acknowledge(r, AcknowledgeType.ACCEPT)
                            accepted["ours"].append((r.offset, r.delivery_count))
                        time.sleep(0.002)
            except BaseException as e:  # surfaces in the main thread
                errors.append(e)

        def run_theirs():
            try:
                while not stop.is_set():
                    for m in list(theirs.poll(0.1)):
                        assert m.error() is None, m.error()
                        accepted["theirs"].append((m.offset(), m.delivery_count()))
                        time.sleep(0.002)
            except BaseException as e:
                errors.append(e)
        threads = [threading.Thread(target=run_ours), threading.Thread(target=run_theirs)]
        for t in threads:
            t.start()
        try:
            deadline = time.monotonic() + 20
            while (len(broker.call(_share_members, "mixed")) < 2 or not assigned.is_set()) \
                    and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.5)     # both have had the partition for a few heartbeats and are fetching
            p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
            for i in range(n):
                p.produce("t", value=b"x%d" % i, partition=0)
                if i % 10 == 9:
                    p.flush()
                    time.sleep(0.02)
            p.flush()
            deadline = time.monotonic() + 40
            while sum(map(len, accepted.values())) < n and time.monotonic() < deadline and not errors:
                time.sleep(0.1)
        finally:
            stop.set()
            for t in threads:
                t.join()
            ours.close()
            theirs.close()
        assert not errors, errors
        everything = accepted["ours"] + accepted["theirs"]
        assert sorted(o for o, _ in everything) == list(range(n))          # each accepted once
        assert accepted["ours"] and accepted["theirs"], {k: len(v) for k, v in accepted.items()}
        assert released and {d for o, d in everything if o in released} == {2}
        assert {d for o, d in everything if o not in released} == {1}


def _share_members(broker, group):
    """The member ids of a share group, from its coordinator shard."""
    gc = broker.group_coordinator
    shard = gc.shards.get(gc.shard_for(group))
    g = shard.groups.get(group) if shard is not None else None
    return list(getattr(g, "members", {}) or {})
