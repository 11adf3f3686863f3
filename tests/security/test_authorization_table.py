"""The authorization table: for each API kgroup serves, the request without the ACL Kafka requires
gets Kafka's answer (the resource and error KafkaApis uses, as Kafka's AuthorizerIntegrationTest
lists them), and with that ACL no authorization error. One broker with StandardAuthorizer,
``User:admin`` and (for the fixture's helpers over PLAINTEXT) ``User:ANONYMOUS`` super users, the client ``User:alice`` over SASL_PLAINTEXT/PLAIN."""
from __future__ import annotations

import asyncio

import pytest

from kgroup.protocol.api import API_BY_KEY, ApiKey
from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.records import Record, build_batch
from kgroup.security import acl as A
from kgroup.testing.broker import KafkaBroker

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
AUTHORIZATION_ERRORS = {E.TOPIC_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED,
                        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
T, G, TX = "t", "g", "tx"
BATCH = build_batch([Record(value=b"v")])


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    with KafkaBroker(tmp_path_factory.mktemp("acl") / "data", security=True, users=USERS,
                     overrides={"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                "super.users": "User:admin;User:ANONYMOUS"}) as b:   # the helpers use PLAINTEXT
        b.create_topics(T, "t2", "t3")
        b.produce(T, [b"x"])
        yield b


def _req(key, **kw):
    return API_BY_KEY[key].request(**kw)


def _nested(key, *path):
    cls = API_BY_KEY[key].request
    for name in path:
        cls = getattr(cls, name)
    return cls


def _codes(msg) -> set:
    """Every error code anywhere in a response."""
    out = set()
    for f in type(msg).FIELDS:
        v = getattr(msg, f.name, None)
        if f.name.endswith("error_code") and isinstance(v, int):
            out.add(v)
        elif f.is_struct and v is not None:
            for item in (v if f.is_array else [v]):
                out |= _codes(item)
    return out


def _r(key, **kw):
    return lambda: _req(key, **kw)


def _topics(key, struct, **kw):
    return _nested(key, struct)(**kw)


# (id, api key, version, request builder, ACLs it needs [(resource type, name, operation)], error without them)
ROWS = [
    ("Metadata", ApiKey.METADATA, 12, lambda: _req(ApiKey.METADATA, topics=[
        _nested(ApiKey.METADATA, "MetadataRequestTopic")(name=T)], allow_auto_topic_creation=False),
     [(A.RT_TOPIC, T, A.DESCRIBE)], E.TOPIC_AUTHORIZATION_FAILED),
    ("Produce", ApiKey.PRODUCE, 9, lambda: _req(ApiKey.PRODUCE, acks=1, timeout_ms=5000, topic_data=[
        _nested(ApiKey.PRODUCE, "TopicProduceData")(name=T, partition_data=[
            _nested(ApiKey.PRODUCE, "TopicProduceData", "PartitionProduceData")(index=0, records=BATCH)])]),
     [(A.RT_TOPIC, T, A.WRITE)], E.TOPIC_AUTHORIZATION_FAILED),
    ("Fetch", ApiKey.FETCH, 12, lambda: _req(ApiKey.FETCH, max_wait_ms=0, min_bytes=0, topics=[
        _nested(ApiKey.FETCH, "FetchTopic")(topic=T, partitions=[
            _nested(ApiKey.FETCH, "FetchTopic", "FetchPartition")(partition=0, fetch_offset=0,
                                                                  partition_max_bytes=1024)])]),
     [(A.RT_TOPIC, T, A.READ)], E.TOPIC_AUTHORIZATION_FAILED),
    # a follower's Fetch (replica id >= 0): CLUSTER_ACTION on the cluster, READ on the topic is not enough
    ("Fetch-follower", ApiKey.FETCH, 12, lambda: _req(ApiKey.FETCH, replica_id=2, max_wait_ms=0, min_bytes=0, topics=[
        _nested(ApiKey.FETCH, "FetchTopic")(topic=T, partitions=[
            _nested(ApiKey.FETCH, "FetchTopic", "FetchPartition")(partition=0, fetch_offset=0,
                                                                  partition_max_bytes=1024)])]),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.CLUSTER_ACTION)], E.TOPIC_AUTHORIZATION_FAILED, [(A.RT_TOPIC, T, A.READ)]),
    ("ListOffsets", ApiKey.LIST_OFFSETS, 7, lambda: _req(ApiKey.LIST_OFFSETS, replica_id=-1, topics=[
        _nested(ApiKey.LIST_OFFSETS, "ListOffsetsTopic")(name=T, partitions=[
            _nested(ApiKey.LIST_OFFSETS, "ListOffsetsTopic", "ListOffsetsPartition")(partition_index=0, timestamp=-1)])]),
     [(A.RT_TOPIC, T, A.DESCRIBE)], E.TOPIC_AUTHORIZATION_FAILED),
    ("OffsetCommit-group", ApiKey.OFFSET_COMMIT, 8, lambda: _req(ApiKey.OFFSET_COMMIT, group_id=G, generation_id_or_member_epoch=-1, topics=[
        _nested(ApiKey.OFFSET_COMMIT, "OffsetCommitRequestTopic")(name=T, partitions=[
            _nested(ApiKey.OFFSET_COMMIT, "OffsetCommitRequestTopic", "OffsetCommitRequestPartition")(
                partition_index=0, committed_offset=1)])]),
     [(A.RT_GROUP, G, A.READ), (A.RT_TOPIC, T, A.READ)], E.GROUP_AUTHORIZATION_FAILED),
    ("OffsetCommit-topic", ApiKey.OFFSET_COMMIT, 8, lambda: _req(ApiKey.OFFSET_COMMIT, group_id=G, generation_id_or_member_epoch=-1, topics=[
        _nested(ApiKey.OFFSET_COMMIT, "OffsetCommitRequestTopic")(name=T, partitions=[
            _nested(ApiKey.OFFSET_COMMIT, "OffsetCommitRequestTopic", "OffsetCommitRequestPartition")(
                partition_index=0, committed_offset=1)])]),
     [(A.RT_TOPIC, T, A.READ)], E.TOPIC_AUTHORIZATION_FAILED, [(A.RT_GROUP, G, A.READ)]),
    ("OffsetFetch", ApiKey.OFFSET_FETCH, 9, lambda: _req(ApiKey.OFFSET_FETCH, groups=[
        _nested(ApiKey.OFFSET_FETCH, "OffsetFetchRequestGroup")(group_id=G, topics=None)]),
     [(A.RT_GROUP, G, A.DESCRIBE)], E.GROUP_AUTHORIZATION_FAILED),
    ("OffsetFetch-topic", ApiKey.OFFSET_FETCH, 7, lambda: _req(ApiKey.OFFSET_FETCH, group_id=G, topics=[
        _nested(ApiKey.OFFSET_FETCH, "OffsetFetchRequestTopic")(name=T, partition_indexes=[0])]),
     [(A.RT_TOPIC, T, A.DESCRIBE)], E.TOPIC_AUTHORIZATION_FAILED, [(A.RT_GROUP, G, A.DESCRIBE)]),
    ("FindCoordinator-group", ApiKey.FIND_COORDINATOR, 4, _r(ApiKey.FIND_COORDINATOR, key_type=0, coordinator_keys=[G]),
     [(A.RT_GROUP, G, A.DESCRIBE)], E.GROUP_AUTHORIZATION_FAILED),
    ("FindCoordinator-txn", ApiKey.FIND_COORDINATOR, 4, _r(ApiKey.FIND_COORDINATOR, key_type=1, coordinator_keys=[TX]),
     [(A.RT_TRANSACTIONAL_ID, TX, A.DESCRIBE)], E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("JoinGroup", ApiKey.JOIN_GROUP, 5, lambda: _req(ApiKey.JOIN_GROUP, group_id=G, session_timeout_ms=10000,
                                                     rebalance_timeout_ms=10000, member_id="x", protocol_type="consumer",
                                                     protocols=[]),
     [(A.RT_GROUP, G, A.READ)], E.GROUP_AUTHORIZATION_FAILED),
    ("SyncGroup", ApiKey.SYNC_GROUP, 3, _r(ApiKey.SYNC_GROUP, group_id=G, generation_id=1, member_id="m"),
     [(A.RT_GROUP, G, A.READ)], E.GROUP_AUTHORIZATION_FAILED),
    ("Heartbeat", ApiKey.HEARTBEAT, 3, _r(ApiKey.HEARTBEAT, group_id=G, generation_id=1, member_id="m"),
     [(A.RT_GROUP, G, A.READ)], E.GROUP_AUTHORIZATION_FAILED),
    ("LeaveGroup", ApiKey.LEAVE_GROUP, 2, _r(ApiKey.LEAVE_GROUP, group_id=G, member_id="m"),
     [(A.RT_GROUP, G, A.READ)], E.GROUP_AUTHORIZATION_FAILED),
    ("DescribeGroups", ApiKey.DESCRIBE_GROUPS, 5, _r(ApiKey.DESCRIBE_GROUPS, groups=[G]),
     [(A.RT_GROUP, G, A.DESCRIBE)], E.GROUP_AUTHORIZATION_FAILED),
    ("DeleteGroups", ApiKey.DELETE_GROUPS, 2, _r(ApiKey.DELETE_GROUPS, groups_names=[G]),
     [(A.RT_GROUP, G, A.DELETE)], E.GROUP_AUTHORIZATION_FAILED),
    ("OffsetDelete", ApiKey.OFFSET_DELETE, 0, lambda: _req(ApiKey.OFFSET_DELETE, group_id=G, topics=[
        _nested(ApiKey.OFFSET_DELETE, "OffsetDeleteRequestTopic")(name=T, partitions=[
            _nested(ApiKey.OFFSET_DELETE, "OffsetDeleteRequestTopic", "OffsetDeleteRequestPartition")(partition_index=0)])]),
     [(A.RT_GROUP, G, A.DELETE), (A.RT_TOPIC, T, A.READ)], E.GROUP_AUTHORIZATION_FAILED),
    ("CreateTopics", ApiKey.CREATE_TOPICS, 7, lambda: _req(ApiKey.CREATE_TOPICS, timeout_ms=5000, validate_only=True, topics=[
        _nested(ApiKey.CREATE_TOPICS, "CreatableTopic")(name="new", num_partitions=1, replication_factor=1)]),
     [(A.RT_TOPIC, "new", A.CREATE)], E.TOPIC_AUTHORIZATION_FAILED),
    ("DeleteTopics", ApiKey.DELETE_TOPICS, 5, _r(ApiKey.DELETE_TOPICS, topic_names=["t2"], timeout_ms=5000),
     [(A.RT_TOPIC, "t2", A.DELETE)], E.TOPIC_AUTHORIZATION_FAILED),
    ("DeleteRecords", ApiKey.DELETE_RECORDS, 2, lambda: _req(ApiKey.DELETE_RECORDS, timeout_ms=5000, topics=[
        _nested(ApiKey.DELETE_RECORDS, "DeleteRecordsTopic")(name="t3", partitions=[
            _nested(ApiKey.DELETE_RECORDS, "DeleteRecordsTopic", "DeleteRecordsPartition")(partition_index=0, offset=0)])]),
     [(A.RT_TOPIC, "t3", A.DELETE)], E.TOPIC_AUTHORIZATION_FAILED),
    ("CreatePartitions", ApiKey.CREATE_PARTITIONS, 3, lambda: _req(ApiKey.CREATE_PARTITIONS, timeout_ms=5000, validate_only=True, topics=[
        _nested(ApiKey.CREATE_PARTITIONS, "CreatePartitionsTopic")(name=T, count=2, assignments=None)]),
     [(A.RT_TOPIC, T, A.ALTER)], E.TOPIC_AUTHORIZATION_FAILED),
    ("DescribeConfigs-topic", ApiKey.DESCRIBE_CONFIGS, 4, lambda: _req(ApiKey.DESCRIBE_CONFIGS, resources=[
        _nested(ApiKey.DESCRIBE_CONFIGS, "DescribeConfigsResource")(resource_type=2, resource_name=T, configuration_keys=None)]),
     [(A.RT_TOPIC, T, A.DESCRIBE_CONFIGS)], E.TOPIC_AUTHORIZATION_FAILED),
    ("DescribeConfigs-broker", ApiKey.DESCRIBE_CONFIGS, 4, lambda: _req(ApiKey.DESCRIBE_CONFIGS, resources=[
        _nested(ApiKey.DESCRIBE_CONFIGS, "DescribeConfigsResource")(resource_type=4, resource_name="1", configuration_keys=None)]),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.DESCRIBE_CONFIGS)], E.CLUSTER_AUTHORIZATION_FAILED),
    ("AlterConfigs", ApiKey.ALTER_CONFIGS, 2, lambda: _req(ApiKey.ALTER_CONFIGS, validate_only=True, resources=[
        _nested(ApiKey.ALTER_CONFIGS, "AlterConfigsResource")(resource_type=2, resource_name=T, configs=[])]),
     [(A.RT_TOPIC, T, A.ALTER_CONFIGS)], E.TOPIC_AUTHORIZATION_FAILED),
    ("IncrementalAlterConfigs", ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, lambda: _req(ApiKey.INCREMENTAL_ALTER_CONFIGS, validate_only=True, resources=[
        _nested(ApiKey.INCREMENTAL_ALTER_CONFIGS, "AlterConfigsResource")(resource_type=2, resource_name=T, configs=[])]),
     [(A.RT_TOPIC, T, A.ALTER_CONFIGS)], E.TOPIC_AUTHORIZATION_FAILED),
    ("InitProducerId-txn", ApiKey.INIT_PRODUCER_ID, 4, _r(ApiKey.INIT_PRODUCER_ID, transactional_id=TX, transaction_timeout_ms=60000),
     [(A.RT_TRANSACTIONAL_ID, TX, A.WRITE)], E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("InitProducerId-idempotent", ApiKey.INIT_PRODUCER_ID, 4, _r(ApiKey.INIT_PRODUCER_ID, transactional_id=None, transaction_timeout_ms=60000),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.IDEMPOTENT_WRITE)], E.CLUSTER_AUTHORIZATION_FAILED),
    ("InitProducerId-idempotent-topic-write", ApiKey.INIT_PRODUCER_ID, 4, _r(ApiKey.INIT_PRODUCER_ID, transactional_id=None, transaction_timeout_ms=60000),
     [(A.RT_TOPIC, T, A.WRITE)], E.CLUSTER_AUTHORIZATION_FAILED),
    ("AddPartitionsToTxn", ApiKey.ADD_PARTITIONS_TO_TXN, 3, lambda: _req(ApiKey.ADD_PARTITIONS_TO_TXN, v3_and_below_transactional_id=TX,
                                                                         v3_and_below_producer_id=1, v3_and_below_producer_epoch=0, v3_and_below_topics=[
        _nested(ApiKey.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxnTopic")(name=T, partitions=[0])]),
     [(A.RT_TRANSACTIONAL_ID, TX, A.WRITE), (A.RT_TOPIC, T, A.WRITE)], E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("AddPartitionsToTxn-topic", ApiKey.ADD_PARTITIONS_TO_TXN, 3, lambda: _req(ApiKey.ADD_PARTITIONS_TO_TXN, v3_and_below_transactional_id=TX,
                                                                               v3_and_below_producer_id=1, v3_and_below_producer_epoch=0, v3_and_below_topics=[
        _nested(ApiKey.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxnTopic")(name=T, partitions=[0])]),
     [(A.RT_TOPIC, T, A.WRITE)], E.TOPIC_AUTHORIZATION_FAILED, [(A.RT_TRANSACTIONAL_ID, TX, A.WRITE)]),
    ("AddPartitionsToTxn-v4", ApiKey.ADD_PARTITIONS_TO_TXN, 4, _r(ApiKey.ADD_PARTITIONS_TO_TXN, transactions=[]),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.CLUSTER_ACTION)], E.CLUSTER_AUTHORIZATION_FAILED),
    ("AddOffsetsToTxn", ApiKey.ADD_OFFSETS_TO_TXN, 3, _r(ApiKey.ADD_OFFSETS_TO_TXN, transactional_id=TX, producer_id=1,
                                                          producer_epoch=0, group_id=G),
     [(A.RT_TRANSACTIONAL_ID, TX, A.WRITE), (A.RT_GROUP, G, A.READ)], E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("AddOffsetsToTxn-group", ApiKey.ADD_OFFSETS_TO_TXN, 3, _r(ApiKey.ADD_OFFSETS_TO_TXN, transactional_id=TX, producer_id=1,
                                                                producer_epoch=0, group_id=G),
     [(A.RT_GROUP, G, A.READ)], E.GROUP_AUTHORIZATION_FAILED, [(A.RT_TRANSACTIONAL_ID, TX, A.WRITE)]),
    ("EndTxn", ApiKey.END_TXN, 3, _r(ApiKey.END_TXN, transactional_id=TX, producer_id=1, producer_epoch=0, committed=True),
     [(A.RT_TRANSACTIONAL_ID, TX, A.WRITE)], E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("WriteTxnMarkers", ApiKey.WRITE_TXN_MARKERS, 1, lambda: _req(ApiKey.WRITE_TXN_MARKERS, markers=[
        _nested(ApiKey.WRITE_TXN_MARKERS, "WritableTxnMarker")(producer_id=1, producer_epoch=0, transaction_result=False,
                                                               coordinator_epoch=0, topics=[
            _nested(ApiKey.WRITE_TXN_MARKERS, "WritableTxnMarker", "WritableTxnMarkerTopic")(name="t9", partition_indexes=[0])])]),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.CLUSTER_ACTION)], E.CLUSTER_AUTHORIZATION_FAILED),
    ("TxnOffsetCommit", ApiKey.TXN_OFFSET_COMMIT, 3, lambda: _req(ApiKey.TXN_OFFSET_COMMIT, transactional_id=TX, group_id=G,
                                                                  producer_id=1, producer_epoch=0, topics=[
        _nested(ApiKey.TXN_OFFSET_COMMIT, "TxnOffsetCommitRequestTopic")(name=T, partitions=[
            _nested(ApiKey.TXN_OFFSET_COMMIT, "TxnOffsetCommitRequestTopic", "TxnOffsetCommitRequestPartition")(
                partition_index=0, committed_offset=1)])]),
     [(A.RT_TRANSACTIONAL_ID, TX, A.WRITE), (A.RT_GROUP, G, A.READ), (A.RT_TOPIC, T, A.READ)],
     E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("DescribeTransactions", ApiKey.DESCRIBE_TRANSACTIONS, 0, _r(ApiKey.DESCRIBE_TRANSACTIONS, transactional_ids=[TX]),
     [(A.RT_TRANSACTIONAL_ID, TX, A.DESCRIBE)], E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("ConsumerGroupHeartbeat", ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, _r(ApiKey.CONSUMER_GROUP_HEARTBEAT, group_id="cg", member_id="",
                                                                      member_epoch=0, rebalance_timeout_ms=5000,
                                                                      subscribed_topic_names=[T], topic_partitions=[]),
     [(A.RT_GROUP, "cg", A.READ), (A.RT_TOPIC, T, A.DESCRIBE)], E.GROUP_AUTHORIZATION_FAILED),
    ("ConsumerGroupHeartbeat-topic", ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, _r(ApiKey.CONSUMER_GROUP_HEARTBEAT, group_id="cg2", member_id="",
                                                                            member_epoch=0, rebalance_timeout_ms=5000,
                                                                            subscribed_topic_names=[T], topic_partitions=[]),
     [(A.RT_TOPIC, T, A.DESCRIBE)], E.TOPIC_AUTHORIZATION_FAILED, [(A.RT_GROUP, "cg2", A.READ)]),
    ("ConsumerGroupDescribe", ApiKey.CONSUMER_GROUP_DESCRIBE, 0, _r(ApiKey.CONSUMER_GROUP_DESCRIBE, group_ids=["cg"]),
     [(A.RT_GROUP, "cg", A.DESCRIBE)], E.GROUP_AUTHORIZATION_FAILED),
    # share groups (KIP-932)
    ("ShareGroupHeartbeat", ApiKey.SHARE_GROUP_HEARTBEAT, 1, _r(ApiKey.SHARE_GROUP_HEARTBEAT, group_id="sgx", member_id="m1",
                                                                member_epoch=0, subscribed_topic_names=[T]),
     [(A.RT_GROUP, "sgx", A.READ), (A.RT_TOPIC, T, A.DESCRIBE)], E.GROUP_AUTHORIZATION_FAILED),
    ("ShareGroupHeartbeat-topic", ApiKey.SHARE_GROUP_HEARTBEAT, 1, _r(ApiKey.SHARE_GROUP_HEARTBEAT, group_id="sgy", member_id="m1",
                                                                      member_epoch=0, subscribed_topic_names=[T]),
     [(A.RT_TOPIC, T, A.DESCRIBE)], E.TOPIC_AUTHORIZATION_FAILED, [(A.RT_GROUP, "sgy", A.READ)]),
    ("ShareGroupDescribe", ApiKey.SHARE_GROUP_DESCRIBE, 1, _r(ApiKey.SHARE_GROUP_DESCRIBE, group_ids=["sgx"]),
     [(A.RT_GROUP, "sgx", A.DESCRIBE)], E.GROUP_AUTHORIZATION_FAILED),
    ("ShareFetch", ApiKey.SHARE_FETCH, 1, _r(ApiKey.SHARE_FETCH, group_id="sgz", member_id="m1", share_session_epoch=0,
                                             max_wait_ms=0, min_bytes=1, max_records=10, batch_size=10, topics=[],
                                             forgotten_topics_data=[]),
     [(A.RT_GROUP, "sgz", A.READ)], E.GROUP_AUTHORIZATION_FAILED),
    ("ShareAcknowledge", ApiKey.SHARE_ACKNOWLEDGE, 1, _r(ApiKey.SHARE_ACKNOWLEDGE, group_id="sgz", member_id="m1",
                                                         share_session_epoch=-1, topics=[]),
     [(A.RT_GROUP, "sgz", A.READ)], E.GROUP_AUTHORIZATION_FAILED),
    ("ReadShareGroupStateSummary", ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, lambda: _req(
        ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, group_id="sgz", topics=[
            _nested(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, "ReadStateSummaryData")(topic_id=b"\1" * 16, partitions=[
                _nested(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, "ReadStateSummaryData", "PartitionData")(
                    partition=0, leader_epoch=0)])]),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.CLUSTER_ACTION)], E.CLUSTER_AUTHORIZATION_FAILED),
    # KafkaApis: DESCRIBE on the group, DESCRIBE on each named topic
    ("DescribeShareGroupOffsets", ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, lambda: _req(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, groups=[_nested(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
                                                             "DescribeShareGroupOffsetsRequestGroup")(
            group_id="sga", topics=None)]),
     [(A.RT_GROUP, "sga", A.DESCRIBE)], E.GROUP_AUTHORIZATION_FAILED),
    ("DescribeShareGroupOffsets-topic", ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, lambda: _req(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, groups=[_nested(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
                                                             "DescribeShareGroupOffsetsRequestGroup")(
            group_id="sga", topics=[_nested(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, "DescribeShareGroupOffsetsRequestGroup",
                                            "DescribeShareGroupOffsetsRequestTopic")(topic_name=T, partitions=[0])])]),
     [(A.RT_TOPIC, T, A.DESCRIBE)], E.TOPIC_AUTHORIZATION_FAILED, [(A.RT_GROUP, "sga", A.DESCRIBE)]),
    # KafkaApis: READ on the group, READ on each topic
    ("AlterShareGroupOffsets", ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, lambda: _req(
        ApiKey.ALTER_SHARE_GROUP_OFFSETS, group_id="sgb", topics=[_nested(
            ApiKey.ALTER_SHARE_GROUP_OFFSETS, "AlterShareGroupOffsetsRequestTopic")(topic_name=T, partitions=[_nested(
                ApiKey.ALTER_SHARE_GROUP_OFFSETS, "AlterShareGroupOffsetsRequestTopic",
                "AlterShareGroupOffsetsRequestPartition")(partition_index=0, start_offset=0)])]),
     [(A.RT_GROUP, "sgb", A.READ), (A.RT_TOPIC, T, A.READ)], E.GROUP_AUTHORIZATION_FAILED),
    ("AlterShareGroupOffsets-topic", ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, lambda: _req(
        ApiKey.ALTER_SHARE_GROUP_OFFSETS, group_id="sgb", topics=[_nested(
            ApiKey.ALTER_SHARE_GROUP_OFFSETS, "AlterShareGroupOffsetsRequestTopic")(topic_name=T, partitions=[_nested(
                ApiKey.ALTER_SHARE_GROUP_OFFSETS, "AlterShareGroupOffsetsRequestTopic",
                "AlterShareGroupOffsetsRequestPartition")(partition_index=0, start_offset=0)])]),
     [(A.RT_TOPIC, T, A.READ)], E.TOPIC_AUTHORIZATION_FAILED, [(A.RT_GROUP, "sgb", A.READ)]),
    # KafkaApis: DELETE on the group, READ on each topic
    ("DeleteShareGroupOffsets", ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, lambda: _req(
        ApiKey.DELETE_SHARE_GROUP_OFFSETS, group_id="sgb", topics=[_nested(
            ApiKey.DELETE_SHARE_GROUP_OFFSETS, "DeleteShareGroupOffsetsRequestTopic")(topic_name=T)]),
     [(A.RT_GROUP, "sgb", A.DELETE), (A.RT_TOPIC, T, A.READ)], E.GROUP_AUTHORIZATION_FAILED),
    ("DeleteShareGroupOffsets-topic", ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, lambda: _req(
        ApiKey.DELETE_SHARE_GROUP_OFFSETS, group_id="sgb", topics=[_nested(
            ApiKey.DELETE_SHARE_GROUP_OFFSETS, "DeleteShareGroupOffsetsRequestTopic")(topic_name=T)]),
     [(A.RT_TOPIC, T, A.READ)], E.TOPIC_AUTHORIZATION_FAILED, [(A.RT_GROUP, "sgb", A.DELETE)]),
    ("DescribeProducers", ApiKey.DESCRIBE_PRODUCERS, 0, lambda: _req(ApiKey.DESCRIBE_PRODUCERS, topics=[
        _nested(ApiKey.DESCRIBE_PRODUCERS, "TopicRequest")(name=T, partition_indexes=[0])]),
     [(A.RT_TOPIC, T, A.READ)], E.TOPIC_AUTHORIZATION_FAILED),
    ("DescribeTopicPartitions", ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, lambda: _req(ApiKey.DESCRIBE_TOPIC_PARTITIONS, topics=[
        _nested(ApiKey.DESCRIBE_TOPIC_PARTITIONS, "TopicRequest")(name=T)]),
     [(A.RT_TOPIC, T, A.DESCRIBE)], E.TOPIC_AUTHORIZATION_FAILED),
    ("OffsetForLeaderEpoch", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, lambda: _req(ApiKey.OFFSET_FOR_LEADER_EPOCH, replica_id=-1, topics=[
        _nested(ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderTopic")(topic=T, partitions=[
            _nested(ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderTopic", "OffsetForLeaderPartition")(
                partition=0, current_leader_epoch=-1, leader_epoch=0)])]),
     [(A.RT_TOPIC, T, A.DESCRIBE)], E.TOPIC_AUTHORIZATION_FAILED),
    # a follower's OffsetForLeaderEpoch: CLUSTER_ACTION (or DESCRIBE on the topic, as a client's)
    ("OffsetForLeaderEpoch-follower", ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, lambda: _req(ApiKey.OFFSET_FOR_LEADER_EPOCH, replica_id=2, topics=[
        _nested(ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderTopic")(topic=T, partitions=[
            _nested(ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderTopic", "OffsetForLeaderPartition")(
                partition=0, current_leader_epoch=-1, leader_epoch=0)])]),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.CLUSTER_ACTION)], E.TOPIC_AUTHORIZATION_FAILED),
    ("ListConfigResources", ApiKey.LIST_CONFIG_RESOURCES, 1, _r(ApiKey.LIST_CONFIG_RESOURCES, resource_types=[]),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.DESCRIBE_CONFIGS)], E.CLUSTER_AUTHORIZATION_FAILED),
    ("ElectLeaders", ApiKey.ELECT_LEADERS, 2, lambda: _req(ApiKey.ELECT_LEADERS, election_type=0, timeout_ms=1000,
                                                            topic_partitions=[_nested(ApiKey.ELECT_LEADERS, "TopicPartitions")(
                                                                topic=T, partitions=[0])]),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.ALTER)], E.CLUSTER_AUTHORIZATION_FAILED),
    ("AlterPartitionReassignments", ApiKey.ALTER_PARTITION_REASSIGNMENTS, 1, lambda: _req(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS, timeout_ms=1000, topics=[_nested(
            ApiKey.ALTER_PARTITION_REASSIGNMENTS, "ReassignableTopic")(name=T, partitions=[_nested(
                ApiKey.ALTER_PARTITION_REASSIGNMENTS, "ReassignableTopic", "ReassignablePartition")(
                    partition_index=0, replicas=[1])])]),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.ALTER)], E.CLUSTER_AUTHORIZATION_FAILED),
    ("ListPartitionReassignments", ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, _r(
        ApiKey.LIST_PARTITION_REASSIGNMENTS, timeout_ms=1000, topics=None),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.DESCRIBE)], E.CLUSTER_AUTHORIZATION_FAILED),
    ("UpdateFeatures", ApiKey.UPDATE_FEATURES, 1, lambda: _req(ApiKey.UPDATE_FEATURES, validate_only=True, feature_updates=[
        _nested(ApiKey.UPDATE_FEATURES, "FeatureUpdateKey")(feature="group.version", max_version_level=1, upgrade_type=1)]),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.ALTER)], E.CLUSTER_AUTHORIZATION_FAILED),
    ("DescribeLogDirs", ApiKey.DESCRIBE_LOG_DIRS, 5, _r(ApiKey.DESCRIBE_LOG_DIRS, topics=None),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.DESCRIBE)], E.CLUSTER_AUTHORIZATION_FAILED),
    ("DescribeAcls", ApiKey.DESCRIBE_ACLS, 3, _r(ApiKey.DESCRIBE_ACLS, resource_type_filter=A.RT_ANY, pattern_type_filter=A.PT_ANY,
                                                 operation=A.ANY, permission_type=A.PERM_ANY),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.DESCRIBE)], E.CLUSTER_AUTHORIZATION_FAILED),
    ("CreateAcls", ApiKey.CREATE_ACLS, 3, lambda: _req(ApiKey.CREATE_ACLS, creations=[
        _nested(ApiKey.CREATE_ACLS, "AclCreation")(resource_type=A.RT_TOPIC, resource_name="zz", resource_pattern_type=A.LITERAL,
                                                   principal="User:zz", host="*", operation=A.READ, permission_type=A.ALLOW)]),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.ALTER)], E.CLUSTER_AUTHORIZATION_FAILED),
    ("DeleteAcls", ApiKey.DELETE_ACLS, 3, lambda: _req(ApiKey.DELETE_ACLS, filters=[
        _nested(ApiKey.DELETE_ACLS, "DeleteAclsFilter")(resource_type_filter=A.RT_TOPIC, resource_name_filter="zz",
                                                        pattern_type_filter=A.LITERAL, operation=A.ANY, permission_type=A.PERM_ANY)]),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.ALTER)], E.CLUSTER_AUTHORIZATION_FAILED),
    ("DescribeUserScramCredentials", ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, _r(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, users=None),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.DESCRIBE)], E.CLUSTER_AUTHORIZATION_FAILED),
    ("AlterUserScramCredentials", ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, lambda: _req(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, upsertions=[
        _nested(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "ScramCredentialUpsertion")(name="zz", mechanism=2, iterations=4096,
                                                                                 salt=b"s" * 16, salted_password=b"p" * 64)]),
     [(A.RT_CLUSTER, A.CLUSTER_NAME, A.ALTER)], E.CLUSTER_AUTHORIZATION_FAILED),
]


