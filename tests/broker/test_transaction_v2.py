"""Transaction version 2 (KIP-890 part 2) over the wire: the broker finalizes transaction.version
2; Produce v12 adds a transaction's partition itself, TxnOffsetCommit v5 its offsets partition,
EndTxn v5 bumps the producer epoch (markers carry it) and answers the id/epoch for the next
transaction, a retried EndTxn gets the same answer, the old epoch is fenced; a TV1 flow
(AddPartitionsToTxn, EndTxn v4) works beside it."""
import time

from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kgroup.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kgroup.protocol.messages.end_txn import EndTxnRequest
from kgroup.protocol.messages.init_producer_id import InitProducerIdRequest
from kgroup.protocol.messages.list_offsets import ListOffsetsRequest
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from kgroup.protocol.messages.produce import ProduceRequest
from kgroup.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kgroup.protocol.records import Record, build_batch, iter_batches
from tests.broker.test_data_path import fetch
from tests.broker.test_features import _features
from tests.broker.test_topics import create
from tests.harness import RawClient

TPD = ProduceRequest.TopicProduceData
TOT = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic


def _produce(c, tid, pid, epoch, seq, value, version=12):
    batch = build_batch([Record(value=value, timestamp=int(time.time() * 1000))], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, is_transactional=True)
    r = c.request(ProduceRequest(transactional_id=tid, acks=-1, timeout_ms=5000, topic_data=[
        TPD(name="t2", partition_data=[TPD.PartitionProduceData(index=0, records=batch)])]), version)
    return r.responses[0].partition_responses[0].error_code


def _end(c, tid, pid, epoch, committed, version=5):
    r = c.request(EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=committed),
                  version)
    return r.error_code, r.producer_id, r.producer_epoch


def _state(c, tid):
    return c.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0).transaction_states[0]


def _lso(c):
    r = c.request(ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name="t2", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 7)
    return r.topics[0].partitions[0].offset


def _wait_complete(c, tid):
    deadline = time.monotonic() + 10
    while _state(c, tid).transaction_state not in ("CompleteCommit", "CompleteAbort"):
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_transaction_version_2_end_to_end(broker):
    c = RawClient(broker.port)
    assert _features(c)[1]["transaction.version"] == (2, 2)
    create(c, "t2", 1)
    init = c.request(InitProducerIdRequest(transactional_id="tv2", transaction_timeout_ms=60000), 5)
    pid, epoch = init.producer_id, init.producer_epoch
    # no AddPartitionsToTxn: Produce v12 adds the partition; v11 would not
    assert _produce(c, "tv2", pid, epoch, 0, b"a", version=11) == E.TRANSACTION_ABORTABLE
    assert _produce(c, "tv2", pid, epoch, 0, b"a") == 0
    # no AddOffsetsToTxn: TxnOffsetCommit v5 adds the group's offsets partition
    r = c.request(TxnOffsetCommitRequest(transactional_id="tv2", group_id="g2", producer_id=pid, producer_epoch=epoch,
                                         topics=[TOT(name="t2", partitions=[TOT.TxnOffsetCommitRequestPartition(
                                             partition_index=0, committed_offset=7, committed_metadata="")])]), 5)
    assert r.topics[0].partitions[0].error_code == 0
    st = _state(c, "tv2")
    assert st.transaction_state == "Ongoing" and sorted(t.topic for t in st.topics) == ["__consumer_offsets", "t2"]
    assert _lso(c) == 0
    # EndTxn v5: the epoch is bumped, and answered
    assert _end(c, "tv2", pid, epoch, True) == (0, pid, epoch + 1)
    assert _end(c, "tv2", pid, epoch, True) == (0, pid, epoch + 1)           # a retry: same answer
    _wait_complete(c, "tv2")
    assert _lso(c) == 2                                                     # past the COMMIT marker
    marker = [h for _, h, _ in iter_batches(memoryview(fetch(c, "t2", 0).records)) if h.is_control]
    assert [(m.producer_id, m.producer_epoch) for m in marker] == [(pid, epoch + 1)]
    g = c.request(OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id="g2", topics=None)], require_stable=True), 9).groups[0]
    assert [(p.partition_index, p.committed_offset) for t in g.topics for p in t.partitions] == [(0, 7)]
    # the next transaction with the new epoch (sequences start again); the old epoch is fenced
    assert _produce(c, "tv2", pid, epoch, 1, b"zombie") == E.INVALID_PRODUCER_EPOCH
    assert _produce(c, "tv2", pid, epoch + 1, 0, b"b") == 0
    assert _end(c, "tv2", pid, epoch, False)[0] == E.PRODUCER_FENCED
    assert _end(c, "tv2", pid, epoch + 1, False) == (0, pid, epoch + 2)
    _wait_complete(c, "tv2")
    assert _state(c, "tv2").transaction_state == "CompleteAbort" and _lso(c) == 4


