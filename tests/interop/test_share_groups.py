"""Share groups (KIP-932) with a real client: confluent-kafka 2.16.1's ShareConsumer (librdkafka 2.16)
against a kgroup broker process.

Checked: implicit acknowledgement (every record delivered once, then nothing more); explicit
acknowledgement where RELEASE redelivers with delivery count 2 and REJECT never again; a record
whose acquisition lock expires is delivered again; four consumers on one partition all receive
records and none twice; after a broker SIGKILL, what was acknowledged is never delivered again and
what was acquired but not acknowledged comes back with its delivery count incremented; the
AdminClient lists and describes the share group. None of these may skip.
"""
from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic,
                                   ResourceType)

from tests.harness import BrokerProcess

pytestmark = pytest.mark.interop

OVERRIDES = ["group.share.min.heartbeat.interval.ms=500", "group.share.heartbeat.interval.ms=500",
             "group.share.min.session.timeout.ms=6000", "group.share.session.timeout.ms=6000",
             "group.share.min.record.lock.duration.ms=1000"]


def setup(bootstrap, topic, partitions=1, n=10, group="sg", **group_configs):
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(topic, partitions, 1)])[topic].result()
    configs = {"share.auto.offset.reset": "earliest", **group_configs}
    r = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    for f in a.incremental_alter_configs([r]).values():
        f.result()
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=i % partitions)
    p.flush()
    return a


def consumer(bootstrap, topic, group="sg", explicit=False):
    conf = {"bootstrap.servers": bootstrap, "group.id": group}
    if explicit:
        conf["share.acknowledgement.mode"] = "explicit"
    c = ShareConsumer(conf)
    c.subscribe([topic])
    return c


def poll_until(c, want, timeout=30.0, on_message=None):
    got = []
    deadline = time.time() + timeout
    while time.time() < deadline and len(got) < want:
        for m in list(c.poll(0.5)):
            assert m.error() is None, m.error()
            got.append((m.partition(), m.offset(), m.delivery_count()))
            if on_message is not None:
                on_message(m)
    return got


@pytest.fixture
def broker(tmp_path):
    b = BrokerProcess(tmp_path / "d", OVERRIDES).start()
    yield b
    b.kill()


def test_implicit_acknowledgement_delivers_each_record_once(broker):
    setup(broker.bootstrap, "t")
    c = consumer(broker.bootstrap, "t")
    try:
        got = poll_until(c, 10)
        assert sorted(o for _, o, _ in got) == list(range(10)) and {d for _, _, d in got} == {1}
        assert poll_until(c, 1, timeout=3) == []        # acknowledged by the next poll: nothing again
    finally:
        c.close()


def test_explicit_release_redelivers_and_reject_never_again(broker):
    from confluent_kafka import AcknowledgeType
    setup(broker.bootstrap, "t", n=4)
    c = consumer(broker.bootstrap, "t", explicit=True)
    try:
        def ack(m):
            kind = {0: AcknowledgeType.RELEASE, 1: AcknowledgeType.REJECT}.get(m.offset(), AcknowledgeType.ACCEPT)
            c.acknowledge(m, kind)
        first = poll_until(c, 4, on_message=ack)
        assert sorted(o for _, o, _ in first) == [0, 1, 2, 3]
        c.commit_sync()
        again = poll_until(c, 1, on_message=lambda m: c.acknowledge(m, AcknowledgeType.ACCEPT))
        assert again == [(0, 0, 2)]                     # RELEASE: delivered again, second delivery
        c.commit_sync()
        assert poll_until(c, 1, timeout=3) == []        # REJECT (1) and ACCEPT: never again
    finally:
        c.close()


def test_an_expired_acquisition_lock_redelivers(broker):
    setup(broker.bootstrap, "t", n=3, **{"share.record.lock.duration.ms": 2000})
    holder = consumer(broker.bootstrap, "t", explicit=True)
    try:
        got = poll_until(holder, 3)
        assert sorted(o for _, o, _ in got) == [0, 1, 2]
        # holder never acknowledges: after the lock (2 s) the records are someone else's
        other = consumer(broker.bootstrap, "t")
        try:
            again = poll_until(other, 3, timeout=30)
            assert sorted(o for _, o, _ in again) == [0, 1, 2] and {d for _, _, d in again} == {2}
        finally:
            other.close()
    finally:
        holder.close()


def test_four_consumers_share_one_partition(broker):
    n = 400
    setup(broker.bootstrap, "t", n=0)
    consumers = [consumer(broker.bootstrap, "t") for _ in range(4)]
    got = [[] for _ in consumers]
    stop = threading.Event()

    def run(i):
        while not stop.is_set():
            for m in list(consumers[i].poll(0.2)):
                got[i].append(m.offset())
    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(4)       # every member joined and got the partition
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 10})
        for i in range(n):
            p.produce("t", value=b"x", partition=0)
            if i % 10 == 9:
                p.flush()
                time.sleep(0.01)
        p.flush()
        deadline = time.time() + 30
        while time.time() < deadline and sum(len(g) for g in got) < n:
            time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join()
        for c in consumers:
            c.close()
    everything = sorted(o for g in got for o in g)
    assert everything == list(range(n))              # each record once, none lost
    assert all(g for g in got), [len(g) for g in got]   # all four received records


