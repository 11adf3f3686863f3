"""KIP-848 online migration with real clients: confluent-kafka 2.16.1 (librdkafka 2.16) consumers
with ``group.protocol=classic`` and ``group.protocol=consumer`` in one group, each in its own process.

Checked:
- a mixed group (two classic members, cooperative-sticky or eager range, slow to revoke, plus two
  consumer-protocol members): the classic group is upgraded when the first consumer-protocol member
  joins, every record is consumed exactly once while a producer writes, and no partition is owned
  by two members at any moment (the callbacks' timestamps; the coordinator's view sampled every
  50 ms);
- a rolling upgrade of a running classic group to the consumer protocol, one member at a time
  (clean close, a new process), and back: every record once, no partition owned twice, the group's
  type consumer after the upgrade and classic again after the downgrade;
- kafka-python (classic only) inside a consumer group.
None of these may skip.
"""
from __future__ import annotations

import threading
import time

import pytest

from kgroup.protocol.messages.list_groups import ListGroupsRequest
from tests.harness import BrokerProcess, RawClient
from tests.interop.test_consumer_protocol import (MemberProcess, Sampler, assert_never_owned_twice, create_topic,
                                                  describe, wait_for)

pytestmark = pytest.mark.interop

OVERRIDES = ["group.consumer.min.session.timeout.ms=6000", "group.consumer.session.timeout.ms=6000",
             "group.consumer.min.heartbeat.interval.ms=500", "group.consumer.heartbeat.interval.ms=500",
             "group.initial.rebalance.delay.ms=0"]

# One consumer process, classic or consumer protocol: one JSON line per event on stdout (t = wall
# clock, shared by the processes). A record counts as consumed once its offset is committed
# (synchronously, before the next poll), so whoever owns a partition next starts after it.
MEMBER = r'''
import json, signal, sys, time
from confluent_kafka import Consumer, KafkaException, TopicPartition
bootstrap, group, topic, protocol, strategy, revoke_delay = sys.argv[1:7]
def emit(**kw):
    kw["t"] = time.time()
    print(json.dumps(kw), flush=True)
conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
        "auto.offset.reset": "earliest", "enable.auto.commit": False}
if protocol == "classic":
    conf.update({"partition.assignment.strategy": strategy, "session.timeout.ms": 6000,
                 "heartbeat.interval.ms": 300})
def revoked(_c, ps):
    # a member that takes its time to let go (flushing state, say): the partitions are still its
    # own until this returns, so nobody else may have them meanwhile
    time.sleep(float(revoke_delay))
    emit(ev="revoke", parts=[[p.topic, p.partition] for p in ps])
c = Consumer(conf)
c.subscribe([topic],
            on_assign=lambda _c, ps: emit(ev="assign", parts=[[p.topic, p.partition] for p in ps]),
            on_revoke=revoked,
            on_lost=lambda _c, ps: emit(ev="lost", parts=[[p.topic, p.partition] for p in ps]))
emit(ev="started")
stopping = []
# SIGINT ends the loop between records: a record committed but not yet reported is never cut off
signal.signal(signal.SIGINT, lambda *_: stopping.append(1))
try:
    while not stopping:
        m = c.poll(0.1)
        if m is None or m.error():
            continue
        try:
            c.commit(message=m, asynchronous=False)
        except KafkaException as e:
            # a commit refused during a rebalance: the record is not consumed; read it again if
            # the partition is still ours (its next owner starts from the committed offset)
            emit(ev="commit_error", error=str(e), topic=m.topic(), part=m.partition(), offset=m.offset())
            try:
                c.seek(TopicPartition(m.topic(), m.partition(), m.offset()))
            except KafkaException:
                pass
            continue
        emit(ev="msg", topic=m.topic(), part=m.partition(), offset=m.offset())
finally:
    emit(ev="closing")
    c.close()
    emit(ev="closed")
'''


class Member(MemberProcess):
    def __init__(self, bootstrap, group, topic, protocol, strategy="range", revoke_delay=0.0):
        super().__init__(MEMBER, bootstrap, group, topic, protocol, strategy, str(revoke_delay))
        self.protocol = protocol


