"""Our client with group.protocol=consumer (KIP-848) end to end, each test against librdkafka's
mock cluster (which implements ConsumerGroupHeartbeat v1 with its own assignor) and against a
kgroup broker: members share a topic, every
message is consumed once across reassignments, a leaving member hands its partitions over,
callbacks revoke before they assign and never let two members own a partition at once, commits
carry the member epoch, static members and regex subscriptions work, and the sync facade too."""
import asyncio
import time
import uuid

import pytest

from kgroup.client import ConsumerRebalanceListener, TopicPartition as TP
from kgroup.client.consumer import Consumer
from kgroup.client.producer import Producer
from kgroup.client.sync import KafkaConsumer, KafkaProducer
from kgroup.testing import rdkafka_mock
from kgroup.testing.broker import KafkaBroker

KIP848 = dict(group_protocol="consumer", auto_offset_reset="earliest")


# The same tests against two brokers: librdkafka's mock cluster and kgroup itself (in-process),
# both with consumer groups heartbeating every 200 ms (the mock's default is 3 s, kgroup's 5 s) and
# a 6 s session; topics auto-created with 4 partitions.
@pytest.fixture(scope="module", params=["rdkafka-mock", "kgroup"])
def cluster(request, tmp_path_factory):
    if request.param == "kgroup":
        overrides = {"group.consumer.heartbeat.interval.ms": 200, "group.consumer.min.heartbeat.interval.ms": 200,
                     "group.consumer.session.timeout.ms": 6000, "group.consumer.min.session.timeout.ms": 6000,
                     "num.partitions": 4}
        with KafkaBroker(tmp_path_factory.mktemp("kip848-client") / "data", overrides) as broker:
            broker.create_topic("six", partitions=6)
            yield broker.bootstrap_servers
        return
    with rdkafka_mock.MockCluster(topics={"six": 6}) as mc:
        mc.set_group_consumer_heartbeat_interval_ms(200)
        mc.set_group_consumer_session_timeout_ms(6000)
        yield mc.bootstrap_servers


def name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def run(coro, timeout=90):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def produce(bootstrap, topic, values):
    async with Producer(bootstrap_servers=bootstrap, linger_ms=1) as p:
        futures = [await p.send(topic, v, key=v) for v in values]
        await asyncio.gather(*futures)


class Ownership(ConsumerRebalanceListener):
    """Records one member's callbacks and checks, across members, that no partition is ever
    assigned to one member while another still owns it."""

    def __init__(self, name, owners):
        self.name, self.owners, self.events = name, owners, []

    def on_partitions_revoked(self, revoked):
        self.events.append(("revoked", sorted(revoked)))
        for tp in revoked:
            assert self.owners.pop(tp) == self.name

    def on_partitions_lost(self, lost):
        self.events.append(("lost", sorted(lost)))
        for tp in lost:
            self.owners.pop(tp, None)

    def on_partitions_assigned(self, assigned):
        self.events.append(("assigned", sorted(assigned)))
        for tp in assigned:
            assert tp not in self.owners, f"{tp} assigned to {self.name} while {self.owners[tp]} owns it"
            self.owners[tp] = self.name


async def poll_all(consumers, got, until, timeout=30):
    """Poll every consumer in turn (one event loop, callbacks never overlap) until ``until()``."""
    deadline = time.monotonic() + timeout
    while not until() and time.monotonic() < deadline:
        for c in consumers:
            for r in await c.poll(20):
                got.append((c, r))


