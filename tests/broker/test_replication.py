"""Replication between in-process brokers, the test acting as their controller
(replication_support.Cluster): followers fetch from leaders and hold the same bytes, the high
watermark follows the ISR, acks=all waits for it, the ISR shrinks and expands, min.insync.replicas
is enforced, a deposed leader truncates what it alone had, producer state survives a failover,
clients get Kafka's leadership errors and hints, and a coordinator partition moves with its
leadership."""
from __future__ import annotations

import time

import pytest

from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.fetch import FetchRequest
from kgroup.protocol.messages.list_offsets import ListOffsetsRequest
from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from kgroup.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kgroup.protocol.messages.produce import ProduceRequest
from kgroup.protocol.messages.write_txn_markers import WriteTxnMarkersRequest

from .replication_support import Cluster, batch, request

T = "orders"


@pytest.fixture
def cluster3():
    c = Cluster(3)
    yield c
    c.close()


def produce(kb, records: bytes, acks: int = -1, timeout_ms: int = 10_000, topic: str = T, partition: int = 0,
            version: int = 11, transactional_id=None):
    P = ProduceRequest
    resp = request(kb, P(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[P.PartitionProduceData(index=partition, records=records)])]),
        version=version)
    return resp, resp.responses[0].partition_responses[0]


def fetch(kb, offset: int, *, version: int = 16, epoch: int = -1, rack: str = "", replica_id: int = -1,
          topic: str = T, isolation: int = 0, last_fetched_epoch: int = -1):
    R = FetchRequest
    topic_id = kb.call(lambda b: b.metadata.get(topic).topic_id)
    resp = request(kb, R(replica_id=replica_id, replica_state=R.ReplicaState(replica_id=replica_id, replica_epoch=-1),
                         max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=isolation, session_id=0,
                         session_epoch=-1, rack_id=rack, forgotten_topics_data=[], topics=[R.FetchTopic(
                             topic=topic, topic_id=topic_id, partitions=[R.FetchPartition(
                                 partition=0, current_leader_epoch=epoch, fetch_offset=offset,
                                 last_fetched_epoch=last_fetched_epoch, log_start_offset=-1,
                                 partition_max_bytes=1 << 20)])]), version=version)
    return resp, resp.responses[0].partitions[0]


def test_followers_hold_the_leaders_bytes_and_the_high_watermark_follows(cluster3):
    c = cluster3
    c.create_topic(T)
    c.elect(T, leader=1, isr=(1, 2, 3))
    for i in range(5):
        _, pr = produce(c.brokers[1], batch([f"v{i}-{j}" for j in range(10)]))
        assert pr.error_code == 0 and pr.base_offset == i * 10
    # answered at acks=all: every ISR member had the records, so the high watermark is there
    assert c.offsets(1, T) == (50, 50)
    leader_bytes = c.log_bytes(1, T)
    for i in (2, 3):
        c.wait(lambda i=i: c.offsets(i, T) == (50, 50), what=f"broker {i} at the leader's high watermark")
        assert c.log_bytes(i, T) == leader_bytes          # byte for byte: offsets, epochs, CRCs
    assert c.brokers[2].call(lambda b: b.data_path.log(T, 0).leader_epoch_cache.entries) == [(0, 0)]


