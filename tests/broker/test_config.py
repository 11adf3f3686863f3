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