def test_three_members_share_a_topic_every_message_once_and_hand_over_on_leave(cluster):
    topic, group = name("kip848"), name("g")
    owners: dict = {}

    async def go():
        await produce(cluster, topic, [f"a{i}".encode() for i in range(100)])
        listeners = [Ownership(f"c{i}", owners) for i in range(3)]
        consumers = [Consumer(bootstrap_servers=cluster, group_id=group, **KIP848) for _ in range(3)]
        got: list = []
        consumers[0].subscribe([topic], listener=listeners[0])
        await poll_all(consumers[:1], got, lambda: len(got) >= 100)
        assert consumers[0].assignment() == {TP(topic, p) for p in range(4)}  # auto-created: 4 partitions

        async def trickle():  # messages keep coming while the partitions move
            for batch in range(20):
                await produce(cluster, topic, [f"m{batch}-{i}".encode() for i in range(10)])
                await asyncio.sleep(0.05)

        producing = asyncio.ensure_future(trickle())
        for c, listener in zip(consumers[1:], listeners[1:]):  # two more members join mid-stream
            c.subscribe([topic], listener=listener)
        await poll_all(consumers, got, lambda: producing.done() and len(got) >= 300
                       and all(c.group_stable() and c.assignment() for c in consumers))
        await producing
        offsets = [(r.partition, r.offset) for _, r in got]
        assert len(offsets) == 300 and len(set(offsets)) == 300  # every message once: no duplicates
        assert len({r.value for _, r in got}) == 300
        assigned = [c.assignment() for c in consumers]
        assert sum(map(len, assigned)) == 4 and set().union(*assigned) == {TP(topic, p) for p in range(4)}
        assert all(assigned), assigned  # the broker spread the partitions over the three members
        assert {c for c, _ in got} == set(consumers)  # and all three consumed
        # the first member gave partitions up: revoked, never lost, and revoked before assigned again
        first = listeners[0].events
        assert first[0][0] == "assigned" and any(kind == "revoked" for kind, _ in first)
        assert not any(kind == "lost" for listener in listeners for kind, _ in listener.events)
        # a member leaving hands its partitions over; new messages reach the two that stay
        leaving = consumers.pop()
        gone = leaving.assignment()
        await leaving.close()
        assert listeners[2].events[-1] == ("revoked", sorted(gone))
        await produce(cluster, topic, [f"b{i}".encode() for i in range(100)])
        got.clear()
        await poll_all(consumers, got, lambda: len(got) >= 100
                       and set().union(*(c.assignment() for c in consumers)) == {TP(topic, p) for p in range(4)})
        assert sorted(r.value for _, r in got) == sorted(f"b{i}".encode() for i in range(100))
        for c in consumers:
            await c.close()
        assert owners == {}

    run(go())


def test_revoke_runs_before_assign_within_one_reconciliation(cluster):
    """Three members join a 6-partition topic one by one, then the first unsubscribes: each
    reconciliation calls on_partitions_revoked, then on_partitions_assigned (Java's order), and
    a partition is never assigned while another member still owns it (checked in the listener)."""
    group = name("g")
    owners: dict = {}

    async def go():
        listeners = [Ownership(f"c{i}", owners) for i in range(3)]
        consumers = [Consumer(bootstrap_servers=cluster, group_id=group, **KIP848) for _ in range(3)]
        got: list = []
        for i, (c, listener) in enumerate(zip(consumers, listeners)):
            c.subscribe(["six"], listener=listener)
            await poll_all(consumers[:i + 1], got, lambda i=i: all(x.group_stable() and x.assignment()
                                                                   for x in consumers[:i + 1]))
        assert len(owners) == 6 and {n for n in owners.values()} == {"c0", "c1", "c2"}
        await consumers[0].unsubscribe()
        await poll_all(consumers[1:], got, lambda: len(owners) == 6 and all(c.group_stable() for c in consumers[1:]))
        assert set(owners) == {TP("six", p) for p in range(6)}
        for listener in listeners:
            kinds = [k for k, _ in listener.events]
            if listener is listeners[0]:
                kinds = kinds[:-1]  # its last revocation is the unsubscribe
            assert kinds[0] == "assigned"
            for i, k in enumerate(kinds[1:], 1):  # a revocation is always followed by an assignment
                if kinds[i - 1] == "revoked":
                    assert k == "assigned"
        assert listeners[0].events[-1][0] == "revoked" and any(k == "revoked" for k, _ in listeners[1].events)
        assert not any(k == "lost" for listener in listeners for k, _ in listener.events)
        for c in consumers:
            await c.close()

    run(go())