class SteadyProducer(threading.Thread):
    """Writes round-robin over the partitions, ``rate`` records a second, until stopped."""

    def __init__(self, bootstrap, topic, partitions, rate=200):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions, self.rate = bootstrap, topic, partitions, rate
        self.sent = 0
        self.stop_flag = False

    def run(self):
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        while not self.stop_flag:
            for _ in range(self.rate // 20):
                p.produce(self.topic, str(self.sent).encode(), partition=self.sent % self.partitions)
                self.sent += 1
            p.poll(0)
            time.sleep(0.05)
        p.flush(15)


def group_type(port, group) -> str | None:
    c = RawClient(port)
    try:
        groups = c.request(ListGroupsRequest(states_filter=[], types_filter=[]), 5).groups
    finally:
        c.close()
    return next((g.group_type for g in groups if g.group_id == group), None)


def check_exactly_once(members, produced, topic, partitions):
    consumed = [r for m in members for r in m.consumed()]
    seen, dupes = set(), set()
    for r in consumed:
        (dupes if r in seen else seen).add(r)
    assert not dupes, f"consumed twice: {sorted(dupes)}; by " + "; ".join(
        f"member {i} ({m.protocol}): " + ", ".join(
            f"{e['ev']}@{e['t']:.3f}{e.get('parts') or e.get('offset', '')}" for e in m.events
            if e["ev"] != "msg" or (e["topic"], e["part"], e["offset"]) in dupes)
        for i, m in enumerate(members))
    assert len(consumed) == produced, (len(consumed), produced)
    assert {(t, p) for t, p, _ in consumed} == {(topic, p) for p in range(partitions)}


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
def test_mixed_group_classic_and_consumer_members(tmp_path, strategy):
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    members, sampler, producer = [], None, None
    topic, group, n = "mx", f"mixed-{strategy}", 6
    try:
        create_topic(broker.bootstrap, topic, n)
        producer = SteadyProducer(broker.bootstrap, topic, n)
        producer.start()
        members = [Member(broker.bootstrap, group, topic, "classic", strategy, revoke_delay=0.5) for _ in range(2)]
        wait_for(lambda: sum(len(m.owned()) for m in members) == n and all(m.owned() for m in members),
                 what="the classic group to form")
        assert group_type(broker.port, group) == "classic"
        sampler = Sampler(broker.port, group)
        sampler.start()
        members += [Member(broker.bootstrap, group, topic, "consumer") for _ in range(2)]
        wait_for(lambda: all(m.owned() for m in members) and sum(len(m.owned()) for m in members) == n,
                 timeout=40, what="all four members to own partitions")
        assert group_type(broker.port, group) == "consumer"
        g = describe(broker.port, group)
        assert len(g.members) == 4
        time.sleep(1)
        producer.stop_flag = True
        producer.join(20)
        wait_for(lambda: sum(len(m.consumed()) for m in members) >= producer.sent, timeout=30,
                 what="every record")
        time.sleep(0.5)
        check_exactly_once(members, producer.sent, topic, n)
        assert_never_owned_twice(members)
        sampler.stop_flag = True
        sampler.join(10)
        assert sampler.samples > 10 and not sampler.overlaps, sampler.overlaps
    finally:
        if sampler is not None:
            sampler.stop_flag = True
        if producer is not None:
            producer.stop_flag = True
        for m in members:
            m.close()
        broker.stop()


def test_rolling_upgrade_to_the_consumer_protocol_and_back(tmp_path):
    """A running classic group of four cooperative-sticky consumers, restarted one by one with
    group.protocol=consumer (clean close, then a new process), then one by one back to classic."""
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    topic, group, n = "roll", "rolling", 8
    live, everyone, sampler, producer = [], [], None, None
    started = time.monotonic()

    def settled():
        owned = [m.owned() for m in live]
        return all(owned) and sum(len(o) for o in owned) == n and len(set().union(*owned)) == n

    def restart(i, protocol):
        live[i].close()
        live[i] = Member(broker.bootstrap, group, topic, protocol, "cooperative-sticky", revoke_delay=0.3)
        everyone.append(live[i])
        wait_for(settled, timeout=30, what=f"the group to settle after member {i} restarted as {protocol}")

    try:
        create_topic(broker.bootstrap, topic, n)
        producer = SteadyProducer(broker.bootstrap, topic, n)
        producer.start()
        live = [Member(broker.bootstrap, group, topic, "classic", "cooperative-sticky", revoke_delay=0.3)
                for _ in range(4)]
        everyone += live
        wait_for(settled, what="the classic group to form")
        assert group_type(broker.port, group) == "classic"
        sampler = Sampler(broker.port, group)
        sampler.start()
        for i in range(4):
            restart(i, "consumer")
        assert group_type(broker.port, group) == "consumer"
        wait_for(lambda: describe(broker.port, group).group_state == "Stable", what="a Stable consumer group")
        for i in range(4):
            restart(i, "classic")
        assert group_type(broker.port, group) == "classic"
        producer.stop_flag = True
        producer.join(20)
        try:
            wait_for(lambda: sum(len(m.consumed()) for m in everyone) >= producer.sent, timeout=30,
                     what="every record")
        except AssertionError:
            per = {}
            for m in everyone:
                for _t, p, _o in m.consumed():
                    per[p] = per.get(p, 0) + 1
            got = {(p, o) for m in everyone for _, p, o in m.consumed()}
            missing = [(p, o) for p in range(n) for o in range(max(o for q, o in got if q == p) + 1)
                       if (p, o) not in got]
            errs = [(i, e) for i, m in enumerate(everyone) for e in m.events
                    if e["ev"] == "commit_error" and (e["part"], e["offset"]) in missing]
            raise AssertionError(f"missing {missing} commit errors {errs} "
                                 f"sent {producer.sent}, consumed per partition {sorted(per.items())}, live "
                                 f"owned {[sorted(m.owned()) for m in live]}, last events "
                                 f"{[[e for e in m.events if e['ev'] != 'msg'][-6:] for m in live]}") from None
        time.sleep(0.5)
        check_exactly_once(everyone, producer.sent, topic, n)
        assert_never_owned_twice(everyone)
        sampler.stop_flag = True
        sampler.join(10)
        assert sampler.samples > 10 and not sampler.overlaps, sampler.overlaps
        assert time.monotonic() - started < 60
    finally:
        if sampler is not None:
            sampler.stop_flag = True
        if producer is not None:
            producer.stop_flag = True
        for m in live:
            m.close()
        broker.stop()


def test_kafka_python_classic_member_inside_a_consumer_group(tmp_path):
    """kafka-python 3.0.12 (classic protocol only, eager range) joins a group of librdkafka
    consumer-protocol members and leaves it again: it gets its share, and every record is consumed
    once with commits checked against its member epoch as the generation."""
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.structs import OffsetAndMetadata, TopicPartition
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    topic, group, n = "kp", "kp-group", 4
    members, producer, kp_seen, stop, errors = [], None, [], threading.Event(), []

    def run_kafka_python():
        try:
            c = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group, client_id="kafka-python",
                              partition_assignment_strategy=[RangePartitionAssignor], auto_offset_reset="earliest",
                              enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=300)
            while not stop.is_set():
                for recs in c.poll(200).values():
                    for r in recs:
                        try:
                            c.commit({TopicPartition(r.topic, r.partition): OffsetAndMetadata(r.offset + 1, "", -1)})
                        except Exception as e:      # refused during a rebalance: read again
                            errors.append(repr(e))
                            c.seek(TopicPartition(r.topic, r.partition), r.offset)
                            break
                        kp_seen.append((r.topic, r.partition, r.offset))
            c.close()
        except BaseException as e:       # surfaced by the test
            errors.append(("fatal", repr(e)))

    t = threading.Thread(target=run_kafka_python, daemon=True)
    try:
        create_topic(broker.bootstrap, topic, n)
        producer = SteadyProducer(broker.bootstrap, topic, n, rate=100)
        producer.start()
        members = [Member(broker.bootstrap, group, topic, "consumer") for _ in range(2)]
        wait_for(lambda: sum(len(m.owned()) for m in members) == n, what="the consumer group to form")
        t.start()
        stable = []     # the Stable snapshot itself: a later describe may already be in the next rebalance

        def three_members_stable():
            g = describe(broker.port, group)
            if g.group_state == "Stable" and len(g.members) == 3:
                stable.append(g)
            return bool(stable)
        wait_for(three_members_stable, timeout=30, what="kafka-python inside the group")
        kp = [m for m in stable[0].members if m.client_id == "kafka-python"]
        assert kp and kp[0].assignment.topic_partitions, "kafka-python got no partitions"
        assert group_type(broker.port, group) == "consumer"
        time.sleep(1)
        stop.set()
        t.join(30)
        assert not [e for e in errors if isinstance(e, tuple)], errors
        wait_for(lambda: describe(broker.port, group).members and len(describe(broker.port, group).members) == 2,
                 what="kafka-python to leave")
        producer.stop_flag = True
        producer.join(20)
        wait_for(lambda: len(kp_seen) + sum(len(m.consumed()) for m in members) >= producer.sent, timeout=30,
                 what="every record")
        time.sleep(0.5)
        consumed = kp_seen + [r for m in members for r in m.consumed()]
        assert len(consumed) == len(set(consumed)) == producer.sent
        assert kp_seen
    finally:
        stop.set()
        if producer is not None:
            producer.stop_flag = True
        for m in members:
            m.close()
        broker.stop()
