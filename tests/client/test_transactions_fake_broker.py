"""Transactions over the wire against a scripted broker (tests/client/test_client_fake_broker.py's
FakeBroker): what librdkafka's mock cannot show. The read_committed consumer asks for
isolation_level=1 and drops the aborted transactions the Fetch answer lists; the transactional
producer retries CONCURRENT_TRANSACTIONS / COORDINATOR_LOAD_IN_PROGRESS, finds the coordinator
again after NOT_COORDINATOR, adds partitions before producing to them, sends the consumer's
generation/member/instance id in TxnOffsetCommit (KIP-447), turns a failed batch into an abortable
transaction and bumps its epoch after the abort (KIP-360)."""
import asyncio

import pytest

from kgroup.client import TopicPartition as TP
from kgroup.client.consumer import Consumer
from kgroup.client.errors import CommitFailedError
from kgroup.client.producer import Producer
from kgroup.client.transactions import ConsumerGroupMetadata, State, TransactionAbortableError
from kgroup.protocol.api import ApiKey
from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnResponse
from kgroup.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnResponse
from kgroup.protocol.messages.end_txn import EndTxnResponse
from kgroup.protocol.messages.fetch import FetchResponse
from kgroup.protocol.messages.find_coordinator import FindCoordinatorResponse
from kgroup.protocol.messages.init_producer_id import InitProducerIdResponse
from kgroup.protocol.messages.produce import ProduceResponse
from kgroup.protocol.messages.txn_offset_commit import TxnOffsetCommitResponse
from kgroup.protocol.records import Record, build_batch, build_end_txn_marker_batch, read_batch_header

from .test_client_fake_broker import FakeBroker


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_read_committed_consumer_drops_aborted_transactions_over_the_wire():
    P = FetchResponse.FetchableTopicResponse.PartitionData
    log = bytearray()
    log += build_batch([Record(None, b"aborted-1", (), 1), Record(None, b"aborted-2", (), 1)], base_offset=0,
                       producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)
    log += build_batch([Record(None, b"committed", (), 1)], base_offset=2, producer_id=6, producer_epoch=0,
                       base_sequence=0, is_transactional=True)
    log += build_end_txn_marker_batch(5, 0, False, 0, 1, base_offset=3)
    log += build_end_txn_marker_batch(6, 0, True, 0, 1, base_offset=4)
    log += build_batch([Record(None, b"plain", (), 1)], base_offset=5)
    end = 6

    def fetch(header, body, version):
        part = body.topics[0].partitions[0]
        isolation = body.isolation_level
        data = bytes(log) if part.fetch_offset < end else b""
        return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[P(
            partition_index=0, high_watermark=end, last_stable_offset=end, log_start_offset=0,
            aborted_transactions=[P.AbortedTransaction(producer_id=5, first_offset=0)] if isolation == 1 else None,
            records=data)])])

    async def read(fake, isolation):
        async with Consumer(bootstrap_servers=f"127.0.0.1:{fake.port}", isolation_level=isolation,
                            fetch_max_wait_ms=10) as c:
            c.assign([TP("t", 0)])
            c.seek(TP("t", 0), 0)
            got = []
            for _ in range(20):
                got += await c.poll(50)
                if await c.position(TP("t", 0)) == end:
                    break
            return [(r.offset, r.value) for r in got], await c.position(TP("t", 0))

    async def go():
        fake = await FakeBroker({ApiKey.FETCH: fetch}).start()
        fake.topics["t"] = 1
        committed, position = await read(fake, "read_committed")
        assert committed == [(2, b"committed"), (5, b"plain")] and position == end
        fetches = [b for k, _, b in fake.received if k == ApiKey.FETCH]
        assert fetches and all(b.isolation_level == 1 for b in fetches)
        fake.received.clear()
        everything, _ = await read(fake, "read_uncommitted")
        assert everything == [(0, b"aborted-1"), (1, b"aborted-2"), (2, b"committed"), (5, b"plain")]
        assert all(b.isolation_level == 0 for k, _, b in fake.received if k == ApiKey.FETCH)
        await fake.stop()
    run(go())


def coordinator_key(find):
    return find.coordinator_keys[0] if find.coordinator_keys else find.key