def test_commit_carries_the_member_epoch_and_a_restarted_group_resumes(cluster):
    topic, group = name("commit"), name("g")

    async def go():
        await produce(cluster, topic, [f"v{i}".encode() for i in range(20)])
        async with Consumer(bootstrap_servers=cluster, group_id=group, enable_auto_commit=False, **KIP848) as c:
            c.subscribe([topic])
            got: list = []
            await poll_all([c], got, lambda: len(got) >= 20)
            machine = c._coordinator.machine
            assert machine.member_epoch > 0 and len(machine.member_id) == 22
            await c.commit()
            committed = await c.committed({TP(topic, p) for p in range(4)})
            assert sum(o.offset for o in committed.values() if o is not None) == 20
        await produce(cluster, topic, [b"after"])
        async with Consumer(bootstrap_servers=cluster, group_id=group, **KIP848) as c:
            c.subscribe([topic])
            got = []
            await poll_all([c], got, lambda: len(got) >= 1)
            assert [r.value for _, r in got] == [b"after"]

    run(go())


def test_static_member_and_regex_subscription(cluster):
    prefix, group = name("rx"), name("g")

    async def go():
        await produce(cluster, f"{prefix}-a", [b"a"])
        await produce(cluster, f"{prefix}-b", [b"b"])
        await produce(cluster, name("other"), [b"no"])
        async with Consumer(bootstrap_servers=cluster, group_id=group, group_instance_id="static-1", **KIP848) as c:
            c.subscribe(pattern=f"{prefix}-.*")
            got: list = []
            await poll_all([c], got, lambda: len(got) >= 2)
            assert sorted(r.value for _, r in got) == [b"a", b"b"]
            assert {tp.topic for tp in c.assignment()} == {f"{prefix}-a", f"{prefix}-b"}
            machine = c._coordinator.machine
        assert machine.member_epoch == 0 and machine.state.name == "UNSUBSCRIBED"  # left with -2

    run(go())


def test_sync_kafka_consumer_with_the_consumer_protocol(cluster):
    topic, group = name("sync"), name("g")
    with KafkaProducer(bootstrap_servers=cluster) as p:
        for i in range(20):
            p.send(topic, f"s{i}".encode(), key=str(i).encode())
        p.flush()
    events = []

    class Listener(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned):
            events.append(("assigned", sorted(assigned)))

        def on_partitions_revoked(self, revoked):
            events.append(("revoked", sorted(revoked)))

    with KafkaConsumer(bootstrap_servers=cluster, group_id=group, **KIP848) as c:
        c.subscribe([topic], listener=Listener())
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 20 and time.monotonic() < deadline:
            got += c.poll(200)
        assert sorted(r.value for r in got) == sorted(f"s{i}".encode() for i in range(20))
        c.commit()
    assert events[0] == ("assigned", [TP(topic, p) for p in range(4)])
    assert events[-1] == ("revoked", [TP(topic, p) for p in range(4)])


def test_regex_on_a_broker_with_only_v0_fails_instead_of_dropping_the_regex():
    from kgroup.client.errors import UnsupportedVersionError
    with rdkafka_mock.MockCluster(topics={"old": 1}, caps={68: 0}) as mc:
        async def go():
            async with Consumer(bootstrap_servers=mc.bootstrap_servers, group_id=name("g"), **KIP848) as c:
                c.subscribe(pattern="o.*")
                with pytest.raises(UnsupportedVersionError, match="regular expressions"):
                    deadline = time.monotonic() + 20
                    while time.monotonic() < deadline:
                        await c.poll(100)
        run(go(), timeout=30)
