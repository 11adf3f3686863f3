"""Transactions where kgroup answered differently from Kafka (the audit's divergences), over the
wire: TxnOffsetCommit verified against the transaction coordinator, transactional records without
a transactional id, InitProducerId with half a producer id/epoch, internal topics in
AddPartitionsToTxn."""
import time

from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kgroup.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kgroup.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kgroup.protocol.messages.init_producer_id import InitProducerIdRequest
from kgroup.protocol.messages.list_offsets import ListOffsetsRequest
from kgroup.protocol.messages.produce import ProduceRequest
from kgroup.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kgroup.protocol.records import Record, build_batch
from tests.broker.test_topics import create
from tests.harness import RawClient

TOT = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
APT = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
TPD = ProduceRequest.TopicProduceData


def _init(c, tid):
    r = c.request(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000), 4)
    assert r.error_code == 0
    return r.producer_id, r.producer_epoch


def _add(c, tid, pid, epoch, topic, partition):
    r = c.request(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[APT(name=topic, partitions=[partition])]), 3)
    return {(t.name, p.partition_index): p.partition_error_code
            for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def _txn_commit(c, tid, pid, epoch, group="g", version=3):
    r = c.request(TxnOffsetCommitRequest(
        transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
        topics=[TOT(name="t", partitions=[TOT.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=3, committed_metadata="")])]), version)
    return r.topics[0].partitions[0].error_code


def test_txn_offset_commit_is_verified_with_the_transaction_coordinator(broker):
    c = RawClient(broker.port)
    create(c, "t", 1)
    pid, epoch = _init(c, "tx-v")
    assert _txn_commit(c, "tx-v", pid + 1000, epoch) == E.INVALID_PRODUCER_ID_MAPPING    # unknown producer
    assert _txn_commit(c, "tx-v", pid, epoch + 1) == E.INVALID_PRODUCER_EPOCH            # a future epoch
    assert _add(c, "tx-v", pid, epoch, "t", 0) == {("t", 0): 0}                           # a transaction is open
    # ... but the group's offsets partition is not in it (no AddOffsetsToTxn)
    assert _txn_commit(c, "tx-v", pid, epoch, version=3) == E.INVALID_TXN_STATE
    assert _txn_commit(c, "tx-v", pid, epoch, version=4) == E.TRANSACTION_ABORTABLE
    assert c.request(AddOffsetsToTxnRequest(transactional_id="tx-v", producer_id=pid, producer_epoch=epoch,
                                            group_id="g"), 3).error_code == 0
    assert _txn_commit(c, "tx-v", pid, epoch) == 0
    assert _txn_commit(c, "tx-v", pid, epoch - 1 if epoch else epoch + 5) == E.INVALID_PRODUCER_EPOCH
    # the transaction is untouched by the refused commits: still ongoing with both partitions
    state = c.request(DescribeTransactionsRequest(transactional_ids=["tx-v"]), 0).transaction_states[0]
    assert (state.error_code, state.transaction_state, state.producer_epoch) == (0, "Ongoing", epoch)
    assert sorted((t.topic, list(t.partitions)) for t in state.topics) == [("__consumer_offsets", [
        [tp.partitions for tp in state.topics if tp.topic == "__consumer_offsets"][0][0]]), ("t", [0])]


def test_transactional_records_without_a_transactional_id_are_refused(broker):
    c = RawClient(broker.port)
    create(c, "t", 1)
    pid, epoch = _init(c, "tx-n")
    assert _add(c, "tx-n", pid, epoch, "t", 0) == {("t", 0): 0}
    batch = build_batch([Record(value=b"v", timestamp=int(time.time() * 1000))], producer_id=pid,
                        producer_epoch=epoch, base_sequence=0, is_transactional=True)
    r = c.request(ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        TPD(name="t", partition_data=[TPD.PartitionProduceData(index=0, records=batch)])]), 9)
    p = r.responses[0].partition_responses[0]
    assert (p.error_code, p.base_offset) == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
    # nothing was appended: no transaction left hanging on the partition
    lo = c.request(ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name="t", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 7)
    assert lo.topics[0].partitions[0].offset == 0
    # an idempotent (non-transactional) batch without a transactional id is still fine
    plain = build_batch([Record(value=b"v", timestamp=int(time.time() * 1000))])
    r = c.request(ProduceRequest(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        TPD(name="t", partition_data=[TPD.PartitionProduceData(index=0, records=plain)])]), 9)
    assert r.responses[0].partition_responses[0].error_code == 0


