"""Topic-level configs: every one Kafka 4.0's LogConfig accepts, with its validation, defaults and
broker synonyms (CreateTopics and DescribeConfigs over raw sockets; validate() directly)."""
import pytest

from kgroup.broker.config import BrokerConfig
from kgroup.broker.topic_configs import TOPIC_CONFIG_DEFS, broker_default, validate
from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.describe_configs import DescribeConfigsRequest
from tests.harness import BrokerProcess, RawClient

CT = CreateTopicsRequest.CreatableTopic
DR = DescribeConfigsRequest.DescribeConfigsResource

# Kafka 4.0's topic configs (LogConfig.configNames(), without message.format.version and
# message.timestamp.difference.max.ms, which 4.0 removed)
KAFKA_40_TOPIC_CONFIGS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "follower.replication.throttled.replicas", "index.interval.bytes", "leader.replication.throttled.replicas",
    "local.retention.bytes", "local.retention.ms", "max.compaction.lag.ms", "max.message.bytes",
    "message.downconversion.enable", "message.timestamp.after.max.ms", "message.timestamp.before.max.ms",
    "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas",
    "preallocate", "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable",
    "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms",
    "segment.ms", "unclean.leader.election.enable",
}

# what librdkafka's 0077-compaction creates its topic with (refused before this table)
COMPACTION_TEST_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "10000",
                           "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400",
                           "file.delete.delay.ms": "10000", "max.compaction.lag.ms": "100"}


def test_the_table_is_kafkas():
    assert set(TOPIC_CONFIG_DEFS) == KAFKA_40_TOPIC_CONFIGS


def test_defaults_and_broker_synonyms():
    c = BrokerConfig()
    assert broker_default(c, "min.cleanable.dirty.ratio") == "0.5"
    assert broker_default(c, "max.compaction.lag.ms") == str(2**63 - 1)
    assert broker_default(c, "file.delete.delay.ms") == "60000"
    assert broker_default(c, "retention.ms") == "604800000"
    assert broker_default(c, "segment.jitter.ms") == "0"
    assert broker_default(c, "flush.ms") == str(2**63 - 1)
    assert broker_default(c, "local.retention.ms") == "-2"
    assert broker_default(c, "leader.replication.throttled.replicas") == ""
    c = BrokerConfig({"log.cleaner.min.cleanable.ratio": "0.2", "log.retention.minutes": "3",
                      "log.roll.jitter.hours": "2", "compression.type": "zstd"})
    assert broker_default(c, "min.cleanable.dirty.ratio") == "0.2"
    assert broker_default(c, "retention.ms") == "180000"
    assert broker_default(c, "segment.jitter.ms") == str(2 * 3600 * 1000)
    assert broker_default(c, "compression.type") == "zstd"


def test_accepts_good_values():
    c = BrokerConfig()
    parsed = validate(dict(COMPACTION_TEST_CONFIGS, **{
        "compression.type": "lz4", "compression.zstd.level": "-5", "compression.gzip.level": "-1",
        "preallocate": "TRUE", "leader.replication.throttled.replicas": "0:1, 1:1",
        "follower.replication.throttled.replicas": "*", "message.downconversion.enable": "false",
        "retention.ms": "-1", "retention.bytes": "-5", "local.retention.ms": "-2"}), c)
    assert parsed["min.cleanable.dirty.ratio"] == 0.01 and parsed["preallocate"] is True
    assert parsed["cleanup.policy"] == ["compact"]
    assert parsed["leader.replication.throttled.replicas"] == ["0:1", "1:1"]


