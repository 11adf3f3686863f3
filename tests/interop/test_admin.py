"""Real clients' admin operations against kgroup: kafka-python's KafkaAdminClient,
confluent-kafka's AdminClient and kcat -L. None of these may skip in CI."""
import json
import os
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.interop


def test_kafka_python_admin(broker):
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="kp-admin", request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("kp-a", 3, 1), NewTopic("kp-b", 1, 1, topic_configs={"cleanup.policy": "compact"})])
        assert {"kp-a", "kp-b"} <= set(admin.list_topics())
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic("kp-a", 3, 1)])
        desc = {t["name"]: t for t in admin.describe_topics(["kp-a"])}
        assert len(desc["kp-a"]["partitions"]) == 3
        cluster = admin.describe_cluster()
        assert cluster["brokers"][0]["port"] == broker.port
        assert cluster["cluster_id"]
        admin.delete_topics(["kp-a"])
        assert "kp-a" not in admin.list_topics()
        assert "kp-b" in admin.list_topics()
    finally:
        admin.close()


def test_confluent_kafka_admin(broker):
    from confluent_kafka.admin import AdminClient, NewTopic, ConfigResource
    from confluent_kafka import KafkaException
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic("ck-a", num_partitions=2, replication_factor=1),
                                   NewTopic("ck-b", num_partitions=1, replication_factor=1)])
    for f in futures.values():
        f.result(10)
    md = admin.list_topics(timeout=10)
    assert {"ck-a", "ck-b"} <= set(md.topics)
    assert len(md.topics["ck-a"].partitions) == 2
    assert md.cluster_id and list(md.brokers) == [md.controller_id]
    with pytest.raises(KafkaException):
        admin.create_topics([NewTopic("ck-a", num_partitions=2, replication_factor=1)])["ck-a"].result(10)
    bad = admin.create_topics([NewTopic("ck-c", num_partitions=1, replication_factor=3)])["ck-c"]
    with pytest.raises(KafkaException, match="REPLICATION_FACTOR"):
        bad.result(10)
    cluster = admin.describe_cluster(request_timeout=10).result(10)
    assert cluster.cluster_id == md.cluster_id and cluster.nodes[0].port == broker.port
    res = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "ck-a")])
    cfg = list(res.values())[0].result(10)
    assert cfg["cleanup.policy"].value == "delete"
    for f in admin.delete_topics(["ck-a"], operation_timeout=10).values():
        f.result(10)
    assert "ck-a" not in admin.list_topics(timeout=10).topics


def _kcat():
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None and os.environ.get("CI"):
        pytest.fail("kcat is not installed: the test set-up (scripts/install-test-deps.sh) must install it")
    if path is None:
        pytest.fail("kcat is not installed: run `make test` (as root it installs kcat with apt)")
    return path


def test_kcat_metadata(broker):
    from kgroup.protocol.messages.create_topics import CreateTopicsRequest
    from tests.harness import RawClient
    c = RawClient(broker.port)
    CT = CreateTopicsRequest.CreatableTopic
    c.request(CreateTopicsRequest(topics=[CT(name="kcat-topic", num_partitions=4, replication_factor=1)]), 5)
    out = subprocess.run([_kcat(), "-b", broker.bootstrap, "-L", "-J"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    md = json.loads(out.stdout)
    assert md["brokers"][0]["name"].endswith(f":{broker.port}")
    (t,) = [t for t in md["topics"] if t["topic"] == "kcat-topic"]
    assert len(t["partitions"]) == 4
    plain = subprocess.run([_kcat(), "-b", broker.bootstrap, "-L"], capture_output=True, text=True, timeout=60)
    assert "topic \"kcat-topic\" with 4 partitions" in plain.stdout
