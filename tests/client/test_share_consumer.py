"""Our ShareConsumer (KIP-932) end to end against kgroup (in-process KafkaBroker, share heartbeats
every 500 ms) and, for the basic scenarios, against librdkafka's mock cluster, which implements
share groups (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge v1). Nothing here may skip.

Checked: implicit acknowledgement delivers each record once; explicit RELEASE redelivers with
delivery count 2 and REJECT never again, with per-partition commit results and the commit
callback; an unacknowledged record comes back with delivery count 2 after
share.record.lock.duration.ms (time travel, no sleep); several of our consumers on one partition
all receive records and none twice; a consumer closed with records acquired hands them to
another; fencing makes the member rejoin with epoch 0 and the same member id; a lost share
session is reopened; the blocking facade; config errors are Java's."""
import asyncio
import threading
import time
import uuid

import pytest

from kgroup.client import AcknowledgeType, KafkaShareConsumer, ShareConsumer, TopicPartition as TP
from kgroup.client.admin import Admin, NewTopic
from kgroup.client.config import ConfigError
from kgroup.client.errors import IllegalStateError
from kgroup.client.producer import Producer
from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.testing import rdkafka_mock
from kgroup.testing.broker import KafkaBroker

GROUP_RESOURCE = 32
OVERRIDES = {"group.share.heartbeat.interval.ms": 500, "group.share.min.heartbeat.interval.ms": 500}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with KafkaBroker(tmp_path_factory.mktemp("share-client") / "data", OVERRIDES) as b:
        yield b


@pytest.fixture
def mock():
    with rdkafka_mock.MockCluster(topics={"mt": 1}) as mc:
        yield mc


def name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def run(coro, timeout=90):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def produce(bootstrap, topic, n, partition=0, start=0):
    async with Producer(bootstrap_servers=bootstrap, linger_ms=1) as p:
        futures = [await p.send(topic, b"v%d" % i, partition=partition) for i in range(start, start + n)]
        await asyncio.gather(*futures)


async def setup(bootstrap, topic, group, partitions=1, n=0, **group_configs):
    """A topic, the group reading it from the earliest offset, ``n`` records in partition 0."""
    async with Admin(bootstrap_servers=bootstrap) as a:
        errors = await a.create_topics([NewTopic(topic, partitions, 1)])
        assert all(e is None for e in errors.values()), errors
        configs = {"share.auto.offset.reset": "earliest", **group_configs}
        await a.incremental_alter_configs(GROUP_RESOURCE, group, [(k, 0, str(v)) for k, v in configs.items()])
    if n:
        await produce(bootstrap, topic, n)


def acknowledged(completed):
    """What the acknowledgement commit callback saw: offsets per partition, the errors."""
    offsets: dict = {}
    for by_tp, _ in completed:
        for tp, o in by_tp.items():
            offsets.setdefault(tp, set()).update(o)
    return offsets, {e for _, e in completed}