@pytest.mark.parametrize("configs,message", [
    ({"message.format.version": "3.0"}, "Unknown topic config name: message.format.version"),
    ({"message.timestamp.difference.max.ms": "1"}, "Unknown topic config name: message.timestamp.difference.max.ms"),
    ({"retention.ms": "abc"}, "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
    ({"segment.bytes": "3000000000"}, "Invalid value 3000000000 for configuration segment.bytes: Not a number of type INT"),
    ({"segment.bytes": "13"}, "Invalid value 13 for configuration segment.bytes: Value must be at least 14"),
    ({"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ({"min.cleanable.dirty.ratio": "1.5"},
     "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ({"min.cleanable.dirty.ratio": "x"},
     "Invalid value x for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"),
    ({"max.compaction.lag.ms": "0"}, "Invalid value 0 for configuration max.compaction.lag.ms: Value must be at least 1"),
    ({"cleanup.policy": "compact,remove"},
     "Invalid value remove for configuration cleanup.policy: String must be one of: compact, delete"),
    ({"compression.type": "brotli"}, "Invalid value brotli for configuration compression.type: String must be one "
                                     "of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ({"compression.gzip.level": "0"}, "Value must be between 1 and 9 or equal to -1"),
    ({"compression.lz4.level": "18"}, "Value must be no more than 17"),
    ({"preallocate": "yes"}, "Invalid value yes for configuration preallocate: Expected value to be either true or false"),
    ({"message.timestamp.type": "NoTime"}, "String must be one of: CreateTime, LogAppendTime"),
    ({"leader.replication.throttled.replicas": "0-1"}, "must be the literal '*' or a list of replicas"),
    ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
     "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
    ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled in the broker"),
    ({"min.insync.replicas": "0"}, "Value must be at least 1"),
])
def test_refuses_what_kafka_refuses(configs, message):
    with pytest.raises(KafkaError) as e:
        validate(configs, BrokerConfig())
    assert e.value.code == ErrorCode.INVALID_CONFIG and message in str(e.value)


def test_conflict_with_broker_default():
    """The min/max lag rule applies to the effective values, a broker default included."""
    with pytest.raises(KafkaError, match="conflict topic config"):
        validate({"min.compaction.lag.ms": "1000"}, BrokerConfig({"log.cleaner.max.compaction.lag.ms": "500"}))


def _create(c, name, configs, version=7):
    cfg = [CT.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()]
    return c.request(CreateTopicsRequest(topics=[CT(name=name, num_partitions=1, replication_factor=1,
                                                    configs=cfg)]), version).topics[0]


def test_create_and_describe_every_config(tmp_path):
    b = BrokerProcess(tmp_path / "d", ["log.cleaner.min.cleanable.ratio=0.25"]).start()
    try:
        c = RawClient(b.port)
        r = _create(c, "compacted", COMPACTION_TEST_CONFIGS)
        assert r.error_code == 0, r.error_message
        returned = {x.name: (x.value, x.config_source) for x in r.configs}
        assert set(returned) == KAFKA_40_TOPIC_CONFIGS
        assert returned["max.compaction.lag.ms"] == ("100", 1)
        assert returned["min.compaction.lag.ms"] == ("0", 5)
        assert returned["min.cleanable.dirty.ratio"] == ("0.01", 1)
        r = _create(c, "defaults", {})
        returned = {x.name: (x.value, x.config_source) for x in r.configs}
        assert returned["min.cleanable.dirty.ratio"] == ("0.25", 4)   # the static broker synonym's
        r = _create(c, "bad", {"min.cleanable.dirty.ratio": "2"})
        assert r.error_code == ErrorCode.INVALID_CONFIG and "no more than 1" in r.error_message
        resp = c.request(DescribeConfigsRequest(resources=[DR(resource_type=2, resource_name="compacted",
                                                              configuration_keys=None)],
                                                include_synonyms=True, include_documentation=True), 4)
        cfg = {e.name: e for e in resp.results[0].configs}
        assert set(cfg) == KAFKA_40_TOPIC_CONFIGS
        assert (cfg["min.cleanable.dirty.ratio"].value, cfg["min.cleanable.dirty.ratio"].config_type) == ("0.01", 6)
        assert (cfg["file.delete.delay.ms"].value, cfg["file.delete.delay.ms"].config_source) == ("10000", 1)
        assert [(s.name, s.value, s.source) for s in cfg["min.cleanable.dirty.ratio"].synonyms] == [
            ("min.cleanable.dirty.ratio", "0.01", 1), ("log.cleaner.min.cleanable.ratio", "0.25", 4)]
        assert cfg["preallocate"].value == "false" and cfg["preallocate"].config_type == 1
        assert cfg["segment.jitter.ms"].documentation
        # an untouched topic reports the broker's value as its default
        assert _create(c, "plain", {}).error_code == 0
        resp = c.request(DescribeConfigsRequest(resources=[DR(resource_type=2, resource_name="plain",
                                                              configuration_keys=["min.cleanable.dirty.ratio"])]), 4)
        (e,) = resp.results[0].configs
        assert (e.value, e.config_source) == ("0.25", 4)    # STATIC_BROKER_CONFIG, as Kafka reports it
        resp = c.request(DescribeConfigsRequest(resources=[DR(resource_type=2, resource_name="plain",
                                                              configuration_keys=["file.delete.delay.ms"])]), 1)
        (e,) = resp.results[0].configs
        assert (e.value, e.config_source) == ("60000", 5)     # DEFAULT_CONFIG
    finally:
        b.stop()
