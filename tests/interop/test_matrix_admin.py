"""Matrix: each client's admin API against kgroup, checked against the coordinator's own view
(kgroup's admin, i.e. DescribeGroups/OffsetFetch answered by the broker).

Fixture: topic "adm" (3 partitions, 3 x 10 records), an active group "adm-active" (one
kafka-python member, range, everything consumed and committed: 10 per partition) and, per
client, an empty group with offsets committed as an admin would (generation -1).

kafka-python: create/list/delete topics, list/describe/delete groups (a non-empty group refused
with NON_EMPTY_GROUP), list/alter group offsets (alter refused for an active group).
aiokafka: list/describe groups (+ group offsets). confluent-kafka: list/describe/delete groups,
list/alter group offsets. kafkajs: describeGroups, fetchOffsets (+ listGroups). kcat: -L.
Each of kafka-python, aiokafka, confluent-kafka and kafkajs also grows a topic
(CreatePartitions), sets and reads back a topic config (AlterConfigs or
IncrementalAlterConfigs, DescribeConfigs) and deletes records (DeleteRecords).
tests/interop/test_admin.py covers the topic/cluster/config side of kafka-python and
confluent-kafka in more depth."""
import asyncio
import json
import subprocess

import pytest

from tests.conftest import ROOT
from tests.harness import BrokerProcess
from tests.interop.test_matrix_harness import (
    BROKER_OVERRIDES, DRIVER_JS, Members, _Admin, committed, create_topics, describe, kcat_bin, node_bin,
    produce_reference, tag, topic_partitions, wait_committed, wait_stable, wait_until)

pytestmark = [pytest.mark.interop, pytest.mark.matrix]

TOPIC, ACTIVE = "adm", "adm-active"
PARTITIONS = 3


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("matrix-admin")
    broker = BrokerProcess(tmp / "data", BROKER_OVERRIDES).start()
    members = Members()
    try:
        create_topics(broker.bootstrap, {TOPIC: PARTITIONS})
        produce_reference(broker.bootstrap, TOPIC, [("k", f"v{p}-{i}", p) for p in range(PARTITIONS) for i in range(10)])
        m = members.start("kafka-python", broker.bootstrap, ACTIVE, [TOPIC], assignors=["range"], log_dir=str(tmp),
                          client_id="adm-member")
        wait_stable(broker.bootstrap, ACTIVE, 1, topic_partitions(TOPIC, PARTITIONS), members=members)
        wait_committed(broker.bootstrap, ACTIVE, {(TOPIC, p): 10 for p in range(PARTITIONS)})
        for client in ("kafka-python", "aiokafka", "confluent-kafka", "kafkajs"):
            errs = _Admin.get(broker.bootstrap).alter_group_offsets(f"adm-empty-{client}",
                                                                    {(TOPIC, p): 3 + p for p in range(PARTITIONS)})
            assert all(e is None for e in errs.values()), errs
        yield broker, m
    finally:
        members.close()
        _Admin.drop(broker.bootstrap)
        broker.stop()


