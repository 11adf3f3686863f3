"""Features (KIP-584, KIP-1022): ApiVersions lists what this broker supports and what is
finalized, UpdateFeatures changes a level with Kafka's checks and messages, the levels survive a
restart, and ``kgroup features`` prints what kafka-features.sh prints."""
from kgroup.broker.features import SUPPORTED, Features
from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.messages.api_versions import ApiVersionsRequest
from kgroup.protocol.messages.update_features import UpdateFeaturesRequest
from tests.broker.test_cli import kgroup
from tests.harness import BrokerProcess, RawClient
from tests.kafka_spec import load_spec

U = UpdateFeaturesRequest.FeatureUpdateKey


def _features(c, version=4):
    r = c.request(ApiVersionsRequest(client_software_name="raw", client_software_version="1"), version)
    return ({f.name: (f.min_version, f.max_version) for f in r.supported_features},
            {f.name: (f.min_version_level, f.max_version_level) for f in r.finalized_features},
            r.finalized_features_epoch)


def test_api_versions_lists_features(broker):
    c = RawClient(broker.port)
    supported, finalized, epoch = _features(c)
    assert supported == {"metadata.version": (7, 30), "group.version": (0, 1), "transaction.version": (0, 2),
                         "share.version": (0, 1)}
    assert finalized == {"metadata.version": (30, 30), "group.version": (1, 1), "transaction.version": (2, 2),
                         "share.version": (1, 1)}
    assert epoch == 0
    # v3: a feature whose lowest level is 0 is left out (KAFKA-17492); v0-2 carry no features
    assert _features(c, 3)[0] == {"metadata.version": (7, 30)}
    assert _features(c, 2) == ({}, {}, -1)


def test_update_features_checks_and_persists(tmp_path):
    b = BrokerProcess(tmp_path / "d").start()
    try:
        c = RawClient(b.port)

        def update(version=2, validate_only=False, **levels):
            ups = [U(feature=n.replace("_", "."), max_version_level=lv, upgrade_type=t, allow_downgrade=t != 1)
                   for n, (lv, t) in levels.items()]
            return c.request(UpdateFeaturesRequest(feature_updates=ups, validate_only=validate_only), version)
        r = update(transaction_version=(1, 1))
        assert r.error_code == ErrorCode.INVALID_UPDATE_VERSION
        assert r.error_message == (
            "The update failed for all features since the following feature had an error: Invalid update version 1 "
            "for feature transaction.version. Can't downgrade the version of this feature without setting the "
            "upgrade type to either safe or unsafe downgrade.")
        r = update(transaction_version=(3, 1))
        assert r.error_message.endswith("Invalid update version 3 for feature transaction.version. "
                                        "Local controller 1 only supports versions 0-2")
        r = update(streams_version=(1, 1))
        assert r.error_message.endswith("Local controller 1 does not support this feature.")
        r = update(metadata_version=(29, 2))
        assert r.error_message.endswith("Unsupported metadata.version downgrade from 4.3-IV0 to 4.2-IV1. Refusing "
                                        "to perform the requested downgrade because it might delete metadata "
                                        "information.")
        assert update(group_version=(0, 2), validate_only=True).error_code == 0   # dry run: nothing changes
        assert _features(c)[1]["group.version"] == (1, 1)
        r = update(version=1, group_version=(0, 2), transaction_version=(0, 2))   # all or nothing, then both
        assert r.error_code == 0 and sorted((x.feature, x.error_code) for x in r.results) == [
            ("group.version", 0), ("transaction.version", 0)]
        _, finalized, epoch = _features(c)
        assert finalized == {"metadata.version": (30, 30), "share.version": (1, 1)} and epoch == 1
        r = update(version=0, group_version=(1, 1))     # v0: allow_downgrade false is an upgrade
        assert r.error_code == 0 and [x.feature for x in r.results] == ["group.version"]
    finally:
        b.stop()
    b = BrokerProcess(tmp_path / "d").start()   # the levels and epoch survive a restart
    try:
        _, finalized, epoch = _features(RawClient(b.port))
        assert finalized == {"metadata.version": (30, 30), "group.version": (1, 1), "share.version": (1, 1)} \
            and epoch == 2
    finally:
        b.stop()


