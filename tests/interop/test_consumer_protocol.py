"""The consumer group protocol (KIP-848) with a real client: confluent-kafka 2.16.1 (librdkafka
2.16) consumers with ``group.protocol=consumer``, each in its own process so it can be SIGKILLed.

Checked:
- three members subscribed by list share six partitions; every record is consumed and committed
  exactly once; the incremental callbacks (on_assign / on_revoke) never let two members own one
  partition at the same moment (a revoke returns before the other member's assign), and no
  sample of the coordinator's view (ConsumerGroupDescribe every 50 ms) shows one in two members;
- a SIGKILLed member keeps its partitions until its session times out, then they move;
- a regex subscription (``^prefix.*``) picks up a topic created later, also when it matched
  nothing when the member joined;
- a static member (group.instance.id) that closes and restarts gets its partitions back with no
  new group epoch;
- offsets committed before a broker SIGKILL are where a new member resumes after the restart;
- the AdminClient describes, lists and deletes a consumer group.
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

from kgroup.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from tests.conftest import ROOT
from tests.harness import BrokerProcess, RawClient

pytestmark = pytest.mark.interop

SESSION_MS = 6000
OVERRIDES = [f"group.consumer.min.session.timeout.ms={SESSION_MS}", f"group.consumer.session.timeout.ms={SESSION_MS}",
             "group.consumer.min.heartbeat.interval.ms=500", "group.consumer.heartbeat.interval.ms=500"]

# One consumer process: one JSON line per event on stdout (t = wall clock, shared by the processes).
MEMBER = r'''
import json, sys, time
from confluent_kafka import Consumer, TopicPartition
bootstrap, group, topics, instance, commit_each = sys.argv[1:6]
def emit(**kw):
    kw["t"] = time.time()
    print(json.dumps(kw), flush=True)
conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "enable.auto.commit": False}
if instance:
    conf["group.instance.id"] = instance
c = Consumer(conf)
c.subscribe(topics.split(",") if not topics.startswith("^") else [topics],
            on_assign=lambda _c, ps: emit(ev="assign", parts=[[p.topic, p.partition] for p in ps]),
            on_revoke=lambda _c, ps: emit(ev="revoke", parts=[[p.topic, p.partition] for p in ps]),
            on_lost=lambda _c, ps: emit(ev="lost", parts=[[p.topic, p.partition] for p in ps]))
try:
    while True:
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        c.commit(message=m, asynchronous=False)
        emit(ev="msg", topic=m.topic(), part=m.partition(), offset=m.offset())
except KeyboardInterrupt:
    pass
finally:
    emit(ev="closing")
    c.close()
    emit(ev="closed")
'''


class MemberProcess:
    """A consumer in its own process (``script`` run with ``args``) that prints one JSON event per
    line: assign / revoke / lost (with "parts"), msg (topic, part, offset), and its own others."""

    def __init__(self, script: str, *args: str):
        self.events: list = []
        # close() stops it with SIGINT (KeyboardInterrupt, then the consumer's close): a process
        # started from a background job inherits SIGINT ignored, and Python then never raises it
        script = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n" + script
        self.proc = subprocess.Popen([sys.executable, "-c", script, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                pass

    def saw(self, ev) -> bool:
        return any(e["ev"] == ev for e in list(self.events))

    def owned(self) -> set:
        have = set()
        for e in list(self.events):
            if e["ev"] == "assign":
                have |= {tuple(p) for p in e["parts"]}
            elif e["ev"] in ("revoke", "lost"):
                have -= {tuple(p) for p in e["parts"]}
        return have

    def consumed(self) -> list:
        return [(e["topic"], e["part"], e["offset"]) for e in list(self.events) if e["ev"] == "msg"]

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.killed_at = time.time()

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.killed_at = time.time()     # it owns nothing from now on (assert_never_owned_twice)


class Member(MemberProcess):
    def __init__(self, bootstrap, group, topics, instance=""):
        super().__init__(MEMBER, bootstrap, group, topics, instance, "1")


def wait_for(cond, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def create_topic(bootstrap, name, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(15)


def produce(bootstrap, topic, partitions, per_partition):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(per_partition):
        for part in range(partitions):
            p.produce(topic, f"{part}:{i}".encode(), partition=part)
    p.flush(15)


def describe(port, group):
    c = RawClient(port)
    try:
        return c.request(ConsumerGroupDescribeRequest(group_ids=[group]), 0).groups[0]
    finally:
        c.close()


def assert_never_owned_twice(members):
    """From the callbacks' timestamps: at no moment do two live members own one partition (a
    SIGKILLed member owns its partitions until it died)."""
    intervals = {}      # partition -> [(start, end, member index)]
    for i, m in enumerate(members):
        open_at = {}
        for e in m.events:
            if e["ev"] == "assign":
                for p in map(tuple, e["parts"]):
                    open_at[p] = e["t"]
            elif e["ev"] in ("revoke", "lost"):
                for p in map(tuple, e["parts"]):
                    if p in open_at:
                        intervals.setdefault(p, []).append((open_at.pop(p), e["t"], i))
        end = getattr(m, "killed_at", None) or time.time()
        for p, start in open_at.items():
            intervals.setdefault(p, []).append((start, end, i))
    for p, spans in intervals.items():
        spans.sort()
        for (_s1, e1, i1), (s2, _e2, i2) in zip(spans, spans[1:]):
            assert s2 >= e1 or i1 == i2, f"{p} owned by members {i1} and {i2} at once: {spans}"


class Sampler(threading.Thread):
    """Samples the coordinator's view (ConsumerGroupDescribe) every 50 ms: in no sample is a
    partition in two members' current assignments."""

    def __init__(self, port, group):
        super().__init__(daemon=True)
        self.port, self.group = port, group
        self.samples, self.overlaps, self.stop_flag = 0, [], False

    def run(self):
        c = RawClient(self.port)
        try:
            while not self.stop_flag:
                g = c.request(ConsumerGroupDescribeRequest(group_ids=[self.group]), 0).groups[0]
                seen = {}
                for m in g.members:
                    for tp in m.assignment.topic_partitions:
                        for p in tp.partitions:
                            if (tp.topic_name, p) in seen:
                                self.overlaps.append(((tp.topic_name, p), seen[(tp.topic_name, p)], m.member_id))
                            seen[(tp.topic_name, p)] = m.member_id
                self.samples += 1
                time.sleep(0.05)
        finally:
            c.close()