def test_kafka_python_admin(env, record_property):
    tag(record_property, "kafka-python", "admin")
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import NoError
    from kafka.structs import OffsetAndMetadata, TopicPartition
    broker, member = env
    empty = "adm-empty-kafka-python"
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="kp-admin", request_timeout_ms=10000)
    try:
        # topics
        a.create_topics([NewTopic("adm-kp-topic", 2, 1)])
        assert "adm-kp-topic" in a.list_topics()
        a.delete_topics(["adm-kp-topic"])
        wait_until(lambda: "adm-kp-topic" not in a.list_topics(), 10, "the topic to go")
        # groups
        listed = {g["group_id"]: g for g in a.list_groups()}
        assert {ACTIVE, empty} <= set(listed), listed
        assert listed[ACTIVE]["protocol_type"] == "consumer"
        d = a.describe_groups([ACTIVE])[ACTIVE]
        assert d["error"] is None and d["group_state"] == "Stable" and d["protocol_data"] == "range", d
        (m,) = d["members"]
        assert m["client_id"] == "adm-member"
        a_ = m["member_assignment"]
        parts = a_["assigned_partitions"] if isinstance(a_, dict) else a_.assigned_partitions
        assigned = {(t["topic"], p) if isinstance(t, dict) else (t.topic, p)
                    for t in parts for p in (t["partitions"] if isinstance(t, dict) else t.partitions)}
        assert assigned == topic_partitions(TOPIC, PARTITIONS)
        # group offsets
        offsets = a.list_group_offsets({ACTIVE: None})[ACTIVE]
        assert {(tp.topic, tp.partition): om.offset for tp, om in offsets.items()} == committed(broker.bootstrap, ACTIVE)
        new = {TopicPartition(TOPIC, p): OffsetAndMetadata(7, "kp", -1) for p in range(PARTITIONS)}
        assert set(a.alter_group_offsets(empty, new).values()) == {NoError}
        assert committed(broker.bootstrap, empty) == {(TOPIC, p): 7 for p in range(PARTITIONS)}
        refused = a.alter_group_offsets(ACTIVE, {TopicPartition(TOPIC, 0): OffsetAndMetadata(0, "", -1)})
        assert set(refused.values()) != {NoError}, "altering an active group's offsets was accepted"
        assert committed(broker.bootstrap, ACTIVE)[(TOPIC, 0)] == 10
        # delete groups
        assert a.delete_groups([empty, ACTIVE]) == {empty: "OK", ACTIVE: "NonEmptyGroupError"}
        assert empty not in {g["group_id"] for g in a.list_groups()}
        assert committed(broker.bootstrap, empty) == {}
    finally:
        a.close()


def test_aiokafka_admin(env, record_property):
    tag(record_property, "aiokafka", "admin")
    from aiokafka.admin import AIOKafkaAdminClient
    broker, member = env
    empty = "adm-empty-aiokafka"

    async def run():
        a = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="aio-admin")
        await a.start()
        try:
            listed = await a.list_consumer_groups()
            # one group per call: aiokafka 0.14.0 parses DescribeGroups v3 answers with the v2
            # schema (DescribeGroupsRequest_v3.RESPONSE_TYPE = DescribeGroupsResponse_v2), which
            # lacks v3's per-group authorized_operations, so a second group in one answer is
            # misread ("Buffer underrun decoding string") - against Apache Kafka too
            described = [*await a.describe_consumer_groups([ACTIVE]), *await a.describe_consumer_groups([empty])]
            offsets = await a.list_consumer_group_offsets(ACTIVE)
            return listed, described, offsets
        finally:
            await a.close()
    listed, described, offsets = asyncio.run(run())
    names = {g[0] for g in listed}
    assert {ACTIVE, empty} <= names, listed
    groups = {g[1]: g for resp in described for g in resp.groups}
    active = groups[ACTIVE]
    assert active[0] == 0 and active[2] == "Stable" and active[3] == "consumer" and active[4] == "range", active
    (m,) = active[5]
    assert m[0] in {mid for mid in describe(broker.bootstrap, ACTIVE)[2]} and m[1] == "adm-member", m
    assert groups[empty][2] == "Empty" and groups[empty][5] == []
    assert {(tp.topic, tp.partition): om.offset for tp, om in offsets.items()} == committed(broker.bootstrap, ACTIVE)


