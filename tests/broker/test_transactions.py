"""The transaction coordinator over the wire, on a broker process (raw sockets): FindCoordinator
key type 1, InitProducerId with a transactional id and its fencing, the transactional produce
check (a partition not added to the transaction is refused), AddPartitionsToTxn, EndTxn writing
the COMMIT marker (the last stable offset moves past it), DescribeTransactions/ListTransactions,
WriteTxnMarkers, and the state surviving a restart (loaded from __transaction_state). In
process: EndTxn answered once PrepareCommit is durable with the next request waiting for the
completion, markers sharing appends, TxnOffsetCommit not holding the Produce behind it."""
import asyncio
import struct
import time

from kgroup.broker import data_path as data_path_module
from kgroup.broker.broker import Broker
from kgroup.broker.config import BrokerConfig
from kgroup.protocol.api import encode_request, parse_response
from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kgroup.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kgroup.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from kgroup.protocol.messages.find_coordinator import FindCoordinatorRequest
from kgroup.protocol.messages.init_producer_id import InitProducerIdRequest
from kgroup.protocol.messages.list_offsets import ListOffsetsRequest
from kgroup.protocol.messages.list_transactions import ListTransactionsRequest
from kgroup.protocol.messages.produce import ProduceRequest
from kgroup.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kgroup.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from kgroup.protocol.records import Record, build_batch, iter_batches
from kgroup.storage.errors import InvalidProducerEpochError
from tests.harness import RawClient

TOPIC = "txw"
TPD = ProduceRequest.TopicProduceData
APT = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
LT = ListOffsetsRequest.ListOffsetsTopic


def produce_request(tid, pid, epoch, seq, partition, *values):
    records = build_batch([Record(key=None, value=v, timestamp=int(time.time() * 1000)) for v in values],
                          producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True)
    return ProduceRequest(transactional_id=tid, acks=-1, timeout_ms=5000, topic_data=[
        TPD(name=TOPIC, partition_data=[TPD.PartitionProduceData(index=partition, records=records)])])


def produce(c, tid, pid, epoch, seq, partition, *values, version=9):
    return c.request(produce_request(tid, pid, epoch, seq, partition, *values), version) \
        .responses[0].partition_responses[0].error_code


def lso(c, partition):
    req = ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[LT(name=TOPIC, partitions=[
        LT.ListOffsetsPartition(partition_index=partition, timestamp=-1)])])
    return c.request(req, 7).topics[0].partitions[0].offset


def describe(c, tid):
    return c.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0).transaction_states[0]


