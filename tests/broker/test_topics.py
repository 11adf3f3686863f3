"""Metadata, CreateTopics, DeleteTopics, DescribeConfigs and DescribeCluster over raw sockets."""
import pytest

from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.delete_topics import DeleteTopicsRequest
from kgroup.protocol.messages.describe_cluster import DescribeClusterRequest
from kgroup.protocol.messages.describe_configs import DescribeConfigsRequest
from kgroup.protocol.messages.metadata import MetadataRequest
from tests.harness import BrokerProcess, RawClient

CT = CreateTopicsRequest.CreatableTopic
MT = MetadataRequest.MetadataRequestTopic


def create(c, name, partitions=1, rf=1, version=7, configs=None, validate_only=False):
    cfg = [CT.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()]
    resp = c.request(CreateTopicsRequest(topics=[CT(name=name, num_partitions=partitions, replication_factor=rf,
                                                    configs=cfg)], validate_only=validate_only), version)
    return resp.topics[0]


def test_create_list_delete_roundtrip(broker):
    c = RawClient(broker.port)
    r = create(c, "orders", 3)
    assert (r.error_code, r.num_partitions, r.replication_factor) == (0, 3, 1)
    assert r.topic_id != bytes(16)
    md = c.request(MetadataRequest(topics=None), 12)
    (t,) = [t for t in md.topics if t.name == "orders"]
    assert t.topic_id == r.topic_id and not t.is_internal
    assert [p.partition_index for p in t.partitions] == [0, 1, 2]
    assert all(p.leader_id == md.controller_id == md.brokers[0].node_id for p in t.partitions)
    assert md.brokers[0].port == broker.port and md.cluster_id
    d = c.request(DeleteTopicsRequest(topic_names=["orders", "nope"]), 5)
    assert [(x.name, x.error_code) for x in d.responses] == [("orders", 0), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert c.request(MetadataRequest(topics=None), 12).topics == []


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "bad name", "bad/name", "ümlaut"])
def test_invalid_topic_names(broker, name):
    c = RawClient(broker.port)
    assert create(c, name).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_create_errors(broker):
    c = RawClient(broker.port)
    assert create(c, "t1").error_code == 0
    r = create(c, "t1")
    assert (r.error_code, r.error_message) == (ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 't1' already exists.")
    r = create(c, "t2", rf=3)
    assert r.error_code == ErrorCode.INVALID_REPLICATION_FACTOR and "only 1 broker" in r.error_message
    assert create(c, "t3", partitions=0).error_code == ErrorCode.INVALID_PARTITIONS
    assert create(c, "t4", configs={"no.such": "1"}).error_code == ErrorCode.INVALID_CONFIG
    assert create(c, "t5", configs={"retention.ms": "abc"}).error_code == ErrorCode.INVALID_CONFIG
    r = create(c, "t6", validate_only=True, partitions=-1, rf=-1)
    assert (r.error_code, r.num_partitions) == (0, 1)
    assert [t.name for t in c.request(MetadataRequest(topics=None), 12).topics] == ["t1"]


def test_metadata_auto_create_and_versions(tmp_path):
    b = BrokerProcess(tmp_path / "d", ["num.partitions=4"]).start()
    try:
        c = RawClient(b.port)
        md = c.request(MetadataRequest(topics=[MT(name="auto")], allow_auto_topic_creation=True), 9)
        assert md.topics[0].error_code == 0 and len(md.topics[0].partitions) == 4
        md = c.request(MetadataRequest(topics=[MT(name="noauto")], allow_auto_topic_creation=False), 9)
        assert md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # v0: empty list = all topics; v1+: empty list = none
        assert [t.name for t in c.request(MetadataRequest(topics=[]), 0).topics] == ["auto"]
        assert c.request(MetadataRequest(topics=[]), 1).topics == []
        # v10+: lookup by topic id
        tid = c.request(MetadataRequest(topics=None), 12).topics[0].topic_id
        md = c.request(MetadataRequest(topics=[MT(name=None, topic_id=tid)]), 12)
        assert md.topics[0].name == "auto"
        md = c.request(MetadataRequest(topics=[MT(name=None, topic_id=b"\x01" * 16)]), 12)
        assert md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
        for v in range(13):
            assert c.request(MetadataRequest(topics=None if v else []), v).topics[0].name == "auto"
    finally:
        b.stop()
    b2 = BrokerProcess(tmp_path / "d", ["auto.create.topics.enable=false"]).start()
    try:
        c = RawClient(b2.port)
        md = c.request(MetadataRequest(topics=[MT(name="other")]), 3)
        assert md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    finally:
        b2.stop()


def test_topics_and_cluster_id_survive_restart(tmp_path):
    b = BrokerProcess(tmp_path / "d").start()
    c = RawClient(b.port)
    r = create(c, "durable", 2, configs={"cleanup.policy": "compact"})
    cluster_id = c.request(MetadataRequest(topics=None), 12).cluster_id
    b.kill()  # no clean shutdown: metadata must already be on disk
    b = BrokerProcess(tmp_path / "d").start()
    try:
        c = RawClient(b.port)
        md = c.request(MetadataRequest(topics=None), 12)
        assert md.cluster_id == cluster_id
        assert [(t.name, t.topic_id, len(t.partitions)) for t in md.topics] == [("durable", r.topic_id, 2)]
        dc = c.request(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=2, resource_name="durable", configuration_keys=["cleanup.policy"])]), 4)
        (e,) = dc.results[0].configs
        assert (e.name, e.value, e.config_source) == ("cleanup.policy", "compact", 1)
    finally:
        b.stop()


def test_describe_configs_and_cluster(broker):
    c = RawClient(broker.port)
    create(c, "cfg", configs={"retention.ms": "1000"})
    R = DescribeConfigsRequest.DescribeConfigsResource
    for v in range(1, 5):
        resp = c.request(DescribeConfigsRequest(resources=[R(resource_type=2, resource_name="cfg", configuration_keys=None),
                                                           R(resource_type=4, resource_name="1", configuration_keys=None),
                                                           R(resource_type=2, resource_name="missing", configuration_keys=None)],
                                                include_synonyms=True), v)
        topic, brk, missing = resp.results
        cfg = {e.name: e for e in topic.configs}
        assert cfg["retention.ms"].value == "1000" and cfg["retention.ms"].config_source == 1
        assert cfg["segment.bytes"].value == "1073741824"
        assert cfg["cleanup.policy"].value == "delete"
        assert {e.name: e.value for e in brk.configs}["num.partitions"] == "1"
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    dc = c.request(DescribeClusterRequest(), 1)
    assert dc.error_code == 0 and dc.brokers[0].port == broker.port and dc.controller_id == dc.brokers[0].broker_id
    assert dc.cluster_id == c.request(MetadataRequest(topics=[]), 12).cluster_id