def test_consumers_read_only_below_the_high_watermark(cluster3):
    c = cluster3
    c.create_topic(T)
    c.elect(T, leader=1, isr=(1, 2, 3))
    produce(c.brokers[1], batch(["a", "b"]))
    c.stop_fetching(3, T)
    _, pr = produce(c.brokers[1], batch(["c"]), acks=1)
    assert pr.error_code == 0
    c.wait(lambda: c.offsets(2, T)[0] == 3, what="broker 2 has the record")
    assert c.offsets(1, T) == (3, 2)                      # broker 3 holds the high watermark
    _, pd = fetch(c.brokers[1], 2)
    assert pd.error_code == 0 and pd.high_watermark == 2 and len(pd.records) == 0
    L = ListOffsetsRequest
    lo = request(c.brokers[1], L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
        name=T, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
    assert lo.topics[0].partitions[0].offset == 2 and lo.topics[0].partitions[0].leader_epoch == 0
    c.resume_fetching(3, T)
    c.wait(lambda: c.offsets(1, T) == (3, 3), what="the high watermark after broker 3 fetched")
    _, pd = fetch(c.brokers[1], 2)
    assert len(pd.records) > 0


def test_acks_all_waits_for_the_isr_then_the_isr_shrinks_and_expands():
    c = Cluster(3, overrides={"replica.lag.time.max.ms": "1500"})
    try:
        c.create_topic(T)
        c.elect(T, leader=1, isr=(1, 2, 3))
        produce(c.brokers[1], batch(["x"]))
        c.stop_fetching(3, T)
        started = time.monotonic()
        _, pr = produce(c.brokers[1], batch(["y"]), timeout_ms=300)
        assert pr.error_code == ErrorCode.REQUEST_TIMED_OUT      # broker 3 is in the ISR and lacks it
        assert time.monotonic() - started >= 0.3
        c.wait(lambda: c.isr(T) == (1, 2), what="the ISR without broker 3")
        assert c.brokers[1].call(lambda b: b.replica_manager.partitions[(T, 0)].isr) == (1, 2)
        _, pr = produce(c.brokers[1], batch(["z"]))
        assert pr.error_code == 0                                 # the ISR is {1, 2} now
        c.resume_fetching(3, T)
        c.wait(lambda: c.isr(T) == (1, 2, 3), what="broker 3 back in the ISR")
        assert c.log_bytes(3, T) == c.log_bytes(1, T)
    finally:
        c.close()


def test_pipelined_acks_all_produces_are_appended_while_earlier_ones_wait_for_the_isr(cluster3):
    """An acks=all Produce waiting for its ISR does not hold the connection's later requests:
    they are appended at once and their waits overlap (one replication round trip for them all,
    not one each in turn); the answers keep their order."""
    import asyncio

    from kgroup.client.connection import BrokerConnection
    c = cluster3
    c.create_topic(T)
    c.elect(T, leader=1, isr=(1, 2, 3))
    produce(c.brokers[1], batch(["x"]))
    c.stop_fetching(3, T)           # in the ISR, not fetching: nothing acks=all is answered meanwhile
    leader = c.brokers[1]
    end = lambda: leader.call(lambda b: b.data_path.log(T, 0).log_end_offset)      # noqa: E731
    P = ProduceRequest

    def body(value):
        return P(transactional_id=None, acks=-1, timeout_ms=20_000, topic_data=[P.TopicProduceData(
            name=T, partition_data=[P.PartitionProduceData(index=0, records=batch([value]))])])

    async def run():
        conn = await BrokerConnection("127.0.0.1", leader.port, node_id=0, client_id="pipelined").connect()
        try:
            sent = [asyncio.ensure_future(conn.send(body(v), version=11)) for v in ("a", "b", "c")]
            for _ in range(200):
                if end() == 4:
                    break
                await asyncio.sleep(0.01)
            appended, waiting = end(), [not f.done() for f in sent]
            c.resume_fetching(3, T)
            return appended, waiting, [r.responses[0].partition_responses[0] for r in await asyncio.gather(*sent)]
        finally:
            conn.close()
    appended, waiting, answers = asyncio.run(run())
    assert appended == 4 and waiting == [True, True, True]
    assert [(pr.error_code, pr.base_offset) for pr in answers] == [(0, 1), (0, 2), (0, 3)]


def test_min_insync_replicas():
    c = Cluster(2, overrides={"replica.lag.time.max.ms": "1500"})
    try:
        c.create_topic(T, configs={"min.insync.replicas": "2"})
        c.elect(T, leader=1, isr=(1, 2))
        _, pr = produce(c.brokers[1], batch(["a"]))
        assert pr.error_code == 0
        c.stop_fetching(2, T)
        # waiting for broker 2 until it leaves the ISR: then the leader alone has the records
        _, pr = produce(c.brokers[1], batch(["b"]), timeout_ms=15_000)
        assert pr.error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        assert c.isr(T) == (1,)
        _, pr = produce(c.brokers[1], batch(["c"]))
        assert pr.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        _, pr = produce(c.brokers[1], batch(["c"]), acks=1)
        assert pr.error_code == 0                                 # acks=1 does not need the ISR
    finally:
        c.close()


def test_errors_and_kip951_hints_on_a_follower(cluster3):
    c = cluster3
    c.create_topic(T)
    c.elect(T, leader=1, isr=(1, 2, 3))
    c.elect(T, leader=1, isr=(1, 2, 3))                  # leader epoch 1
    resp, pr = produce(c.brokers[2], batch(["a"]))
    assert pr.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (pr.current_leader.leader_id, pr.current_leader.leader_epoch) == (1, 1)
    assert [(n.node_id, n.host, n.port) for n in resp.node_endpoints] == [(1, "127.0.0.1", c.brokers[1].port)]
    resp, pd = fetch(c.brokers[1], 0, epoch=0)
    assert pd.error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (pd.current_leader.leader_id, pd.current_leader.leader_epoch) == (1, 1)
    _, pd = fetch(c.brokers[1], 0, epoch=2)
    assert pd.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    _, pd = fetch(c.brokers[2], 0, epoch=1, version=10)     # no client metadata: the leader only
    assert pd.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    L = ListOffsetsRequest
    lo = request(c.brokers[3], L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
        name=T, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-1, current_leader_epoch=1)])]))
    assert lo.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    E = OffsetForLeaderEpochRequest
    for kb, current, code in ((c.brokers[1], 2, ErrorCode.UNKNOWN_LEADER_EPOCH),
                              (c.brokers[1], 0, ErrorCode.FENCED_LEADER_EPOCH),
                              (c.brokers[2], 1, ErrorCode.NOT_LEADER_OR_FOLLOWER)):
        r = request(kb, E(replica_id=-1, topics=[E.OffsetForLeaderTopic(topic=T, partitions=[
            E.OffsetForLeaderPartition(partition=0, current_leader_epoch=current, leader_epoch=1)])]))
        assert r.topics[0].partitions[0].error_code == code


