"""Transactions whose partitions, and whose group's ``__consumer_offsets`` partition, are led by
other brokers than the transaction coordinator's (three in-process brokers, the test as their
controller, Metadata and FindCoordinator answered from its states): the leaders verify each
transactional produce and TxnOffsetCommit with the coordinator over the network
(AddPartitionsToTxnManager), the coordinator sends its markers to every leader
(TransactionMarkerChannelManager), retried to a new leader after a leadership change, and the
transaction completes only once every marker is written."""
from __future__ import annotations

import asyncio
import time

import pytest

from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from kgroup.protocol.records import ControlRecordType, iter_batches, read_end_txn_marker_batch

from .replication_support import Cluster, request

T = "orders"
GROUP = "billing"
TXN_STATE, OFFSETS = "__transaction_state", "__consumer_offsets"


@pytest.fixture
def cluster():
    """Broker 1 coordinates the transactions, broker 2 the group; ``orders``-0 is led by broker 2,
    ``orders``-1 by broker 3; every partition is replicated on all three."""
    c = Cluster(3, overrides={"transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1"})
    try:
        c.create_topic(T, partitions=2)
        c.create_internal_topic(TXN_STATE)
        c.create_internal_topic(OFFSETS)
        c.elect(TXN_STATE, leader=1, isr=(1, 2, 3))
        c.elect(OFFSETS, leader=2, isr=(1, 2, 3))
        c.elect(T, leader=2, isr=(1, 2, 3), partitions=(0,))
        c.elect(T, leader=3, isr=(1, 2, 3), partitions=(1,))
        c.serve_cluster_metadata()
        yield c
    finally:
        c.close()


def markers(c: Cluster, broker: int, topic: str, partition: int = 0) -> list[tuple[int, bool]]:
    """(producer id, committed) of each transaction marker in the partition's log on ``broker``."""
    out = []
    for _, header, batch in iter_batches(memoryview(c.log_bytes(broker, topic, partition))):
        marker = read_end_txn_marker_batch(batch, header)
        if marker is not None:
            out.append((header.producer_id, marker.control_type == ControlRecordType.COMMIT))
    return out


def txn_state(c: Cluster, tid: str) -> str | None:
    found = [t for t in c.brokers[1].transactions() if t.get("transactional_id") == tid]
    return found[0]["state"] if found else None


def committed_offsets(c: Cluster, group: str, partitions) -> dict[int, int]:
    F = OffsetFetchRequest
    r = request(c.brokers[2], F(groups=[F.OffsetFetchRequestGroup(group_id=group, topics=[
        F.OffsetFetchRequestTopics(name=T, partition_indexes=list(partitions))])], require_stable=True), version=8)
    assert r.groups[0].error_code == 0
    return {p.partition_index: p.committed_offset for p in r.groups[0].topics[0].partitions}


def read_committed(c: Cluster, expect: int, seconds: float = 20.0) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": c.brokers[3].bootstrap_servers, "group.id": "reader",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(T, 0, 0), TopicPartition(T, 1, 0)])
        got, deadline = [], time.monotonic() + seconds
        while time.monotonic() < deadline and len(got) < expect:
            m = consumer.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
        settle = time.monotonic() + 1.0         # nothing more comes
        while time.monotonic() < settle:
            m = consumer.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
        return got
    finally:
        consumer.close()