def test_transaction_over_the_wire(broker):
    c = RawClient(broker.port)
    CT = CreateTopicsRequest.CreatableTopic
    assert c.request(CreateTopicsRequest(topics=[CT(name=TOPIC, num_partitions=2, replication_factor=1)],
                                         timeout_ms=5000), 7).topics[0].error_code == 0
    fc = c.request(FindCoordinatorRequest(key_type=1, coordinator_keys=["tx-a"]), 4).coordinators[0]
    assert (fc.error_code, fc.node_id, fc.port) == (0, 1, broker.port)
    fc3 = c.request(FindCoordinatorRequest(key="tx-a", key_type=1), 3)
    assert fc3.error_code == 0 and fc3.port == broker.port

    init = c.request(InitProducerIdRequest(transactional_id="tx-a", transaction_timeout_ms=60000), 4)
    assert init.error_code == 0 and init.producer_epoch == 0
    pid = init.producer_id
    # Not added yet: refused (KIP-890 verification), v9 knows it as INVALID_TXN_STATE.
    assert produce(c, "tx-a", pid, 0, 0, 0, b"early") == E.INVALID_TXN_STATE
    assert lso(c, 0) == 0

    add = c.request(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx-a", v3_and_below_producer_id=pid, v3_and_below_producer_epoch=0,
        v3_and_below_topics=[APT(name=TOPIC, partitions=[0]), APT(name="nope", partitions=[0])]), 3)
    errors = {r.name: r.results_by_partition[0].partition_error_code for r in add.results_by_topic_v3_and_below}
    assert errors == {TOPIC: E.OPERATION_NOT_ATTEMPTED, "nope": E.UNKNOWN_TOPIC_OR_PARTITION}
    add = c.request(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx-a", v3_and_below_producer_id=pid, v3_and_below_producer_epoch=0,
        v3_and_below_topics=[APT(name=TOPIC, partitions=[0])]), 3)
    assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    assert produce(c, "tx-a", pid, 0, 0, 0, b"a", b"b") == 0
    assert produce(c, "tx-a", pid, 0, 0, 1, b"other") == E.INVALID_TXN_STATE   # partition 1 not added
    assert lso(c, 0) == 0                     # the open transaction holds the LSO

    st = describe(c, "tx-a")
    assert (st.error_code, st.transaction_state, st.producer_id) == (0, "Ongoing", pid)
    assert [(t.topic, t.partitions) for t in st.topics] == [(TOPIC, [0])]
    listed = c.request(ListTransactionsRequest(state_filters=["Ongoing", "Bogus"], producer_id_filters=[]), 1)
    assert listed.error_code == 0 and listed.unknown_state_filters == ["Bogus"]
    assert [(s.transactional_id, s.producer_id) for s in listed.transaction_states] == [("tx-a", pid)]

    end = c.request(EndTxnRequest(transactional_id="tx-a", producer_id=pid, producer_epoch=0, committed=True), 3)
    assert end.error_code == 0
    assert lso(c, 0) == 3                     # two records and the COMMIT marker
    # EndTxn is answered once PrepareCommit is durable; CompleteCommit follows the markers' fsync.
    deadline = time.monotonic() + 10
    while (state := describe(c, "tx-a").transaction_state) != "CompleteCommit":
        assert state == "PrepareCommit" and time.monotonic() < deadline, state
        time.sleep(0.01)

    # A new instance fences the old epoch: its produce and EndTxn are refused.
    init2 = c.request(InitProducerIdRequest(transactional_id="tx-a", transaction_timeout_ms=60000), 4)
    assert (init2.error_code, init2.producer_id, init2.producer_epoch) == (0, pid, 1)
    end = c.request(EndTxnRequest(transactional_id="tx-a", producer_id=pid, producer_epoch=0, committed=True), 3)
    assert end.error_code == E.PRODUCER_FENCED
    end = c.request(EndTxnRequest(transactional_id="tx-a", producer_id=pid, producer_epoch=0, committed=True), 1)
    assert end.error_code == E.INVALID_PRODUCER_EPOCH      # before KIP-588's PRODUCER_FENCED

    # WriteTxnMarkers: an ABORT marker written over the wire (and an unknown partition refused).
    M = WriteTxnMarkersRequest.WritableTxnMarker
    wm = c.request(WriteTxnMarkersRequest(markers=[M(
        producer_id=pid, producer_epoch=1, transaction_result=False, coordinator_epoch=0,
        topics=[M.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[1, 7])])]), 1)
    assert [(p.partition_index, p.error_code) for p in wm.markers[0].topics[0].partitions] == \
        [(1, 0), (7, E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert lso(c, 1) == 1
    c.close()

    broker.stop()
    broker.start()
    c = RawClient(broker.port)
    deadline = time.monotonic() + 10
    while (st := describe(c, "tx-a")).error_code == E.COORDINATOR_LOAD_IN_PROGRESS and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (st.error_code, st.transaction_state, st.producer_epoch) == (0, "Empty", 1)
    assert describe(c, "unknown").error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    c.close()


def test_timed_out_transaction_is_aborted_by_the_coordinator(tmp_path):
    """transaction.timeout.ms passes with the transaction open: the coordinator's timer aborts it
    with the epoch bumped (the producer is fenced) and writes the ABORT marker, so the last stable
    offset moves past the records, which stay invisible."""
    from tests.harness import BrokerProcess
    b = BrokerProcess(tmp_path / "data", ["transaction.abort.timed.out.transaction.cleanup.interval.ms=100"]).start()
    try:
        c = RawClient(b.port)
        CT = CreateTopicsRequest.CreatableTopic
        c.request(CreateTopicsRequest(topics=[CT(name=TOPIC, num_partitions=2, replication_factor=1)],
                                      timeout_ms=5000), 7)
        init = c.request(InitProducerIdRequest(transactional_id="slow", transaction_timeout_ms=300), 4)
        pid = init.producer_id
        c.request(AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="slow", v3_and_below_producer_id=pid, v3_and_below_producer_epoch=0,
            v3_and_below_topics=[APT(name=TOPIC, partitions=[1])]), 3)
        assert produce(c, "slow", pid, 0, 0, 1, b"late") == 0
        assert lso(c, 1) == 0
        deadline = time.monotonic() + 10
        while (st := describe(c, "slow")).transaction_state != "CompleteAbort":
            assert time.monotonic() < deadline, st
            time.sleep(0.05)
        assert st.producer_epoch == 1            # bumped: the producer is fenced
        assert lso(c, 1) == 2                    # the record and the ABORT marker
        end = c.request(EndTxnRequest(transactional_id="slow", producer_id=pid, producer_epoch=0, committed=True), 3)
        assert end.error_code == E.PRODUCER_FENCED
        c.close()
    finally:
        b.stop()


def test_add_partitions_to_txn_v4_batches_transactions_across_shards(broker):
    """KIP-890's broker-to-coordinator form: several transactional ids (on different
    __transaction_state partitions) in one request, some adding, some only verifying."""
    from kgroup.transaction_coordinator import transaction_partition
    c = RawClient(broker.port)
    CT = CreateTopicsRequest.CreatableTopic
    c.request(CreateTopicsRequest(topics=[CT(name=TOPIC, num_partitions=2, replication_factor=1)],
                                  timeout_ms=5000), 7)
    tids = ["v4-a", "v4-b"]
    assert transaction_partition(tids[0]) != transaction_partition(tids[1])
    pids = {}
    for tid in tids:
        r = c.request(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000), 4)
        pids[tid] = r.producer_id
    Tx = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction

    def request(verify_only, version=4):
        txns = [Tx(transactional_id=tid, producer_id=pids[tid], producer_epoch=0, verify_only=verify_only,
                   topics=[APT(name=TOPIC, partitions=[i])]) for i, tid in enumerate(tids)]
        r = c.request(AddPartitionsToTxnRequest(transactions=txns), version)
        assert r.error_code == 0
        return {t.transactional_id: [p.partition_error_code for tr in t.topic_results for p in tr.results_by_partition]
                for t in r.results_by_transaction}

    assert request(True) == {"v4-a": [E.TRANSACTION_ABORTABLE], "v4-b": [E.TRANSACTION_ABORTABLE]}  # not added
    assert request(False, version=5) == {"v4-a": [0], "v4-b": [0]}
    assert request(True) == {"v4-a": [0], "v4-b": [0]}
    assert describe(c, "v4-b").topics[0].partitions == [1]
    c.close()