def test_a_deposed_leader_truncates_what_it_alone_had_and_follows(cluster3):
    c = cluster3
    c.create_topic(T)
    c.elect(T, leader=1, isr=(1, 2, 3))
    produce(c.brokers[1], batch(["a", "b", "c"]))
    c.stop_fetching(2, T)
    c.stop_fetching(3, T)
    _, pr = produce(c.brokers[1], batch(["only-on-1"]), acks=1)     # never replicated
    assert pr.base_offset == 3
    c.elect(T, leader=2, isr=(2, 3))                                # epoch 1 on broker 2
    _, pr = produce(c.brokers[2], batch(["new-1", "new-2"]))
    assert pr.error_code == 0 and pr.base_offset == 3
    c.elect(T, leader=2, isr=(2, 3), replicas=(1, 2, 3))            # broker 1 follows again (epoch 2)
    c.wait(lambda: c.log_bytes(1, T) == c.log_bytes(2, T), what="broker 1 truncated and caught up")
    assert c.offsets(1, T)[0] == 5
    assert c.brokers[1].call(lambda b: b.data_path.log(T, 0).leader_epoch_cache.entries) == [(0, 0), (1, 3)]
    c.wait(lambda: c.isr(T) == (1, 2, 3), what="broker 1 back in the ISR")
    # a follower asking with a diverging last fetched epoch (v12+) is told where its log diverged
    _, pd = fetch(c.brokers[2], 4, version=12, replica_id=1, last_fetched_epoch=0, epoch=2)
    assert pd.error_code == 0 and (pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset) == (0, 3)


def test_diverging_epoch_answer():
    c = Cluster(2)
    try:
        c.create_topic(T)
        c.elect(T, leader=1, isr=(1, 2))
        produce(c.brokers[1], batch(["a", "b"]))
        c.elect(T, leader=1, isr=(1, 2))
        produce(c.brokers[1], batch(["c"]))
        c.stop_fetching(2, T)
        # broker 2 pretends to have fetched up to 5 at epoch 0: epoch 0 ended at 2 on the leader
        _, pd = fetch(c.brokers[1], 5, version=12, replica_id=2, last_fetched_epoch=0)
        assert pd.error_code == 0
        assert (pd.diverging_epoch.epoch, pd.diverging_epoch.end_offset) == (0, 2)
        _, pd = fetch(c.brokers[1], 2, version=12, replica_id=2, last_fetched_epoch=0)
        assert pd.diverging_epoch.epoch == -1 and len(pd.records) > 0
    finally:
        c.close()


