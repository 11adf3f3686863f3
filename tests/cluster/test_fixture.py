"""The ``kafka_cluster`` pytest fixture (kgroup.testing.pytest_plugin): three brokers and a
ZooKeeper, a broker killed and started again."""
import pytest

pytestmark = pytest.mark.interop


@pytest.mark.kafka_broker_config({"zookeeper.session.timeout.ms": "3000"})
def test_kafka_cluster_fixture(kafka_cluster):
    assert kafka_cluster.live_brokers() == [1, 2, 3]
    assert len(kafka_cluster.bootstrap_servers.split(",")) == 3
    kafka_cluster.create_topic("fixture", partitions=2, replication_factor=3)
    victim = kafka_cluster.leader("fixture", 0)
    kafka_cluster.kill(victim)
    kafka_cluster.wait_for(lambda: kafka_cluster.leader("fixture", 0) not in (None, victim), 15)
    kafka_cluster.start_broker(victim)
    kafka_cluster.wait_for(lambda: kafka_cluster.live_brokers() == [1, 2, 3], 30)
