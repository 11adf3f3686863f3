import pytest

from kgroup.broker.config import BrokerConfig, ConfigError, parse_properties


def test_defaults_are_kafkas():
    c = BrokerConfig()
    assert c["num.partitions"] == 1
    assert c["socket.request.max.bytes"] == 104857600
    assert c["offsets.topic.num.partitions"] == 50
    assert c["group.initial.rebalance.delay.ms"] == 3000
    assert c["auto.create.topics.enable"] is True
    assert c.log_dir == "/tmp/kafka-logs"
    assert c.listener() == ("", 9092)
    assert c.retention_ms == 168 * 3600 * 1000
    assert c["producer.id.expiration.ms"] == 86400000
    assert c["producer.id.expiration.check.interval.ms"] == 600000


def test_properties_file_and_overrides(tmp_path):
    p = tmp_path / "server.properties"
    p.write_text("# comment\nnum.partitions=3\nlog.dirs=/a,/b\nlisteners = PLAINTEXT://127.0.0.1:19092\n"
                 "auto.create.topics.enable=false\n")
    c = BrokerConfig.load(str(p), ["num.partitions=5"])
    assert c["num.partitions"] == 5 and c.log_dir == "/a" and c.listener() == ("127.0.0.1", 19092)
    assert c["auto.create.topics.enable"] is False
    assert c.advertised(None) == ("127.0.0.1", 19092)


@pytest.mark.parametrize("props,msg", [
    ({"bogus.key": "1"}, "bogus.key"),
    ({"num.partitions": "many"}, "num.partitions"),
    ({"auto.create.topics.enable": "maybe"}, "auto.create.topics.enable"),
    ({"listeners": "SSL://:9093"}, "SSL"),
])
def test_bad_config(props, msg):
    with pytest.raises(ConfigError, match=msg):
        BrokerConfig(props)


def test_parse_properties_continuations():
    assert parse_properties("a=1\\\n  2\nb : x\n! bang\n") == {"a": "12", "b": "x"}


def test_consumer_group_migration_policy():
    """KIP-848's group.consumer.migration.policy: Kafka's values, case insensitive, bidirectional by default."""
    from kgroup.coordinator.config import GroupCoordinatorConfig
    assert BrokerConfig()["group.consumer.migration.policy"] == "bidirectional"
    c = BrokerConfig({"group.consumer.migration.policy": "Upgrade"})
    assert c["group.consumer.migration.policy"] == "upgrade"
    g = GroupCoordinatorConfig.from_props(c.values)
    assert g.upgrade_enabled and not g.downgrade_enabled
    g = GroupCoordinatorConfig.from_props({"group.consumer.migration.policy": "DOWNGRADE"})
    assert g.downgrade_enabled and not g.upgrade_enabled
    g = GroupCoordinatorConfig.from_props({"group.consumer.migration.policy": "disabled"})
    assert not g.downgrade_enabled and not g.upgrade_enabled
    with pytest.raises(ConfigError, match="String must be one of \\(case insensitive\\): DISABLED, UPGRADE"):
        BrokerConfig({"group.consumer.migration.policy": "sideways"})


def test_every_kafka_broker_key_is_accepted():
    """A Kafka 4.3 server.properties starts kgroup: keys it applies are parsed, the others (the
    rest of Kafka's AbstractKafkaConfig) are kept as not applied; other keys stay errors."""
    cfg = BrokerConfig({"transaction.partition.verification.enable": "false", "transaction.state.log.min.isr": "1",
                        "producer.id.expiration.check.interval.ms": "1000", "process.roles": "broker,controller",
                        "controller.quorum.bootstrap.servers": "localhost:9093", "num.replica.fetchers": "2",
                        "background.threads": "4"})
    assert cfg["transaction.partition.verification.enable"] is False
    assert cfg["producer.id.expiration.check.interval.ms"] == 1000
    assert cfg.not_applied == {"process.roles": "broker,controller", "controller.quorum.bootstrap.servers":
                               "localhost:9093", "num.replica.fetchers": "2", "background.threads": "4"}
    with pytest.raises(ConfigError, match="Unknown configuration 'no.such.key'"):
        BrokerConfig({"no.such.key": "1"})
