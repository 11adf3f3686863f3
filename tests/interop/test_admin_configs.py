"""Real admin clients against kgroup's topic configs and config/partition admin APIs
(confluent-kafka's AdminClient, kafka-python's KafkaAdminClient). None of these may skip."""
import time

import pytest

from tests.broker.test_topic_configs import COMPACTION_TEST_CONFIGS, KAFKA_40_TOPIC_CONFIGS

pytestmark = pytest.mark.interop


def test_confluent_creates_with_every_kafka_config(broker):
    """librdkafka's 0077-compaction topic configs, then DescribeConfigs of them all."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("ck-compacted", 1, 1, config=COMPACTION_TEST_CONFIGS)])["ck-compacted"].result(10)
    cfg = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "ck-compacted")])
    cfg = list(cfg.values())[0].result(10)
    assert set(cfg) == KAFKA_40_TOPIC_CONFIGS
    assert {k: cfg[k].value for k in COMPACTION_TEST_CONFIGS} == COMPACTION_TEST_CONFIGS
    assert cfg["compression.type"].value == "producer" and cfg["compression.type"].is_default
    bad = admin.create_topics([NewTopic("ck-bad", 1, 1, config={"min.compaction.lag.ms": "10",
                                                                "max.compaction.lag.ms": "5"})])["ck-bad"]
    with pytest.raises(KafkaException, match="conflict topic config"):
        bad.result(10)


def test_kafka_python_creates_and_describes(broker):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    from kafka.errors import InvalidConfigurationError
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("kp-compacted", 1, 1, topic_configs=COMPACTION_TEST_CONFIGS)])
        res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-compacted")], config_filter="all")
        entries = {k: v["value"] for k, v in res["topic"]["kp-compacted"].items()}
        assert set(entries) == KAFKA_40_TOPIC_CONFIGS
        assert {k: entries[k] for k in COMPACTION_TEST_CONFIGS} == COMPACTION_TEST_CONFIGS
        modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-compacted")])
        assert set(modified["topic"]["kp-compacted"]) == set(COMPACTION_TEST_CONFIGS)
        with pytest.raises(InvalidConfigurationError):
            admin.create_topics([NewTopic("kp-bad", 1, 1, topic_configs={"segment.jitter.ms": "-1"})])
    finally:
        admin.close()


def _wait(futures, timeout=15):
    return {k: f.result(timeout) for k, f in futures.items()}


def test_confluent_admin_apis(broker):
    """create_partitions, alter_configs, incremental_alter_configs (topic and broker),
    delete_records and describe_configs through librdkafka's admin client."""
    from confluent_kafka import KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       NewPartitions, NewTopic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    _wait(admin.create_topics([NewTopic("ck-admin", 2, 1, config={"retention.ms": "1000"})]))
    _wait(admin.create_partitions([NewPartitions("ck-admin", 4)]))
    assert len(admin.list_topics("ck-admin", timeout=10).topics["ck-admin"].partitions) == 4
    with pytest.raises(KafkaException, match="INVALID_PARTITIONS"):
        _wait(admin.create_partitions([NewPartitions("ck-admin", 3)]))

    topic = ConfigResource(ConfigResource.Type.TOPIC, "ck-admin", set_config={"segment.ms": "60000"})
    _wait(admin.alter_configs([topic]))   # legacy: replaces the set, retention.ms back to default
    cfg = _wait(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "ck-admin")]))
    cfg = list(cfg.values())[0]
    assert cfg["segment.ms"].value == "60000" and cfg["retention.ms"].is_default

    inc = ConfigResource(ConfigResource.Type.TOPIC, "ck-admin", incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
        ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("max.compaction.lag.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    _wait(admin.incremental_alter_configs([inc]))
    cfg = list(_wait(admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "ck-admin")])).values())[0]
    assert cfg["cleanup.policy"].value == "delete,compact" and cfg["segment.ms"].is_default
    assert cfg["max.compaction.lag.ms"].value == "60000"

    brk = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry("log.cleaner.min.cleanable.ratio", "0.2", incremental_operation=AlterConfigOpType.SET)])
    _wait(admin.incremental_alter_configs([brk]))
    cfg = list(_wait(admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")])).values())[0]
    assert cfg["log.cleaner.min.cleanable.ratio"].value == "0.2"
    assert cfg["log.cleaner.min.cleanable.ratio"].source == 2   # DYNAMIC_BROKER_CONFIG
    bad = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
        ConfigEntry("num.partitions", "7", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="Cannot update these configs dynamically"):
        _wait(admin.incremental_alter_configs([bad]))

    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce("ck-admin", key=b"k%d" % i, value=b"v%d" % i, partition=0)
    assert p.flush(10) == 0
    res = _wait(admin.delete_records([TopicPartition("ck-admin", 0, 6)]))
    (deleted,) = res.values()
    assert deleted.low_watermark == 6
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ck-wm"})
    assert c.get_watermark_offsets(TopicPartition("ck-admin", 0), timeout=10) == (6, 10)
    c.close()


def test_kafka_python_admin_apis(broker):
    from kafka import KafkaProducer, TopicPartition
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    from kafka.errors import InvalidPartitionsError
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("kp-admin", 1, 1)])
        admin.create_partitions({"kp-admin": 3})
        assert len(admin.describe_topics(["kp-admin"])[0]["partitions"]) == 3
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({"kp-admin": 2})
        res = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin",
                                                  configs={"retention.ms": "5000"})])
        assert res == {"topic": {"kp-admin": "OK"}}
        res = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin",
                                                  configs={"cleanup.policy": (AlterConfigOp.APPEND, "compact")})])
        assert res == {"topic": {"kp-admin": "OK"}}
        res = admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin", configs={"retention.ms": "5"})],
                                  incremental=False)   # legacy AlterConfigs, modified keys carried along
        assert res == {"topic": {"kp-admin": "OK"}}
        modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin")])
        assert {k: v["value"] for k, v in modified["topic"]["kp-admin"].items()} == {
            "retention.ms": "5", "cleanup.policy": "delete,compact"}
        admin.reset_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin", configs=["retention.ms"])])
        modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin")])
        assert set(modified["topic"]["kp-admin"]) == {"cleanup.policy"}
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-admin", configs={"cleanup.policy": "delete"})])
        p = KafkaProducer(bootstrap_servers=broker.bootstrap)
        for _i in range(8):
            p.send("kp-admin", b"x", partition=1)
        p.flush(10)
        p.close()
        out = admin.delete_records({TopicPartition("kp-admin", 1): 5})
        assert out[TopicPartition("kp-admin", 1)]["low_watermark"] == 5
    finally:
        admin.close()