def test_acknowledged_never_again_after_a_kill(tmp_path):
    from confluent_kafka import AcknowledgeType
    b = BrokerProcess(tmp_path / "d", OVERRIDES).start()
    try:
        setup(b.bootstrap, "t", n=6)
        c = consumer(b.bootstrap, "t", explicit=True)
        got = poll_until(c, 6, on_message=lambda m: m.offset() < 3 and c.acknowledge(m, AcknowledgeType.ACCEPT))
        assert sorted(o for _, o, _ in got) == list(range(6))
        c.commit_sync()     # 0-2 acknowledged (answered once durable); 3-5 acquired, not acknowledged
        b.kill()
        b = BrokerProcess(tmp_path / "d", OVERRIDES).start()
        c2 = consumer(b.bootstrap, "t")
        try:
            again = poll_until(c2, 3, timeout=40)
            assert sorted((o, d) for _, o, d in again) == [(3, 2), (4, 2), (5, 2)]
            assert poll_until(c2, 1, timeout=3) == []
        finally:
            c2.close()
    finally:
        b.kill()


def test_the_share_group_is_listed_and_described_over_the_wire(broker):
    """ListGroups (type filter "share") and ShareGroupDescribe while a ShareConsumer is a member; the
    AdminClient's list_consumer_groups leaves it out, as for Kafka (its protocol type is "share")."""
    from kgroup.protocol.messages.list_groups import ListGroupsRequest
    from kgroup.protocol.messages.share_group_describe import ShareGroupDescribeRequest
    from tests.harness import RawClient
    a = setup(broker.bootstrap, "t", n=1)
    c = consumer(broker.bootstrap, "t")
    try:
        assert len(poll_until(c, 1)) == 1
        raw = RawClient(broker.port)
        listed = raw.request(ListGroupsRequest(states_filter=[], types_filter=["share"]), 5).groups
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed] == [
            ("sg", "share", "Stable", "share")]
        [d] = raw.request(ShareGroupDescribeRequest(group_ids=["sg"]), 1).groups
        assert (d.error_code, d.group_state, d.assignor_name, len(d.members)) == (0, "Stable", "simple", 1)
        assert [(t.topic_name, t.partitions) for t in d.members[0].assignment.topic_partitions] == [("t", [0])]
        assert "sg" not in {g.group_id for g in a.list_consumer_groups().result().valid}
    finally:
        c.close()


def test_delete_group_deletes_its_share_state(broker):
    """DeleteGroups on an empty share group deletes its share-partitions' state first: a new group
    of the same name starts again from share.auto.offset.reset."""
    from kgroup.protocol.messages.read_share_group_state import ReadShareGroupStateRequest
    from tests.harness import RawClient
    a = setup(broker.bootstrap, "t", n=3)
    c = consumer(broker.bootstrap, "t")
    assert len(poll_until(c, 3)) == 3
    c.close()
    assert a.delete_consumer_groups(["sg"])["sg"].result() is None
    raw = RawClient(broker.port)
    from kgroup.protocol.messages.metadata import MetadataRequest
    t = raw.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")]), 12).topics[0].topic_id
    R = ReadShareGroupStateRequest.ReadStateData
    r = raw.request(ReadShareGroupStateRequest(group_id="sg", topics=[R(topic_id=t, partitions=[
        R.PartitionData(partition=0, leader_epoch=0)])]), 0)
    assert r.results[0].partitions[0].error_code == 42       # INVALID_REQUEST: no state any more
    c = consumer(broker.bootstrap, "t")                      # the group again: from the earliest offset
    try:
        assert sorted(o for _, o, _ in poll_until(c, 3)) == [0, 1, 2]
    finally:
        c.close()


def _release_reject_scenario(bootstrap):
    """A share consumer in explicit mode; four records produced once it is assigned; offset 0
    RELEASEd, 1 REJECTed, the rest (and any redelivery) ACCEPTed. Returns (offset, delivery
    count) in delivery order."""
    from confluent_kafka import AcknowledgeType
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "cmp", "share.acknowledgement.mode": "explicit"})
    c.subscribe(["t"])
    got, produced, t0 = [], False, time.time()
    try:
        while time.time() - t0 < 30 and len(got) < 5:
            for m in list(c.poll(0.5)):
                assert m.error() is None, m.error()
                got.append((m.offset(), m.delivery_count()))
                kind = AcknowledgeType.ACCEPT
                if m.delivery_count() == 1:
                    kind = {0: AcknowledgeType.RELEASE, 1: AcknowledgeType.REJECT}.get(m.offset(), kind)
                c.acknowledge(m, kind)
            if got:
                c.commit_sync()
            if not produced and time.time() - t0 > 4:
                p = Producer({"bootstrap.servers": bootstrap})
                for i in range(4):
                    p.produce("t", value=b"v%d" % i, partition=0)
                p.flush()
                produced = True
        for m in list(c.poll(2.0)):
            got.append((m.offset(), m.delivery_count()))
    finally:
        c.close()
    return got


def test_same_deliveries_as_librdkafka_mock(broker):
    """librdkafka's mock cluster implements share groups: the same scenario against it and against
    kgroup delivers the same records with the same delivery counts."""
    from kgroup.testing.rdkafka_mock import MockCluster
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result()
    ours = _release_reject_scenario(broker.bootstrap)
    with MockCluster(brokers=1, topics={"t": 1}) as mock:
        theirs = _release_reject_scenario(mock.bootstrap_servers)
    assert ours == theirs == [(0, 1), (1, 1), (2, 1), (3, 1), (0, 2)]
