"""The group coordinator's broker SIGKILLed under a classic group of librdkafka consumers with
commits: __consumer_offsets is replicated, its partition's new leader loads it, and the group goes
on with no committed offset lost. Both protocols' runs share one cluster, each with its own topic
and group (the killed broker starts again before the next)."""
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kgroup.coordinator import group_partition
from kgroup.testing.cluster import KafkaCluster

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with KafkaCluster(3, tmp_path_factory.mktemp("cluster"), {
            "zookeeper.session.timeout.ms": 6000, "offsets.topic.num.partitions": 3,
            "offsets.topic.replication.factor": 3}) as c:
        yield c


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_survives_its_coordinators_death(cluster, protocol):
    c, topic, group = cluster, f"orders-{protocol}", f"billing-{protocol}"
    for n, b in c.brokers.items():
        if not b.running:
            c.start_broker(n)
    c.wait_until_brokers_see_each_other()
    a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    a.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
    for i in range(300):
        p.produce(topic, value=b"%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    conf = {"bootstrap.servers": c.bootstrap_servers, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf["session.timeout.ms"] = 10000
    consumer = Consumer(conf)
    consumer.subscribe([topic])
    seen = []
    deadline = time.monotonic() + 60
    while len(seen) < 300 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            seen.append(int(m.value()))
    assert len(seen) == 300
    consumer.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in consumer.committed(
        [TopicPartition(topic, q) for q in range(3)], 30)}
    assert committed == {0: 100, 1: 100, 2: 100}
    coordinator = c.leader("__consumer_offsets", group_partition(group, 3))
    c.kill(coordinator)
    for i in range(300, 330):
        p.produce(topic, value=b"%d" % i, partition=i % 3)
    assert p.flush(60) == 0
    deadline = time.monotonic() + 60
    while len(seen) < 330 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and not m.error():
            seen.append(int(m.value()))
    assert sorted(seen) == list(range(330))
    consumer.commit(asynchronous=False)
    consumer.close()
    other = Consumer(conf)
    after = {tp.partition: tp.offset for tp in other.committed(
        [TopicPartition(topic, q) for q in range(3)], 30)}
    other.close()
    assert after == {0: 110, 1: 110, 2: 110}
