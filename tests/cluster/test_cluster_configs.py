"""Cluster-wide settings in ZooKeeper (kgroup/cluster/zk_config_store.py) on a 3-broker cluster
(``kgroup serve`` processes, an authorizer on, each broker with PLAINTEXT (the inter-broker
listener, ANONYMOUS a super user) and SASL_PLAINTEXT): an ACL created through one
broker is enforced by every broker and its deletion too; a SCRAM user created through one broker
authenticates at the others and after a broker's restart; a dynamic broker config set as the
cluster default is seen by DescribeConfigs on every broker with Kafka's config source; a group
config set through a broker that is not the group's coordinator applies at the coordinator; a
client-metrics subscription set through one broker is described by the others; a feature level changed through one broker is in every broker's ApiVersions; each in Kafka 3.9's
znodes. Real clients: confluent-kafka's AdminClient, kgroup's own client speaking SASL to one
chosen broker, the ``kgroup features`` tool."""
import asyncio
import json
import subprocess
import sys
import time

import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from kgroup.client.config import AdminConfig
from kgroup.client.connection import BrokerConnection
from kgroup.client.security import ClientSecurity
from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kgroup.protocol.messages.describe_configs import DescribeConfigsRequest
from kgroup.protocol.messages.find_coordinator import FindCoordinatorRequest
from kgroup.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kgroup.protocol.messages.metadata import MetadataRequest
from kgroup.testing.cluster import KafkaCluster
from tests.harness import RawClient

pytestmark = pytest.mark.interop
USERS = {"admin": "admin-secret", "alice": "alice-secret"}
SOON = 10.0         # how long a change may take to reach every broker


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with KafkaCluster(3, tmp_path_factory.mktemp("configs"), {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS;User:admin", "offsets.topic.num.partitions": 3},
            listeners=("PLAINTEXT", "SASL_PLAINTEXT"), users=USERS) as c:
        yield c


def admin(cluster, n=1):
    """confluent-kafka's AdminClient bootstrapped from broker ``n`` (PLAINTEXT: a super user)."""
    return AdminClient({"bootstrap.servers": cluster.broker(n).bootstrap_servers})


def _result(futures):
    return {k: f.result(timeout=30) for k, f in futures.items()}


async def _at_broker(cluster, n, user, mechanism, password, request, version):
    """``request`` sent to broker ``n`` itself over SASL_PLAINTEXT as ``user``."""
    b = cluster.broker(n)
    sec = ClientSecurity(AdminConfig(b.security_config("SASL_PLAINTEXT", user, mechanism, password=password)))
    conn = BrokerConnection("127.0.0.1", b.port_of("SASL_PLAINTEXT"), node_id=n, client_id="configs-test", security=sec)
    await conn.connect()
    try:
        return await conn.send(request, version=version)
    finally:
        conn.close()


def topic_error_for_alice(cluster, n, topic):
    """The error broker ``n`` gives alice (SASL PLAIN) for ``topic`` in Metadata."""
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
    resp = asyncio.run(_at_broker(cluster, n, "alice", "PLAIN", USERS["alice"], req, 12))
    return resp.topics[0].error_code


def wait_until(predicate, timeout=SOON, what=""):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)
    return time.monotonic()


