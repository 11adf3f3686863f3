"""acks=all producers while the partition leader is SIGKILLed, on 3 kgroup brokers over ZooKeeper
with RF 3 and min.insync.replicas=2: every acknowledged record is in the log afterwards, once, in
order; the killed broker comes back as a follower and holds the same bytes. The tests share one
cluster, each on its own topic (the killed broker starts again before the next)."""
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kgroup.testing.cluster import KafkaCluster

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with KafkaCluster(3, tmp_path_factory.mktemp("cluster"), {"zookeeper.session.timeout.ms": 6000,
                                                              "replica.lag.time.max.ms": 5000}) as c:
        yield c


def new_topic(c, name):
    """Every broker running and seeing the others, then ``name`` with RF 3 and a full ISR."""
    for n, b in c.brokers.items():
        if not b.running:
            c.start_broker(n)
    c.wait_until_brokers_see_each_other()
    a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    a.create_topics([NewTopic(name, 1, 3, config={"min.insync.replicas": "2"})])[name].result(30)
    c.wait_for(lambda: c.leader(name, 0) is not None and len(c.partition_state(name, 0).isr) == 3,
               what="a leader and a full ISR")


def through_a_leader_kill(c, topic, acked, lock, produce_one):
    """Produce (``produce_one(i)``) until records are acknowledged, SIGKILL the leader, go on
    until the new leader has acknowledged more; returns the victim."""
    stop = threading.Event()

    def produce():
        i = 0
        while not stop.is_set():
            produce_one(i)
            i += 1
            time.sleep(0.002)

    def more(n, what):          # conditions, not fixed pauses: the producer is going on
        with lock:
            target = len(acked) + n
        c.wait_for(lambda: len(acked) >= target, 60, what=what)
    t = threading.Thread(target=produce)
    t.start()
    try:
        more(200, "records acknowledged before the kill")
        victim = c.leader(topic, 0)
        c.kill(victim)
        c.wait_for(lambda: c.leader(topic, 0) not in (None, victim), what="a new leader")
        more(200, "records acknowledged by the new leader")
    finally:
        stop.set()
        t.join()
    return victim


def read_back(c, topic, count):
    consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "check",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 60
    while time.monotonic() < deadline and len(got) < count:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got.append(int(m.value()))
    consumer.close()
    return got


def test_acks_all_through_a_leader_kill(cluster):
    c, topic = cluster, "orders-rdkafka"
    new_topic(c, topic)
    p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 60000})
    acked, errors, lock = [], [], threading.Lock()

    def report(err, msg):
        with lock:
            if err:
                errors.append(err)
            else:
                acked.append(int(msg.value()))

    def produce_one(i):
        p.produce(topic, value=b"%d" % i, partition=0, on_delivery=report)
        p.poll(0)
    victim = through_a_leader_kill(c, topic, acked, lock, produce_one)
    assert p.flush(60) == 0
    assert acked and not errors, errors[:3]
    c.start_broker(victim)
    got = read_back(c, topic, len(acked))
    assert sorted(set(acked)) == sorted(acked)                  # idempotent: acknowledged once
    assert got == sorted(got) and len(set(got)) == len(got)     # in order, once
    assert set(acked) <= set(got), sorted(set(acked) - set(got))[:10]
    print(f"acknowledged {len(acked)}, read back {len(got)}")


def test_kafka_python_acks_all_through_a_leader_kill(cluster):
    """kafka-python's idempotent producer (enable_idempotence: its retries after the leader's
    death carry the same producer id and sequence numbers, so the new leader drops a batch it
    already holds) through the same SIGKILL."""
    from kafka import KafkaProducer
    c, topic = cluster, "orders-kafka-python"
    new_topic(c, topic)
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

    def produce_one(i):
        ok, failed = on_ack(i)
        p.send(topic, value=b"%d" % i, partition=0).add_callback(ok).add_errback(failed)
    victim = through_a_leader_kill(c, topic, acked, lock, produce_one)
    p.flush(60)
    p.close(10)
    assert acked and not errors, errors[:3]
    assert len(set(acked)) == len(acked)
    c.start_broker(victim)
    got = read_back(c, topic, len(acked))
    assert got == sorted(got) and len(set(got)) == len(got)     # in order, once
    assert set(acked) <= set(got), sorted(set(acked) - set(got))[:10]
    print(f"acknowledged {len(acked)}, read back {len(got)}")