# == in process: the marker path's timing (a slowed filesystem sync makes the windows certain) ==========
TOT = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic


def test_txn_offset_commit_answers_unknown_partitions_merged_by_topic(broker):
    """Partitions the broker does not have get UNKNOWN_TOPIC_OR_PARTITION (KafkaApis); a topic with
    known and unknown partitions appears once in the answer, as Kafka's response builder merges."""
    c = RawClient(broker.port)
    CT = CreateTopicsRequest.CreatableTopic
    assert c.request(CreateTopicsRequest(topics=[CT(name="tu", num_partitions=1, replication_factor=1)],
                                         timeout_ms=5000), 7).topics[0].error_code == 0
    init = c.request(InitProducerIdRequest(transactional_id="tx-u", transaction_timeout_ms=60000), 4)
    P = TOT.TxnOffsetCommitRequestPartition
    r = c.request(TxnOffsetCommitRequest(
        transactional_id="tx-u", group_id="g-u", producer_id=init.producer_id, producer_epoch=init.producer_epoch,
        topics=[TOT(name="tu", partitions=[P(partition_index=0, committed_offset=1, committed_metadata=""),
                                           P(partition_index=9, committed_offset=1, committed_metadata="")]),
                TOT(name="nope", partitions=[P(partition_index=0, committed_offset=1, committed_metadata="")])]), 3)
    by_topic = [(t.name, sorted(p.partition_index for p in t.partitions)) for t in r.topics]
    assert sorted(by_topic) == [("nope", [0]), ("tu", [0, 9])], by_topic
    errors = {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}
    assert errors[("tu", 9)] == errors[("nope", 0)] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert errors[("tu", 0)] != E.UNKNOWN_TOPIC_OR_PARTITION
    c.close()