def test_confluent_authorized_operations(broker):
    """librdkafka's 0081 "with authorized operations": with no authorizer Kafka answers every
    operation the resource supports."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation, AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("ck-ops", 1, 1)])["ck-ops"].result(10)
    desc = admin.describe_topics(TopicCollection(["ck-ops"]), include_authorized_operations=True)["ck-ops"].result(10)
    assert set(desc.authorized_operations) == {
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE, AclOperation.DELETE,
        AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    cluster = admin.describe_cluster(include_authorized_operations=True).result(10)
    assert set(cluster.authorized_operations) == {
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE}
    assert admin.describe_cluster().result(10).authorized_operations is None
    # groups: DescribeGroups v3+ for a classic group, ConsumerGroupDescribe (69) for a KIP-848 one
    from confluent_kafka import Consumer
    group_ops = {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
                 AclOperation.ALTER_CONFIGS}
    for proto in ("classic", "consumer"):
        group = f"ck-ops-{proto}"
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": proto})
        try:
            c.subscribe(["ck-ops"])
            deadline = time.monotonic() + 30
            while not c.assignment() and time.monotonic() < deadline:
                c.poll(0.2)
            assert c.assignment(), proto
            d = admin.describe_consumer_groups([group], include_authorized_operations=True)[group].result(10)
            assert d.type.name == proto.upper() and set(d.authorized_operations) == group_ops, (proto, d)
            assert admin.describe_consumer_groups([group])[group].result(10).authorized_operations is None
        finally:
            c.close()


def test_confluent_group_configs(broker):
    """Kafka 4.0's GROUP config resource through librdkafka: incremental_alter_configs, describe_configs."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.GROUP, "ck-group", incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "50000", incremental_operation=AlterConfigOpType.SET)])
    _wait(admin.incremental_alter_configs([res]))
    cfg = list(_wait(admin.describe_configs([ConfigResource(ConfigResource.Type.GROUP, "ck-group")])).values())[0]
    assert cfg["consumer.session.timeout.ms"].value == "50000" and not cfg["consumer.session.timeout.ms"].is_default
    assert cfg["consumer.heartbeat.interval.ms"].value == "5000" and cfg["consumer.heartbeat.interval.ms"].is_default
    bad = ConfigResource(ConfigResource.Type.GROUP, "ck-group", incremental_configs=[
        ConfigEntry("consumer.heartbeat.interval.ms", "60000", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="consumer.heartbeat.interval.ms must be less than or equal"):
        _wait(admin.incremental_alter_configs([bad]))