def test_acls_created_through_one_broker_are_enforced_by_all(cluster):
    a = admin(cluster, 1)
    _result(a.create_topics([NewTopic("secured", 1, 3)]))
    for n in (1, 2, 3):
        assert topic_error_for_alice(cluster, n, "secured") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    literal = AclBinding(ResourceType.TOPIC, "secured", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    prefixed = AclBinding(ResourceType.GROUP, "billing-", ResourcePatternType.PREFIXED, "User:alice", "*",
                          AclOperation.READ, AclPermissionType.ALLOW)
    started = time.monotonic()
    _result(a.create_acls([literal, prefixed]))
    # the answer comes after the ZooKeeper write: the znodes are there, in Kafka's layout
    zk = cluster.zk.zk
    doc = json.loads(zk.get("/kafka-acl/Topic/secured")[0])
    assert doc == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                           "operation": "Describe", "host": "*"}]}
    assert json.loads(zk.get("/kafka-acl-extended/prefixed/Group/billing-")[0])["acls"][0]["operation"] == "Read"
    changes = [zk.get(f"/kafka-acl-changes/{c}")[0] for c in zk.get_children("/kafka-acl-changes")]
    assert b"TOPIC:secured" in changes
    ext = [json.loads(zk.get(f"/kafka-acl-extended-changes/{c}")[0]) for c in zk.get_children("/kafka-acl-extended-changes")]
    assert {"version": 1, "resourceType": "GROUP", "name": "billing-", "patternType": "PREFIXED"} in ext
    for n in (1, 2, 3):
        wait_until(lambda n=n: topic_error_for_alice(cluster, n, "secured") == 0, what=f"broker {n} allows alice")
    print(f"ACL enforced by all 3 brokers {time.monotonic() - started:.2f} s after CreateAcls was sent")
    # every broker describes both
    for n in (1, 2, 3):
        an = admin(cluster, n)
        got = an.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY,
                                                               "User:alice", None, AclOperation.ANY,
                                                               AclPermissionType.ANY)).result(timeout=30)
        assert set(got) >= {literal, prefixed}

    # deleted through broker 3: every broker refuses alice again
    deleted = a.delete_acls([AclBindingFilter(ResourceType.TOPIC, "secured", ResourcePatternType.LITERAL,
                                              None, None, AclOperation.ANY, AclPermissionType.ANY)])
    assert [list(f.result(timeout=30)) for f in deleted.values()] == [[literal]]
    assert zk.exists("/kafka-acl/Topic/secured") is None        # an empty resource's znode goes, as Kafka's
    for n in (1, 2, 3):
        wait_until(lambda n=n: topic_error_for_alice(cluster, n, "secured") == ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                   what=f"broker {n} refuses alice again")


def test_acls_written_by_kafkas_tools_are_applied(cluster):
    """An ACL znode and notification written as Kafka 3.9's AclAuthorizer writes them (by another
    tool on the same ZooKeeper) reach every broker."""
    zk = cluster.zk.zk
    a = admin(cluster)
    _result(a.create_topics([NewTopic("by-zk", 1, 1)]))
    zk.create("/kafka-acl/Topic/by-zk", b'{"version":1,"acls":[{"host":"*","permissionType":"Allow",'
                                        b'"operation":"Read","principal":"User:alice"}]}', makepath=True)
    zk.create("/kafka-acl-changes/acl_changes_", b"Topic:by-zk", sequence=True)
    for n in (1, 2, 3):       # READ implies DESCRIBE
        wait_until(lambda n=n: topic_error_for_alice(cluster, n, "by-zk") == 0, what=f"broker {n} allows alice")


def scram_ok(cluster, n, user, password, mechanism="SCRAM-SHA-256"):
    try:
        asyncio.run(_at_broker(cluster, n, user, mechanism, password, MetadataRequest(topics=[]), 12))
        return True
    except Exception as e:      # noqa: BLE001 - a refused authentication
        if "uthentication" not in str(e):
            raise
        return False


def test_scram_user_created_through_one_broker_authenticates_everywhere_and_after_restart(cluster):
    assert not scram_ok(cluster, 3, "carol", "carol-secret")
    a = admin(cluster, 1)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    _result(a.alter_user_scram_credentials([UserScramCredentialUpsertion("carol", info, b"carol-secret")]))
    doc = json.loads(cluster.zk.zk.get("/config/users/carol")[0])
    assert doc["version"] == 1 and list(doc["config"]) == ["SCRAM-SHA-256"]
    parts = dict(kv.split("=", 1) for kv in doc["config"]["SCRAM-SHA-256"].split(","))
    assert list(parts) == ["salt", "stored_key", "server_key", "iterations"] and parts["iterations"] == "4096"
    for n in (1, 2, 3):
        wait_until(lambda n=n: scram_ok(cluster, n, "carol", "carol-secret"), what=f"carol at broker {n}")
        assert not scram_ok(cluster, n, "carol", "wrong")
    described = _result(a.describe_user_scram_credentials(["carol"]))
    assert described["carol"].scram_credential_infos[0].iterations == 4096

    # a broker restarted keeps every setting: the SCRAM user, an ACL, a dynamic config
    _result(a.create_acls([AclBinding(ResourceType.TOPIC, "kept", ResourcePatternType.LITERAL, "User:alice", "*",
                                      AclOperation.DESCRIBE, AclPermissionType.ALLOW)]))
    _result(a.create_topics([NewTopic("kept", 1, 3)]))
    cluster.stop(3)
    cluster.start_broker(3)
    assert scram_ok(cluster, 3, "carol", "carol-secret")
    assert topic_error_for_alice(cluster, 3, "kept") == 0

    # deleted through broker 2: refused everywhere
    from confluent_kafka.admin import UserScramCredentialDeletion
    a2 = admin(cluster, 2)
    _result(a2.alter_user_scram_credentials([UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)]))
    assert json.loads(cluster.zk.zk.get("/config/users/carol")[0])["config"] == {}
    for n in (1, 2, 3):
        wait_until(lambda n=n: not scram_ok(cluster, n, "carol", "carol-secret"), what=f"carol refused at broker {n}")