SYNC_DELAY = {"s": 0.0}      # set by a scenario: each filesystem sync (syncfs, 2+ logs) first sleeps this long


def _inproc(tmp_path, monkeypatch, scenario):
    sync = data_path_module._sync_filesystem

    def slow_sync(directory):
        time.sleep(SYNC_DELAY["s"])
        sync(directory)
    monkeypatch.setattr(data_path_module, "_sync_filesystem", slow_sync)
    monkeypatch.setitem(SYNC_DELAY, "s", 0.0)

    async def main():
        b = Broker(BrokerConfig.load(None, ["listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={tmp_path / 'data'}"]))
        await b.start()
        conns = []

        async def connect():
            conns.append(await asyncio.open_connection("127.0.0.1", b.bound_port))
            return conns[-1]
        try:
            return await scenario(b, connect)
        finally:
            for _, w in conns:
                w.close()
            await b.stop()
    asyncio.run(asyncio.wait_for(main(), 60))


async def _pipelined(conn, requests):
    """Send ``[(body, version)]`` in one write; their answers in order."""
    reader, writer = conn
    writer.write(b"".join(p for i, (body, v) in enumerate(requests) for p in encode_request(body, v, i, "x")))
    answers = []
    for i, (body, v) in enumerate(requests):
        size, = struct.unpack(">i", await reader.readexactly(4))
        cid, resp = parse_response(type(body).API_KEY, v, await reader.readexactly(size))
        assert cid == i
        answers.append(resp)
    return answers


def _add_partitions(tid, pid, epoch, partitions):
    return AddPartitionsToTxnRequest(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                                     v3_and_below_producer_epoch=epoch,
                                     v3_and_below_topics=[APT(name=TOPIC, partitions=partitions)]), 3


def _produce(tid, pid, epoch, seq, partition, value):
    return produce_request(tid, pid, epoch, seq, partition, value), 9


async def _open_transaction(b, conn, tid):
    """Topic TOPIC (2 partitions), ``tid`` initialized with both partitions added; (pid, epoch)."""
    CT = CreateTopicsRequest.CreatableTopic
    created, init = await _pipelined(conn, [
        (CreateTopicsRequest(topics=[CT(name=TOPIC, num_partitions=2, replication_factor=1)], timeout_ms=5000), 7),
        (InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000), 4)])
    assert created.topics[0].error_code == 0 and init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch
    add, = await _pipelined(conn, [_add_partitions(tid, pid, epoch, [0, 1])])
    assert all(p.partition_error_code == 0 for t in add.results_by_topic_v3_and_below for p in t.results_by_partition)
    return pid, epoch


def _give_up_timers(b) -> list:
    """The give-up timers of requests parked behind a completing transaction still queued on the
    broker's loop (a cancelled one may stay in the loop's heap until its time)."""
    give_up = b.transaction_coordinator._give_up
    return [h for h in b.loop._scheduled if not h.cancelled() and h._callback == give_up]