class TxnBroker:
    """A transaction and group coordinator that answers each API from a script of error codes
    (then NONE), recording the requests in order."""

    def __init__(self, script=None):
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.epoch = 0
        self.produced = []
        self.fake = FakeBroker({
            ApiKey.FIND_COORDINATOR: self.find_coordinator, ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
            ApiKey.ADD_PARTITIONS_TO_TXN: self.add_partitions, ApiKey.ADD_OFFSETS_TO_TXN: self.add_offsets,
            ApiKey.TXN_OFFSET_COMMIT: self.txn_offset_commit, ApiKey.END_TXN: self.end_txn,
            ApiKey.PRODUCE: self.produce})
        self.fake.topics["t"] = 2

    def next_error(self, api):
        queue = self.script.get(api)
        return queue.pop(0) if queue else ErrorCode.NONE

    def calls(self):
        return [ApiKey(k).name for k, _, _ in self.fake.received
                if k not in (ApiKey.API_VERSIONS, ApiKey.METADATA)]

    def bodies(self, api):
        return [(v, b) for k, v, b in self.fake.received if k == api]

    def find_coordinator(self, header, body, version):
        R = FindCoordinatorResponse
        if version >= 4:
            return R(coordinators=[R.Coordinator(key=k, node_id=0, host="127.0.0.1", port=self.fake.port,
                                                 error_code=0) for k in body.coordinator_keys])
        return R(node_id=0, host="127.0.0.1", port=self.fake.port)

    def init_producer_id(self, header, body, version):
        err = self.next_error("InitProducerId")
        if not err:
            self.epoch += 1
        return InitProducerIdResponse(error_code=err, producer_id=77, producer_epoch=self.epoch)

    def add_partitions(self, header, body, version):
        err = self.next_error("AddPartitionsToTxn")
        R = AddPartitionsToTxnResponse
        return R(results_by_topic_v3_and_below=[R.AddPartitionsToTxnTopicResult(name=t.name, results_by_partition=[
            R.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=err) for p in t.partitions])
            for t in body.v3_and_below_topics])

    def add_offsets(self, header, body, version):
        return AddOffsetsToTxnResponse(error_code=self.next_error("AddOffsetsToTxn"))

    def txn_offset_commit(self, header, body, version):
        err = self.next_error("TxnOffsetCommit")
        R = TxnOffsetCommitResponse
        return R(topics=[R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            R.TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=err)
            for p in t.partitions]) for t in body.topics])

    def end_txn(self, header, body, version):
        return EndTxnResponse(error_code=self.next_error("EndTxn"))

    def produce(self, header, body, version):
        err = self.next_error("Produce")
        P = ProduceResponse
        out = []
        for td in body.topic_data:
            parts = []
            for pd in td.partition_data:
                h = read_batch_header(bytes(pd.records))
                self.produced.append((body.transactional_id, td.name, pd.index, h.is_transactional, h.producer_id,
                                      h.producer_epoch, h.base_sequence))
                parts.append(P.PartitionProduceResponse(index=pd.index, error_code=err, base_offset=0 if not err else -1))
            out.append(P.TopicProduceResponse(name=td.name, partition_responses=parts))
        return P(responses=out)


def test_commit_with_retries_coordinator_moves_and_kip447_fields():
    broker = TxnBroker({"InitProducerId": [ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS],
                        "AddPartitionsToTxn": [ErrorCode.NOT_COORDINATOR],
                        "TxnOffsetCommit": [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS],
                        "EndTxn": [ErrorCode.CONCURRENT_TRANSACTIONS]})

    async def go():
        fake = await broker.fake.start()
        async with Producer(bootstrap_servers=f"127.0.0.1:{fake.port}", transactional_id="tx", linger_ms=1,
                            retry_backoff_ms=5, transaction_timeout_ms=12345) as p:
            await p.init_transactions()
            p.begin_transaction()
            futures = [await p.send("t", b"v", partition=i % 2) for i in range(4)]
            meta = ConsumerGroupMetadata("grp", 7, "member-1", "static-1")
            await p.send_offsets_to_transaction({TP("in", 0): 10, ("in", 1): 20}, meta)
            await p.commit_transaction()
            assert all(f.done() and not f.exception() for f in futures)
        calls = broker.calls()
        # InitProducerId retried twice; AddPartitionsToTxn answered NOT_COORDINATOR -> lookup again
        assert calls[:4] == ["FIND_COORDINATOR"] + ["INIT_PRODUCER_ID"] * 3
        assert calls.index("ADD_PARTITIONS_TO_TXN") < calls.index("PRODUCE")
        assert calls.count("ADD_PARTITIONS_TO_TXN") == 2  # NOT_COORDINATOR, then again after a lookup
        assert [coordinator_key(b) for _, b in broker.bodies(ApiKey.FIND_COORDINATOR) if b.key_type == 1] == \
            ["tx", "tx"]
        assert calls[-2:] == ["END_TXN", "END_TXN"] and calls.count("TXN_OFFSET_COMMIT") == 2
        assert calls.index("ADD_OFFSETS_TO_TXN") < calls.index("TXN_OFFSET_COMMIT")
        (_, init), *_ = broker.bodies(ApiKey.INIT_PRODUCER_ID)
        assert init.transactional_id == "tx" and init.transaction_timeout_ms == 12345
        finds = [(b.key_type, coordinator_key(b)) for _, b in broker.bodies(ApiKey.FIND_COORDINATOR)]
        assert finds[0] == (1, "tx") and (0, "grp") in finds
        added = {(t.name, p) for _, b in broker.bodies(ApiKey.ADD_PARTITIONS_TO_TXN) for t in b.v3_and_below_topics
                 for p in t.partitions}
        assert added == {("t", 0), ("t", 1)}
        assert all(v <= 3 for v, _ in broker.bodies(ApiKey.ADD_PARTITIONS_TO_TXN))
        v, toc = broker.bodies(ApiKey.TXN_OFFSET_COMMIT)[-1]
        assert v >= 3 and (toc.group_id, toc.generation_id, toc.member_id, toc.group_instance_id) == \
            ("grp", 7, "member-1", "static-1")
        assert {(t.name, p.partition_index, p.committed_offset) for t in toc.topics for p in t.partitions} == \
            {("in", 0, 10), ("in", 1, 20)}
        v, end = broker.bodies(ApiKey.END_TXN)[-1]
        assert v <= 4 and end.committed and (end.producer_id, end.producer_epoch) == (77, 1)
        assert broker.produced and all(r[0] == "tx" and r[3] and r[4:6] == (77, 1) for r in broker.produced)
        await fake.stop()
    run(go())