def test_three_members_kill_and_session_expiry(tmp_path):
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    members = []
    sampler = None
    try:
        sampler = Sampler(broker.port, "cp")
        sampler.start()
        create_topic(broker.bootstrap, "cp-a", 6)
        produce(broker.bootstrap, "cp-a", 6, 50)
        members = [Member(broker.bootstrap, "cp", "cp-a") for _ in range(3)]
        wait_for(lambda: all(len(m.owned()) == 2 for m in members), what="2 partitions each")
        wait_for(lambda: sum(len(m.consumed()) for m in members) == 300, what="the first 300 records")
        g = describe(broker.port, "cp")
        assert g.group_state == "Stable" and len(g.members) == 3
        assert all(len(m.assignment.topic_partitions[0].partitions) == 2 for m in g.members)
        victim = members[0]
        lost = victim.owned()
        victim.kill()
        time.sleep(2)                   # well inside the session: nobody has its partitions yet
        assert not any(lost & m.owned() for m in members[1:])
        produce(broker.bootstrap, "cp-a", 6, 10)
        wait_for(lambda: all(len(m.owned()) == 3 for m in members[1:]), timeout=SESSION_MS / 1000 + 15,
                 what="the killed member's partitions to move after the session timeout")
        wait_for(lambda: sum(len(m.consumed()) for m in members) >= 360, what="every record")
        consumed = [r for m in members for r in m.consumed()]
        assert len(consumed) == len(set(consumed)) == 360       # every record once
        assert {(t, p) for t, p, _ in consumed} == {("cp-a", p) for p in range(6)}
        assert_never_owned_twice(members)
        sampler.stop_flag = True
        sampler.join(10)
        assert sampler.samples > 50 and not sampler.overlaps, sampler.overlaps
        for m in members[1:]:
            m.close()
        # the incremental callbacks ran: the survivors each received more on a second on_assign
        assert all(sum(1 for e in m.events if e["ev"] == "assign" and e["parts"]) >= 2 for m in members[1:])
        assert describe(broker.port, "cp").group_state == "Empty"
    finally:
        if sampler is not None:
            sampler.stop_flag = True
        for m in members:
            m.close()
        broker.stop()


def test_regex_subscription_follows_new_topics(tmp_path):
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    members = []
    try:
        create_topic(broker.bootstrap, "rx-one", 2)
        create_topic(broker.bootstrap, "other", 2)
        members = [Member(broker.bootstrap, "rx", "^rx-.*") for _ in range(2)]
        wait_for(lambda: sorted(p for m in members for p in m.owned()) == [("rx-one", 0), ("rx-one", 1)],
                 what="rx-one assigned")
        create_topic(broker.bootstrap, "rx-two", 2)
        produce(broker.bootstrap, "rx-two", 2, 5)
        wait_for(lambda: sorted(p for m in members for p in m.owned()) ==
                 [("rx-one", 0), ("rx-one", 1), ("rx-two", 0), ("rx-two", 1)], what="rx-two assigned")
        wait_for(lambda: len([r for m in members for r in m.consumed()]) == 10, what="rx-two's records")
        assert_never_owned_twice(members)
    finally:
        for m in members:
            m.close()
        broker.stop()


