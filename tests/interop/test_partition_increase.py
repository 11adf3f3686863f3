"""A partition increase (CreatePartitions) reaches a subscribed cooperative-sticky group through
its members' metadata refresh and rebalances it onto the new partitions, as with Kafka: the
leader sees the partition count change and rejoins; the old partitions stay where they were."""
import threading
import time

import pytest

pytestmark = pytest.mark.interop


class Member(threading.Thread):
    def __init__(self, bootstrap, group, client_id):
        super().__init__(daemon=True)
        self.bootstrap, self.group, self.client_id = bootstrap, group, client_id
        self.assigned, self.seen, self.revoked = set(), [], []
        self.stop, self.error = threading.Event(), None

    def run(self):
        from confluent_kafka import Consumer
        try:
            c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "client.id": self.client_id,
                          "partition.assignment.strategy": "cooperative-sticky", "auto.offset.reset": "earliest",
                          "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
                          "topic.metadata.refresh.interval.ms": 1000})
            c.subscribe(["grow"], on_revoke=lambda _c, parts: self.revoked.extend(
                (p.topic, p.partition) for p in parts))
            while not self.stop.is_set():
                for m in c.consume(100, 0.2):
                    if m.error() is None:
                        self.seen.append((m.partition(), m.value()))
                self.assigned = {(tp.topic, tp.partition) for tp in c.assignment()}
            c.close()
        except BaseException as e:
            self.error = e


def _wait_cover(members, n, timeout=60):
    everything = {("grow", p) for p in range(n)}
    deadline = time.time() + timeout
    while time.time() < deadline:
        for m in members:
            assert m.error is None, repr(m.error)
        views = [m.assigned for m in members]
        if all(views) and set().union(*views) == everything and sum(map(len, views)) == n:
            return [set(v) for v in views]
        time.sleep(0.2)
    pytest.fail(f"the group never covered {n} partitions: {[m.assigned for m in members]}")


def test_cooperative_sticky_group_picks_up_added_partitions(tmp_path):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
    from tests.harness import BrokerProcess
    b = BrokerProcess(tmp_path / "d", ["group.initial.rebalance.delay.ms=0"]).start()
    members = []
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("grow", 2, 1)])["grow"].result(10)
        members = [Member(b.bootstrap, "grow-group", f"m{i}") for i in range(2)]
        for m in members:
            m.start()
        before = _wait_cover(members, 2)
        time.sleep(1)   # the initial cooperative rounds (a partition moving to the second member) settle
        revoked_before = [list(m.revoked) for m in members]
        admin.create_partitions([NewPartitions("grow", 6)])["grow"].result(10)
        after = _wait_cover(members, 6)
        for old, new in zip(before, after):   # sticky: nobody lost what it had
            assert old <= new
        # cooperative: the increase revoked nothing
        assert [list(m.revoked) for m in members] == revoked_before
        p = Producer({"bootstrap.servers": b.bootstrap})
        for part in range(6):
            p.produce("grow", value=b"p%d" % part, partition=part)
        assert p.flush(10) == 0
        deadline = time.time() + 30
        while time.time() < deadline and sum(len(m.seen) for m in members) < 6:
            time.sleep(0.1)
        assert sorted(v for m in members for _, v in m.seen) == [b"p%d" % i for i in range(6)]
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(20)
        b.stop()


def test_our_client_group_picks_up_added_partitions(tmp_path):
    """Our consumer's leader compares its metadata snapshot after each refresh, as Java's does."""
    from tests.harness import BrokerProcess
    from tests.interop.test_mixed_groups import Member as MixedMember
    from kgroup.client.sync import KafkaAdmin, KafkaConsumer
    b = BrokerProcess(tmp_path / "d", ["group.initial.rebalance.delay.ms=0"]).start()
    members = []
    try:
        admin = KafkaAdmin(bootstrap_servers=b.bootstrap)
        assert admin.create_topics([("grow", 2, 1)]) == {"grow": None}
        for i in range(2):
            members.append(MixedMember(
                f"kgroup-{i}", f"kg{i}",
                lambda i=i: KafkaConsumer("grow", bootstrap_servers=b.bootstrap, group_id="kg-grow",
                                          client_id=f"kg{i}", partition_assignment_strategy=["cooperative-sticky"],
                                          metadata_max_age_ms=1000, session_timeout_ms=10000,
                                          heartbeat_interval_ms=500),
                lambda c: [(r.topic, r.partition, r.offset, r.value) for r in c.poll(200)],
                lambda c: {(tp.topic, tp.partition) for tp in c.assignment()},
                lambda c: None, lambda c: c.close()))
        for m in members:
            m.start()
        before = _wait_cover(members, 2)
        assert admin.create_partitions({"grow": 5}) == {"grow": None}
        after = _wait_cover(members, 5)
        for old, new in zip(before, after):
            assert old <= new
        admin.close()
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(20)
        b.stop()
