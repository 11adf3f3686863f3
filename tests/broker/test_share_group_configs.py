"""Kafka's GroupConfig validation of the share.* group configs and the group.share.* broker
defaults behind them (no broker process: the checks are pure functions of the broker's config)."""
import types

import pytest

from kgroup.broker import group_configs as gc
from kgroup.coordinator.config import GroupCoordinatorConfig
from kgroup.protocol.errors import ErrorCode, KafkaError


def broker(**values):
    return types.SimpleNamespace(config=types.SimpleNamespace(values=values),
                                 metadata=types.SimpleNamespace(group_configs={}))


def refused(b, configs) -> str:
    with pytest.raises(KafkaError) as e:
        gc.validate(b, configs)
    assert e.value.code == ErrorCode.INVALID_CONFIG
    return str(e.value)


def test_defaults_follow_the_broker():
    b = broker(**{"group.share.record.lock.duration.ms": "20000"})
    d = gc.defaults(b)
    assert d["share.record.lock.duration.ms"] == 20000 and d["share.delivery.count.limit"] == 5
    assert d["share.auto.offset.reset"] == "latest" and d["share.renew.acknowledge.enable"] is True


def test_values_types_and_bounds():
    b = broker()
    gc.validate(b, {"share.record.lock.duration.ms": "15000", "share.delivery.count.limit": "10",
                    "share.partition.max.record.locks": "100", "share.auto.offset.reset": "by_duration:PT1H30M",
                    "share.isolation.level": "read_committed", "share.renew.acknowledge.enable": "FALSE"})
    assert "Value must be at least 1000" in refused(b, {"share.record.lock.duration.ms": "999"})
    assert refused(b, {"share.record.lock.duration.ms": "14999"}) == \
        "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"
    assert refused(b, {"share.delivery.count.limit": "11"}) == \
        "share.delivery.count.limit must be less than or equal to group.share.max.delivery.count.limit"
    assert refused(b, {"share.partition.max.record.locks": "4001"}) == \
        "share.partition.max.record.locks must be less than or equal to group.share.max.partition.max.record.locks"
    assert refused(b, {"share.delivery.count.limit": "x"}) == \
        "Invalid value x for configuration share.delivery.count.limit: Not a number of type INT"
    assert refused(b, {"share.isolation.level": "none"}) == \
        "Invalid value none for configuration share.isolation.level: String must be one of: read_committed, " \
        "read_uncommitted"
    assert refused(b, {"share.renew.acknowledge.enable": "yes"}).endswith("Expected value to be either true or false")
    for bad in ("none", "by_duration:", "by_duration:-PT1H", "by_duration:1h"):
        assert "The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'." \
            in refused(b, {"share.auto.offset.reset": bad})
    b2 = broker(**{"group.share.min.session.timeout.ms": "5000", "group.share.min.heartbeat.interval.ms": "5000"})
    assert refused(b2, {"share.session.timeout.ms": "5000"}) == \
        "share.session.timeout.ms must be greater than share.heartbeat.interval.ms"


def test_auto_offset_reset_parsing():
    assert gc.parse_auto_offset_reset("EARLIEST") == ("earliest", None)
    assert gc.parse_auto_offset_reset("by_duration:P1DT2H3M4.5S") == ("by_duration", 93784500)


def test_overrides_are_typed():
    b = broker()
    b.metadata.group_configs["g"] = {"share.heartbeat.interval.ms": "6000", "share.renew.acknowledge.enable": "false"}
    assert gc.overrides(b) == {"g": {"share.heartbeat.interval.ms": 6000, "share.renew.acknowledge.enable": False}}


def test_broker_share_config_checks():
    cfg = GroupCoordinatorConfig.from_props({"group.share.max.size": "7", "group.share.delivery.count.limit": "3"})
    assert (cfg.share_max_size, cfg.share_delivery_count_limit) == (7, 3)
    for props in ({"group.share.max.size": "1001"}, {"group.share.session.timeout.ms": "44999"},
                  {"group.share.delivery.count.limit": "11"}, {"group.share.record.lock.duration.ms": "1000"}):
        with pytest.raises(ValueError):
            GroupCoordinatorConfig.from_props(props)