async def _send(secure, key, version, req):
    from kgroup.client.config import AdminConfig
    from kgroup.client.connection import BrokerConnection
    from kgroup.client.security import ClientSecurity
    sec = ClientSecurity(AdminConfig(secure.security_config("SASL_PLAINTEXT", "alice", "PLAIN")))
    conn = BrokerConnection("127.0.0.1", secure.port_of("SASL_PLAINTEXT"), node_id=1, client_id="acl-table",
                            security=sec)
    await conn.connect()
    try:
        return await conn.send(req, version=version)
    finally:
        conn.close()


def _set_acls(secure, acls, add: bool):
    bindings = [A.AclBinding(rt, name, A.LITERAL, "User:alice", "*", op, A.ALLOW) for rt, name, op in acls]

    def change(b):
        if add:
            assert b.security.acls.create(bindings) == [None] * len(bindings)
        else:
            b.security.acls.delete([A.AclBindingFilter(x.resource_type, x.resource_name, x.pattern_type, x.principal,
                                                       x.host, x.operation, x.permission_type) for x in bindings])
    secure.call(change)


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_authorization(secure, row):
    name, key, version, build, needed, denied = row[:6]
    given = row[6] if len(row) > 6 else []
    _set_acls(secure, given, True)
    try:
        before = asyncio.run(_send(secure, key, version, build()))
        assert denied in _codes(before), (name, _codes(before))
        assert not (_codes(before) & AUTHORIZATION_ERRORS - {denied}), (name, _codes(before))
        _set_acls(secure, needed, True)
        try:
            after = asyncio.run(_send(secure, key, version, build()))
            assert not (_codes(after) & AUTHORIZATION_ERRORS), (name, _codes(after), after)
        finally:
            _set_acls(secure, needed, False)
    finally:
        _set_acls(secure, given, False)


