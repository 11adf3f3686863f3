"""Request-handling edges against a broker process: a deleted topic's committed offsets go (and
stay gone after a restart, and for a recreated topic), OffsetDelete's UNKNOWN_TOPIC_OR_PARTITION,
DeleteGroups' duplicate ids, authorized operations without an authorizer."""
from kgroup.broker.authorized_operations import CLUSTER_OPERATIONS, GROUP_OPERATIONS, TOPIC_OPERATIONS
from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.delete_groups import DeleteGroupsRequest
from kgroup.protocol.messages.describe_cluster import DescribeClusterRequest
from kgroup.protocol.messages.describe_groups import DescribeGroupsRequest
from kgroup.protocol.messages.find_coordinator import FindCoordinatorRequest
from kgroup.protocol.messages.metadata import MetadataRequest
from kgroup.protocol.messages.offset_delete import OffsetDeleteRequest
from tests.broker.test_topics import create
from tests.harness import BrokerProcess, RawClient


def _admin(b):
    from kgroup.client.sync import KafkaAdmin
    return KafkaAdmin(bootstrap_servers=b.bootstrap)


def _offsets(admin, group):
    return {(tp.topic, tp.partition): om.offset for tp, om in admin.list_group_offsets(group).items()}


def test_deleting_a_topic_removes_its_committed_offsets(tmp_path):
    b = BrokerProcess(tmp_path / "d").start()
    try:
        c = RawClient(b.port)
        assert create(c, "gone", 2).error_code == 0 and create(c, "kept", 1).error_code == 0
        admin = _admin(b)
        try:
            for g in ("g1", "g2"):
                admin.alter_group_offsets(g, {("gone", 0): 5, ("gone", 1): 6, ("kept", 0): 7})
            assert _offsets(admin, "g1") == {("gone", 0): 5, ("gone", 1): 6, ("kept", 0): 7}
            admin.delete_topics(["gone"])
            assert _offsets(admin, "g1") == _offsets(admin, "g2") == {("kept", 0): 7}
        finally:
            admin.close()
    finally:
        b.kill()      # the tombstones were written before: a crash keeps them
    b = BrokerProcess(tmp_path / "d").start()
    try:
        c = RawClient(b.port)
        assert create(c, "gone", 2).error_code == 0     # recreated: starts with no committed offsets
        admin = _admin(b)
        try:
            assert _offsets(admin, "g1") == {("kept", 0): 7}
        finally:
            admin.close()
    finally:
        b.stop()


def test_offset_delete_unknown_topics_and_partitions(broker):
    c = RawClient(broker.port)
    assert create(c, "t", 2).error_code == 0
    admin = _admin(broker)
    try:
        admin.alter_group_offsets("g", {("t", 0): 3, ("t", 1): 4})
    finally:
        admin.close()
    T = OffsetDeleteRequest.OffsetDeleteRequestTopic
    P = T.OffsetDeleteRequestPartition
    req = OffsetDeleteRequest(group_id="g", topics=[T(name="nope", partitions=[P(partition_index=0)]),
                                                    T(name="t", partitions=[P(partition_index=0),
                                                                            P(partition_index=9)])])
    resp = c.request(req, 0)
    assert resp.error_code == 0
    got = {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}
    assert got == {("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                   ("t", 0): 0}
    # a group-level error replaces the partition answers, as Kafka's OffsetDeleteResponse.Builder does
    resp = c.request(OffsetDeleteRequest(group_id="missing", topics=[T(name="nope", partitions=[P(partition_index=0)])]), 0)
    assert (resp.error_code, resp.topics) == (ErrorCode.GROUP_ID_NOT_FOUND, [])


def test_delete_groups_removes_duplicate_ids_first(broker):
    c = RawClient(broker.port)
    assert create(c, "t", 1).error_code == 0
    admin = _admin(broker)
    try:
        admin.alter_group_offsets("dup", {("t", 0): 1})
    finally:
        admin.close()
    resp = c.request(DeleteGroupsRequest(groups_names=["dup", "dup", "other"]), 2)
    assert [(r.group_id, r.error_code) for r in resp.results] == [("dup", 0), ("other", ErrorCode.GROUP_ID_NOT_FOUND)]


def test_authorized_operations_without_an_authorizer(broker):
    c = RawClient(broker.port)
    assert create(c, "t", 1).error_code == 0
    MT = MetadataRequest.MetadataRequestTopic
    for v in (8, 10, 12):
        md = c.request(MetadataRequest(topics=[MT(name="t"), MT(name="missing")], allow_auto_topic_creation=False,
                                       include_topic_authorized_operations=True,
                                       include_cluster_authorized_operations=True), v)
        assert [t.topic_authorized_operations for t in md.topics] == [TOPIC_OPERATIONS] * 2
        if v <= 10:
            assert md.cluster_authorized_operations == CLUSTER_OPERATIONS
        md = c.request(MetadataRequest(topics=[MT(name="t")], include_topic_authorized_operations=False), v)
        assert md.topics[0].topic_authorized_operations == -2147483648
    # AclOperation codes: READ 3 WRITE 4 CREATE 5 DELETE 6 ALTER 7 DESCRIBE 8 CLUSTER_ACTION 9
    # DESCRIBE_CONFIGS 10 ALTER_CONFIGS 11 IDEMPOTENT_WRITE 12
    assert TOPIC_OPERATIONS == 8 + 16 + 32 + 64 + 128 + 256 + 1024 + 2048 == 3576
    assert CLUSTER_OPERATIONS == 32 + 128 + 256 + 512 + 1024 + 2048 + 4096 == 8096
    assert GROUP_OPERATIONS == 8 + 64 + 256 + 1024 + 2048 == 3400
    dc = c.request(DescribeClusterRequest(include_cluster_authorized_operations=True), 1)
    assert dc.cluster_authorized_operations == CLUSTER_OPERATIONS
    assert c.request(DescribeClusterRequest(), 1).cluster_authorized_operations == -2147483648
    c.request(FindCoordinatorRequest(key="g", key_type=0), 1)
    for v in (3, 5):
        dg = c.request(DescribeGroupsRequest(groups=["g"], include_authorized_operations=True), v)
        assert dg.groups[0].authorized_operations == GROUP_OPERATIONS
        dg = c.request(DescribeGroupsRequest(groups=["g"], include_authorized_operations=False), v)
        assert dg.groups[0].authorized_operations == -2147483648