def test_transaction_version_1_beside_it(broker):
    c = RawClient(broker.port)
    create(c, "t2", 1)
    init = c.request(InitProducerIdRequest(transactional_id="tv1", transaction_timeout_ms=60000), 4)
    pid, epoch = init.producer_id, init.producer_epoch
    APT = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    add = c.request(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tv1", v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[APT(name="t2", partitions=[0])]), 3)
    assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    assert _produce(c, "tv1", pid, epoch, 0, b"v1", version=9) == 0
    assert _end(c, "tv1", pid, epoch, True, version=4)[0] == 0
    _wait_complete(c, "tv1")
    st = _state(c, "tv1")
    assert (st.producer_id, st.producer_epoch) == (pid, epoch)               # no bump in TV1
    assert _lso(c) == 2


def _marker(c, pid, epoch, version, transaction_version=0):
    from kgroup.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
    M = WriteTxnMarkersRequest.WritableTxnMarker
    r = c.request(WriteTxnMarkersRequest(markers=[M(
        producer_id=pid, producer_epoch=epoch, transaction_result=False, coordinator_epoch=0,
        transaction_version=transaction_version,
        topics=[M.WritableTxnMarkerTopic(name="t2", partition_indexes=[0])])]), version)
    return r.markers[0].topics[0].partitions[0].error_code


def test_write_txn_markers_v2_checks_the_epoch_as_the_transaction_version_says(broker):
    """WriteTxnMarkers v2's TransactionVersion: a version 2 marker must carry the bumped epoch
    (INVALID_PRODUCER_EPOCH at the data's epoch: KafkaApis passes it to the append, and
    ProducerAppendInfo.checkProducerEpoch refuses it); a v1 request (version 0) accepts it."""
    c = RawClient(broker.port)
    create(c, "t2", 1)
    for tid, accepted in (("m2", False), ("m1", True)):
        init = c.request(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000), 5)
        pid, epoch = init.producer_id, init.producer_epoch
        assert _produce(c, tid, pid, epoch, 0, b"x") == 0
        lso = _lso(c)
        if accepted:
            assert _marker(c, pid, epoch, 1) == 0
            assert _lso(c) > lso
        else:
            assert _marker(c, pid, epoch, 2, transaction_version=2) == E.INVALID_PRODUCER_EPOCH
            assert _lso(c) == lso                                             # still open
            assert _marker(c, pid, epoch + 1, 2, transaction_version=2) == 0
            assert _lso(c) > lso
            assert _marker(c, pid, epoch + 1, 2, transaction_version=2) == 0   # a retry, nothing open


def test_end_txn_v5_abort_with_no_transaction_bumps_the_epoch(broker):
    """TV2's EndTxn ABORT in Empty (Kafka 4.3: a PrepareAbort with no partitions and the epoch
    bumped, completed at once) answers the next epoch; a COMMIT there is INVALID_TXN_STATE."""
    c = RawClient(broker.port)
    init = c.request(InitProducerIdRequest(transactional_id="empty", transaction_timeout_ms=60000), 5)
    pid, epoch = init.producer_id, init.producer_epoch
    assert _end(c, "empty", pid, epoch, True)[0] == E.INVALID_TXN_STATE
    assert _end(c, "empty", pid, epoch, False) == (0, pid, epoch + 1)
    _wait_complete(c, "empty")
    st = _state(c, "empty")
    assert (st.transaction_state, st.producer_epoch, st.topics) == ("CompleteAbort", epoch + 1, [])
    assert _end(c, "empty", pid, epoch, False) == (0, pid, epoch + 1)          # a retry
    assert _end(c, "empty", pid, epoch + 1, False) == (0, pid, epoch + 2)      # abort again: another bump