def test_confluent_kafka_commits_and_aborts_across_brokers(cluster):
    """librdkafka's transactional producer, its coordinator on broker 1, writes to partitions led
    by brokers 2 and 3 and sends offsets to a group coordinated by broker 2: commits and an
    abort; read_committed readers see exactly the committed records; every leader has the
    markers (and its followers, replicated); the group's offsets are the last commit's."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    c = cluster
    p = Producer({"bootstrap.servers": c.brokers[1].bootstrap_servers, "transactional.id": "tx", "linger.ms": 0})
    group = Consumer({"bootstrap.servers": c.brokers[1].bootstrap_servers, "group.id": GROUP})
    try:
        p.init_transactions(30)
        expected = []
        for n, commit in ((0, True), (1, False), (2, True)):
            p.begin_transaction()
            for part in (0, 1):
                for i in range(5):
                    value = b"t%d-p%d-%d" % (n, part, i)
                    p.produce(T, value=value, partition=part)
                    if commit:
                        expected.append(value)
            if n != 1:
                p.send_offsets_to_transaction([TopicPartition(T, 0, 10 * (n + 1)), TopicPartition(T, 1, 10 * (n + 1) + 1)],
                                              group.consumer_group_metadata(), 30)
            assert p.flush(30) == 0     # written before an abort too (else librdkafka just drops them)
            p.commit_transaction(30) if commit else p.abort_transaction(30)
        c.wait(lambda: txn_state(c, "tx") == "CompleteCommit", what="the last transaction complete")
        pid = next(t for t in c.brokers[1].transactions() if t["transactional_id"] == "tx")["producer_id"]
        # every leader has the three markers, then its followers
        want = [(pid, True), (pid, False), (pid, True)]
        assert markers(c, 2, T, 0) == want
        assert markers(c, 3, T, 1) == want
        assert markers(c, 2, OFFSETS) == [(pid, True), (pid, True)]
        for broker in (1, 3):
            c.wait(lambda b=broker: markers(c, b, T, 0) == want, what=f"broker {broker} has the markers of orders-0")
        assert sorted(read_committed(c, len(expected))) == sorted(expected)
        assert committed_offsets(c, GROUP, (0, 1)) == {0: 30, 1: 31}
    finally:
        group.close()


def test_markers_are_retried_to_a_new_leader(cluster):
    """The leader of orders-1 does not answer the coordinator's markers (its connection drops
    each WriteTxnMarkers, as a broker about to fail): the transaction stays in PrepareCommit, its
    EndTxn answered, the markers retried; orders-1 moves to broker 2 and the marker is sent there,
    then the transaction completes."""
    from confluent_kafka import Producer
    c = cluster
    p = Producer({"bootstrap.servers": c.brokers[1].bootstrap_servers, "transactional.id": "moving",
                  "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    values = [b"m%d" % i for i in range(6)]
    for i, v in enumerate(values):
        p.produce(T, value=v, partition=i % 2)
    assert p.flush(30) == 0
    c.brokers[3].drop_connection(api="WriteTxnMarkers", count=None, client_id="broker-1")
    p.commit_transaction(30)        # answered once PrepareCommit is written, before the markers
    time.sleep(0.5)
    assert txn_state(c, "moving") == "PrepareCommit"
    pid = next(t for t in c.brokers[1].transactions() if t["transactional_id"] == "moving")["producer_id"]
    assert markers(c, 2, T, 0) == [(pid, True)]         # broker 2's partition has it already
    assert markers(c, 3, T, 1) == []
    c.elect(T, leader=2, isr=(1, 2, 3), partitions=(1,))
    c.wait(lambda: txn_state(c, "moving") == "CompleteCommit", what="the transaction complete on the new leader")
    assert markers(c, 2, T, 1) == [(pid, True)]
    c.brokers[3].inject("clear")
    c.wait(lambda: markers(c, 3, T, 1) == [(pid, True)], what="broker 3, now a follower, has the marker")
    assert sorted(read_committed(c, len(values))) == sorted(values)


def test_a_produce_to_a_partition_outside_the_transaction_is_refused_by_its_remote_coordinator(cluster):
    """KIP-890 part 1 with the coordinator on another broker: a transactional batch for a
    partition the transaction never added is refused (TRANSACTION_ABORTABLE from broker 1's
    coordinator, INVALID_TXN_STATE for Produce v10); one added is accepted."""
    from kgroup.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest as A
    from kgroup.protocol.messages.init_producer_id import InitProducerIdRequest
    from kgroup.protocol.records import Record, build_batch
    from .test_replication import produce
    c = cluster
    init = request(c.brokers[1], InitProducerIdRequest(transactional_id="raw", transaction_timeout_ms=60000,
                                                       producer_id=-1, producer_epoch=-1), version=4)
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch

    def batch(seq):
        return build_batch([Record(value=b"x")], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                           is_transactional=True)
    _, pr = produce(c.brokers[2], batch(0), partition=0, transactional_id="raw", version=11)
    assert pr.error_code == ErrorCode.TRANSACTION_ABORTABLE
    _, pr = produce(c.brokers[2], batch(0), partition=0, transactional_id="raw", version=10)
    assert pr.error_code == ErrorCode.INVALID_TXN_STATE
    added = request(c.brokers[1], A(v3_and_below_transactional_id="raw", v3_and_below_producer_id=pid,
                                    v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                                        A.AddPartitionsToTxnTopic(name=T, partitions=[0])]), version=3)
    assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
    _, pr = produce(c.brokers[2], batch(0), partition=0, transactional_id="raw", version=11)
    assert pr.error_code == 0
    # the other partition, on broker 3, is still outside the transaction
    _, pr = produce(c.brokers[3], batch(0), partition=1, transactional_id="raw", version=11)
    assert pr.error_code == ErrorCode.TRANSACTION_ABORTABLE


def test_our_tv2_producer_across_brokers(cluster):
    """Our client's transaction version 2 producer (Produce v12 and TxnOffsetCommit v5 add their
    partitions through the leaders, which ask broker 1's coordinator): commits and aborts with
    offsets for a group on broker 2."""
    from kgroup.client import TopicPartition as TP
    from kgroup.client.producer import Producer
    from kgroup.client.transactions import ConsumerGroupMetadata
    c = cluster

    async def go():
        async with Producer(bootstrap_servers=c.brokers[1].bootstrap_servers, transactional_id="tv2") as p:
            await p.init_transactions()
            assert p._txn.transaction_v2
            expected = []
            for n, commit in ((0, True), (1, False), (2, True)):
                p.begin_transaction()
                for part in (0, 1):
                    v = b"tv2-%d-%d" % (n, part)
                    await p.send(T, v, partition=part)
                    if commit:
                        expected.append(v)
                await p.send_offsets_to_transaction({TP(T, 0): n + 1, TP(T, 1): n + 2}, ConsumerGroupMetadata(GROUP))
                await (p.commit_transaction() if commit else p.abort_transaction())
            return expected
    expected = asyncio.run(go())
    c.wait(lambda: txn_state(c, "tv2") == "CompleteCommit", what="the last transaction complete")
    pid = next(t for t in c.brokers[1].transactions() if t["transactional_id"] == "tv2")["producer_id"]
    for broker, part in ((2, 0), (3, 1)):
        assert [committed for p_, committed in markers(c, broker, T, part) if p_ == pid] == [True, False, True]
    assert [committed for p_, committed in markers(c, 2, OFFSETS) if p_ == pid] == [True, False, True]
    assert sorted(read_committed(c, len(expected))) == sorted(expected)
    assert committed_offsets(c, GROUP, (0, 1)) == {0: 3, 1: 4}


def test_write_txn_markers_on_a_cluster(cluster):
    """WriteTxnMarkers as a coordinator sends it: NOT_LEADER_OR_FOLLOWER from a follower (the
    coordinator retries it elsewhere); from the leader, answered once its ISR has the marker."""
    from kgroup.protocol.messages.write_txn_markers import WriteTxnMarkersRequest as W
    c = cluster

    def send(broker):
        M = W.WritableTxnMarker
        r = request(c.brokers[broker], W(markers=[M(producer_id=77, producer_epoch=0, transaction_result=False,
                                                     coordinator_epoch=0, topics=[M.WritableTxnMarkerTopic(
                                                         name=T, partition_indexes=[0])])]), version=1)
        return r.markers[0].topics[0].partitions[0].error_code
    assert send(3) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert markers(c, 3, T, 0) == []
    assert send(2) == ErrorCode.NONE
    end = c.offsets(2, T, 0)[0]
    assert c.offsets(2, T, 0) == (end, end)           # the high watermark passed it: the ISR has it
    assert markers(c, 2, T, 0) == [(77, False)]


def test_an_unreachable_coordinator_is_retried_by_the_producer(cluster):
    """While the transaction coordinator's broker is not reachable, a leader answers a
    transactional batch NOT_ENOUGH_REPLICAS (retried by every client without a metadata refresh,
    as Kafka's ReplicaManager answers COORDINATOR_NOT_AVAILABLE / NETWORK_EXCEPTION), then
    verifies it once the coordinator is back."""
    from kgroup.protocol.messages.init_producer_id import InitProducerIdRequest
    from kgroup.protocol.records import Record, build_batch
    from .test_replication import produce
    c = cluster
    init = request(c.brokers[1], InitProducerIdRequest(transactional_id="gone", transaction_timeout_ms=60000,
                                                       producer_id=-1, producer_epoch=-1), version=4)
    batch = build_batch([Record(value=b"x")], producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                        base_sequence=0, is_transactional=True)
    c.down.add(1)
    try:
        _, pr = produce(c.brokers[3], batch, partition=1, transactional_id="gone", version=11)
        assert pr.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    finally:
        c.down.discard(1)
    _, pr = produce(c.brokers[3], batch, partition=1, transactional_id="gone", version=11)
    assert pr.error_code == ErrorCode.TRANSACTION_ABORTABLE      # asked, and not in the transaction
    assert c.offsets(3, T, 1)[0] == 0
