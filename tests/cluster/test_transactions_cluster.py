"""Transactions on 3 kgroup brokers over ZooKeeper: a confluent-kafka transactional producer whose
partitions are led by several brokers (its transaction coordinator on one of them) commits and
aborts with its group's offsets; its markers reach every leader (TransactionMarkerChannelManager's
WriteTxnMarkers) and read_committed readers see exactly the committed records; then the
transaction coordinator's broker is SIGKILLed and the next transactions complete on the new one."""
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kgroup.coordinator.partitioner import group_partition
from kgroup.testing.cluster import KafkaCluster
from kgroup.transaction_coordinator.shard import transaction_partition

pytestmark = pytest.mark.interop


def _group_led_elsewhere(c, admin, broker) -> str:
    """A group whose coordinator is not on ``broker``. librdkafka (2.16) waits for ever for a
    group coordinator that died once a Metadata answer has left its broker out: its request to
    the coordinator (rd_kafka_coord_req) has a timeout that nothing checks, and the broker,
    decommissioned, no longer changes state to wake it. Kafka's Metadata leaves a dead broker
    out too, so the group's coordinator is kept off the broker the test kills."""
    admin.describe_consumer_groups(["g"])       # FindCoordinator: __consumer_offsets is created
    c.wait_for(lambda: all(c.leader("__consumer_offsets", p) is not None for p in range(3)),
               what="the offsets topic's leaders")
    return next(g for g in (f"g{i}" for i in range(100))
                if c.leader("__consumer_offsets", group_partition(g, 3)) != broker)


def _read_committed(bootstrap, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition("orders", p, 0) for p in range(partitions)])
    got, idle = [], time.monotonic()
    while time.monotonic() - idle < 5:
        m = c.poll(0.3)
        if m is not None and not m.error():
            got.append(m.value().decode())
            idle = time.monotonic()
    c.close()
    return sorted(got)


def test_transactions_across_the_cluster_and_their_coordinators_death(tmp_path):
    with KafkaCluster(3, tmp_path, {"zookeeper.session.timeout.ms": 6000, "transaction.state.log.num.partitions": 3,
                                    "offsets.topic.num.partitions": 3}) as c:
        a = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        a.create_topics([NewTopic("orders", 3, 3, config={"min.insync.replicas": "2"})])["orders"].result(30)
        c.wait_for(lambda: all(c.leader("orders", p) is not None for p in range(3)), what="leaders")
        assert len({c.leader("orders", p) for p in range(3)}) > 1      # the partitions' leaders differ
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "transactional.id": "tx-cluster",
                      "transaction.timeout.ms": 30000})
        p.init_transactions(30)
        coordinator = c.leader("__transaction_state", transaction_partition("tx-cluster", 3))
        group = _group_led_elsewhere(c, a, coordinator)
        expected = []

        def transaction(n, commit):
            p.begin_transaction()
            values = [f"{n}-{i}" for i in range(6)]
            for i, v in enumerate(values):
                p.produce("orders", value=v.encode(), partition=i % 3)
            meta = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": group}).consumer_group_metadata()
            p.send_offsets_to_transaction([TopicPartition("orders", 0, n + 1)], meta, 30)
            if commit:
                p.commit_transaction(60)
                expected.extend(values)
            else:
                p.abort_transaction(60)

        for n in range(4):
            transaction(n, commit=n != 1)
        assert _read_committed(c.bootstrap_servers, 3) == sorted(expected)

        assert c.leader("__transaction_state", transaction_partition("tx-cluster", 3)) == coordinator
        c.kill(coordinator)
        c.wait_for(lambda: c.leader("__transaction_state", transaction_partition("tx-cluster", 3))
                   not in (None, coordinator), timeout=60, what="a new transaction coordinator")
        c.wait_for(lambda: all(c.leader("orders", q) not in (None, coordinator) for q in range(3)),
                   timeout=60, what="the partitions' new leaders")
        for n in range(4, 6):
            transaction(n, commit=True)
        assert _read_committed(c.bootstrap_servers, 3) == sorted(expected)
        check = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": group})
        [committed] = check.committed([TopicPartition("orders", 0)], 30)
        check.close()
        assert committed.offset == 6
