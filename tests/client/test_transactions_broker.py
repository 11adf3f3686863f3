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


def test_transaction_version_follows_the_broker(tmp_path):
    """Our producer speaks transaction version 2 when the broker finalizes it, as Java 4.x does:
    no AddPartitionsToTxn/AddOffsetsToTxn, EndTxn v5 bumping the epoch with every transaction; once
    transaction.version is downgraded to 1, a producer that connects afterwards runs TV1 (the epoch
    kept), and the consume-transform-produce loop holds with TV1 too."""
    from kgroup.client.admin import Admin
    from kgroup.protocol.messages.describe_transactions import DescribeTransactionsRequest
    from tests.harness import RawClient
    b = BrokerProcess(tmp_path / "d", overrides=["group.initial.rebalance.delay.ms=0"]).start()
    try:
        bs = b.bootstrap
        src, dst = name("src"), name("dst")
        create(bs, (src, 1), (dst, 1))
        raw = RawClient(b.port)

        def epoch(tid):
            return raw.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0).transaction_states[0] \
                .producer_epoch

        async def go():
            async with Producer(bootstrap_servers=bs, transactional_id="tv") as p:
                await p.init_transactions()
                assert p._txn.transaction_v2
                start = epoch("tv")
                for i in range(3):
                    p.begin_transaction()
                    await p.send(dst, b"v2-%d" % i, partition=0)
                    await p.send_offsets_to_transaction({TP(src, 0): i + 1}, ConsumerGroupMetadata("gv"))
                    await p.commit_transaction()
                assert epoch("tv") == start + 3                      # one bump per transaction
                async with Admin(bootstrap_servers=bs) as admin:
                    await admin.update_features({"transaction.version": (1, 2)})
                # the finalized level comes with ApiVersions, on a new connection (as in Java)
                p.begin_transaction()
                await p.send(dst, b"last-v2", partition=0)
                await p.commit_transaction()
                assert p._txn.transaction_v2
            async with Producer(bootstrap_servers=bs, transactional_id="tv") as p:
                await p.init_transactions()
                assert not p._txn.transaction_v2
                now = epoch("tv")
                p.begin_transaction()
                await p.send(dst, b"v1", partition=0)
                await p.send_offsets_to_transaction({TP(src, 0): 9}, ConsumerGroupMetadata("gv"))
                await p.commit_transaction()
                assert epoch("tv") == now                            # TV1: the epoch is kept
            got = await read_all(bs, dst, 1, "read_committed", seconds=2)
            assert [r.value for r in got] == [b"v2-0", b"v2-1", b"v2-2", b"last-v2", b"v1"]
            assert await committed(bs, "gv", [TP(src, 0)]) == {TP(src, 0): 9}
            src2, dst2, group = name("src"), name("dst"), name("g")
            create(bs, (src2, 2), (dst2, 2))
            await seed(bs, src2, 12)
            done, aborted, _ = await transform_loop(bs, src2, dst2, group, name("tid"), 12, abort_every=3,
                                                    consumer_config=GROUP)
            assert sorted(done) == sorted(f"out-{i}".encode() for i in range(12)) and aborted
            got = await read_all(bs, dst2, 2, "read_committed", seconds=2)
            assert sorted(r.value for r in got) == sorted(done)
        run(go())
    finally:
        b.stop()
