"""Our transactional producer and read_committed consumer against librdkafka's mock cluster,
which implements the transaction coordinator (InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn writing COMMIT/ABORT control
batches). Known limits of the mock (librdkafka 2.16), checked here so that a newer mock that
lifts them makes these tests say so: its Fetch never lists aborted transactions (so no client's
read_committed consumer can drop aborted records there; that filter is covered by
test_transactions_unit.py and by test_transactions_fake_broker.py over the wire), and its
TxnOffsetCommit validates but stores nothing (so offsets committed in a transaction are not
visible to the group after the commit). Nothing here may skip."""
import asyncio
import time
import uuid

import pytest

from kgroup.client import TopicPartition as TP
from kgroup.client.connection import BrokerConnection
from kgroup.client.consumer import Consumer
from kgroup.client.fetcher import build_fetch
from kgroup.client.config import ConsumerConfig
from kgroup.client.producer import Producer
from kgroup.client.sync import KafkaProducer
from kgroup.client.transactions import ProducerFencedError
from kgroup.protocol.messages.init_producer_id import InitProducerIdRequest
from kgroup.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, control_record_type, decode_records, iter_batches
from kgroup.testing import rdkafka_mock

FAST = dict(heartbeat_interval_ms=200, session_timeout_ms=2000, auto_offset_reset="earliest")


@pytest.fixture(scope="module")
def mock():
    proc, bootstrap = rdkafka_mock.spawn(1, {}, initial_rebalance_delay_ms=0)
    yield bootstrap
    proc.kill()
    proc.wait()


def name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def run(coro, timeout=90):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def raw_log(bootstrap, topic, partitions):
    """Every batch of the partitions as stored: [(partition, offset, producer id, kind, value)]
    with kind "data", "COMMIT" or "ABORT" (read_uncommitted fetches from offset 0 up to the high
    watermark; the mock answers one batch per partition and fetch)."""
    host, _, port = bootstrap.rpartition(":")
    conn = await BrokerConnection(host, int(port), node_id=1, client_id="raw").connect()
    config = ConsumerConfig(bootstrap_servers=bootstrap, fetch_max_wait_ms=10)
    out = []
    try:
        for partition in range(partitions):
            offset, high_watermark = 0, None
            while high_watermark is None or offset < high_watermark:
                req, cap = build_fetch([(TP(topic, partition), offset, -1)], {}, config, None)
                resp = await conn.send(req, max_version=cap)
                p = resp.responses[0].partitions[0]
                assert p.error_code == 0
                high_watermark = p.high_watermark
                for _, header, batch in iter_batches(p.records or b""):
                    for rec in decode_records(batch, header):
                        if header.is_control:
                            kind = {CONTROL_COMMIT: "COMMIT", CONTROL_ABORT: "ABORT"}[control_record_type(rec.key)]
                            out.append((partition, rec.offset, header.producer_id, kind, None))
                        elif rec.offset >= offset:
                            assert header.is_transactional  # our transactional producer marks its batches
                            out.append((partition, rec.offset, header.producer_id, "data", rec.value))
                    offset = max(offset, header.next_offset)
    finally:
        conn.close()
    return sorted(out)


async def seed(bootstrap, topic, n):
    async with Producer(bootstrap_servers=bootstrap, linger_ms=1) as p:
        await asyncio.gather(*[await p.send(topic, f"in-{i}".encode(), partition=i % 2) for i in range(n)])


async def read_all(bootstrap, topic, partitions, isolation, seconds=2.0):
    async with Consumer(bootstrap_servers=bootstrap, isolation_level=isolation, auto_offset_reset="earliest",
                        fetch_max_wait_ms=50) as c:
        c.assign([TP(topic, p) for p in range(partitions)])
        got = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            got += await c.poll(100)
        return got


