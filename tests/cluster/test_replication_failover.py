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


def test_kafka_python_acks_all_through_a_leader_kill(tmp_path):
    """kafka-python's idempotent producer (enable_idempotence: its retries after the leader's
    death carry the same producer id and sequence numbers, so the new leader drops a batch it
    already holds) through the same SIGKILL."""
    from kafka import KafkaProducer
    with KafkaCluster(3, tmp_path, {"zookeeper.session.timeout.ms": 6000,
                                    "replica.lag.time.max.ms": 5000}) as c:
        a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        a.create_topics([NewTopic("orders", 1, 3, config={"min.insync.replicas": "2"})])["orders"].result(30)
        c.wait_for(lambda: c.leader("orders", 0) is not None, what="a leader")
        p = KafkaProducer(bootstrap_servers=c.bootstrap_servers, acks="all", enable_idempotence=True,
                          linger_ms=5, delivery_timeout_ms=60000, request_timeout_ms=10000)
        acked, errors, lock = [], [], threading.Lock()

        def on_ack(i):
            def ok(_):
                with lock:
                    acked.append(i)

            def failed(e):
                with lock:
                    errors.append(e)
            return ok, failed
        stop = threading.Event()

        def produce():
            i = 0
            while not stop.is_set():
                ok, failed = on_ack(i)
                p.send("orders", value=b"%d" % i, partition=0).add_callback(ok).add_errback(failed)
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
        p.flush(60)
        p.close(10)
        assert acked and not errors, errors[:3]
        assert len(set(acked)) == len(acked)
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
        assert got == sorted(got) and len(set(got)) == len(got)     # in order, once
        assert set(acked) <= set(got), sorted(set(acked) - set(got))[:10]
        print(f"acknowledged {len(acked)}, read back {len(got)}")
