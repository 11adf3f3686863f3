"""Consumer groups of real clients against a kgroup broker: kafka-python 3.0.12 and
confluent-kafka 2.16.1 (librdkafka) consumers, each in its own process so it can be SIGKILLed.

What is checked, per assignment strategy (range, roundrobin), with one group of three
kafka-python consumers and one group of three confluent-kafka consumers sharing two topics of
three partitions:
- every generation's assignment (each GroupMetadata record the coordinator wrote to
  ``__consumer_offsets``, and DescribeGroups while Stable) gives every partition to exactly one
  member, with the strategy the group voted for;
- a member killed with SIGKILL (no LeaveGroup) stays in the group until its session timeout
  (6 s), then its partitions move to the two others;
- a static member (group.instance.id) restarted within its session timeout gets its old
  assignment back with no new generation;
- offsets committed before a broker SIGKILL survive the restart and a new consumer of the group
  resumes exactly at them (Kafka's ConsumerBounceTest.testConsumptionWithBrokerFailures).
None of these may skip.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import pytest

from kgroup.protocol.consumer_protocol import ConsumerProtocolAssignment
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.describe_groups import DescribeGroupsRequest
from tests.conftest import ROOT
from tests.harness import BrokerProcess, RawClient, free_port, group_records

pytestmark = pytest.mark.interop

TOPICS = ("grp-a", "grp-b")
ALL_PARTITIONS = {(t, p) for t in TOPICS for p in range(3)}
SESSION_MS = 6000
OVERRIDES = ["group.initial.rebalance.delay.ms=200"]

# One consumer process: prints one JSON line per event on stdout.
MEMBER = r'''
import json, sys, time
client, bootstrap, group, strategy, instance = sys.argv[1:6]
topics = ["grp-a", "grp-b"]
instance = instance or None

def emit(**kw):
    print(json.dumps(kw), flush=True)

if client == "kp":
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[strategy]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, group_instance_id=instance,
                             client_id="kp-member", partition_assignment_strategy=[assignor],
                             session_timeout_ms=6000, heartbeat_interval_ms=1000,
                             max_poll_interval_ms=20000, enable_auto_commit=False,
                             auto_offset_reset="earliest")

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit(event="revoked")

        def on_partitions_assigned(self, assigned):
            md = consumer._coordinator.group_metadata()
            emit(event="assigned", member=md.member_id, generation=md.generation_id,
                 partitions=sorted([tp.topic, tp.partition] for tp in assigned))

    consumer.subscribe(topics, listener=Listener())
    emit(event="started")
    while True:
        consumer.poll(200)
else:
    from confluent_kafka import Consumer
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": "ck-member",
            "partition.assignment.strategy": strategy, "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000, "max.poll.interval.ms": 20000,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000}
    if instance:
        conf["group.instance.id"] = instance
    consumer = Consumer(conf)

    def on_assign(c, partitions):
        emit(event="assigned", member=c.memberid(), generation=None,
             partitions=sorted([tp.topic, tp.partition] for tp in partitions))

    def on_revoke(c, partitions):
        emit(event="revoked")

    consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke)
    emit(event="started")
    while True:
        consumer.poll(0.2)
'''


class Member:
    """One consumer process; its events are collected by a reader thread."""

    def __init__(self, client, bootstrap, group, strategy, instance=""):
        self.client = client
        self.events: list[dict] = []
        self.proc = subprocess.Popen([sys.executable, "-c", MEMBER, client, bootstrap, group, strategy, instance],
                                     cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                pass

    def assignments(self):
        return [e for e in self.events if e["event"] == "assigned"]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def members():
    started: list[Member] = []
    yield started
    for m in started:
        m.kill()


# -- observing the group from outside -------------------------------------------------------------

def describe(port, group):
    c = RawClient(port)
    try:
        (g,) = c.request(DescribeGroupsRequest(groups=[group]), 5).groups
        return g
    finally:
        c.close()


def owners(group_desc) -> dict:
    """{member_id: set of (topic, partition)} from a DescribeGroups answer."""
    out = {}
    for m in group_desc.members:
        a = bytes(m.member_assignment)
        parts = set()
        if a:
            assignment, _ = ConsumerProtocolAssignment.decode(memoryview(a), int.from_bytes(a[:2], "big"), 2)
            parts = {(tp.topic, p) for tp in assignment.assigned_partitions for p in tp.partitions}
        out[m.member_id] = parts
    return out


def assert_partitioned(by_member: dict, what: str):
    """Every partition owned by exactly one member."""
    seen = [tp for parts in by_member.values() for tp in parts]
    assert sorted(seen) == sorted(ALL_PARTITIONS), f"{what}: not a partition of the topics: {by_member}"


def wait_stable(port, group, n_members, timeout=40.0):
    """Wait for a Stable group of ``n_members`` whose assignment covers every partition once."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        g = last = describe(port, group)
        if g.group_state == "Stable" and len(g.members) == n_members:
            by_member = owners(g)
            if all(by_member.values()):
                assert_partitioned(by_member, f"DescribeGroups of {group}")
                return g
        time.sleep(0.2)
    raise AssertionError(f"{group} did not reach Stable with {n_members} members: {last}")