async def poll_until(c, want, timeout=20.0, on_record=None):
    """(partition, offset, delivery count) of what ``c`` polls until ``want`` records or the timeout."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for r in await c.poll(200):
            got.append((r.partition, r.offset, r.delivery_count))
            if on_record is not None:
                on_record(r)
    return got


# --- the same scenarios against kgroup and librdkafka's mock --------------------------------------

@pytest.fixture(params=["kgroup", "rdkafka-mock"])
def cluster(request):
    """(bootstrap, topic, group, produce-when-assigned): the mock starts a share group at the latest
    offset, so records are produced once the member has fetched; kgroup's group reads from the
    earliest."""
    if request.param == "kgroup":
        b = request.getfixturevalue("broker")
        topic, group = name("t"), name("g")
        run(setup(b.bootstrap_servers, topic, group))
        return b.bootstrap_servers, topic, group
    mc = request.getfixturevalue("mock")
    return mc.bootstrap_servers, "mt", name("g")


def share_members(broker, group):
    """The member ids of a share group, from its coordinator shard."""
    gc = broker.group_coordinator
    g = gc.shards[gc.shard_for(group)].groups.get(group)
    return list(g.members) if g is not None else []


async def send(p, topic, n):
    await asyncio.gather(*[await p.send(topic, b"v%d" % i, partition=0) for i in range(n)])


async def joined(c, timeout=20.0):
    """Poll until the member has its assignment and has fetched once (its share session open)."""
    deadline = time.monotonic() + timeout
    while not c.assignment() and time.monotonic() < deadline:
        assert await c.poll(100) == []
    assert c.assignment(), "no assignment"
    assert await c.poll(300) == []


def test_implicit_acknowledgement_each_record_once(cluster):
    bootstrap, topic, group = cluster

    async def go():
        # One producer throughout: librdkafka's mock closes every share session on a broker when
        # any connection to it closes (a short-lived producer's would end the consumer's).
        async with Producer(bootstrap_servers=bootstrap, linger_ms=1) as p, \
                ShareConsumer(bootstrap_servers=bootstrap, group_id=group) as c:
            c.subscribe([topic])
            await joined(c)
            assert c.assignment() == {TP(topic, 0)} and c.subscription() == {topic}
            await send(p, topic, 10)
            got = await poll_until(c, 10)
            assert sorted(o for _, o, _ in got) == list(range(10)) and {d for _, _, d in got} == {1}
            assert await poll_until(c, 1, timeout=2) == []      # ACCEPTed by the next poll: never again
            assert c.acquisition_lock_timeout_ms() and c.acquisition_lock_timeout_ms() > 0
        async with ShareConsumer(bootstrap_servers=bootstrap, group_id=group) as again:
            again.subscribe([topic])
            assert await poll_until(again, 1, timeout=3) == []
    run(go())


def test_explicit_release_redelivers_reject_never_again(cluster):
    bootstrap, topic, group = cluster

    async def go():
        async with Producer(bootstrap_servers=bootstrap, linger_ms=1) as p, \
                ShareConsumer(bootstrap_servers=bootstrap, group_id=group, share_acknowledgement_mode="explicit") as c:
            completed = []
            c.set_acknowledgement_commit_callback(lambda offsets, error: completed.append((offsets, error)))
            c.subscribe([topic])
            await joined(c)
            await send(p, topic, 4)
            kinds = {0: AcknowledgeType.RELEASE, 1: AcknowledgeType.REJECT}
            first = await poll_until(c, 4, on_record=lambda r: c.acknowledge(r, kinds.get(r.offset,
                                                                                           AcknowledgeType.ACCEPT)))
            assert sorted(o for _, o, _ in first) == [0, 1, 2, 3]
            assert await c.commit_sync() == {TP(topic, 0): None}
            assert acknowledged(completed) == ({TP(topic, 0): {0, 1, 2, 3}}, {None})
            again = await poll_until(c, 1, on_record=lambda r: c.acknowledge(r))
            assert again == [(0, 0, 2)]                          # RELEASE: delivered again, second time
            assert await c.commit_sync() == {TP(topic, 0): None}
            assert await poll_until(c, 1, timeout=2) == []       # REJECT and ACCEPT: never again
    run(go())


# --- kgroup only ------------------------------------------------------------------------------------

def test_explicit_mode_refuses_a_poll_with_records_unacknowledged(broker):
    topic, group = name("t"), name("g")

    async def go():
        await setup(broker.bootstrap_servers, topic, group, n=3)
        async with ShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                                 share_acknowledgement_mode="explicit") as c:
            c.subscribe([topic])
            records = []
            while not records:
                records = await c.poll(500)
            with pytest.raises(IllegalStateError, match="must be acknowledged"):
                await c.poll(0)
            for r in records:
                c.acknowledge(r)
            with pytest.raises(IllegalStateError, match="already been acknowledged"):
                c.acknowledge(records[0], AcknowledgeType.REJECT)
            with pytest.raises(IllegalStateError, match="not in flight"):
                c.acknowledge_offset(topic, 0, 99)
            await c.poll(0)
        async with ShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group) as implicit:
            implicit.subscribe([topic])
            with pytest.raises(IllegalStateError, match="Implicit acknowledgement"):
                implicit.acknowledge(records[0])
    run(go())


def test_unacknowledged_records_come_back_after_the_lock_duration(broker):
    """The holder never acknowledges; moving the broker's clock past share.record.lock.duration.ms
    releases them, and the other member gets them with delivery count 2."""
    topic, group = name("t"), name("g")

    async def go():
        await setup(broker.bootstrap_servers, topic, group, n=3, **{"share.record.lock.duration.ms": 15000})
        holder = ShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                               share_acknowledgement_mode="explicit")
        other = ShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group)
        try:
            holder.subscribe([topic])
            got = await poll_until(holder, 3)
            assert sorted(o for _, o, _ in got) == [0, 1, 2]
            other.subscribe([topic])
            await joined(other)
            assert await other.poll(300) == []              # locked by the holder
            await asyncio.to_thread(broker.advance_time, 16)
            again = await poll_until(other, 3)
            assert sorted((o, d) for _, o, d in again) == [(0, 2), (1, 2), (2, 2)]
            for r in range(3):                               # the holder's locks are gone
                holder.acknowledge_offset(topic, 0, r)
            result = await holder.commit_sync()
            assert result[TP(topic, 0)].code == ErrorCode.INVALID_RECORD_STATE
        finally:
            await holder.close()
            await other.close()
    run(go())


def test_several_consumers_on_one_partition_all_receive_records(broker):
    n = 300
    topic, group = name("t"), name("g")

    async def go():
        await setup(broker.bootstrap_servers, topic, group)
        consumers = [ShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group, max_poll_records=5)
                     for _ in range(3)]
        got = [[] for _ in consumers]
        stop = asyncio.Event()

        async def consume(i):
            c = consumers[i]
            c.subscribe([topic])
            while not stop.is_set():
                for r in await c.poll(100):
                    got[i].append(r.offset)
                    await asyncio.sleep(0.002)       # some work per record
        tasks = [asyncio.create_task(consume(i)) for i in range(3)]
        try:
            deadline = time.monotonic() + 20
            while not all(c.assignment() for c in consumers) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            for start in range(0, n, 10):
                await produce(broker.bootstrap_servers, topic, 10, start=start)
            deadline = time.monotonic() + 30
            while sum(map(len, got)) < n and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        finally:
            stop.set()
            await asyncio.gather(*tasks)
            for c in consumers:
                await c.close()
        assert sorted(o for g in got for o in g) == list(range(n))      # each once, none lost
        assert all(got), [len(g) for g in got]                           # all three received records
    run(go())


def test_a_consumer_closed_with_records_acquired_hands_them_over(broker):
    topic, group = name("t"), name("g")

    async def go():
        await setup(broker.bootstrap_servers, topic, group, n=5)
        first = ShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group)
        first.subscribe([topic])
        got = await poll_until(first, 5)
        assert sorted(o for _, o, _ in got) == list(range(5))
        assert broker.call(share_members, group) == [first.member_id]
        await first.close()             # implicit mode: the last poll's records are released, not accepted
        assert broker.call(share_members, group) == []          # left with epoch -1
        assert broker.call(lambda br: br.share_partitions.sessions.get(group, first.member_id)) is None
        async with ShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group) as second:
            second.subscribe([topic])
            again = await poll_until(second, 5)
            assert sorted((o, d) for _, o, d in again) == [(o, 2) for o in range(5)]
    run(go())


def test_fencing_rejoins_with_epoch_zero_and_the_same_member_id(broker):
    topic, group = name("t"), name("g")

    async def go():
        await setup(broker.bootstrap_servers, topic, group, n=2)
        async with ShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group) as c:
            c.subscribe([topic])
            assert len(await poll_until(c, 2)) == 2
            member, epoch = c.member_id, c._machine.member_epoch
            assert epoch > 0
            sent = []
            original = c._machine._build_heartbeat

            def spy():
                req, s = original()
                sent.append((req.member_id, req.member_epoch, req.subscribed_topic_names))
                return req, s
            c._machine._build_heartbeat = spy
            await asyncio.to_thread(broker.inject_errors, "ShareGroupHeartbeat", ["FENCED_MEMBER_EPOCH"], group=group)
            deadline = time.monotonic() + 10
            while not any(e == 0 for _, e, _ in sent[1:]) or c._machine.member_epoch <= 0:
                assert time.monotonic() < deadline, sent
                await c.poll(100)
            rejoin = next(s for s in sent[1:] if s[1] == 0)
            assert rejoin == (member, 0, [topic])             # KIP-1082: the same id, full request
            await produce(broker.bootstrap_servers, topic, 1, start=2)
            assert [o for _, o, _ in await poll_until(c, 1)] == [2]
    run(go())


def test_a_lost_share_session_is_reopened(broker):
    topic, group = name("t"), name("g")

    async def go():
        await setup(broker.bootstrap_servers, topic, group, n=2)
        async with ShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group) as c:
            c.subscribe([topic])
            assert len(await poll_until(c, 2)) == 2
            [node] = c._nodes.values()
            assert node.handler.epoch > 0
            await asyncio.to_thread(broker.inject_errors, "ShareFetch", ["SHARE_SESSION_NOT_FOUND"], group=group)
            await produce(broker.bootstrap_servers, topic, 2, start=2)
            # the session error fails the piggy-backed acknowledgement of 0-1; the new session
            # replaces the old one, which releases them: they come again (count 2) with the new records
            got = await poll_until(c, 4)
            assert sorted((o, d) for _, o, d in got) == [(0, 2), (1, 2), (2, 1), (3, 1)]
            assert node.handler.epoch > 0
    run(go())


def test_blocking_facade(broker):
    topic, group = name("t"), name("g")
    run(setup(broker.bootstrap_servers, topic, group, n=3))
    completed = []
    with KafkaShareConsumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                             "share.acknowledgement.mode": "explicit"}) as c:
        c.set_acknowledgement_commit_callback(lambda offsets, error: completed.append((offsets, error)))
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            for r in c.poll(200):
                got.append(r)
                c.acknowledge(r, AcknowledgeType.ACCEPT)
        assert sorted(r.offset for r in got) == [0, 1, 2] and {r.value for r in got} == {b"v0", b"v1", b"v2"}
        assert c.commit_sync() == {TP(topic, 0): None}
        assert acknowledged(completed) == ({TP(topic, 0): {0, 1, 2}}, {None})
        assert c.assignment() == {TP(topic, 0)}
        # one thread at a time, as Java's ConcurrentModificationException
        polling = threading.Thread(target=c.poll, args=(1500,))
        polling.start()
        time.sleep(0.3)
        with pytest.raises(IllegalStateError, match="multi-threaded"):
            c.subscription()
        polling.join()
        assert c.subscription() == {topic}


def test_config_errors_are_javas():
    with pytest.raises(ConfigError, match="valid group.id"):
        ShareConsumer(bootstrap_servers="127.0.0.1:1")
    with pytest.raises(ConfigError, match="auto.offset.reset, enable.auto.commit cannot be set when using a share group"):
        ShareConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "auto.offset.reset": "earliest",
                       "enable.auto.commit": "false"})
    with pytest.raises(ConfigError, match="share.acknowledgement.mode"):
        ShareConsumer(bootstrap_servers="127.0.0.1:1", group_id="g", share_acknowledgement_mode="sometimes")
    with pytest.raises(ConfigError, match="Unknown share consumer configuration 'no.such.key'"):
        ShareConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "no.such.key": 1})


def test_unsubscribe_leaves_and_subscribe_joins_again(broker):
    topic, group = name("t"), name("g")

    async def go():
        await setup(broker.bootstrap_servers, topic, group, n=2)
        async with ShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group) as c:
            c.subscribe([topic])
            assert len(await poll_until(c, 2)) == 2
            epoch = c._machine.member_epoch
            await c.unsubscribe()
            assert c.assignment() == set() and c.subscription() == set() and c._machine.member_epoch == 0
            with pytest.raises(IllegalStateError, match="not subscribed"):
                await c.poll(0)
            c.subscribe([topic])
            await produce(broker.bootstrap_servers, topic, 1, start=2)
            got = await poll_until(c, 1)
            # 0-1 stay acquired by this member across the re-join and are ACCEPTed with its next fetch
            assert got == [(0, 2, 1)] and c._machine.member_epoch > epoch
    run(go())


def test_renew_keeps_the_lock_and_returns_the_record_again(broker):
    """RENEW (ShareAcknowledge v2, KIP-1222): the next poll returns the same record, and it stays
    this member's past its first lock; ACCEPT then succeeds."""
    topic, group = name("t"), name("g")

    async def go():
        await setup(broker.bootstrap_servers, topic, group, n=1, **{"share.record.lock.duration.ms": 15000})
        c = ShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group,
                          share_acknowledgement_mode="explicit")
        other = ShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group)
        completed = []
        try:
            c.set_acknowledgement_commit_callback(lambda offsets, error: completed.append((offsets, error)))
            c.subscribe([topic])
            records = []
            while not records:
                records = await c.poll(200)
            other.subscribe([topic])
            await joined(other)
            await asyncio.to_thread(broker.advance_time, 10)
            c.acknowledge(records[0], AcknowledgeType.RENEW)
            again = await c.poll(0)
            assert [(r.offset, r.delivery_count) for r in again] == [(0, 1)]
            while not completed:                    # the RENEW answered
                assert await c.commit_sync() == {}
                await asyncio.sleep(0.05)
            assert completed == [({TP(topic, 0): {0}}, None)]
            await asyncio.to_thread(broker.advance_time, 10)     # past the first lock, not the renewed one
            assert await poll_until(other, 1, timeout=1) == []
            c.acknowledge(again[0], AcknowledgeType.ACCEPT)
            assert await c.commit_sync() == {TP(topic, 0): None}
        finally:
            await c.close()
            await other.close()
    run(go())