def test_regex_matching_no_topic_yet_then_created(tmp_path):
    """A member whose regex matches nothing when it joins (Kafka 4.0+, KAFKA-18095: accepted, it
    is in the group with no partitions) gets the topic once it is created."""
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    members = []
    try:
        members = [Member(broker.bootstrap, "nx", "^nx-.*")]
        wait_for(lambda: len(describe(broker.port, "nx").members) == 1, what="the member in the group")
        assert members[0].owned() == set() and members[0].proc.poll() is None
        create_topic(broker.bootstrap, "nx-late", 2)
        produce(broker.bootstrap, "nx-late", 2, 3)
        wait_for(lambda: members[0].owned() == {("nx-late", 0), ("nx-late", 1)}, what="nx-late assigned")
        wait_for(lambda: len(members[0].consumed()) == 6, what="nx-late's records")
    finally:
        for m in members:
            m.close()
        broker.stop()


def test_static_member_restart_gets_its_partitions_back(tmp_path):
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    members = []
    try:
        create_topic(broker.bootstrap, "st", 4)
        members = [Member(broker.bootstrap, "st", "st", f"inst-{i}") for i in range(2)]
        wait_for(lambda: all(len(m.owned()) == 2 for m in members), what="2 partitions each")
        before = members[0].owned()
        epoch = describe(broker.port, "st").group_epoch
        members[0].close()              # a static member's close is a temporary leave (-2)
        restarted = Member(broker.bootstrap, "st", "st", "inst-0")
        members.append(restarted)
        wait_for(lambda: restarted.owned() == before, what="the same partitions back")
        g = describe(broker.port, "st")
        assert g.group_epoch == epoch and sorted(m.instance_id for m in g.members) == ["inst-0", "inst-1"]
        assert members[1].owned() and not (members[1].owned() & before)
    finally:
        for m in members:
            m.close()
        broker.stop()


def test_commits_survive_a_broker_sigkill(tmp_path):
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    m = None
    try:
        create_topic(broker.bootstrap, "bk", 3)
        produce(broker.bootstrap, "bk", 3, 20)
        m = Member(broker.bootstrap, "bk", "bk")
        wait_for(lambda: len(m.consumed()) == 60, what="60 records")
        m.kill()
    finally:
        broker.kill()
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    try:
        produce(broker.bootstrap, "bk", 3, 2)
        m2 = Member(broker.bootstrap, "bk", "bk")
        try:
            wait_for(lambda: len(m2.consumed()) == 6, timeout=SESSION_MS / 1000 + 20,
                     what="the 6 new records (the killed member's session must expire first)")
            time.sleep(1)
            assert sorted(m2.consumed()) == [("bk", p, o) for p in range(3) for o in (20, 21)]
        finally:
            m2.close()
    finally:
        broker.stop()


@pytest.mark.matrix
def test_admin_client_describes_lists_and_deletes_a_consumer_group(tmp_path, record_property):
    """confluent-kafka's AdminClient: describe_consumer_groups (ConsumerGroupDescribe: type, state,
    current and target assignment), list_consumer_groups (type and state) and
    delete_consumer_groups once the group is empty. The compatibility matrix's Admin cell of
    confluent-kafka with group.protocol=consumer."""
    from tests.interop.test_matrix_harness import tag
    tag(record_property, "confluent-kafka.consumer", "admin")
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType
    from confluent_kafka.admin import AdminClient
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    members = []
    try:
        create_topic(broker.bootstrap, "ad", 4)
        members = [Member(broker.bootstrap, "adg", "ad") for _ in range(2)]
        wait_for(lambda: all(len(m.owned()) == 2 for m in members), what="2 partitions each")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        wait_for(lambda: admin.describe_consumer_groups(["adg"])["adg"].result(10).state
                 == ConsumerGroupState.STABLE, what="Stable")
        d = admin.describe_consumer_groups(["adg"])["adg"].result(10)
        assert d.type == ConsumerGroupType.CONSUMER and len(d.members) == 2
        current = sorted(tp.partition for m in d.members for tp in m.assignment.topic_partitions)
        target = sorted(tp.partition for m in d.members for tp in m.target_assignment.topic_partitions)
        assert current == target == [0, 1, 2, 3]
        listed = {g.group_id: (g.state, g.type) for g in admin.list_consumer_groups().result(10).valid}
        assert listed["adg"] == (ConsumerGroupState.STABLE, ConsumerGroupType.CONSUMER)
        assert admin.delete_consumer_groups(["adg"])["adg"].exception(10) is not None    # NON_EMPTY_GROUP
        for m in members:
            m.close()
        admin.delete_consumer_groups(["adg"])["adg"].result(10)
        assert "adg" not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}
    finally:
        for m in members:
            m.close()
        broker.stop()
