"""Real admin clients against kgroup's topic configs and config/partition admin APIs
(confluent-kafka's AdminClient, kafka-python's KafkaAdminClient). None of these may skip."""
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