@pytest.mark.kafka_broker_config({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                  "super.users": "User:admin", **OVERRIDES})
def test_over_sasl_ssl_and_not_authorized(kafka_broker_secure):
    """The security settings every client takes; a user without READ on the group gets
    GROUP_AUTHORIZATION_FAILED from poll (fatal, as Java)."""
    b = kafka_broker_secure
    admin = b.security_config("SASL_SSL", "admin", "SCRAM-SHA-512")
    alice = b.security_config("SASL_SSL", "alice", "SCRAM-SHA-256")

    async def go():
        await setup_with(admin, "t", "g", n=2)
        async with ShareConsumer(config={**admin, "group.id": "g"}) as c:
            c.subscribe(["t"])
            assert sorted(o for _, o, _ in await poll_until(c, 2)) == [0, 1]
        async with ShareConsumer(config={**alice, "group.id": "g"}) as c:
            c.subscribe(["t"])
            with pytest.raises(KafkaError) as e:
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    await c.poll(100)
            assert e.value.code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    run(go())


async def setup_with(config, topic, group, n=0):
    async with Admin(config=config) as a:
        errors = await a.create_topics([NewTopic(topic, 1, 1)])
        assert all(e is None for e in errors.values()), errors
        await a.incremental_alter_configs(GROUP_RESOURCE, group, [("share.auto.offset.reset", 0, "earliest")])
    async with Producer(config=config) as p:
        await asyncio.gather(*[await p.send(topic, b"v%d" % i, partition=0) for i in range(n)])


