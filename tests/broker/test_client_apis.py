"""The client-facing APIs Kafka 4.x brokers serve that kgroup lacked, over the wire:
DescribeProducers (61), DescribeTopicPartitions (75, paged by cursors), ListConfigResources (74)
and OffsetForLeaderEpoch (23)."""
import time

from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kgroup.protocol.messages.describe_producers import DescribeProducersRequest
from kgroup.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from kgroup.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kgroup.protocol.messages.init_producer_id import InitProducerIdRequest
from kgroup.protocol.messages.list_config_resources import ListConfigResourcesRequest
from kgroup.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kgroup.protocol.records import Record, build_batch
from tests.broker.test_data_path import produce
from tests.broker.test_topics import create
from tests.harness import RawClient

DTP = DescribeTopicPartitionsRequest


def _batch(pid=-1, epoch=-1, seq=-1, transactional=False, n=1):
    return build_batch([Record(value=b"v", timestamp=int(time.time() * 1000)) for _ in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=transactional)


def test_describe_producers(broker):
    c = RawClient(broker.port)
    create(c, "p", 2)
    assert produce(c, "p", _batch(pid=500, epoch=3, seq=0, n=4)).error_code == 0
    init = c.request(InitProducerIdRequest(transactional_id="tx-d", transaction_timeout_ms=60000), 4)
    pid, epoch = init.producer_id, init.producer_epoch
    APT = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    c.request(AddPartitionsToTxnRequest(v3_and_below_transactional_id="tx-d", v3_and_below_producer_id=pid,
                                        v3_and_below_producer_epoch=epoch,
                                        v3_and_below_topics=[APT(name="p", partitions=[0])]), 3)
    from kgroup.protocol.messages.produce import ProduceRequest
    TPD = ProduceRequest.TopicProduceData
    r = c.request(ProduceRequest(transactional_id="tx-d", acks=-1, timeout_ms=5000, topic_data=[TPD(
        name="p", partition_data=[TPD.PartitionProduceData(index=0, records=_batch(pid, epoch, 0, True, 2))])]), 9)
    assert r.responses[0].partition_responses[0].error_code == 0
    resp = c.request(DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name="p", partition_indexes=[0, 1, 7]),
        DescribeProducersRequest.TopicRequest(name="nope", partition_indexes=[0])]), 0)
    by = {(t.name, p.partition_index): p for t in resp.topics for p in t.partitions}
    producers = {s.producer_id: (s.producer_epoch, s.last_sequence, s.current_txn_start_offset)
                 for s in by[("p", 0)].active_producers}
    assert producers == {500: (3, 3, -1), pid: (epoch, 1, 4)}      # the transaction began at offset 4
    assert by[("p", 0)].active_producers[0].last_timestamp > 0
    assert (by[("p", 1)].error_code, by[("p", 1)].active_producers) == (0, [])
    assert by[("p", 7)].error_code == by[("nope", 0)].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_topic_partitions_pages_with_cursors(broker):
    c = RawClient(broker.port)
    for name, n in (("a", 3), ("b", 1), ("c", 4)):
        create(c, name, n)

    def page(topics=(), limit=2000, cursor=None):
        return c.request(DTP(topics=[DTP.TopicRequest(name=t) for t in topics], response_partition_limit=limit,
                             cursor=cursor), 0)

    def seen(resp):
        return [(t.name, [p.partition_index for p in t.partitions]) for t in resp.topics]
    r = page()
    assert seen(r) == [("a", [0, 1, 2]), ("b", [0]), ("c", [0, 1, 2, 3])] and r.next_cursor is None
    assert r.topics[0].topic_id != bytes(16) and r.topics[0].partitions[0].leader_id == 1
    # pages of 2 partitions: every partition once, in order
    pages, cursor = [], None
    while True:
        r = page(limit=2, cursor=cursor)
        pages.append(seen(r))
        cursor = r.next_cursor and DTP.Cursor(topic_name=r.next_cursor.topic_name,
                                             partition_index=r.next_cursor.partition_index)
        if cursor is None:
            break
    assert pages == [[("a", [0, 1])], [("a", [2]), ("b", [0])], [("c", [0, 1])], [("c", [2, 3])]]
    # asked topics: unknown ones answered, the cursor must name one of them
    r = page(["c", "zz", "a"], limit=5)
    assert [(t.name, t.error_code) for t in r.topics] == [("a", 0), ("c", 0)] and \
        (r.next_cursor.topic_name, r.next_cursor.partition_index) == ("c", 2)
    r = page(["zz", "b"])
    assert [(t.name, t.error_code) for t in r.topics] == [("b", 0), ("zz", E.UNKNOWN_TOPIC_OR_PARTITION)]
    r = page(["a"], cursor=DTP.Cursor(topic_name="b", partition_index=0))
    assert [(t.name, t.error_code) for t in r.topics] == [("a", E.INVALID_REQUEST)]


def test_list_config_resources(broker):
    c = RawClient(broker.port)
    create(c, "lc", 1)
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    assert c.request(IncrementalAlterConfigsRequest(resources=[R(resource_type=32, resource_name="grp", configs=[
        R.AlterableConfig(name="consumer.session.timeout.ms", config_operation=0, value="50000")])]),
        1).responses[0].error_code == 0

    def listed(types, version=1):
        r = c.request(ListConfigResourcesRequest(resource_types=types), version)
        return r.error_code, sorted((x.resource_type, x.resource_name) for x in r.config_resources)
    assert listed([]) == (0, [(2, "lc"), (4, "1"), (8, "1"), (32, "grp")])
    assert listed([32, 2]) == (0, [(2, "lc"), (32, "grp")])
    assert listed([3])[0] == E.UNSUPPORTED_VERSION
    assert listed([], 0) == (0, [])            # v0: client metrics resources only


def test_offset_for_leader_epoch(broker):
    c = RawClient(broker.port)
    create(c, "le", 1)
    for _ in range(3):
        assert produce(c, "le", _batch()).error_code == 0
    T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic

    def ask(epoch, current=-1, partition=0, topic="le", version=4):
        r = c.request(OffsetForLeaderEpochRequest(replica_id=-1, topics=[T(topic=topic, partitions=[
            T.OffsetForLeaderPartition(partition=partition, current_leader_epoch=current, leader_epoch=epoch)])]),
            version)
        p = r.topics[0].partitions[0]
        return p.error_code, p.leader_epoch, p.end_offset
    assert ask(0) == (0, 0, 3)                  # the current epoch ends at the log end
    assert ask(0, current=0, version=2) == (0, 0, 3)
    assert ask(5) == (0, -1, -1)                # an epoch after the current one is unknown
    assert ask(0, current=1)[0] == E.UNKNOWN_LEADER_EPOCH
    assert ask(0, partition=3)[0] == ask(0, topic="nope")[0] == E.UNKNOWN_TOPIC_OR_PARTITION