def test_end_txn_answered_once_prepared_and_next_request_waits_for_completion(tmp_path, monkeypatch):
    """EndTxn is answered once PrepareCommit is durable, its markers appended (the LSO is past
    them) but not yet durable; the next transaction's AddPartitionsToTxn, pipelined behind it,
    arrives while the markers are being synced and waits for CompleteCommit (Kafka answers it
    CONCURRENT_TRANSACTIONS, which librdkafka retries after 20 ms) instead of failing."""
    async def scenario(b, connect):
        conn, other = await connect(), await connect()
        pid, epoch = await _open_transaction(b, conn, "tx-d")
        produced = await _pipelined(conn, [_produce("tx-d", pid, epoch, 0, p, b"v") for p in (0, 1)])
        assert [r.responses[0].partition_responses[0].error_code for r in produced] == [0, 0]
        SYNC_DELAY["s"] = 0.3       # the markers' sync: the window in which the AddPartitionsToTxn arrives
        reader, writer = conn
        writer.write(b"".join(
            [*encode_request(EndTxnRequest(transactional_id="tx-d", producer_id=pid, producer_epoch=epoch,
                                           committed=True), 3, 0, "x"),
             *encode_request(_add_partitions("tx-d", pid, epoch, [1])[0], 3, 1, "x")]))
        size, = struct.unpack(">i", await reader.readexactly(4))
        assert parse_response(EndTxnRequest.API_KEY, 3, await reader.readexactly(size)) == (0, EndTxnResponse(error_code=0))
        # Answered: the markers are appended (the LSO is past them), not yet durable (the slowed
        # sync is under way), the transaction still PrepareCommit.
        plog = b.data_path.log(TOPIC, 0)
        assert (plog.last_stable_offset, plog.recovery_point) == (2, 1)
        assert b.transaction_coordinator.shards[b.transaction_coordinator.shard_for("tx-d")].transactions["tx-d"].state.kafka_name == "PrepareCommit"
        size, = struct.unpack(">i", await reader.readexactly(4))
        cid, add = parse_response(AddPartitionsToTxnRequest.API_KEY, 3, await reader.readexactly(size))
        assert cid == 1 and add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        st, = await _pipelined(other, [(DescribeTransactionsRequest(transactional_ids=["tx-d"]), 0)])
        st = st.transaction_states[0]
        assert (st.transaction_state, [(t.topic, t.partitions) for t in st.topics]) == ("Ongoing", [(TOPIC, [1])])
        assert b.transaction_coordinator._completing == {}
        assert _give_up_timers(b) == []         # resumed: its timer went with it
    _inproc(tmp_path, monkeypatch, scenario)


def test_a_request_behind_a_transaction_whose_markers_never_land_gets_concurrent_transactions(tmp_path, monkeypatch):
    """The markers of an ended transaction are never written (the test hook holds them): the
    next AddPartitionsToTxn waits a bounded time, then is answered CONCURRENT_TRANSACTIONS as
    Kafka answers it, and so is every retry; nothing waits for ever."""
    async def scenario(b, connect):
        conn = await connect()
        pid, epoch = await _open_transaction(b, conn, "tx-h")
        b.transaction_coordinator.hold_markers = True
        ended, = await _pipelined(conn, [(EndTxnRequest(transactional_id="tx-h", producer_id=pid,
                                                        producer_epoch=epoch, committed=True), 3)])
        assert ended.error_code == 0
        started = time.monotonic()
        add, = await _pipelined(conn, [_add_partitions("tx-h", pid, epoch, [1])])
        waited = time.monotonic() - started
        assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == \
            E.CONCURRENT_TRANSACTIONS
        assert 0.9 <= waited < 5
        assert b.transaction_coordinator._completing == {"tx-h": []}
    _inproc(tmp_path, monkeypatch, scenario)


def test_txn_offset_commit_does_not_hold_the_produce_behind_it(tmp_path, monkeypatch):
    """A TxnOffsetCommit waits only for the fsync of its (replayed) pending offsets, so the
    transaction's Produce pipelined behind it on the same connection (as librdkafka sends them)
    is appended in the same loop turn and both share one group commit."""
    async def scenario(b, connect):
        conn = await connect()
        pid, epoch = await _open_transaction(b, conn, "tx-o")
        added, = await _pipelined(conn, [(AddOffsetsToTxnRequest(transactional_id="tx-o", producer_id=pid,
                                                                 producer_epoch=epoch, group_id="g-o"), 3)])
        assert added.error_code == 0
        rounds = []
        b.data_path.flush_observer = rounds.append
        commit, produced = await _pipelined(conn, [
            (TxnOffsetCommitRequest(transactional_id="tx-o", group_id="g-o", producer_id=pid, producer_epoch=epoch,
                                    topics=[TOT(name=TOPIC, partitions=[TOT.TxnOffsetCommitRequestPartition(
                                        partition_index=0, committed_offset=5, committed_metadata="")])]), 3),
            _produce("tx-o", pid, epoch, 0, 0, b"v")])
        assert commit.topics[0].partitions[0].error_code == 0
        assert produced.responses[0].partition_responses[0].error_code == 0
        assert len(rounds) == 1, rounds
    _inproc(tmp_path, monkeypatch, scenario)