def test_producer_state_follows_the_replicated_batches():
    c = Cluster(2, overrides={"transaction.partition.verification.enable": "false"})
    try:
        c.create_topic(T)
        c.elect(T, leader=1, isr=(1, 2))
        pid, txn_pid = 7000, 7001
        first = batch(["i0", "i1"], producer_id=pid, producer_epoch=0, base_sequence=0)
        _, pr = produce(c.brokers[1], first)
        assert pr.base_offset == 0
        txn = batch(["t0"], producer_id=txn_pid, producer_epoch=0, base_sequence=0, is_transactional=True)
        _, pr = produce(c.brokers[1], txn, transactional_id="tx")
        assert pr.error_code == 0 and pr.base_offset == 2
        c.wait(lambda: c.offsets(2, T) == (3, 3), what="broker 2 caught up")
        c.elect(T, leader=2, isr=(1, 2))
        # the new leader knows the idempotent producer: the same batch again is a duplicate
        _, pr = produce(c.brokers[2], first)
        assert pr.error_code == 0 and pr.base_offset == 0
        _, pr = produce(c.brokers[2], batch(["gap"], producer_id=pid, producer_epoch=0, base_sequence=5))
        assert pr.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        # ... and the open transaction: read_committed stops before it
        assert c.brokers[2].call(lambda b: b.data_path.log(T, 0).last_stable_offset) == 2
        W = WriteTxnMarkersRequest
        r = request(c.brokers[2], W(markers=[W.WritableTxnMarker(
            producer_id=txn_pid, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
            topics=[W.WritableTxnMarkerTopic(name=T, partition_indexes=[0])])]))
        assert r.markers[0].topics[0].partitions[0].error_code == 0
        c.wait(lambda: c.offsets(1, T) == (4, 4), what="broker 1 has the marker")
        c.elect(T, leader=1, isr=(1, 2))
        # the aborted transaction index was rebuilt on broker 1 from the replicated marker
        _, pd = fetch(c.brokers[1], 0, isolation=1, epoch=2)
        assert pd.error_code == 0 and pd.last_stable_offset == 4
        assert [(a.producer_id, a.first_offset) for a in pd.aborted_transactions] == [(txn_pid, 2)]
    finally:
        c.close()


def test_fetch_from_follower_kip392():
    c = Cluster(3, overrides={"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"},
                racks=("r1", "r2", "r3"))
    try:
        c.create_topic(T)
        c.elect(T, leader=1, isr=(1, 2, 3))
        produce(c.brokers[1], batch(["a", "b"]))
        c.wait(lambda: c.offsets(2, T) == (2, 2), what="broker 2 at the high watermark")
        fetch(c.brokers[1], 0)      # the followers' fetch offsets are known after their next fetch
        time.sleep(0.3)
        _, pd = fetch(c.brokers[1], 0, rack="r2")
        assert pd.preferred_read_replica == 2 and len(pd.records) == 0
        _, pd = fetch(c.brokers[1], 0, rack="r1")
        assert pd.preferred_read_replica == -1 and len(pd.records) > 0
        _, pd = fetch(c.brokers[1], 0, rack="elsewhere")
        assert pd.preferred_read_replica == -1
        _, pd = fetch(c.brokers[2], 0, rack="r2", epoch=0)            # the follower serves it
        assert pd.error_code == 0 and len(pd.records) > 0 and pd.high_watermark == 2
    finally:
        c.close()


