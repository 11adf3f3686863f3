"""A share group of confluent-kafka 2.16.1 ShareConsumers on a 3-broker cluster, RF 3 everywhere:
the broker leading the share-partition's ``__share_group_state`` partition (its share coordinator),
or the broker leading the data partition (where the share-partition lives), is SIGKILLed.
Consumption continues on the new leaders; nothing acknowledged before the kill is delivered again;
what was acquired and not acknowledged comes back with its delivery count incremented.

The share-partition's leader reads and writes its state through the share coordinator of the
state partition's leader, over the network when that is another broker (share_persister.py)."""
import time

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from kgroup.cluster import zk_data as zd
from kgroup.protocol.messages.find_coordinator import FindCoordinatorRequest
from kgroup.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kgroup.protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from kgroup.protocol.messages.share_fetch import ShareFetchRequest
from kgroup.share_coordinator.shard import share_state_partition
from kgroup.testing.cluster import KafkaCluster
from tests.harness import RawClient

pytestmark = pytest.mark.interop
STATE_PARTITIONS = 3


def poll_until(c, want, timeout, on_message=None):
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(got) < want:
        for m in list(c.poll(0.5)):
            assert m.error() is None, m.error()
            got.append((m.offset(), m.delivery_count()))
            if on_message is not None:
                on_message(m)
    return got


def find_share_coordinator(cluster, key):
    """FindCoordinator v6, key type 2 (share), retried while the state topic is being created."""
    deadline = time.monotonic() + 30
    while True:
        raw = RawClient(cluster.broker(1).port)
        try:
            resp = raw.request(FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 6)
        finally:
            raw.close()
        co = resp.coordinators[0]
        if co.error_code == 0:
            assert co.key == key and co.port == cluster.broker(co.node_id).port
            return co.node_id
        assert co.error_code == 15 and time.monotonic() < deadline, co     # COORDINATOR_NOT_AVAILABLE
        time.sleep(0.2)


def not_leader_answers(cluster, n, group, topic_id):
    """ShareFetch and ShareAcknowledge of work-0 at broker ``n`` (not its leader): both answer
    NOT_LEADER_OR_FOLLOWER with the leader (KIP-951's CurrentLeader and NodeEndpoints)."""
    F, A = ShareFetchRequest, ShareAcknowledgeRequest
    raw = RawClient(cluster.broker(n).port)
    try:
        fetch = raw.request(F(group_id=group, member_id="m-wire", share_session_epoch=0, max_wait_ms=0, min_bytes=1,
                              max_records=10, batch_size=10, topics=[F.FetchTopic(topic_id=topic_id, partitions=[
                                  F.FetchTopic.FetchPartition(partition_index=0, acknowledgement_batches=[])])],
                              forgotten_topics_data=[]), 1)
        ack = raw.request(A(group_id=group, member_id="m-wire", share_session_epoch=1, topics=[
            A.AcknowledgeTopic(topic_id=topic_id, partitions=[A.AcknowledgeTopic.AcknowledgePartition(
                partition_index=0, acknowledgement_batches=[A.AcknowledgeTopic.AcknowledgePartition.AcknowledgementBatch(
                    first_offset=0, last_offset=0, acknowledge_types=[1])])])]), 1)
        raw.request(F(group_id=group, member_id="m-wire", share_session_epoch=-1, max_wait_ms=0, min_bytes=1,
                      max_records=10, batch_size=10, topics=[], forgotten_topics_data=[]), 1)
    finally:
        raw.close()
    leaders = set()
    for resp in (fetch, ack):
        assert resp.error_code == 0
        (pd,), = [t.partitions for t in resp.responses]
        assert pd.error_code == 6, pd       # NOT_LEADER_OR_FOLLOWER
        (ep,) = resp.node_endpoints
        assert ep.node_id == pd.current_leader.leader_id
        leaders.add((ep.node_id, ep.port))
    (got,) = leaders
    return got