def test_confluent_kafka_admin(env, record_property):
    tag(record_property, "confluent-kafka", "admin")
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient
    broker, member = env
    empty = "adm-empty-confluent-kafka"
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = a.list_consumer_groups(request_timeout=10).result(10)
    names = {g.group_id: g for g in listed.valid}
    assert not listed.errors and {ACTIVE, empty} <= set(names), listed
    d = a.describe_consumer_groups([ACTIVE, empty], request_timeout=10)
    active, idle = d[ACTIVE].result(10), d[empty].result(10)
    assert active.state.name == "STABLE" and active.partition_assignor == "range", active
    (m,) = active.members
    assert m.client_id == "adm-member"
    assert {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions} == topic_partitions(TOPIC, PARTITIONS)
    assert idle.state.name == "EMPTY" and idle.members == []
    got = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(ACTIVE)])[ACTIVE].result(10)
    assert {(tp.topic, tp.partition): tp.offset for tp in got.topic_partitions} == committed(broker.bootstrap, ACTIVE)
    altered = a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        empty, [TopicPartition(TOPIC, p, 9) for p in range(PARTITIONS)])])[empty].result(10)
    assert all(tp.error is None for tp in altered.topic_partitions)
    assert committed(broker.bootstrap, empty) == {(TOPIC, p): 9 for p in range(PARTITIONS)}
    try:  # an active group's offsets cannot be altered (Kafka: UNKNOWN_MEMBER_ID per partition)
        refused = a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            ACTIVE, [TopicPartition(TOPIC, 0, 0)])])[ACTIVE].result(10)
        assert all(tp.error is not None for tp in refused.topic_partitions), refused
    except KafkaException as e:
        assert "UNKNOWN_MEMBER_ID" in str(e), e
    assert committed(broker.bootstrap, ACTIVE)[(TOPIC, 0)] == 10
    res = a.delete_consumer_groups([empty, ACTIVE], request_timeout=10)
    res[empty].result(10)
    with pytest.raises(KafkaException, match="NON_EMPTY_GROUP"):
        res[ACTIVE].result(10)
    assert empty not in {g.group_id for g in a.list_consumer_groups(request_timeout=10).result(10).valid}


def test_kafkajs_admin(env, record_property):
    tag(record_property, "kafkajs", "admin")
    broker, member = env
    empty = "adm-empty-kafkajs"
    outs = {}
    for g in (ACTIVE, empty):
        conf = {"role": "admin", "bootstrap": broker.bootstrap, "group": g, "topics": [TOPIC], "log_level": "WARN"}
        p = subprocess.run([node_bin(), DRIVER_JS, json.dumps(conf)], cwd=ROOT, capture_output=True, text=True,
                           timeout=60)
        evs = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        assert p.returncode == 0 and evs and evs[-1]["ev"] == "admin", f"{evs}\n{p.stderr[-3000:]}"
        outs[g] = evs[-1]
    (active,) = outs[ACTIVE]["groups"]
    assert active["state"] == "Stable" and active["protocol"] == "range" and active["protocolType"] == "consumer"
    (m,) = active["members"]
    assert m["clientId"] == "adm-member"
    assert {tuple(tp) for tp in m["assignment"]} == topic_partitions(TOPIC, PARTITIONS)
    assert {(t, p): o for t, p, o in outs[ACTIVE]["offsets"]} == committed(broker.bootstrap, ACTIVE)
    assert {(t, p): o for t, p, o in outs[empty]["offsets"]} == {(TOPIC, p): 3 + p for p in range(PARTITIONS)}
    (idle,) = outs[empty]["groups"]
    assert idle["state"] == "Empty" and idle["members"] == []
    assert {ACTIVE, empty} <= {g for g, _ in outs[ACTIVE]["listed"]}


def test_kcat_metadata(env, record_property):
    tag(record_property, "kcat", "metadata-L")
    broker, member = env
    out = subprocess.run([kcat_bin(), "-b", broker.bootstrap, "-L", "-J"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    md = json.loads(out.stdout)
    assert [b["name"] for b in md["brokers"]] == [f"127.0.0.1:{broker.port}"]
    (t,) = [t for t in md["topics"] if t["topic"] == TOPIC]
    assert [p["partition"] for p in t["partitions"]] == list(range(PARTITIONS))
    assert all(p["leader"] == md["brokers"][0]["id"] for p in t["partitions"])


def test_kafka_python_topic_admin(env, record_property):
    """CreatePartitions, IncrementalAlterConfigs / AlterConfigs, DescribeConfigs and DeleteRecords."""
    tag(record_property, "kafka-python", "admin-partitions-configs-records")
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    from kafka.structs import TopicPartition
    broker, _ = env
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="kp-admin2", request_timeout_ms=10000)
    try:
        a.create_topics([NewTopic("adm-kp-grow", 1, 1)])
        a.create_partitions({"adm-kp-grow": 3})
        assert len(a.describe_topics(["adm-kp-grow"])[0]["partitions"]) == 3
        assert a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "adm-kp-grow",
                                               configs={"retention.ms": "60000"})]) == {"topic": {"adm-kp-grow": "OK"}}
        got = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "adm-kp-grow")])
        assert got["topic"]["adm-kp-grow"]["retention.ms"]["value"] == "60000"
        low = a.delete_records({TopicPartition(TOPIC, 0): 4})
        assert low[TopicPartition(TOPIC, 0)]["low_watermark"] == 4
    finally:
        a.close()