def test_metadata_hides_unauthorized_topics_and_computes_operations(secure):
    req = lambda: _req(ApiKey.METADATA, topics=None, include_topic_authorized_operations=True)  # noqa: E731
    names = {t.name for t in asyncio.run(_send(secure, ApiKey.METADATA, 10, req())).topics}
    assert T not in names
    _set_acls(secure, [(A.RT_TOPIC, T, A.READ)], True)
    try:
        topics = {t.name: t for t in asyncio.run(_send(secure, ApiKey.METADATA, 10, req())).topics}
        assert set(topics) == {T}
        # READ implies DESCRIBE (AclEntry's implied operations)
        assert topics[T].topic_authorized_operations == (1 << A.READ) | (1 << A.DESCRIBE)
    finally:
        _set_acls(secure, [(A.RT_TOPIC, T, A.READ)], False)


def test_list_groups_and_transactions_are_filtered(secure):
    secure.consume(T, 1, group="listed")        # over PLAINTEXT, as the super user ANONYMOUS
    got = asyncio.run(_send(secure, ApiKey.LIST_GROUPS, 4, _req(ApiKey.LIST_GROUPS)))
    assert "listed" not in {g.group_id for g in got.groups}
    _set_acls(secure, [(A.RT_GROUP, "listed", A.DESCRIBE)], True)
    try:
        got = asyncio.run(_send(secure, ApiKey.LIST_GROUPS, 4, _req(ApiKey.LIST_GROUPS)))
        assert "listed" in {g.group_id for g in got.groups}
    finally:
        _set_acls(secure, [(A.RT_GROUP, "listed", A.DESCRIBE)], False)