def set_group_configs(cluster, group, configs):
    """Through every broker: each answers once the configs are in ZooKeeper and installed on itself,
    so all three have them when this returns (the share-partition's leader reads
    share.auto.offset.reset), without waiting for the others' change notifications."""
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    for n in cluster.brokers:
        raw = RawClient(cluster.broker(n).port)
        try:
            resp = raw.request(IncrementalAlterConfigsRequest(validate_only=False, resources=[R(
                resource_type=32, resource_name=group, configs=[R.AlterableConfig(name=k, config_operation=0, value=v)
                                                                 for k, v in configs.items()])]), 1)
        finally:
            raw.close()
        assert [r.error_code for r in resp.responses] == [0]


@pytest.mark.parametrize("victim", ["state", "data"])
def test_share_group_survives_a_leaders_death(tmp_path, victim):
    with KafkaCluster(3, tmp_path, {
            "zookeeper.session.timeout.ms": 6000, "offsets.topic.num.partitions": 3,
            "share.coordinator.state.topic.num.partitions": STATE_PARTITIONS,
            "group.share.min.heartbeat.interval.ms": 500, "group.share.heartbeat.interval.ms": 500,
            "group.share.min.session.timeout.ms": 6000, "group.share.session.timeout.ms": 6000,
            "group.share.min.record.lock.duration.ms": 1000}) as c:
        c.create_topic("work", 1, 3, {"min.insync.replicas": "2"})
        topic_id = c.zk.get_topic("work")[1]
        data_leader = c.leader("work", 0)
        # FindCoordinator key type 2 creates __share_group_state (RF 3) and names each state
        # partition's leader; the group is one whose state partition another broker leads
        for q in range(3):
            key = f"probe:{zd.uuid_to_str(topic_id)}:{q}"
            node = find_share_coordinator(c, key)
            assert node == c.leader("__share_group_state", share_state_partition("probe", topic_id, q, STATE_PARTITIONS))
        assert all(sorted(r) == [1, 2, 3] for r in c.assignment("__share_group_state").values())
        group = next(g for g in (f"sg{i}" for i in range(100)) if c.leader(
            "__share_group_state", share_state_partition(g, topic_id, 0, STATE_PARTITIONS)) != data_leader)
        state_p = share_state_partition(group, topic_id, 0, STATE_PARTITIONS)
        state_leader = c.leader("__share_group_state", state_p)
        set_group_configs(c, group, {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": "3000"})
        follower = next(n for n in (1, 2, 3) if n != data_leader)
        assert not_leader_answers(c, follower, group, topic_id) == (data_leader, c.broker(data_leader).port)
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
        for i in range(6):
            p.produce("work", value=b"v%d" % i, partition=0)
        assert p.flush(30) == 0

        first = ShareConsumer({"bootstrap.servers": c.bootstrap_servers, "group.id": group,
                               "share.acknowledgement.mode": "explicit"})
        first.subscribe(["work"])
        got = poll_until(first, 6, 60, on_message=lambda m: m.offset() < 3 and first.acknowledge(m, AcknowledgeType.ACCEPT))
        assert sorted(o for o, _ in got) == list(range(6)) and all(d == 1 for _, d in got)
        first.commit_sync()     # 0-2 acknowledged (answered once durable); 3-5 acquired, not acknowledged

        killed = state_leader if victim == "state" else data_leader
        c.kill(killed)
        for i in range(6, 12):
            p.produce("work", value=b"v%d" % i, partition=0)
        assert p.flush(60) == 0
        c.wait_for(lambda: c.leader("work", 0) not in (None, killed)
                   and c.leader("__share_group_state", state_p) not in (None, killed), 30)

        second = ShareConsumer({"bootstrap.servers": c.bootstrap_servers, "group.id": group})
        second.subscribe(["work"])
        try:
            again = poll_until(second, 9, 90)
            assert sorted(again) == [(3, 2), (4, 2), (5, 2)] + [(o, 1) for o in range(6, 12)], (
                victim, killed, state_leader, data_leader, again)
            assert poll_until(second, 1, 4) == []
        finally:
            second.close()