async def transform_loop(bootstrap, src, dst, group, tid, n, abort_every=None, consumer_config=FAST):
    """Exactly-once consume-transform-produce: per poll, one transaction with the transformed
    records and the consumed offsets (send_offsets_to_transaction with the consumer's group
    metadata). With ``abort_every`` every k-th transaction is aborted and its input re-read
    from the last committed position. Returns (committed outputs, aborted outputs, metadata)."""
    committed, aborted, metas = [], [], []
    async with Consumer(src, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                        isolation_level="read_committed", max_poll_records=4, **consumer_config) as consumer, \
            Producer(bootstrap_servers=bootstrap, transactional_id=tid, linger_ms=1) as producer:
        await producer.init_transactions()
        done = 0
        txn_no = 0
        deadline = time.monotonic() + 40
        while done < n and time.monotonic() < deadline:
            records = await consumer.poll(200)
            if not records:
                continue
            txn_no += 1
            producer.begin_transaction()
            outs = [f"out-{r.value.decode()[3:]}".encode() for r in records]
            futures = [await producer.send(dst, v, partition=r.partition) for v, r in zip(outs, records)]
            positions = {tp: await consumer.position(tp) for tp in consumer.assignment()}
            meta = consumer.group_metadata()
            metas.append(meta)
            await producer.send_offsets_to_transaction(positions, meta)
            if abort_every and txn_no % abort_every == 0:
                await producer.flush()
                await asyncio.gather(*futures)  # written to the log, then aborted
                await producer.abort_transaction()
                aborted += outs
                for tp in {TP(r.topic, r.partition) for r in records}:  # rewind to the last commit
                    consumer.seek(tp, min(r.offset for r in records if (r.topic, r.partition) == tp))
                continue
            await producer.commit_transaction()
            committed += outs
            done += len(records)
    return committed, aborted, metas


def test_consume_transform_produce_commit_path(mock):
    src, dst, group = name("src"), name("dst"), name("g")

    async def go():
        await seed(mock, src, 20)
        committed, aborted, metas = await transform_loop(mock, src, dst, group, name("tid"), 20)
        assert sorted(committed) == sorted(f"out-{i}".encode() for i in range(20)) and not aborted
        # KIP-447: the offsets carried the live generation and member id of the consumer
        assert all(m.group_id == group and m.generation_id >= 1 and m.member_id for m in metas)
        log = await raw_log(mock, dst, 2)
        data = [e for e in log if e[3] == "data"]
        assert sorted(e[4] for e in data) == sorted(committed)  # each output exactly once
        markers = [e for e in log if e[3] != "data"]
        assert markers and all(e[3] == "COMMIT" for e in markers)
        # every data batch is transactional, written by the one producer id, and closed by a marker
        assert len({e[2] for e in log}) == 1
        for p in (0, 1):
            part = [e for e in log if e[0] == p]
            assert part[-1][3] == "COMMIT"
        # read_committed: exactly the committed records, never a control record
        got = await read_all(mock, dst, 2, "read_committed")
        assert sorted(r.value for r in got) == sorted(committed)
        assert {(r.partition, r.offset) for r in got} == {(e[0], e[1]) for e in data}
    run(go())


def test_group_metadata_with_the_consumer_group_protocol(mock):
    """KIP-848: the group metadata carries the member epoch as the generation, as Java's."""
    src, dst, group = name("src"), name("dst"), name("g")

    async def go():
        await seed(mock, src, 8)
        committed, _, metas = await transform_loop(mock, src, dst, group, name("tid"), 8, consumer_config=dict(
            group_protocol="consumer", auto_offset_reset="earliest"))
        assert sorted(committed) == sorted(f"out-{i}".encode() for i in range(8))
        assert all(m.group_id == group and m.generation_id >= 1 and m.member_id for m in metas)
    run(go())