def test_share_group_offsets_hide_topics_not_described(secure):
    """DescribeShareGroupOffsets of every share-partition (null topics) leaves out the topics the
    principal may not DESCRIBE (KafkaApis.describeShareGroupAllOffsetsForGroup)."""
    from kgroup.client.admin import Admin
    from kgroup.client.assignors import TopicPartition

    async def alter():          # over PLAINTEXT, as the super user ANONYMOUS
        async with Admin(bootstrap_servers=secure.bootstrap("PLAINTEXT")) as admin:
            return await admin.alter_share_group_offsets("sgh", {TopicPartition(T, 0): 0})
    assert asyncio.run(alter()) == {TopicPartition(T, 0): None}
    G = _nested(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, "DescribeShareGroupOffsetsRequestGroup")

    def topics():
        r = asyncio.run(_send(secure, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1,
                              _req(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, groups=[G(group_id="sgh", topics=None)])))
        assert r.groups[0].error_code == 0
        return [t.topic_name for t in r.groups[0].topics]
    _set_acls(secure, [(A.RT_GROUP, "sgh", A.DESCRIBE)], True)
    try:
        assert topics() == []
        _set_acls(secure, [(A.RT_TOPIC, T, A.DESCRIBE)], True)
        try:
            assert topics() == [T]
        finally:
            _set_acls(secure, [(A.RT_TOPIC, T, A.DESCRIBE)], False)
    finally:
        _set_acls(secure, [(A.RT_GROUP, "sgh", A.DESCRIBE)], False)