def test_init_producer_id_with_half_a_producer_id_and_epoch_is_invalid(broker):
    c = RawClient(broker.port)
    for pid, epoch in ((5, -1), (-1, 3)):
        for tid in (None, "tx-h"):
            r = c.request(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000,
                                                producer_id=pid, producer_epoch=epoch), 4)
            assert (r.error_code, r.producer_id, r.producer_epoch) == (E.INVALID_REQUEST, -1, -1), (pid, epoch, tid)
    r = c.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4)
    assert r.error_code == 0 and r.producer_id >= 0


def test_add_partitions_to_txn_refuses_internal_topics(broker):
    """A client's AddPartitionsToTxn (v0-3) naming an internal topic fails the whole transaction:
    TOPIC_AUTHORIZATION_FAILED for it, OPERATION_NOT_ATTEMPTED for the rest (KafkaApis); nothing
    is added, so no marker is ever written into __transaction_state or __consumer_offsets."""
    from kgroup.protocol.messages.end_txn import EndTxnRequest
    c = RawClient(broker.port)
    create(c, "t", 1)
    pid, epoch = _init(c, "tx-i")
    r = c.request(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tx-i", v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[APT(name="__transaction_state", partitions=[0]), APT(name="t", partitions=[0]),
                             APT(name="__consumer_offsets", partitions=[1])]), 3)
    got = {(t.name, p.partition_index): p.partition_error_code
           for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}
    assert got == {("__transaction_state", 0): E.TOPIC_AUTHORIZATION_FAILED,
                   ("__consumer_offsets", 1): E.TOPIC_AUTHORIZATION_FAILED, ("t", 0): E.OPERATION_NOT_ATTEMPTED}
    state = c.request(DescribeTransactionsRequest(transactional_ids=["tx-i"]), 0).transaction_states[0]
    assert (state.transaction_state, list(state.topics)) == ("Empty", [])
    assert _add(c, "tx-i", pid, epoch, "t", 0) == {("t", 0): 0}
    assert c.request(EndTxnRequest(transactional_id="tx-i", producer_id=pid, producer_epoch=epoch,
                                   committed=False), 3).error_code == 0


def test_idle_producer_ids_expire(tmp_path):
    """producer.id.expiration.ms, checked every producer.id.expiration.check.interval.ms
    (ProducerStateManager.removeExpiredProducers): an idle producer is forgotten, so its next
    batch is taken as a new producer's (any sequence); before expiry a gap is out of order."""
    from tests.broker.test_data_path import produce
    from tests.harness import BrokerProcess
    b = BrokerProcess(tmp_path / "d", ["producer.id.expiration.ms=1500",
                                       "producer.id.expiration.check.interval.ms=500"]).start()
    try:
        c = RawClient(b.port)
        create(c, "t", 1)

        def idempotent(seq):
            return build_batch([Record(value=b"v", timestamp=int(time.time() * 1000))], producer_id=77,
                               producer_epoch=0, base_sequence=seq)
        assert produce(c, "t", idempotent(0)).error_code == 0
        assert produce(c, "t", idempotent(5)).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        deadline = time.monotonic() + 15
        while produce(c, "t", idempotent(5)).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER:
            assert time.monotonic() < deadline, "the idle producer id never expired"
            time.sleep(0.3)
        assert produce(c, "t", idempotent(6)).error_code == 0      # known again, in sequence
    finally:
        b.stop()
