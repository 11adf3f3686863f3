"""The seam between the cluster metadata and replication, with two in-process brokers over a real
ZooKeeper: each broker's replica manager gets ``apply_partition_states`` for exactly the
partitions it hosts (topic id, leader, leader epoch, ISR, replicas, partition epoch, as the state
znodes say), ``stop_replicas(delete=True)`` when their topic is deleted, and the cluster wiring's
``alter_isr`` (conditional on the partition epoch and the leader epoch) and ``broker_endpoint``."""
import asyncio
import time

import pytest

from kgroup.cluster.partition_state import PartitionState
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.testing.broker import KafkaBroker
from kgroup.testing.zookeeper import ZooKeeperServer
from tests.harness import RawClient

pytestmark = pytest.mark.interop


class Recorder:
    """Wraps the broker's replica manager and records what the cluster wiring calls."""

    def __init__(self, inner):
        self.inner = inner
        self.applied: list[PartitionState] = []
        self.stopped: list = []

    def apply_partition_states(self, states):
        self.applied.extend(states)
        self.inner.apply_partition_states(states)

    def stop_replicas(self, tps, delete):
        self.stopped.append((sorted(tps), delete))
        self.inner.stop_replicas(tps, delete)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def wait(pred, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("timed out")


@pytest.fixture
def two_brokers(tmp_path):
    with ZooKeeperServer(tmp_path / "zk") as zk:
        brokers = []
        try:
            for n in (1, 2):
                b = KafkaBroker(tmp_path / f"b{n}", {"node.id": n, "zookeeper.connect": zk.connect,
                                                     "zookeeper.session.timeout.ms": 6000})
                brokers.append(b.start())
            for b in brokers:
                b.call(lambda broker: setattr(broker, "replica_manager", Recorder(broker.replica_manager)))
            for b in brokers:       # each has seen the other register
                wait(lambda b=b: b.call(lambda broker: sorted(broker.cluster.cache.brokers)) == [1, 2])
            yield brokers
        finally:
            for b in brokers:
                b.close()


def run(b, coro_fn):
    return asyncio.run_coroutine_threadsafe(coro_fn(b.broker), b._loop).result(20)


def test_partition_states_reach_the_replica_managers(two_brokers):
    b1, b2 = two_brokers
    from confluent_kafka.admin import AdminClient
    a = AdminClient({"bootstrap.servers": b1.bootstrap_servers})
    def create(name, assignment):
        c = RawClient(b1.port)
        try:
            CT = CreateTopicsRequest.CreatableTopic
            A = CT.CreatableReplicaAssignment
            return c.request(CreateTopicsRequest(topics=[CT(name=name, num_partitions=-1, replication_factor=-1, assignments=[
                A(partition_index=p, broker_ids=r) for p, r in enumerate(assignment)], configs=[])],
                timeout_ms=30000, validate_only=False), 7).topics[0]
        finally:
            c.close()
    assert create("uneven", [[1, 2], [2]]).error_code == 39      # INVALID_REPLICA_ASSIGNMENT, as Kafka
    assert create("seam", [[1, 2], [2, 1]]).error_code == 0
    assert create("only2", [[2]]).error_code == 0
    rm1, rm2 = b1.broker.replica_manager, b2.broker.replica_manager
    wait(lambda: {(s.topic, s.partition) for s in rm2.applied} == {("seam", 0), ("seam", 1), ("only2", 0)}
         and {(s.topic, s.partition) for s in rm1.applied} == {("seam", 0), ("seam", 1)})
    topic_id = b1.call(lambda broker: broker.metadata.get("seam").topic_id)
    (s0,) = [s for s in rm1.applied if s.topic == "seam" and s.partition == 0]
    assert s0 == PartitionState("seam", 0, topic_id, 1, 0, (1, 2), (1, 2), 0)
    assert [s for s in rm2.applied if s.topic == "seam" and s.partition == 1] == [
        PartitionState("seam", 1, topic_id, 2, 0, (2, 1), (2, 1), 0)]
    assert b1.call(lambda broker: broker.data_path.logs.get("only2", 0)) is None      # not hosted there
    # broker_endpoint: each broker's address on the inter-broker listener
    assert rm1.broker_endpoint(2) == ("127.0.0.1", b2.port) and rm2.broker_endpoint(1) == ("127.0.0.1", b1.port)
    assert rm1.broker_endpoint(9) is None
    # alter_isr: the leader shrinks the ISR at the current epochs ...
    new_epoch = run(b1, lambda broker: broker.replica_manager.alter_isr("seam", 0, 0, [1], 0))
    assert new_epoch == 1
    wait(lambda: any(s.topic == "seam" and s.partition == 0 and s.isr == (1,) and s.partition_epoch == 1
                     for s in rm2.applied))
    # ... a stale partition epoch or leader epoch is refused, and so is a follower's change
    assert run(b1, lambda broker: broker.replica_manager.alter_isr("seam", 0, 0, [1, 2], 0)) is None
    assert run(b1, lambda broker: broker.replica_manager.alter_isr("seam", 0, 3, [1, 2], 1)) is None
    assert run(b2, lambda broker: broker.replica_manager.alter_isr("seam", 0, 0, [1, 2], 1)) is None
    assert run(b1, lambda broker: broker.replica_manager.alter_isr("seam", 0, 0, [1, 2], 1)) == 2
    # deletion: the replicas stop and their logs go
    a.delete_topics(["seam"], operation_timeout=30)["seam"].result(30)
    wait(lambda: ([("seam", 0), ("seam", 1)], True) in rm2.stopped)
    wait(lambda: ([("seam", 0), ("seam", 1)], True) in rm1.stopped)
    assert b2.call(lambda broker: broker.data_path.logs.get("seam", 1)) is None
