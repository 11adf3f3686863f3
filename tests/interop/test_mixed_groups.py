"""Mixed groups: kgroup, kafka-python and confluent-kafka consumers in one group on our broker
agree on one assignment per generation and, with synchronous commits, consume every message
exactly once (the group is Stable before the data arrives, so no rebalance interleaves)."""
import threading
import time

import pytest

pytestmark = pytest.mark.interop

TOPIC_PARTITIONS = 6
MESSAGES = 3000


class Member(threading.Thread):
    """Polls one client in its own thread, committing synchronously after every batch."""

    def __init__(self, name, client_id, make, poll, assignment, commit, close):
        super().__init__(name=name, daemon=True)
        self.client_id = client_id
        self.make, self._poll, self._assignment, self._commit, self._close = make, poll, assignment, commit, close
        self.seen = []
        self.assigned = set()
        self.stop = threading.Event()
        self.error = None

    def run(self):
        try:
            c = self.make()
            while not self.stop.is_set():
                recs = self._poll(c)
                self.assigned = self._assignment(c)
                if recs:
                    self.seen.extend(recs)
                    self._commit(c)
            self._close(c)
        except BaseException as e:  # surfaced by the test
            self.error = e


def kgroup_member(bootstrap, group, strategy):
    from kgroup.client.sync import KafkaConsumer
    return Member(
        "kgroup", "kgroup-member",
        lambda: KafkaConsumer("mixed", bootstrap_servers=bootstrap, group_id=group, client_id="kgroup-member",
                              partition_assignment_strategy=[strategy], auto_offset_reset="earliest",
                              enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=500),
        lambda c: [(r.topic, r.partition, r.offset, r.value) for r in c.poll(200)],
        lambda c: {(tp.topic, tp.partition) for tp in c.assignment()},
        lambda c: c.commit(), lambda c: c.close())


def kafka_python_member(bootstrap, group, strategy):
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    return Member(
        "kafka-python", "kafka-python-member",
        lambda: KafkaConsumer("mixed", bootstrap_servers=bootstrap, group_id=group, client_id="kafka-python-member",
                              partition_assignment_strategy=[RangePartitionAssignor], auto_offset_reset="earliest",
                              enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=500),
        lambda c: [(r.topic, r.partition, r.offset, r.value) for rs in c.poll(200).values() for r in rs],
        lambda c: {(tp.topic, tp.partition) for tp in c.assignment()},
        lambda c: c.commit(), lambda c: c.close())


def confluent_member(bootstrap, group, strategy):
    from confluent_kafka import Consumer

    def make():
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "confluent-member",
                      "partition.assignment.strategy": strategy, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
        c.subscribe(["mixed"])
        return c

    def poll(c):
        msgs = c.consume(500, 0.2)
        out = []
        for m in msgs:
            if m.error() is None:
                out.append((m.topic(), m.partition(), m.offset(), m.value()))
        return out

    return Member("confluent-kafka", "confluent-member", make, poll,
                  lambda c: {(tp.topic, tp.partition) for tp in c.assignment()},
                  lambda c: c.commit(asynchronous=False), lambda c: c.close())


def _broker_view(bootstrap, group):
    """(state, {client id: assigned partitions}) as the coordinator records them."""
    from kgroup.client.sync import KafkaAdmin
    admin = KafkaAdmin(bootstrap_servers=bootstrap)
    try:
        g = admin.describe_groups([group])[group]
        return g.state, {m.client_id: {(tp.topic, tp.partition) for tp in m.assignment} for m in g.members}
    finally:
        admin.close()


@pytest.mark.parametrize("strategy,makers", [
    ("range", (kgroup_member, kafka_python_member, confluent_member)),
    ("cooperative-sticky", (kgroup_member, confluent_member)),
], ids=["range-kgroup+kafka-python+confluent", "cooperative-sticky-kgroup+confluent"])
def test_mixed_group_agrees_and_consumes_once(tmp_path, strategy, makers):
    from tests.harness import BrokerProcess
    from kgroup.client.sync import KafkaAdmin, KafkaProducer
    b = BrokerProcess(tmp_path / "d", ["group.initial.rebalance.delay.ms=0"]).start()
    members = []
    try:
        admin = KafkaAdmin(bootstrap_servers=b.bootstrap)
        assert admin.create_topics([("mixed", TOPIC_PARTITIONS, 1)]) == {"mixed": None}
        admin.close()
        group = f"mixed-{strategy}"
        members = [m(b.bootstrap, group, strategy) for m in makers]
        for m in members:
            m.start()
        everything = {("mixed", p) for p in range(TOPIC_PARTITIONS)}
        deadline = time.time() + 60
        stable_since = None
        while time.time() < deadline:
            for m in members:
                assert m.error is None, f"{m.name}: {m.error!r}"
            views = [m.assigned for m in members]
            ok = all(views) and set().union(*views) == everything and sum(map(len, views)) == TOPIC_PARTITIONS
            if ok:  # the clients' views are exactly what the coordinator handed out
                state, broker_view = _broker_view(b.bootstrap, group)
                ok = state == "Stable" and broker_view == {m.client_id: m.assigned for m in members}
            stable_since = (stable_since or time.time()) if ok else None
            if stable_since and time.time() - stable_since > 2:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"group never agreed on one assignment: {[(m.name, m.assigned) for m in members]}")
        p = KafkaProducer(bootstrap_servers=b.bootstrap)
        for i in range(MESSAGES):
            p.send("mixed", value=b"m%d" % i, key=b"k%d" % i)
        p.flush()
        p.close()
        deadline = time.time() + 60
        while time.time() < deadline and sum(len(m.seen) for m in members) < MESSAGES:
            time.sleep(0.1)
        values = [r[3] for m in members for r in m.seen]
        assert len(values) == MESSAGES and set(values) == {b"m%d" % i for i in range(MESSAGES)}
        for m in members:  # each read only its own partitions
            assert {(t, p) for t, p, _, _ in m.seen} <= m.assigned, m.name
        # every member consumed something: the assignment really was shared
        assert all(m.seen for m in members)
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.join(20)
        b.stop()