def generations_in_log(data_dir, group, num_partitions=50):
    """[(generation, protocol, {member: partitions})] of every GroupMetadata record of ``group``."""
    out = []
    for v in group_records(data_dir, group, num_partitions):
        by_member = {}
        for m in v.members:
            a = bytes(m.assignment)
            parts = set()
            if a:
                assignment, _ = ConsumerProtocolAssignment.decode(memoryview(a), int.from_bytes(a[:2], "big"), 2)
                parts = {(tp.topic, p) for tp in assignment.assigned_partitions for p in tp.partitions}
            by_member[m.member_id] = parts
        out.append((v.generation, v.protocol, by_member))
    return out


def create_topics(port, names=TOPICS, partitions=3):
    c = RawClient(port)
    CT = CreateTopicsRequest.CreatableTopic
    resp = c.request(CreateTopicsRequest(topics=[CT(name=n, num_partitions=partitions, replication_factor=1)
                                                 for n in names]), 5)
    assert all(t.error_code == 0 for t in resp.topics)
    c.close()


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


# -- tests ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_groups_share_partitions_and_recover_from_a_killed_member(tmp_path, members, strategy):
    """kafka-python and confluent-kafka groups, 3 members each: one owner per partition in every
    generation; a SIGKILLed member's partitions move to the others after the session timeout."""
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    try:
        create_topics(broker.port)
        groups = {"kp": f"kp-{strategy}", "ck": f"ck-{strategy}"}
        by_client = {c: [Member(c, broker.bootstrap, g, strategy) for _ in range(3)] for c, g in groups.items()}
        for ms in by_client.values():
            members.extend(ms)
        stable = {c: wait_stable(broker.port, g, 3) for c, g in groups.items()}
        for g in stable.values():
            assert g.protocol_type == "consumer" and g.protocol_data == strategy
            assert all(len(parts) == 2 for parts in owners(g).values()), owners(g)

        # SIGKILL one member of each group: no LeaveGroup is sent.
        victims = {}
        for c, ms in by_client.items():
            wait_for(lambda ms=ms: all(m.assignments() for m in ms), 20, f"{c} assignment callbacks")
            victim = ms[1]
            victims[c] = victim.assignments()[-1]["member"]
            victim.kill()
        killed_at = time.monotonic()
        time.sleep(SESSION_MS / 1000 / 2)
        for c, g in groups.items():   # still a member: its session has not expired yet
            d = describe(broker.port, g)
            assert victims[c] in {m.member_id for m in d.members}, (c, d)
        for c, g in groups.items():
            after = wait_stable(broker.port, g, 2, timeout=30)
            assert time.monotonic() - killed_at >= SESSION_MS / 1000 * 0.9
            assert victims[c] not in owners(after)
            sizes = sorted(len(p) for p in owners(after).values())
            # range: 2 of each topic to the first member, 1 to the second; roundrobin: 3 and 3
            assert sizes == ([2, 4] if strategy == "range" else [3, 3]), (c, owners(after))

        # The survivors were told, through their callbacks, what they own now.
        for c, ms in by_client.items():
            final = [set(map(tuple, m.assignments()[-1]["partitions"])) for m in (ms[0], ms[2])]
            assert final[0] | final[1] == ALL_PARTITIONS and not final[0] & final[1], (c, final)
        kp_generations = {e["generation"] for m in by_client["kp"] for e in m.assignments()}
        assert None not in kp_generations and len(kp_generations) >= 2
    finally:
        broker.stop()

    # Every generation written to the log gave each partition to exactly one member.
    for c, g in groups.items():
        gens = [x for x in generations_in_log(broker.data_dir, g) if x[2]]
        assert gens, f"no GroupMetadata with members for {g}"
        assert [x[0] for x in gens] == sorted(x[0] for x in gens)
        for generation, protocol, by_member in gens:
            assert protocol == strategy
            assert_partitioned(by_member, f"{g} generation {generation}")
        assert len(gens[-1][2]) == 2 and victims[c] not in gens[-1][2]


