"""`kgroup topics --alter --partitions`, `kgroup configs --describe/--alter` and
`kgroup delete-records` (shaped like kafka-topics.sh, kafka-configs.sh, kafka-delete-records.sh)."""
import json
import subprocess
import sys

from tests.broker.test_cli import kgroup
from tests.conftest import ROOT


def test_topics_alter_partitions(broker):
    bs = broker.bootstrap
    assert kgroup("topics", "--bootstrap-server", bs, "--create", "--topic", "t", "--partitions", "2").returncode == 0
    r = kgroup("topics", "--bootstrap-server", bs, "--alter", "--topic", "t", "--partitions", "5")
    assert r.returncode == 0, r.stderr
    r = kgroup("topics", "--bootstrap-server", bs, "--describe", "--topic", "t")
    assert "PartitionCount: 5" in r.stdout, r.stdout
    r = kgroup("topics", "--bootstrap-server", bs, "--alter", "--topic", "t", "--partitions", "3")
    assert r.returncode == 1 and "currently has 5 partition(s); 3 would not be an increase" in r.stderr
    r = kgroup("topics", "--bootstrap-server", bs, "--alter", "--topic", "nope", "--partitions", "3", "--if-exists")
    assert r.returncode == 0


def test_configs_describe_and_alter(broker):
    bs = broker.bootstrap
    assert kgroup("topics", "--bootstrap-server", bs, "--create", "--topic", "c").returncode == 0
    r = kgroup("configs", "--bootstrap-server", bs, "--entity-type", "topics", "--entity-name", "c", "--alter",
               "--add-config", "retention.ms=5000,cleanup.policy=[compact,delete],min.cleanable.dirty.ratio=0.1")
    assert (r.returncode, r.stdout.strip()) == (0, "Completed updating config for topic c."), r.stderr
    r = kgroup("configs", "--bootstrap-server", bs, "--topic", "c", "--describe")
    lines = r.stdout.splitlines()
    assert lines[0] == "Dynamic configs for topic c are:"
    assert "  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000, " \
           "STATIC_BROKER_CONFIG:log.retention.ms=604800000}" not in lines   # log.retention.ms is unset
    assert any(line.startswith("  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000")
               for line in lines), lines
    assert any(line.startswith("  cleanup.policy=compact,delete ") for line in lines)
    assert len(lines) == 4
    r = kgroup("configs", "--bootstrap-server", bs, "--topic", "c", "--alter", "--delete-config", "retention.ms")
    assert r.returncode == 0
    assert not any("retention.ms" in line for line in kgroup("configs", "--bootstrap-server", bs, "--topic", "c",
                                                       "--describe").stdout.splitlines())
    r = kgroup("configs", "--bootstrap-server", bs, "--topic", "c", "--alter", "--add-config", "segment.bytes=1")
    assert r.returncode == 1 and "Value must be at least 14" in r.stderr
    # dynamic broker configs: the cluster default and this broker
    r = kgroup("configs", "--bootstrap-server", bs, "--entity-type", "brokers", "--entity-default", "--alter",
               "--add-config", "log.cleaner.min.cleanable.ratio=0.2")
    assert (r.returncode, r.stdout.strip()) == (0, "Completed updating default config for brokers in the cluster.")
    r = kgroup("configs", "--bootstrap-server", bs, "--entity-type", "brokers", "--entity-default", "--describe")
    assert r.stdout.splitlines()[:2] == ["Default configs for brokers in the cluster are:",
                                         "  log.cleaner.min.cleanable.ratio=0.2 sensitive=false synonyms="
                                         "{DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.min.cleanable.ratio=0.2, "
                                         "DEFAULT_CONFIG:log.cleaner.min.cleanable.ratio=0.5}"]
    r = kgroup("configs", "--bootstrap-server", bs, "--broker", "1", "--alter", "--add-config", "num.partitions=3")
    assert r.returncode == 1 and "Cannot update these configs dynamically" in r.stderr


def test_delete_records_tool(broker, tmp_path):
    bs = broker.bootstrap
    assert kgroup("topics", "--bootstrap-server", bs, "--create", "--topic", "d", "--partitions", "2").returncode == 0
    r = subprocess.run([sys.executable, "-m", "kgroup", "produce", "--bootstrap-server", bs, "--topic", "d"],
                       input="".join(f"line{i}\n" for i in range(20)), cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    from kgroup.client.sync import KafkaAdmin
    admin = KafkaAdmin(bootstrap_servers=bs)
    try:
        ends = admin.list_offsets({("d", 0): -1, ("d", 1): -1})
        end0 = ends[("d", 0)][0]
        spec = tmp_path / "offsets.json"
        spec.write_text(json.dumps({"partitions": [{"topic": "d", "partition": 0, "offset": -1},
                                                   {"topic": "d", "partition": 1, "offset": 10**9}], "version": 1}))
        r = kgroup("delete-records", "--bootstrap-server", bs, "--offset-json-file", str(spec))
        assert r.returncode == 1
        assert r.stdout.splitlines()[:3] == ["Executing records delete operation", "Records delete operation completed:",
                                             f"partition: d-0\tlow_watermark: {end0}"]
        assert "partition: d-1\terror:" in r.stdout
        assert admin.list_offsets({("d", 0): -2})[("d", 0)][0] == end0
    finally:
        admin.close()


def test_configs_for_a_group(broker):
    bs = broker.bootstrap
    r = kgroup("configs", "--bootstrap-server", bs, "--entity-type", "groups", "--entity-name", "g", "--alter",
               "--add-config", "consumer.session.timeout.ms=50000")
    assert (r.returncode, r.stdout.strip()) == (0, "Completed updating config for group g."), r.stderr
    r = kgroup("configs", "--bootstrap-server", bs, "--group", "g", "--describe")
    assert r.stdout.splitlines() == ["Dynamic configs for group g are:",
                                     "  consumer.session.timeout.ms=50000 sensitive=false "
                                     "synonyms={DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000}"]
