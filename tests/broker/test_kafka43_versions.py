"""The versions Kafka 4.1-4.3 added, end to end over the wire: topic ids in Produce v13 and
OffsetCommit/OffsetFetch v10 (resolved by the handler, unknown ids UNKNOWN_TOPIC_ID), ListOffsets
v11's earliest-pending-upload timestamp, DescribeGroups v6's GROUP_ID_NOT_FOUND, ListTransactions
v2's pattern, DescribeCluster v2, Metadata v13, Fetch v18, DescribeConfigs v1+ without is_default,
and KIP-896's removed versions refused."""
import struct
import time

from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.describe_cluster import DescribeClusterRequest
from kgroup.protocol.messages.describe_groups import DescribeGroupsRequest
from kgroup.protocol.messages.fetch import FetchRequest
from kgroup.protocol.messages.list_offsets import ListOffsetsRequest
from kgroup.protocol.messages.list_transactions import ListTransactionsRequest
from kgroup.protocol.messages.metadata import MetadataRequest
from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from kgroup.protocol.messages.produce import ProduceRequest
from kgroup.protocol.records import Record, build_batch
from tests.broker.test_topics import create
from tests.harness import RawClient

OC = OffsetCommitRequest.OffsetCommitRequestTopic
OCP = OC.OffsetCommitRequestPartition
OFG = OffsetFetchRequest.OffsetFetchRequestGroup
OFT = OFG.OffsetFetchRequestTopics
TPD = ProduceRequest.TopicProduceData
PPD = TPD.PartitionProduceData
UNKNOWN_ID = bytes(range(1, 17))


def _produce_by_id(c, topic_id, partition, value, version=13):
    batch = build_batch([Record(key=b"k", value=value, timestamp=int(time.time() * 1000))])
    return c.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
        TPD(topic_id=topic_id, partition_data=[PPD(index=partition, records=batch)])]), version)


def test_produce_v13_names_topics_by_id(broker):
    c = RawClient(broker.port)
    t = create(c, "by-id", 2)
    resp = _produce_by_id(c, t.topic_id, 1, b"v")
    (tr,) = resp.responses
    assert tr.topic_id == t.topic_id
    assert [(p.index, p.error_code, p.base_offset) for p in tr.partition_responses] == [(1, 0, 0)]
    resp = _produce_by_id(c, t.topic_id, 7, b"v")       # a partition the topic lacks
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    resp = _produce_by_id(c, UNKNOWN_ID, 0, b"v")
    assert resp.responses[0].topic_id == UNKNOWN_ID
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    # what v13 wrote, read back by name with Fetch v12 and by id with v18
    fetch = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, topics=[
        FetchRequest.FetchTopic(topic="by-id", topic_id=t.topic_id, partitions=[
            FetchRequest.FetchTopic.FetchPartition(partition=1, fetch_offset=0, partition_max_bytes=1 << 20)])])
    for version in (12, 18):
        part = c.request(fetch, version).responses[0].partitions[0]
        assert part.error_code == 0 and part.high_watermark == 1 and part.records


