"""Our transactional producer and read_committed consumer against the kgroup broker's
transaction coordinator: exactly-once consume-transform-produce with commit and abort paths,
offsets committed in a transaction visible to the group after the commit and not after an abort,
and a second instance with the same transactional id fencing the first."""
import asyncio

import pytest

from kgroup.client import TopicPartition as TP
from kgroup.client.admin import NewTopic
from kgroup.client.consumer import Consumer
from kgroup.client.producer import Producer
from kgroup.client.sync import KafkaAdmin
from kgroup.client.transactions import ConsumerGroupMetadata, ProducerFencedError
from tests.client.test_transactions_mock import name, read_all, seed, transform_loop
from tests.harness import BrokerProcess

GROUP = dict(heartbeat_interval_ms=500, session_timeout_ms=6000, auto_offset_reset="earliest")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("txn-client") / "data",
                      overrides=["group.initial.rebalance.delay.ms=0"]).start()
    yield b.bootstrap
    b.stop()


def create(bootstrap, *topics):
    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        result = admin.create_topics([NewTopic(t, n, 1) for t, n in topics])
        assert all(e is None for e in result.values()), result


def run(coro, timeout=120):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def committed(bootstrap, group, tps):
    async with Consumer(bootstrap_servers=bootstrap, group_id=group) as c:
        return {tp: (None if om is None else om.offset) for tp, om in (await c.committed(tps)).items()}


@pytest.mark.parametrize("abort_every", [None, 2])
def test_exactly_once_consume_transform_produce(broker, abort_every):
    src, dst, group = name("src"), name("dst"), name("g")
    create(broker, (src, 2), (dst, 2))

    async def go():
        await seed(broker, src, 24)
        done, aborted, _ = await transform_loop(broker, src, dst, group, name("tid"), 24, abort_every=abort_every,
                                                consumer_config=GROUP)
        assert sorted(done) == sorted(f"out-{i}".encode() for i in range(24))
        assert bool(aborted) == bool(abort_every)
        # read_committed: each input's output exactly once, nothing aborted, no markers
        got = await read_all(broker, dst, 2, "read_committed", seconds=3)
        assert sorted(r.value for r in got) == sorted(done)
        # read_uncommitted also returns the aborted attempts (the test can tell the difference)
        everything = await read_all(broker, dst, 2, "read_uncommitted", seconds=3)
        assert len(everything) == len(done) + len(aborted)
        # the group's offsets are exactly what was consumed and produced
        assert await committed(broker, group, [TP(src, 0), TP(src, 1)]) == {TP(src, 0): 12, TP(src, 1): 12}
    run(go())


def test_transactional_offsets_visible_after_commit_not_after_abort(broker):
    topic, group, src = name("v"), name("g"), name("src")
    create(broker, (topic, 1), (src, 1))

    async def go():
        async with Producer(bootstrap_servers=broker, transactional_id=name("tid")) as p:
            await p.init_transactions()
            p.begin_transaction()
            await (await p.send(topic, b"aborted", partition=0))
            await p.send_offsets_to_transaction({TP(src, 0): 5}, ConsumerGroupMetadata(group))
            await p.abort_transaction()
            assert await committed(broker, group, [TP(src, 0)]) == {TP(src, 0): None}
            p.begin_transaction()
            await p.send(topic, b"committed", partition=0)
            await p.send_offsets_to_transaction({TP(src, 0): 7}, ConsumerGroupMetadata(group))
            await p.commit_transaction()
            assert await committed(broker, group, [TP(src, 0)]) == {TP(src, 0): 7}
        got = await read_all(broker, topic, 1, "read_committed", seconds=2)
        assert [r.value for r in got] == [b"committed"]
    run(go())


def test_a_second_instance_fences_the_first(broker):
    tid, topic = name("tid"), name("fence")
    create(broker, (topic, 1))

    async def go():
        async with Producer(bootstrap_servers=broker, transactional_id=tid) as old, \
                Producer(bootstrap_servers=broker, transactional_id=tid) as new:
            await old.init_transactions()
            old.begin_transaction()
            await (await old.send(topic, b"zombie", partition=0))
            await new.init_transactions()  # bumps the epoch and aborts the zombie's transaction
            with pytest.raises(ProducerFencedError):
                await old.commit_transaction()
            with pytest.raises(ProducerFencedError):
                old.begin_transaction()
            new.begin_transaction()
            await new.send(topic, b"live", partition=0)
            await new.commit_transaction()
        got = await read_all(broker, topic, 1, "read_committed", seconds=2)
        assert [r.value for r in got] == [b"live"]
    run(go())
