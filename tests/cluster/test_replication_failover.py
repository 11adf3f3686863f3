"""acks=all producers while the partition leader is SIGKILLed, on 3 kgroup brokers over ZooKeeper
with RF 3 and min.insync.replicas=2: every acknowledged record is in the log afterwards, once, in
order; the killed broker comes back as a follower and holds the same bytes."""
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kgroup.testing.cluster import KafkaCluster

pytestmark = pytest.mark.interop


def test_acks_all_through_a_leader_kill(tmp_path):
    with KafkaCluster(3, tmp_path, {"zookeeper.session.timeout.ms": 6000,
                                    "replica.lag.time.max.ms": 5000}) as c:
        a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        a.create_topics([NewTopic("orders", 1, 3, config={"min.insync.replicas": "2"})])["orders"].result(30)
        c.wait_for(lambda: c.leader("orders", 0) is not None, what="a leader")
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 60000})
        acked, errors = [], []

        def report(err, msg):
            if err:
                errors.append(err)
            else:
                acked.append(int(msg.value()))
        stop = threading.Event()

        def produce():
            i = 0
            while not stop.is_set():
                p.produce("orders", value=b"%d" % i, partition=0, on_delivery=report)
                p.poll(0)
                i += 1
                time.sleep(0.002)
        t = threading.Thread(target=produce)
        t.start()
        time.sleep(2)
        victim = c.leader("orders", 0)
        c.kill(victim)
        c.wait_for(lambda: c.leader("orders", 0) not in (None, victim), what="a new leader")
        time.sleep(3)
        stop.set()
        t.join()
        assert p.flush(60) == 0
        assert acked and not errors, errors[:3]
        c.start_broker(victim)
        consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "check",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.assign([TopicPartition("orders", 0, 0)])
        got, deadline = [], time.monotonic() + 60
        while time.monotonic() < deadline and len(got) < len(acked):
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(int(m.value()))
        consumer.close()
        assert sorted(set(acked)) == sorted(acked)                  # idempotent: acknowledged once
        assert got == sorted(got) and len(set(got)) == len(got)     # in order, once
        assert set(acked) <= set(got), sorted(set(acked) - set(got))[:10]
        print(f"acknowledged {len(acked)}, read back {len(got)}")