def test_failed_batch_makes_the_transaction_abortable_then_abort_bumps_the_epoch():
    broker = TxnBroker({"Produce": [ErrorCode.MESSAGE_TOO_LARGE]})

    async def go():
        fake = await broker.fake.start()
        async with Producer(bootstrap_servers=f"127.0.0.1:{fake.port}", transactional_id="tx", linger_ms=1,
                            retry_backoff_ms=5) as p:
            await p.init_transactions()
            p.begin_transaction()
            fut = await p.send("t", b"big", partition=0)
            with pytest.raises(TransactionAbortableError):
                await p.commit_transaction()
            assert isinstance(fut.exception(), Exception)
            assert p._txn.state == State.ABORTABLE_ERROR
            with pytest.raises(TransactionAbortableError):
                await p.send("t", b"more", partition=0)
            await p.abort_transaction()
            assert p._txn.state == State.READY
            # the failed batch used sequence 0: the epoch is bumped (KIP-360) and sequences restart
            p.begin_transaction()
            await (await p.send("t", b"again", partition=0))
            await p.commit_transaction()
        ends = [b for _, b in broker.bodies(ApiKey.END_TXN)]
        assert [e.committed for e in ends] == [False, True]
        inits = [b for _, b in broker.bodies(ApiKey.INIT_PRODUCER_ID)]
        assert [(i.producer_id, i.producer_epoch) for i in inits] == [(-1, -1), (77, 1)]
        assert broker.produced[-1][4:] == (77, 2, 0)
        await fake.stop()
    run(go())


def test_txn_offset_commit_with_a_stale_generation_is_commit_failed_and_abortable():
    broker = TxnBroker({"TxnOffsetCommit": [ErrorCode.ILLEGAL_GENERATION]})

    async def go():
        fake = await broker.fake.start()
        async with Producer(bootstrap_servers=f"127.0.0.1:{fake.port}", transactional_id="tx",
                            retry_backoff_ms=5) as p:
            await p.init_transactions()
            p.begin_transaction()
            with pytest.raises(CommitFailedError):
                await p.send_offsets_to_transaction({TP("in", 0): 1}, ConsumerGroupMetadata("grp", 3, "m", None))
            with pytest.raises(TransactionAbortableError):
                await p.commit_transaction()
            await p.abort_transaction()
        assert [b.committed for _, b in broker.bodies(ApiKey.END_TXN)] == [False]  # AddOffsetsToTxn started it
        await fake.stop()
    run(go())


def test_partition_never_added_fails_its_batches_and_the_transaction_is_abortable():
    broker = TxnBroker({"AddPartitionsToTxn": [ErrorCode.CONCURRENT_TRANSACTIONS] * 10_000})

    async def go():
        fake = await broker.fake.start()
        async with Producer(bootstrap_servers=f"127.0.0.1:{fake.port}", transactional_id="tx", linger_ms=1,
                            retry_backoff_ms=5, retry_backoff_max_ms=20, request_timeout_ms=300,
                            delivery_timeout_ms=400) as p:
            await p.init_transactions()
            p.begin_transaction()
            fut = await p.send("t", b"v", partition=0)
            with pytest.raises(TransactionAbortableError):
                await p.commit_transaction()
            assert fut.done() and fut.exception() is not None
            await p.abort_transaction()
            assert p._txn.state == State.READY
        assert not broker.produced  # nothing reached a partition that was never added
        assert broker.bodies(ApiKey.END_TXN) == []  # the coordinator never heard of the transaction
        await fake.stop()
    run(go())