def test_confluent_kafka_topic_admin(env, record_property):
    tag(record_property, "confluent-kafka", "admin-partitions-configs-records")
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic
    broker, _ = env
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    a.create_topics([NewTopic("adm-ck-grow", 1, 1)])["adm-ck-grow"].result(10)
    a.create_partitions([NewPartitions("adm-ck-grow", 4)])["adm-ck-grow"].result(10)
    assert len(a.list_topics("adm-ck-grow", timeout=10).topics["adm-ck-grow"].partitions) == 4
    res = ConfigResource(ConfigResource.Type.TOPIC, "adm-ck-grow", incremental_configs=[
        ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    list(a.incremental_alter_configs([res]).values())[0].result(10)
    cfg = list(a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "adm-ck-grow")]).values())[0].result(10)
    assert cfg["retention.ms"].value == "60000"
    (deleted,) = a.delete_records([TopicPartition(TOPIC, 1, 5)]).values()
    assert deleted.result(10).low_watermark == 5


def test_kafkajs_topic_admin(env, record_property):
    tag(record_property, "kafkajs", "admin-partitions-configs-records")
    broker, _ = env
    conf = {"role": "topic-admin", "bootstrap": broker.bootstrap, "topic": "adm-js-grow", "log_level": "WARN"}
    p = subprocess.run([node_bin(), DRIVER_JS, json.dumps(conf)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    evs = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    assert p.returncode == 0 and evs and evs[-1]["ev"] == "topic-admin", f"{evs}\n{p.stderr[-3000:]}"
    out = evs[-1]
    assert out["partitions"] == 3
    assert out["configs"] == {"retention.ms": "60000", "cleanup.policy": "delete"}
    assert out["low"] == 4


def test_aiokafka_topic_admin(env, record_property):
    """AIOKafkaAdminClient's create_partitions, alter_configs, describe_configs and delete_records."""
    tag(record_property, "aiokafka", "admin-partitions-configs-records")
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.structs import TopicPartition
    broker, _ = env
    grow = "adm-aio-grow"

    async def run():
        a = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="aio-admin2", request_timeout_ms=10000)
        await a.start()
        try:
            created = (await a.create_topics([NewTopic(grow, 1, 1)])).to_object()
            # create_partitions raises on a topic error itself
            await a.create_partitions({grow: NewPartitions(3)})
            (described,) = await a.describe_topics([grow])
            altered = [r.to_object() for r in await a.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, grow, configs={"retention.ms": "60000"})])]
            configs = [r.to_object() for r in await a.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, grow, configs={"retention.ms": None})])]
            low = await a.delete_records({TopicPartition(TOPIC, 2): RecordsToDelete(6)})
            return created, described, altered, configs, low
        finally:
            await a.close()
    created, described, altered, configs, low = asyncio.run(run())
    assert [(t["topic"], t["error_code"]) for t in created["topic_errors"]] == [(grow, 0)], created
    assert sorted(p["partition"] for p in described["partitions"]) == [0, 1, 2], described
    assert [(r["resource_name"], r["error_code"]) for resp in altered for r in resp["resources"]] == [(grow, 0)], altered
    ((res,),) = [resp["resources"] for resp in configs]
    assert res["error_code"] == 0 and res["resource_name"] == grow, res
    (entry,) = res["config_entries"]
    # config_source 1: DYNAMIC_TOPIC_CONFIG, the value AlterConfigs set rather than the default
    assert (entry["config_names"], entry["config_value"], entry["config_source"]) == ("retention.ms", "60000", 1), res
    assert low == {TopicPartition(TOPIC, 2): 6}