def test_markers_of_transactions_prepared_together_share_one_append_per_partition(tmp_path, monkeypatch):
    """Two transactions whose PrepareCommit records become durable in the same group commit get
    their COMMIT markers on a shared partition in one append; a marker the log refuses is
    retried alone and does not hold back the other transaction."""
    async def scenario(b, connect):
        c1, c2, c3 = await connect(), await connect(), await connect()
        pid1, e1 = await _open_transaction(b, c1, "tx-m1")
        init, = await _pipelined(c2, [(InitProducerIdRequest(transactional_id="tx-m2", transaction_timeout_ms=60000), 4)])
        pid2, e2 = init.producer_id, init.producer_epoch
        await _pipelined(c2, [_add_partitions("tx-m2", pid2, e2, [0, 1])])
        for c, tid, pid, e in ((c1, "tx-m1", pid1, e1), (c2, "tx-m2", pid2, e2)):
            produced = await _pipelined(c, [_produce(tid, pid, e, 0, p, b"v") for p in (0, 1)])
            assert [r.responses[0].partition_responses[0].error_code for r in produced] == [0, 0]
        plog = b.data_path.log(TOPIC, 0)
        appends, refuse = [], {pid2}
        real_append = plog.append

        def append(records, **kw):      # the log refuses tx-m2's marker on partition 0, for now
            appends.append(len(records))
            if any(h.is_control and h.producer_id in refuse for _, h, _ in iter_batches(memoryview(records))):
                raise InvalidProducerEpochError("refused for the test")
            return real_append(records, **kw)
        monkeypatch.setattr(plog, "append", append)
        # A slow sync in flight (a plain produce to both partitions: one syncfs), so both Prepare records are
        # appended meanwhile and made durable together by the next one.
        SYNC_DELAY["s"] = 0.3
        _, w3 = c3
        w3.write(b"".join(encode_request(ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
            TPD(name=TOPIC, partition_data=[TPD.PartitionProduceData(index=p, records=build_batch(
                [Record(key=None, value=b"plain", timestamp=int(time.time() * 1000))])) for p in (0, 1)])]),
            9, 0, "x")))
        while not b.data_path._sync_in_flight:
            await asyncio.sleep(0.001)
        ends = [asyncio.ensure_future(_pipelined(c, [(EndTxnRequest(transactional_id=tid, producer_id=pid,
                                                                    producer_epoch=e, committed=True), 3)]))
                for c, tid, pid, e in ((c1, "tx-m1", pid1, e1), (c2, "tx-m2", pid2, e2))]
        assert [r[0].error_code for r in await asyncio.gather(*ends)] == [0, 0]
        # The plain batch, then the two markers in one append (refused), then tx-m1's alone, tx-m2's
        # alone (refused; later retries may follow).
        assert len(appends) >= 4 and appends[1] == 2 * appends[2] == 2 * appends[3], appends
        txn = b.transaction_coordinator
        deadline = time.monotonic() + 10
        while txn.shards[txn.shard_for("tx-m1")].transactions["tx-m1"].state.kafka_name != "CompleteCommit":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        assert txn.shards[txn.shard_for("tx-m2")].transactions["tx-m2"].state.kafka_name == "PrepareCommit"
        refuse.clear()                          # the retry (every 100 ms) now succeeds
        while txn.shards[txn.shard_for("tx-m2")].transactions["tx-m2"].state.kafka_name != "CompleteCommit":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        # Two transactional records, the plain one, two markers; on partition 1 tx-m2's marker
        # once more per retry (each writes all its markers again: a repeated marker ends nothing).
        p0, p1 = b.data_path.log(TOPIC, 0), b.data_path.log(TOPIC, 1)
        assert p0.last_stable_offset == p0.log_end_offset == 5
        assert p1.last_stable_offset == p1.log_end_offset >= 6
    _inproc(tmp_path, monkeypatch, scenario)


def _produce_v12(tid, pid, epoch, seq, partition, value):
    return produce_request(tid, pid, epoch, seq, partition, value), 12