@pytest.mark.parametrize("client", ["kp", "ck"])
def test_static_member_restart_within_session_timeout_keeps_generation(tmp_path, members, client):
    """KIP-345 with a real client: SIGKILL the group's leader, a static member, and start it again
    with the same group.instance.id before its session times out: it gets its old partitions back
    (and stays leader under its new member id), the others see no rebalance and the group's
    generation does not move."""
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    try:
        create_topics(broker.port)
        group = f"static-{client}"
        ms = [Member(client, broker.bootstrap, group, "range", instance=f"inst-{i}") for i in range(3)]
        members.extend(ms)
        before = wait_stable(broker.port, group, 3)
        wait_for(lambda: all(m.assignments() for m in ms), 20, "assignment callbacks")
        time.sleep(1.5)  # let late callbacks of the last generation land
        events_before = [len(m.events) for m in ms]
        gen_before = generations_in_log(broker.data_dir, group)[-1][0]
        owned_before = {m.group_instance_id: parts for m, parts in
                        zip(before.members, owners(before).values())}

        last = group_records(broker.data_dir, group)[-1]
        leader = next(m.group_instance_id for m in last.members if m.member_id == last.leader)
        victim = int(leader.split("-")[1])
        ms[victim].kill()
        restarted = Member(client, broker.bootstrap, group, "range", instance=leader)
        members.append(restarted)
        wait_for(lambda: restarted.assignments(), 5.5, "the restarted static member's assignment")
        after = wait_stable(broker.port, group, 3, timeout=10)
        time.sleep(SESSION_MS / 1000 + 1)  # past the old session: nothing expires, nothing rebalances
        after = wait_stable(broker.port, group, 3, timeout=5)

        assert {m.group_instance_id: parts for m, parts in zip(after.members, owners(after).values())} == owned_before
        assert set(map(tuple, restarted.assignments()[-1]["partitions"])) == owned_before[leader]
        for i, (m, n) in enumerate(zip(ms, events_before)):
            if i != victim:
                assert [e for e in m.events[n:] if e["event"] in ("assigned", "revoked")] == [], m.events[n:]
        records = generations_in_log(broker.data_dir, group)
        assert records[-1][0] == gen_before, records[-3:]
        new_id = restarted.assignments()[-1]["member"]
        assert new_id in records[-1][2] and new_id.startswith(f"{leader}-")
        assert group_records(broker.data_dir, group)[-1].leader == new_id
    finally:
        broker.stop()


def produce_known_data(bootstrap, topic, n_per_partition):
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    for part in range(3):
        for i in range(n_per_partition):
            p.send(topic, value=f"{part}:{i}".encode(), partition=part)
    p.flush(30)
    p.close()