def test_offsets_partition_moves_with_its_leadership():
    c = Cluster(2, overrides={"offsets.topic.num.partitions": "1"})
    try:
        c.create_topic(T)
        for kb in c.brokers.values():     # the offsets topic on both, with one topic id
            kb.call(lambda b: b.group_coordinator.ensure_offsets_topic())
        offsets_id = c.topic_id("__consumer_offsets")
        for kb in list(c.brokers.values())[1:]:
            kb.call(_set_topic_id, "__consumer_offsets", offsets_id)
        c.elect("__consumer_offsets", leader=1, isr=(1, 2))
        C = OffsetCommitRequest
        commit = C(group_id="billing", generation_id_or_member_epoch=-1, member_id="", topics=[
            C.OffsetCommitRequestTopic(name=T, partitions=[C.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=42, committed_metadata="m")])])
        r = request(c.brokers[1], commit, version=8)
        assert r.topics[0].partitions[0].error_code == 0
        # answered once replicated: broker 2 already has the commit
        assert c.offsets(2, "__consumer_offsets")[0] == c.offsets(1, "__consumer_offsets")[0] > 0
        F = OffsetFetchRequest
        ask = F(groups=[F.OffsetFetchRequestGroup(group_id="billing", topics=[
            F.OffsetFetchRequestTopics(name=T, partition_indexes=[0])])])
        r = request(c.brokers[2], ask, version=8)
        assert r.groups[0].error_code == ErrorCode.NOT_COORDINATOR
        c.elect("__consumer_offsets", leader=2, isr=(1, 2))
        assert c.brokers[2].call(lambda b: b.group_coordinator.runtime.epochs) == {0: 1}

        def fetched():
            r = request(c.brokers[2], ask, version=8)
            return r if r.groups[0].error_code == 0 else None
        r = c.wait(fetched, what="broker 2 serving the group")
        assert r.groups[0].topics[0].partitions[0].committed_offset == 42
        r = request(c.brokers[1], ask, version=8)
        assert r.groups[0].error_code == ErrorCode.NOT_COORDINATOR
        r = request(c.brokers[1], commit, version=8)
        assert r.topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
    finally:
        c.close()


def test_a_leader_whose_session_expired_leads_nothing_until_its_next_state():
    """ZooKeeper expired the leader's session (it was stopped past the timeout): until the
    controller's next states reach it, it answers neither as a partition's leader nor as its
    coordinator partition's (a deposed coordinator answering OffsetFetch from its old state would
    show committed offsets going back); a state at a newer epoch makes it leader again."""
    c = Cluster(2, overrides={"offsets.topic.num.partitions": "1"})
    try:
        c.create_topic(T)
        c.create_internal_topic("__consumer_offsets")
        c.elect(T, leader=1, isr=(1, 2))
        c.elect("__consumer_offsets", leader=1, isr=(1, 2))
        _, pr = produce(c.brokers[1], batch(["a"]))
        assert pr.error_code == 0
        F = OffsetFetchRequest
        ask = F(groups=[F.OffsetFetchRequestGroup(group_id="billing", topics=[
            F.OffsetFetchRequestTopics(name=T, partition_indexes=[0])])])
        c.wait(lambda: request(c.brokers[1], ask, version=8).groups[0].error_code == 0, what="the group loaded")
        c.brokers[1].call(lambda b: b.replica_manager.resign_leaderships())
        _, pr = produce(c.brokers[1], batch(["b"]))
        assert pr.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert request(c.brokers[1], ask, version=8).groups[0].error_code == ErrorCode.NOT_COORDINATOR
        assert fetch(c.brokers[1], 0)[1].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        c.elect(T, leader=1, isr=(1, 2))          # the controller's next epoch: leader again
        c.elect("__consumer_offsets", leader=1, isr=(1, 2))
        _, pr = produce(c.brokers[1], batch(["c"]))
        assert pr.error_code == 0
        c.wait(lambda: request(c.brokers[1], ask, version=8).groups[0].error_code == 0, what="the group loaded again")
    finally:
        c.close()


def _set_topic_id(b, name, topic_id):
    reg = b.metadata
    topic = reg.topics[name]
    reg._by_id.pop(topic.topic_id, None)
    topic.topic_id = topic_id
    reg._by_id[topic_id] = topic
    reg._save_topics()