def test_commit_async_reports_through_the_callback(broker):
    topic, group = name("t"), name("g")

    async def go():
        await setup(broker.bootstrap_servers, topic, group, n=3)
        async with ShareConsumer(bootstrap_servers=broker.bootstrap_servers, group_id=group) as c:
            completed = []
            c.set_acknowledgement_commit_callback(lambda offsets, error: completed.append((offsets, error)))
            c.subscribe([topic])
            got = await poll_until(c, 3)
            assert len(got) == 3
            completed.clear()
            future = c.commit_async()               # implicit: every record of the last poll ACCEPTed
            assert await future == {TP(topic, 0): None}
            assert completed == []                  # the callback runs inside a consumer call
            assert await c.poll(0) == []
            assert acknowledged(completed) == ({TP(topic, 0): {0, 1, 2}}, {None})
            assert await c.commit_async() == {}     # nothing left to acknowledge
    run(go())


def test_rides_through_a_broker_kill(tmp_path):
    """kill -9 and restart of the broker under a consumer: it reconnects, opens a new share
    session and goes on; what it acknowledged is never delivered again."""
    with KafkaBroker(tmp_path / "data", OVERRIDES, process=True) as b:
        topic, group = "t", "g"
        run(setup(b.bootstrap_servers, topic, group, n=6))

        async def go():
            async with ShareConsumer(bootstrap_servers=b.bootstrap_servers, group_id=group) as c:
                c.subscribe([topic])
                assert sorted(o for _, o, _ in await poll_until(c, 6)) == list(range(6))
                assert await c.commit_sync() == {TP(topic, 0): None}    # durable before it is answered
                port = b.port_of("PLAINTEXT")
                await asyncio.to_thread(b.kill_and_restart)
                assert b.port_of("PLAINTEXT") == port
                await produce(b.bootstrap_servers, topic, 3, start=6)
                got = await poll_until(c, 3, timeout=40)
                assert sorted((o, d) for _, o, d in got) == [(6, 1), (7, 1), (8, 1)]
                assert await poll_until(c, 1, timeout=2) == []
        run(go(), timeout=120)
