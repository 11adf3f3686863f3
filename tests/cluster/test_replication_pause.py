"""A leader SIGSTOPped past its ZooKeeper session while acks=all producers write: the partition
moves, the producers go on, and the old leader, resumed, is fenced, rejoins as a follower and holds
the new leader's bytes."""
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kgroup.testing.cluster import KafkaCluster

pytestmark = pytest.mark.interop


def test_paused_leader_is_fenced_and_rejoins(tmp_path):
    with KafkaCluster(3, tmp_path, {"zookeeper.session.timeout.ms": 6000}) as c:
        a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        a.create_topics([NewTopic("orders", 1, 3, config={"min.insync.replicas": "2"})])["orders"].result(30)
        c.wait_for(lambda: c.leader("orders", 0) is not None, what="a leader")
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                      "message.timeout.ms": 60000})
        acked, stop = [], threading.Event()

        def produce():
            i = 0
            while not stop.is_set():
                p.produce("orders", value=b"%d" % i, partition=0,
                          on_delivery=lambda err, m: acked.append(int(m.value())) if not err else None)
                p.poll(0)
                i += 1
                time.sleep(0.005)
        t = threading.Thread(target=produce)
        t.start()
        try:        # conditions, not fixed pauses: records acknowledged at each step
            c.wait_for(lambda: len(acked) >= 100, 60, what="records acknowledged by the first leader")
            victim = c.leader("orders", 0)
            c.pause(victim)
            c.wait_for(lambda: c.leader("orders", 0) not in (None, victim), timeout=30, what="a new leader")
            n = len(acked)
            # resumed: the idempotent producer's requests in flight to it are answered (it no longer
            # leads), so the producer goes on with the new leader (while it is stopped, they would
            # wait for request.timeout.ms, as with a stopped Kafka broker)
            c.resume(victim)
            c.wait_for(lambda: len(acked) >= n + 100, 60, what="records acknowledged by the new leader")
            c.wait_for(lambda: victim in c.partition_state("orders", 0).isr, 60, what="the old leader back in the ISR")
        finally:
            stop.set()
            t.join()
        assert p.flush(60) == 0
        leader = c.leader("orders", 0)

        def log_bytes(n):
            with open(f"{c.broker(n).data_dir}/orders-0/00000000000000000000.log", "rb") as f:
                return f.read()
        c.wait_for(lambda: log_bytes(victim) == log_bytes(leader), timeout=30, what="the old leader caught up")
        assert len(acked) > 100
