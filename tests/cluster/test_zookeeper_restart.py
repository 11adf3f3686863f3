"""ZooKeeper stopped and started again (same port, same data directory) under acks=all produce
load on 3 kgroup brokers, RF 3, min.insync.replicas=2: nothing acknowledged is lost, every broker is
registered again, a controller is elected, and produce goes on.

ZooKeeper keeps its sessions in its snapshot and restarts their timers when it loads them, so
brokers that reconnect within their session timeout keep their sessions, registrations and the
controller through a restart however long it was down. The second case makes a session expire
across the restart: the controller's broker is SIGSTOPped before ZooKeeper stops and resumed only
after its session timed out on the restarted server, so it must register again and another broker
be elected controller. The two cases share one cluster (in this order), each on its own topic."""
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kgroup.testing.cluster import KafkaCluster

pytestmark = pytest.mark.interop

SESSION_MS = 6000


def registrations(c):
    """Each registered broker's epoch (its znode's creation zxid)."""
    return {n: c.zk.zk.exists(f"/brokers/ids/{n}").czxid for n in c.live_brokers()}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with KafkaCluster(3, tmp_path_factory.mktemp("cluster"), {"zookeeper.session.timeout.ms": SESSION_MS,
                                                              "replica.lag.time.max.ms": 5000}) as c:
        yield c


@pytest.mark.parametrize("controller_expires", [False, True], ids=["sessions-kept", "controller-expired"])
def test_zookeeper_restart_under_acks_all_load(cluster, controller_expires):
    c, topic = cluster, f"orders-{'controller-expired' if controller_expires else 'sessions-kept'}"
    c.wait_until_brokers_see_each_other()
    a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    a.create_topics([NewTopic(topic, 2, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    c.wait_for(lambda: all(c.leader(topic, q) is not None for q in range(2)), what="leaders")
    before = registrations(c)
    epoch = c.controller_epoch()
    p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 120000})
    acked, errors = {0: [], 1: []}, []

    def report(err, msg):
        if err:
            errors.append(err)
        else:
            acked[msg.partition()].append(int(msg.value()))
    stop = threading.Event()

    def produce():
        i = 0
        while not stop.is_set():
            p.produce(topic, value=b"%d" % i, partition=i % 2, on_delivery=report)
            p.poll(0)
            i += 1
            time.sleep(0.002)
    t = threading.Thread(target=produce)
    t.start()
    try:
        c.wait_for(lambda: sum(map(len, acked.values())) >= 200, 60, what="records acknowledged before the restart")
        paused = c.controller()
        if controller_expires:
            c.pause(paused)
        c.restart_zookeeper(2.0)
        at_restart = sum(map(len, acked.values()))
        if controller_expires:
            c.wait_for(lambda: paused not in c.live_brokers(), 60, what="the paused broker's session to expire")
            c.resume(paused)
        c.wait_for(lambda: c.live_brokers() == [1, 2, 3] and c.controller() is not None, 60,
                   what="every broker registered and a controller")
        after = registrations(c)
        new_epoch = c.controller_epoch()
        c.wait_for(lambda: sum(map(len, acked.values())) > at_restart + 200, 60, what="produce to go on")
    finally:
        stop.set()
        t.join()
    assert p.flush(120) == 0
    assert not errors, errors[:3]
    print(f"{paused=} {controller_expires=}: registrations {before} -> {after}, controller epoch {epoch} -> {new_epoch}, "
          f"acknowledged {sum(map(len, acked.values()))} ({at_restart} before the restart)")
    if controller_expires:
        assert after[paused] > before[paused], (before, after)
        assert new_epoch > epoch and c.controller() != paused
    else:
        assert after == before and new_epoch == epoch
    consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "check",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, q, 0) for q in range(2)])
    got, deadline = {0: [], 1: []}, time.monotonic() + 60
    while time.monotonic() < deadline and sum(map(len, got.values())) < sum(map(len, acked.values())):
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            got[m.partition()].append(int(m.value()))
    consumer.close()
    for q in range(2):
        assert len(set(acked[q])) == len(acked[q])
        assert got[q] == sorted(got[q]) and len(set(got[q])) == len(got[q])     # in order, once
        assert set(acked[q]) <= set(got[q]), sorted(set(acked[q]) - set(got[q]))[:10]