def test_tv2_requests_behind_a_completing_transaction_wait_for_it(tmp_path, monkeypatch):
    """Transaction version 2: the next transaction's Produce v12 and TxnOffsetCommit v5 arrive
    while the previous one's markers are being synced (EndTxn v5 answered, PrepareCommit). Each
    waits for CompleteCommit, then adds its partition itself and is appended, instead of being
    answered CONCURRENT_TRANSACTIONS (or NOT_ENOUGH_REPLICAS), which the producer would retry
    after its backoff (Kafka's ReplicaManager retries the produce's add in the broker)."""
    async def scenario(b, connect):
        conn = await connect()
        CT = CreateTopicsRequest.CreatableTopic
        created, init = await _pipelined(conn, [
            (CreateTopicsRequest(topics=[CT(name=TOPIC, num_partitions=2, replication_factor=1)], timeout_ms=5000), 7),
            (InitProducerIdRequest(transactional_id="tx-2", transaction_timeout_ms=60000), 5)])
        pid, epoch = init.producer_id, init.producer_epoch
        produced, = await _pipelined(conn, [_produce_v12("tx-2", pid, epoch, 0, 0, b"a")])
        assert produced.responses[0].partition_responses[0].error_code == 0
        SYNC_DELAY["s"] = 0.3       # the markers' sync: the window in which the next requests arrive
        offsets = TxnOffsetCommitRequest(transactional_id="tx-2", group_id="g-2", producer_id=pid,
                                         producer_epoch=epoch + 1, topics=[TOT(name=TOPIC, partitions=[
                                             TOT.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=3,
                                                                                 committed_metadata="")])])
        ended, produced, committed = await _pipelined(conn, [
            (EndTxnRequest(transactional_id="tx-2", producer_id=pid, producer_epoch=epoch, committed=True), 5),
            _produce_v12("tx-2", pid, epoch + 1, 0, 1, b"b"), (offsets, 5)])
        assert (ended.error_code, ended.producer_epoch) == (0, epoch + 1)
        assert produced.responses[0].partition_responses[0].error_code == 0
        assert committed.topics[0].partitions[0].error_code == 0
        st, = await _pipelined(conn, [(DescribeTransactionsRequest(transactional_ids=["tx-2"]), 0)])
        st = st.transaction_states[0]
        assert st.transaction_state == "Ongoing" and st.producer_epoch == epoch + 1
        assert sorted((t.topic, t.partitions) for t in st.topics) == [
            ("__consumer_offsets", [b.group_coordinator.shard_for("g-2")]), (TOPIC, [1])]
        assert b.transaction_coordinator._completing == {}
        assert _give_up_timers(b) == []
    _inproc(tmp_path, monkeypatch, scenario)


def test_a_tv2_produce_behind_a_transaction_whose_markers_never_land_gets_concurrent_transactions(tmp_path, monkeypatch):
    """The previous transaction's markers are never written (the test hook holds them): a
    Produce v12 of the next transaction waits Kafka's add.partitions.to.txn.retry.backoff.max.ms
    (100 ms), then is answered CONCURRENT_TRANSACTIONS, which Kafka keeps for transaction version
    2 (below v12 it is NOT_ENOUGH_REPLICAS, which older clients retry)."""
    async def scenario(b, connect):
        conn = await connect()
        CT = CreateTopicsRequest.CreatableTopic
        await _pipelined(conn, [(CreateTopicsRequest(topics=[CT(name=TOPIC, num_partitions=2, replication_factor=1)],
                                                     timeout_ms=5000), 7)])
        init, = await _pipelined(conn, [(InitProducerIdRequest(transactional_id="tx-2h", transaction_timeout_ms=60000), 5)])
        pid, epoch = init.producer_id, init.producer_epoch
        produced, = await _pipelined(conn, [_produce_v12("tx-2h", pid, epoch, 0, 0, b"a")])
        assert produced.responses[0].partition_responses[0].error_code == 0
        b.transaction_coordinator.hold_markers = True
        ended, = await _pipelined(conn, [(EndTxnRequest(transactional_id="tx-2h", producer_id=pid,
                                                        producer_epoch=epoch, committed=True), 5)])
        assert ended.error_code == 0
        started = time.monotonic()
        produced, = await _pipelined(conn, [_produce_v12("tx-2h", pid, epoch + 1, 0, 1, b"b")])
        waited = time.monotonic() - started
        assert produced.responses[0].partition_responses[0].error_code == E.CONCURRENT_TRANSACTIONS
        assert 0.09 <= waited < 5
        older, = await _pipelined(conn, [(produce_request("tx-2h", pid, epoch + 1, 0, 1, b"b"), 11)])
        assert older.responses[0].partition_responses[0].error_code == E.NOT_ENOUGH_REPLICAS
    _inproc(tmp_path, monkeypatch, scenario)