def consume_kp(bootstrap, group, topic, want, commit_at=None):
    """Consume with kafka-python until ``want`` messages; returns {partition: [values]} and
    commits ``commit_at`` ({partition: offset}) explicitly if given."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=1000,
                      max_poll_interval_ms=20000)
    got: dict[int, list] = {}
    deadline = time.monotonic() + 30
    try:
        while sum(map(len, got.values())) < want and time.monotonic() < deadline:
            for tp, msgs in c.poll(500).items():
                got.setdefault(tp.partition, []).extend((m.offset, m.value.decode()) for m in msgs)
        if commit_at:
            c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in commit_at.items()})
            committed = {p: c.committed(TopicPartition(topic, p)) for p in commit_at}
            assert committed == commit_at
    finally:
        c.close()
    return got


def consume_ck(bootstrap, group, topic, want, commit_at=None):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
    c.subscribe([topic])
    got: dict[int, list] = {}
    deadline = time.monotonic() + 30
    try:
        while sum(map(len, got.values())) < want and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.setdefault(m.partition(), []).append((m.offset(), m.value().decode()))
        if commit_at:
            c.commit(offsets=[TopicPartition(topic, p, o) for p, o in commit_at.items()], asynchronous=False)
            committed = c.committed([TopicPartition(topic, p) for p in commit_at], timeout=10)
            assert {tp.partition: tp.offset for tp in committed} == commit_at
    finally:
        c.close()
    return got


@pytest.mark.parametrize("client", ["kp", "ck"])
def test_commits_survive_broker_sigkill_and_consumers_resume_exactly(tmp_path, client):
    """Produce 3 x 20 known records, consume them, commit offsets 7/11/20, SIGKILL the broker,
    restart it on the same data: a new consumer of the group starts exactly at 7/11/20."""
    consume = consume_kp if client == "kp" else consume_ck
    topic, group, n = f"bounce-{client}", f"bounce-{client}", 20
    commit_at = {0: 7, 1: 11, 2: 20}
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    try:
        create_topics(broker.port, [topic])
        produce_known_data(broker.bootstrap, topic, n)
        first = consume(broker.bootstrap, group, topic, 3 * n, commit_at)
        assert {p: [v for _, v in vs] for p, vs in first.items()} == \
            {p: [f"{p}:{i}" for i in range(n)] for p in range(3)}
    finally:
        broker.kill()
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    try:
        produce_known_data(broker.bootstrap, topic, 2)     # offsets 20, 21 of every partition
        second = consume(broker.bootstrap, group, topic, sum(n + 2 - o for o in commit_at.values()))
        expected = {p: [(i, f"{p}:{i}") for i in range(o, n)] + [(n, f"{p}:0"), (n + 1, f"{p}:1")]
                    for p, o in commit_at.items()}
        assert second == expected
    finally:
        broker.stop()


def test_kafka_python_consumer_keeps_consuming_across_a_broker_sigkill(tmp_path):
    """Kafka's ConsumerBounceTest.testConsumptionWithBrokerFailures with one broker: a kafka-python
    consumer committing after every poll sees the broker SIGKILLed and restarted (same port) and
    ends with every record consumed (no gaps) and its commits at the log end."""
    from kafka import KafkaConsumer, TopicPartition
    port = free_port()
    overrides = OVERRIDES + [f"listeners=PLAINTEXT://127.0.0.1:{port}"]
    broker = BrokerProcess(tmp_path / "data", overrides).start()
    n = 200
    consumer = None
    try:
        create_topics(broker.port, ["bounce-live"])
        produce_known_data(broker.bootstrap, "bounce-live", n)
        consumer = KafkaConsumer("bounce-live", bootstrap_servers=broker.bootstrap, group_id="bounce-live",
                                 enable_auto_commit=False, auto_offset_reset="earliest", session_timeout_ms=6000,
                                 heartbeat_interval_ms=1000, max_poll_records=20, fetch_max_bytes=2048,
                                 max_partition_fetch_bytes=1024, reconnect_backoff_max_ms=500,
                                 request_timeout_ms=8000)
        seen, bounced = [], False
        deadline = time.monotonic() + 60
        while len(set(seen)) < 3 * n and time.monotonic() < deadline:
            records = consumer.poll(500)
            for msgs in records.values():
                seen.extend(m.value.decode() for m in msgs)
            if records:
                try:
                    consumer.commit()
                except Exception:       # the coordinator is gone: these records come again
                    pass
            if len(seen) >= n and not bounced:
                broker.kill()
                bounced = True
                broker = BrokerProcess(tmp_path / "data", overrides).start()
        assert bounced and set(seen) == {f"{p}:{i}" for p in range(3) for i in range(n)}
        consumer.commit()
        tps = [TopicPartition("bounce-live", p) for p in range(3)]
        assert {tp.partition: consumer.committed(tp) for tp in tps} == {0: n, 1: n, 2: n}
    finally:
        if consumer is not None:
            consumer.close()
        broker.stop()