def test_offset_commit_and_fetch_v10_by_topic_id(broker):
    c = RawClient(broker.port)
    t = create(c, "ids", 2)
    resp = c.request(OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
        OC(topic_id=t.topic_id, partitions=[OCP(partition_index=0, committed_offset=5),
                                            OCP(partition_index=9, committed_offset=1)]),
        OC(topic_id=UNKNOWN_ID, partitions=[OCP(partition_index=0, committed_offset=1)])]), 10)
    got = {(tr.topic_id, p.partition_index): p.error_code for tr in resp.topics for p in tr.partitions}
    assert got == {(t.topic_id, 0): 0, (t.topic_id, 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                   (UNKNOWN_ID, 0): ErrorCode.UNKNOWN_TOPIC_ID}
    # v9 by name sees the same commit
    old = c.request(OffsetFetchRequest(groups=[OFG(group_id="g", topics=None)]), 9)
    assert [(tr.name, [(p.partition_index, p.committed_offset) for p in tr.partitions])
            for tr in old.groups[0].topics] == [("ids", [(0, 5)])]
    # v10: a fetch of all offsets names the topic by id; asked by id, an unknown id is UNKNOWN_TOPIC_ID
    every = c.request(OffsetFetchRequest(groups=[OFG(group_id="g", topics=None)]), 10).groups[0]
    assert [(tr.topic_id, [(p.partition_index, p.committed_offset) for p in tr.partitions])
            for tr in every.topics] == [(t.topic_id, [(0, 5)])]
    asked = c.request(OffsetFetchRequest(groups=[OFG(group_id="g", topics=[
        OFT(topic_id=t.topic_id, partition_indexes=[0, 1]), OFT(topic_id=UNKNOWN_ID, partition_indexes=[3])])]),
        10).groups[0]
    got = {(tr.topic_id, p.partition_index): (p.committed_offset, p.error_code)
           for tr in asked.topics for p in tr.partitions}
    assert got == {(t.topic_id, 0): (5, 0), (t.topic_id, 1): (-1, 0),
                   (UNKNOWN_ID, 3): (-1, ErrorCode.UNKNOWN_TOPIC_ID)}


def test_list_offsets_v11_earliest_pending_upload(broker):
    c = RawClient(broker.port)
    create(c, "lo", 1)

    def ask(ts, version):
        p = c.request(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name="lo", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=ts)])]),
            version).topics[0].partitions[0]
        return p.error_code, p.offset
    assert ask(-6, 11) == (0, -1)                   # nothing is tiered
    assert ask(-6, 10) == (ErrorCode.UNSUPPORTED_VERSION, -1)
    assert ask(-3, 6) == (ErrorCode.UNSUPPORTED_VERSION, -1)  # max timestamp needs v7
    assert ask(-7, 11) == (ErrorCode.UNSUPPORTED_VERSION, -1)
    assert ask(-1, 1) == (0, 0)


def test_describe_groups_v6_group_id_not_found(broker):
    c = RawClient(broker.port)
    g5 = c.request(DescribeGroupsRequest(groups=["nobody"]), 5).groups[0]
    assert (g5.error_code, g5.group_state) == (0, "Dead")
    g6 = c.request(DescribeGroupsRequest(groups=["nobody"]), 6).groups[0]
    assert (g6.error_code, g6.group_state, g6.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND, "Dead", "Group nobody not found.")


def test_list_transactions_v2_pattern(broker):
    from kgroup.client.sync import KafkaProducer
    c = RawClient(broker.port)
    create(c, "tx", 1)
    for tid in ("app-1", "app-2", "other"):
        p = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=tid)
        try:
            p.init_transactions()
        finally:
            p.close()

    def ids(pattern, version=2):
        r = c.request(ListTransactionsRequest(transactional_id_pattern=pattern), version)
        return r.error_code, sorted(s.transactional_id for s in r.transaction_states)
    assert ids(None) == (0, ["app-1", "app-2", "other"])
    assert ids("app-.*") == (0, ["app-1", "app-2"])
    assert ids("app") == (0, [])                     # the whole id must match
    assert ids("app-.*", 1) == (0, ["app-1", "app-2", "other"])    # v1 does not carry it
    assert ids("(")[0] == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_describe_cluster_v2_and_metadata_v13(broker):
    c = RawClient(broker.port)
    r = c.request(DescribeClusterRequest(include_fenced_brokers=True), 2)
    assert r.error_code == 0 and [(b.broker_id, b.is_fenced) for b in r.brokers] == [(1, False)]
    md = c.request(MetadataRequest(topics=None), 13)
    assert md.error_code == 0 and [b.node_id for b in md.brokers] == [1]


def test_versions_kafka_4_removed_are_refused(broker):
    """KIP-896: a request at a removed version (OffsetCommit v1, ListOffsets v0, Produce v2) is
    one the broker does not serve: it closes the connection, as Kafka does."""
    for key, version in ((8, 1), (2, 0), (0, 2), (27, 0)):
        c = RawClient(broker.port)
        header = struct.pack(">hhih", key, version, 1, -1)
        c.sock.sendall(struct.pack(">i", len(header) + 8) + header + bytes(8))
        assert c.is_closed_by_peer(), (key, version)