def test_consume_transform_produce_abort_path(mock):
    src, dst, group = name("src"), name("dst"), name("g")

    async def go():
        await seed(mock, src, 24)
        committed, aborted, _ = await transform_loop(mock, src, dst, group, name("tid"), 24, abort_every=2)
        assert aborted, "the loop must have aborted some transactions"
        # every input was committed exactly once, including those whose first attempt was aborted
        assert sorted(committed) == sorted(f"out-{i}".encode() for i in range(24))
        log = await raw_log(mock, dst, 2)
        # each transaction on a partition ends with the marker of its outcome: the records
        # before an ABORT marker are the aborted attempts, those before a COMMIT the committed
        outcome_of = {}
        for p in (0, 1):
            pending = []
            for e in (e for e in log if e[0] == p):
                if e[3] == "data":
                    pending.append(e[4])
                else:
                    for v in pending:
                        outcome_of.setdefault(e[3], []).append(v)
                    pending = []
            assert not pending  # no transaction left open
        assert sorted(outcome_of["ABORT"]) == sorted(aborted)
        assert sorted(outcome_of["COMMIT"]) == sorted(committed)
        # read_committed never returns control records and returns every committed record
        got = await read_all(mock, dst, 2, "read_committed")
        control_offsets = {(e[0], e[1]) for e in log if e[3] != "data"}
        assert not control_offsets & {(r.partition, r.offset) for r in got}
        assert set(committed) <= {r.value for r in got}
        # the mock's limit (see the module docstring): aborted data is still served to
        # read_committed consumers because its Fetch lists no aborted transactions
        assert sorted(r.value for r in got) == sorted(committed + aborted)
        assert {(r.partition, r.offset) for r in got} == {(e[0], e[1]) for e in log if e[3] == "data"}
    run(go())


def test_an_epoch_bump_fences_the_producer(mock):
    """The mock gives a second instance a new producer id instead of bumping the epoch of the
    first (Kafka does the latter), so the fencing is provoked as the coordinator would do it:
    an InitProducerId with the producer's current id and epoch (KIP-360) bumps the epoch, and
    the old epoch's next request is answered INVALID_PRODUCER_EPOCH: fatal."""
    tid, topic = name("tid"), name("fence")

    async def go():
        async with Producer(bootstrap_servers=mock, transactional_id=tid, linger_ms=1) as old:
            await old.init_transactions()
            old.begin_transaction()
            await (await old.send(topic, b"zombie", partition=0))
            host, _, port = mock.rpartition(":")
            conn = await BrokerConnection(host, int(port), node_id=1, client_id="fencer").connect()
            resp = await conn.send(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000,
                                                         producer_id=old._producer_id,
                                                         producer_epoch=old._producer_epoch))
            conn.close()
            assert resp.error_code == 0 and resp.producer_epoch == old._producer_epoch + 1
            with pytest.raises(ProducerFencedError):
                await old.commit_transaction()
            with pytest.raises(ProducerFencedError):  # fatal: every later call fails too
                old.begin_transaction()
            with pytest.raises(ProducerFencedError):
                await old.abort_transaction()
        log = await raw_log(mock, topic, 1)
        assert [(e[3], e[4]) for e in log] == [("data", b"zombie")]  # the fenced producer wrote no marker
    run(go())


def test_sync_facade_and_state_errors(mock):
    topic = name("sync")
    p = KafkaProducer(bootstrap_servers=mock, transactional_id=name("tid"), linger_ms=1)
    try:
        with pytest.raises(Exception, match="initTransactions"):
            p.begin_transaction()
        p.init_transactions()
        with pytest.raises(Exception, match="Cannot call send in state READY"):
            p.send(topic, b"outside")
        p.begin_transaction()
        f = p.send(topic, b"one", partition=1)
        p.commit_transaction()
        assert f.get(5).offset == 0
        p.begin_transaction()  # an empty transaction: nothing to tell the coordinator
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"two", partition=1)
        p.abort_transaction()
    finally:
        p.close()
    log = run(raw_log(mock, topic, 2))
    kinds = [(e[3], e[4]) for e in log]
    assert kinds[0] == ("data", b"one") and kinds[1] == ("COMMIT", None)
    # "two" was either never sent (dropped by the abort) or sent and then aborted
    assert kinds[2:] in ([], [("data", b"two"), ("ABORT", None)])


def test_non_transactional_producer_rejects_transactional_calls(mock):
    async def go():
        async with Producer(bootstrap_servers=mock) as p:
            with pytest.raises(Exception, match="non-transactional"):
                await p.init_transactions()
    run(go())