def kgroup_cli(*args):
    return subprocess.run([sys.executable, "-m", "kgroup", *args], capture_output=True, text=True, timeout=60)


def broker_config(cluster, n, key):
    res = ConfigResource(ResourceType.BROKER, str(n))
    an = admin(cluster, n)      # kept: the futures need their client alive
    entries = an.describe_configs([res])[res].result(timeout=30)
    source = entries[key].source
    return entries[key].value, int(getattr(source, "value", source))


def test_dynamic_broker_configs_cluster_default_and_per_broker(cluster):
    key = "log.cleaner.backoff.ms"
    # the cluster default through broker 1 (kafka-configs.sh --entity-default; confluent-kafka's
    # AdminClient refuses an empty resource name)
    r = kgroup_cli("configs", "--bootstrap-server", cluster.broker(1).bootstrap_servers, "--entity-type", "brokers",
                   "--entity-default", "--alter", "--add-config", f"{key}=20000")
    assert (r.returncode, r.stdout.strip()) == (0, "Completed updating default config for brokers in the cluster."), \
        r.stderr
    assert json.loads(cluster.zk.zk.get("/config/brokers/<default>")[0]) == {"version": 1, "config": {key: "20000"}}
    changes = [json.loads(cluster.zk.zk.get(f"/config/changes/{c}")[0]) for c in cluster.zk.zk.get_children("/config/changes")]
    assert {"version": 2, "entity_path": "brokers/<default>"} in changes
    for n in (1, 2, 3):
        wait_until(lambda n=n: broker_config(cluster, n, key) == ("20000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
                   what=f"broker {n} has the cluster default")
    one = ConfigResource(ResourceType.BROKER, "2", incremental_configs=[
        ConfigEntry(key, "30000", incremental_operation=AlterConfigOpType.SET)])
    a2 = admin(cluster, 2)
    _result(a2.incremental_alter_configs([one]))
    assert json.loads(cluster.zk.zk.get("/config/brokers/2")[0]) == {"version": 1, "config": {key: "30000"}}
    assert broker_config(cluster, 2, key) == ("30000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    time.sleep(0.5)
    for n in (1, 3):
        assert broker_config(cluster, n, key) == ("20000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    # the default deleted through broker 3: broker 2 keeps its own, the others are back to Kafka's default
    r = kgroup_cli("configs", "--bootstrap-server", cluster.broker(3).bootstrap_servers, "--entity-type", "brokers",
                   "--entity-default", "--alter", "--delete-config", key)
    assert r.returncode == 0, r.stderr
    for n in (1, 3):
        wait_until(lambda n=n: broker_config(cluster, n, key) == ("15000", ConfigSource.DEFAULT_CONFIG.value),
                   what=f"broker {n} back to the default")
    assert broker_config(cluster, 2, key) == ("30000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)


def _raw(cluster, n, request, version):
    raw = RawClient(cluster.broker(n).port)
    try:
        return raw.request(request, version)
    finally:
        raw.close()


def group_coordinator(cluster, group):
    deadline = time.monotonic() + 30
    while True:
        co = _raw(cluster, 1, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4).coordinators[0]
        if co.error_code == 0:
            return co.node_id
        assert time.monotonic() < deadline, co
        time.sleep(0.2)


def test_group_config_set_through_another_broker_applies_at_the_coordinator(cluster):
    group = "billing-cfg"
    a = admin(cluster)
    _result(a.create_topics([NewTopic("cfg-topic", 2, 3)]))
    coordinator = group_coordinator(cluster, group)
    other = next(n for n in (1, 2, 3) if n != coordinator)
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    resp = _raw(cluster, other, IncrementalAlterConfigsRequest(validate_only=False, resources=[R(
        resource_type=32, resource_name=group, configs=[
            R.AlterableConfig(name="consumer.heartbeat.interval.ms", config_operation=0, value="7000")])]), 1)
    assert [r.error_code for r in resp.responses] == [0]
    assert json.loads(cluster.zk.zk.get(f"/config/groups/{group}")[0]) == {
        "version": 1, "config": {"consumer.heartbeat.interval.ms": "7000"}}
    D = DescribeConfigsRequest.DescribeConfigsResource

    def described(n):
        r = _raw(cluster, n, DescribeConfigsRequest(resources=[D(resource_type=32, resource_name=group,
                                                                  configuration_keys=["consumer.heartbeat.interval.ms"])]), 4)
        (entry,) = r.results[0].configs
        return entry.value, entry.config_source
    for n in (1, 2, 3):
        wait_until(lambda n=n: described(n) == ("7000", 8), what=f"broker {n} describes the group config")   # GROUP_CONFIG
    # the coordinator gives a joining KIP-848 member the group's heartbeat interval
    hb = _raw(cluster, coordinator, ConsumerGroupHeartbeatRequest(
        group_id=group, member_id="", member_epoch=0, rebalance_timeout_ms=30000,
        subscribed_topic_names=["cfg-topic"], server_assignor="uniform", topic_partitions=[]), 0)
    assert (hb.error_code, hb.heartbeat_interval_ms) == (0, 7000)


def finalized_at(cluster, n):
    async def get():
        b = cluster.broker(n)
        conn = BrokerConnection("127.0.0.1", b.port, node_id=n, client_id="features-test")
        await conn.connect()
        conn.close()
        return conn.finalized_features
    return asyncio.run(get())


def test_feature_update_through_one_broker_is_in_every_api_versions(cluster):
    assert all(finalized_at(cluster, n).get("share.version") == 1 for n in (1, 2, 3))
    epoch = cluster.zk.zk.get("/feature")[1].version
    r = kgroup_cli("features", "--bootstrap-server", cluster.broker(2).bootstrap_servers, "downgrade",
                   "--feature", "share.version=0")
    assert (r.returncode, r.stdout.strip()) == (0, "share.version was downgraded to 0."), r.stderr
    doc = json.loads(cluster.zk.zk.get("/feature")[0])
    assert doc["version"] == 2 and doc["status"] == 1 and "share.version" not in doc["features"]
    assert doc["features"]["group.version"] == {"max_version_level": 1}
    for n in (1, 2, 3):
        wait_until(lambda n=n: "share.version" not in finalized_at(cluster, n), what=f"broker {n} without share.version")
    r = kgroup_cli("features", "--bootstrap-server", cluster.broker(3).bootstrap_servers, "upgrade",
                   "--feature", "share.version=1")
    assert (r.returncode, r.stdout.strip()) == (0, "share.version was upgraded to 1."), r.stderr
    for n in (1, 2, 3):
        wait_until(lambda n=n: finalized_at(cluster, n).get("share.version") == 1, what=f"broker {n} with share.version=1")
    r = kgroup_cli("features", "--bootstrap-server", cluster.broker(1).bootstrap_servers, "describe")
    assert f"Epoch: {epoch + 2}" in r.stdout, r.stdout


def test_client_metrics_subscription_is_the_clusters(cluster):
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    resp = _raw(cluster, 1, IncrementalAlterConfigsRequest(validate_only=False, resources=[R(
        resource_type=16, resource_name="all-clients", configs=[
            R.AlterableConfig(name="metrics", config_operation=0, value="org.apache.kafka.producer."),
            R.AlterableConfig(name="interval.ms", config_operation=0, value="60000")])]), 1)
    assert [r.error_code for r in resp.responses] == [0]
    assert json.loads(cluster.zk.zk.get("/config/client-metrics/all-clients")[0]) == {
        "version": 1, "config": {"metrics": "org.apache.kafka.producer.", "interval.ms": "60000"}}
    D = DescribeConfigsRequest.DescribeConfigsResource

    def described(n):
        r = _raw(cluster, n, DescribeConfigsRequest(resources=[D(resource_type=16, resource_name="all-clients",
                                                                  configuration_keys=["interval.ms"])]), 4)
        return [(c.name, c.value) for c in r.results[0].configs]
    for n in (2, 3):
        wait_until(lambda n=n: described(n) == [("interval.ms", "60000")], what=f"broker {n} has the subscription")


def test_acl_created_while_zookeeper_is_down_lands_when_it_is_back(cluster):
    """The answer waits for the ZooKeeper write, which waits out the lost connection."""
    a = admin(cluster, 1)
    _result(a.create_topics([NewTopic("outage", 1, 3)]))
    binding = AclBinding(ResourceType.TOPIC, "outage", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    cluster.stop_zookeeper()
    try:
        futures = a.create_acls([binding])
        time.sleep(2)
        assert not any(f.done() for f in futures.values())
    finally:
        cluster.start_zookeeper()
    _result(futures)
    assert cluster.zk.zk.exists("/kafka-acl/Topic/outage") is not None
    for n in (1, 2, 3):
        wait_until(lambda n=n: topic_error_for_alice(cluster, n, "outage") == 0, timeout=30,
                   what=f"broker {n} allows alice")


def test_scram_user_written_with_kgroup_configs_zookeeper(cluster):
    """kafka-configs.sh --zookeeper's way, for users that must exist before any broker runs: the
    znode and its notification, applied by the running brokers too."""
    r = kgroup_cli("configs", "--zookeeper", cluster.zookeeper.connect, "--alter", "--entity-type", "users",
                   "--entity-name", "dave", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=dave-secret]")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "Completed updating config for entity: user-principal 'dave'."
    doc = json.loads(cluster.zk.zk.get("/config/users/dave")[0])
    assert list(doc["config"]) == ["SCRAM-SHA-512"] and doc["config"]["SCRAM-SHA-512"].endswith(",iterations=8192")
    for n in (1, 2, 3):
        wait_until(lambda n=n: scram_ok(cluster, n, "dave", "dave-secret", "SCRAM-SHA-512"), what=f"dave at broker {n}")
    r = kgroup_cli("configs", "--zookeeper", cluster.zookeeper.connect, "--alter", "--entity-type", "topics",
                   "--entity-name", "t", "--add-config", "retention.ms=1")
    assert r.returncode == 2 and "--bootstrap-server option must be specified" in r.stderr


def test_scram_inter_broker_user_from_zookeeper(tmp_path):
    """A cluster whose only listener is SASL_PLAINTEXT with SCRAM-SHA-512 between brokers: the
    inter-broker user's credentials are in ZooKeeper before the brokers start (KafkaCluster writes
    them as kgroup configs --zookeeper does), and replication works on them."""
    users = {"broker": "broker-secret", "alice": "alice-secret"}
    with KafkaCluster(3, tmp_path, {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                    "super.users": "User:broker", "offsets.topic.num.partitions": 1},
                      listeners=("SASL_PLAINTEXT",), users=users, inter_broker_user="broker",
                      inter_broker_mechanism="SCRAM-SHA-512") as c:
        assert json.loads(c.zk.zk.get("/config/users/broker")[0])["config"].keys() == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
        c.create_topic("replicated", partitions=1, replication_factor=3)
        from confluent_kafka import Producer
        p = Producer({**c.client_config("broker", "SCRAM-SHA-512"), "acks": "all"})
        for i in range(10):
            p.produce("replicated", str(i).encode())
        assert p.flush(30) == 0
        c.wait_for(lambda: sorted(c.partition_state("replicated", 0).isr) == [1, 2, 3], 30, what="a full ISR")