def test_confluent_kafka_acks_all(cluster3):
    from confluent_kafka import Producer
    c = cluster3
    c.create_topic(T)
    c.elect(T, leader=1, isr=(1, 2, 3))
    p = Producer({"bootstrap.servers": c.brokers[1].bootstrap_servers, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 5})
    errors, delivered = [], []

    def report(err, msg):
        (errors if err else delivered).append(err or msg.offset())
    for i in range(2000):
        p.produce(T, value=b"m%d" % i, partition=0, on_delivery=report)
    assert p.flush(30) == 0
    assert errors == [] and sorted(delivered) == list(range(2000))
    leader = c.log_bytes(1, T)
    assert c.offsets(1, T) == (2000, 2000)
    for i in (2, 3):
        c.wait(lambda i=i: c.log_bytes(i, T) == leader, what=f"broker {i} has every record")


def test_older_states_are_ignored_and_stop_replicas(cluster3):
    from kgroup.cluster.partition_state import PartitionState
    c = cluster3
    topic_id = c.create_topic(T)
    c.elect(T, leader=1, isr=(1, 2, 3))
    c.elect(T, leader=1, isr=(1, 2, 3))                 # leader epoch 1
    stale = [PartitionState(T, 0, topic_id, 2, 0, (2,), (1, 2, 3), 9)]
    for kb in c.brokers.values():
        kb.call(lambda b: b.replica_manager.apply_partition_states(stale))
    assert c.brokers[1].call(lambda b: (b.replica_manager.partitions[(T, 0)].leader,
                                        b.replica_manager.partitions[(T, 0)].leader_epoch)) == (1, 1)
    _, pr = produce(c.brokers[1], batch(["a"]))
    assert pr.error_code == 0
    c.brokers[3].call(lambda b: b.replica_manager.stop_replicas([(T, 0)], delete=True))
    assert c.brokers[3].call(lambda b: b.data_path.log(T, 0)) is None
    c.brokers[1].call(lambda b: b.replica_manager.stop_replicas([(T, 0)], delete=False))
    _, pr = produce(c.brokers[1], batch(["b"]))
    assert pr.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert c.offsets(1, T)[0] == 1                        # the log is kept


def test_delete_records_on_the_leader_moves_the_followers_log_start(cluster3):
    from kgroup.protocol.messages.delete_records import DeleteRecordsRequest as D
    c = cluster3
    c.create_topic(T)
    c.elect(T, leader=1, isr=(1, 2, 3))
    for _ in range(3):
        produce(c.brokers[1], batch(["a", "b"]))

    def delete(kb):
        r = request(kb, D(timeout_ms=5000, topics=[D.DeleteRecordsTopic(name=T, partitions=[
            D.DeleteRecordsPartition(partition_index=0, offset=4)])]))
        return r.topics[0].partitions[0]
    assert delete(c.brokers[2]).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    r = delete(c.brokers[1])
    assert r.error_code == 0 and r.low_watermark == 4
    produce(c.brokers[1], batch(["c"]))
    for i in (2, 3):
        c.wait(lambda i=i: c.brokers[i].call(lambda b: b.data_path.log(T, 0).log_start_offset) == 4,
               what=f"broker {i}'s log start")


def test_high_watermarks_are_checkpointed_and_read_back():
    c = Cluster(2)
    try:
        c.create_topic(T)
        c.elect(T, leader=1, isr=(1, 2))
        produce(c.brokers[1], batch(["a", "b"]))
        c.wait(lambda: c.offsets(2, T) == (2, 2), what="broker 2 at the high watermark")
        c.brokers[2].stop()                 # a clean stop writes the checkpoint
        text = open(f"{c.brokers[2].data_dir}/replication-offset-checkpoint").read()
        assert text == f"0\n1\n{T} 0 2\n"
        c.brokers[1].stop()
        c.brokers[2].start()
        c.wire(2)
        c.down.add(1)
        c.elect(T, leader=1, isr=(1, 2))    # following a leader that is gone: nothing fetched
        assert c.offsets(2, T) == (2, 2)     # the high watermark from the checkpoint, not the log start
    finally:
        c.close()