def test_supported_levels_are_kafka_levels(tmp_path):
    """Each supported range lies within what a Kafka 4.3 broker supports, and metadata.version's
    top is 4.3-IV0 (level 30), the level a Kafka 4.3 cluster is formatted with."""
    kafka = {"metadata.version": (7, 30), "transaction.version": (0, 2), "group.version": (0, 1),
             "share.version": (0, 1)}
    for name, (lo, hi) in SUPPORTED.items():
        assert kafka[name][0] <= lo <= hi <= kafka[name][1], name
    f = Features(str(tmp_path), 1)
    try:
        f.update({"metadata.version": (31, 1)})
    except KafkaError as e:
        assert e.code == ErrorCode.INVALID_UPDATE_VERSION
    else:
        raise AssertionError("4.4-IV0 is not a production level")
    assert load_spec("UpdateFeaturesRequest")["validVersions"] == "0-2"


def test_features_cli(broker):
    bs = broker.bootstrap
    r = kgroup("features", "--bootstrap-server", bs, "describe")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        f"Feature: {'group.version':<40}  SupportedMinVersion: {'0':<15}  SupportedMaxVersion: {'1':<15}  "
        f"FinalizedVersionLevel: {'1':<15}  Epoch: 0",
        f"Feature: {'metadata.version':<40}  SupportedMinVersion: {'3.3-IV3':<15}  SupportedMaxVersion: "
        f"{'4.3-IV0':<15}  FinalizedVersionLevel: {'4.3-IV0':<15}  Epoch: 0",
        f"Feature: {'share.version':<40}  SupportedMinVersion: {'0':<15}  SupportedMaxVersion: {'1':<15}  "
        f"FinalizedVersionLevel: {'1':<15}  Epoch: 0",
        f"Feature: {'transaction.version':<40}  SupportedMinVersion: {'0':<15}  SupportedMaxVersion: {'2':<15}  "
        f"FinalizedVersionLevel: {'2':<15}  Epoch: 0"]
    r = kgroup("features", "--bootstrap-server", bs, "downgrade", "--feature", "group.version=0", "--dry-run")
    assert (r.returncode, r.stdout.strip()) == (0, "group.version can be downgraded to 0."), r.stderr
    r = kgroup("features", "--bootstrap-server", bs, "downgrade", "--feature", "group.version=0")
    assert (r.returncode, r.stdout.strip()) == (0, "group.version was downgraded to 0."), r.stderr
    r = kgroup("features", "--bootstrap-server", bs, "upgrade", "--feature", "transaction.version=3")
    assert r.returncode == 1
    assert r.stdout.strip() == ("Could not upgrade transaction.version to 3. The update failed for all features "
                                "since the following feature had an error: Invalid update version 3 for feature "
                                "transaction.version. Local controller 1 only supports versions 0-2"), r.stderr
    r = kgroup("features", "--bootstrap-server", bs, "upgrade", "--feature", "group.version=1")
    assert (r.returncode, r.stdout.strip()) == (0, "group.version was upgraded to 1."), r.stderr
    r = kgroup("features", "--bootstrap-server", bs, "describe")
    assert r.stdout.splitlines()[0].endswith("Epoch: 2")


def test_group_version_0_turns_the_consumer_protocol_off(broker):
    from kgroup.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
    from kgroup.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
    c = RawClient(broker.port)
    hb = ConsumerGroupHeartbeatRequest(group_id="g", member_id="m1", member_epoch=0, rebalance_timeout_ms=30000,
                                       subscribed_topic_names=["t"], topic_partitions=[])
    assert c.request(hb, 1).error_code == 0
    r = c.request(UpdateFeaturesRequest(feature_updates=[U(feature="group.version", max_version_level=0,
                                                           upgrade_type=2)]), 2)
    assert r.error_code == 0
    assert c.request(hb, 1).error_code == ErrorCode.UNSUPPORTED_VERSION
    d = c.request(ConsumerGroupDescribeRequest(group_ids=["g"]), 1).groups[0]
    assert (d.group_id, d.error_code) == ("g", ErrorCode.UNSUPPORTED_VERSION)