def test_transactions_survive_a_failover_with_confluent_kafka():
    """A librdkafka transactional producer commits, aborts and leaves one transaction open on
    broker 1, which leads the data partition and __transaction_state; both move to broker 2: a
    read_committed consumer there reads exactly the committed records, stopped before the open
    transaction, and broker 2's transaction coordinator has it Ongoing."""
    from confluent_kafka import Consumer, Producer
    c = Cluster(2, overrides={"transaction.state.log.num.partitions": "1"})
    try:
        c.create_topic(T)
        for kb in c.brokers.values():
            kb.call(lambda b: b.transaction_coordinator.ensure_topic())
        txn_id = c.topic_id("__transaction_state")
        c.brokers[2].call(_set_topic_id, "__transaction_state", txn_id)
        c.elect(T, leader=1, isr=(1, 2))
        c.elect("__transaction_state", leader=1, isr=(1, 2))
        p = Producer({"bootstrap.servers": c.brokers[1].bootstrap_servers, "transactional.id": "tx", "linger.ms": 0})
        p.init_transactions(30)
        for values, commit in ((range(10), True), (range(100, 105), False)):
            p.begin_transaction()
            for v in values:
                p.produce(T, value=b"%d" % v, partition=0)
            p.commit_transaction(30) if commit else p.abort_transaction(30)
        p.begin_transaction()
        for v in range(200, 203):
            p.produce(T, value=b"%d" % v, partition=0)
        assert p.flush(30) == 0
        end = c.offsets(1, T)[0]
        c.wait(lambda: c.offsets(2, T) == (end, end), what="broker 2 has every record")
        c.wait(lambda: c.offsets(2, "__transaction_state")[0] == c.offsets(1, "__transaction_state")[0],
               what="broker 2 has the transaction log")
        c.elect(T, leader=2, isr=(1, 2))
        c.elect("__transaction_state", leader=2, isr=(1, 2))
        assert c.brokers[2].call(lambda b: b.data_path.log(T, 0).last_stable_offset) == end - 3
        consumer = Consumer({"bootstrap.servers": c.brokers[2].bootstrap_servers, "group.id": "reader",
                             "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        from confluent_kafka import TopicPartition
        consumer.assign([TopicPartition(T, 0, 0)])
        got, deadline = [], time.monotonic() + 20
        while time.monotonic() < deadline and len(got) < 10:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(int(m.value()))
        time.sleep(1.0)
        m = consumer.poll(0.5)
        assert m is None or m.error()
        consumer.close()
        assert got == list(range(10))
        states = c.wait(lambda: [t for t in c.brokers[2].transactions() if t.get("transactional_id") == "tx"],
                        what="broker 2's coordinator has the transaction")
        assert states[0]["state"] == "Ongoing", states
    finally:
        c.close()


def test_a_follower_behind_the_leaders_log_start_starts_over_there():
    c = Cluster(2, overrides={"replica.lag.time.max.ms": "60000"})
    try:
        c.create_topic(T, configs={"segment.bytes": "1024"})
        c.elect(T, leader=1, isr=(1, 2))
        produce(c.brokers[1], batch(["a"]))
        c.wait(lambda: c.offsets(2, T)[0] == 1, what="broker 2 has the first record")
        c.stop_fetching(2, T)
        for _ in range(20):
            produce(c.brokers[1], batch([b"x" * 200]), acks=1)
        c.brokers[1].call(lambda b: b.data_path.log(T, 0).set_high_watermark(21))    # as if the ISR had it
        c.brokers[1].call(lambda b: b.data_path.log(T, 0).delete_records_before(15))
        c.brokers[1].call(lambda b: b.data_path.log(T, 0).delete_old_segments())
        start = c.brokers[1].call(lambda b: b.data_path.log(T, 0).log_start_offset)
        assert start == 15
        c.resume_fetching(2, T)
        c.wait(lambda: c.offsets(2, T)[0] == 21, what="broker 2 caught up")
        assert c.brokers[2].call(lambda b: b.data_path.log(T, 0).log_start_offset) == 15
        assert c.log_bytes(2, T) == c.log_bytes(1, T)
    finally:
        c.close()
