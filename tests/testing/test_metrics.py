"""The metrics listener: /metrics in Prometheus' text format, scraped by a real Prometheus
server (Debian's ``prometheus``), whose PromQL answers a real consumer group's lag; the admin
endpoint applies fault-injection commands."""
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from kgroup.testing.broker import KafkaBroker
from tests.harness import free_port

pytestmark = pytest.mark.interop


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


def post(url, obj):
    req = urllib.request.Request(url, data=json.dumps(obj).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def samples(text):
    """{(name, frozenset(labels)): value} of a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        if "{" in head:
            name, labels = head[:-1].split("{", 1)
            pairs = frozenset(tuple(kv.split("=", 1)) for kv in labels.split(",")) if labels else frozenset()
            pairs = frozenset((k, v.strip('"')) for k, v in pairs)
        else:
            name, pairs = head, frozenset()
        out[(name, pairs)] = float(value)
    return out


def test_metrics_off_by_default(kafka_broker):
    assert kafka_broker.broker.http is None and kafka_broker.broker.metrics is None
    assert kafka_broker.broker.request_hook is not None     # the fixture enables fault injection only


def test_no_hook_when_metrics_and_faults_are_off(tmp_path):
    with KafkaBroker(tmp_path / "d", {"kgroup.fault.injection.enable": "false"}) as b:
        assert b.broker.request_hook is None and b.broker.request_counts is None


def test_metrics_text_with_kafka_python_group(tmp_path):
    from kafka import KafkaConsumer, KafkaProducer
    with KafkaBroker(tmp_path / "d", metrics=True) as b:
        b.create_topic("m", partitions=2)
        producer = KafkaProducer(bootstrap_servers=b.bootstrap_servers)
        for i in range(10):
            producer.send("m", value=b"x", partition=i % 2)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer("m", bootstrap_servers=b.bootstrap_servers, group_id="mg",
                                 auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=10000)
        n = 0
        for _ in consumer:
            n += 1
            if n == 10:
                break
        consumer.commit()
        status, ctype, text = get(b.http_url + "/metrics")
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
        s = samples(text)
        assert s[("kafka_consumergroup_members", frozenset({("consumergroup", "mg")}))] == 1
        consumer.close()
        b.produce("m", ["late"] * 3, partition=1)
        s = samples(get(b.http_url + "/metrics")[2])
        lag = {p: s[("kafka_consumergroup_lag", frozenset({("consumergroup", "mg"), ("topic", "m"), ("partition", p)}))]
               for p in ("0", "1")}
        assert lag == {"0": 0, "1": 3}
        assert s[("kafka_consumergroup_lag_sum", frozenset({("consumergroup", "mg"), ("topic", "m")}))] == 3
        assert s[("kafka_topic_partition_current_offset", frozenset({("topic", "m"), ("partition", "1")}))] == 8
        assert s[("kafka_topic_partition_oldest_offset", frozenset({("topic", "m"), ("partition", "1")}))] == 0
        assert s[("kafka_server_group_coordinator_metrics_group_count", frozenset({("protocol", "classic")}))] == 1
        assert s[("kafka_server_group_coordinator_metrics_classic_group_count", frozenset({("state", "Empty")}))] == 1
        assert s[("kafka_server_group_coordinator_metrics_offset_commit_count", frozenset())] == 2
        assert s[("kafka_server_group_coordinator_metrics_group_completed_rebalance_count", frozenset())] >= 1
        assert s[("kafka_log_log_size", frozenset({("topic", "m"), ("partition", "1")}))] > 0
        assert s[("kafka_log_logflushstats_flush_time_seconds_count", frozenset())] >= 1
        commits = [v for (name, labels), v in s.items() if name == "kafka_network_requestmetrics_requests_total"
                   and ("request", "OffsetCommit") in labels]
        assert sum(commits) == 1
        joins = [v for (name, labels), v in s.items()
                 if name == "kafka_network_requestmetrics_requests_total" and ("request", "JoinGroup") in labels]
        assert sum(joins) >= 1
        joins_timed = [v for (name, labels), v in s.items() if name ==
                       "kafka_network_requestmetrics_total_time_seconds_count" and ("request", "JoinGroup") in labels]
        assert sum(joins_timed) == sum(joins)   # every JoinGroup timed (parked until the rebalance's answer)
        timed = [v for (name, labels), v in s.items()
                 if name == "kafka_network_requestmetrics_total_time_seconds_count" and ("request", "Metadata") in labels]
        assert sum(timed) >= 1
        # Offset deletion vs expiration: an OffsetDelete of an Empty group's partition is a deletion.
        from kgroup.protocol.messages.offset_delete import OffsetDeleteRequest
        from tests.harness import RawClient
        T = OffsetDeleteRequest.OffsetDeleteRequestTopic
        c = RawClient(b.port)
        r = c.request(OffsetDeleteRequest(group_id="mg", topics=[T(name="m", partitions=[
            T.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
        assert r.error_code == 0
        s = samples(get(b.http_url + "/metrics")[2])
        assert s[("kafka_server_group_coordinator_metrics_offset_deletion_count", frozenset())] == 1
        assert s[("kafka_server_group_coordinator_metrics_offset_expiration_count", frozenset())] == 0


def test_coordinator_counters_count_batched_commits_from_this_start(tmp_path):
    """Pipelined OffsetCommits, written by the runtime in batches, are each counted; after a
    restart on the same data the counters start at zero (the log's records are history) while
    the retained offsets are still there."""
    from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
    from tests.harness import RawClient
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    counter = "kafka_server_group_coordinator_metrics_offset_commit_count"

    def pipelined_commits(port, n):
        c = RawClient(port)
        for i in range(n):
            c.send(OffsetCommitRequest(group_id=f"simple-{i % 3}", generation_id_or_member_epoch=-1, member_id="",
                                       topics=[T(name="m", partitions=[T.OffsetCommitRequestPartition(
                                           partition_index=i % 2, committed_offset=i, committed_metadata="")])]), 8)
        for _ in range(n):
            c.recv_frame()
        c.sock.close()

    with KafkaBroker(tmp_path / "d", metrics=True) as b:
        b.create_topic("m", partitions=2)
        pipelined_commits(b.port, 200)
        s = samples(get(b.http_url + "/metrics")[2])
        assert s[(counter, frozenset())] == 200
        assert s[("kafka_server_group_coordinator_metrics_offset_count", frozenset())] == 6
        b.restart()
        # __consumer_offsets loads in the background after start and a scrape shows only loaded
        # partitions' offsets: wait for the load (bounded) before comparing.
        deadline = time.monotonic() + 10
        while True:
            s = samples(get(b.http_url + "/metrics")[2])
            if s[("kafka_server_group_coordinator_metrics_offset_count", frozenset())] == 6 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert s[(counter, frozenset())] == 0
        assert s[("kafka_server_group_coordinator_metrics_offset_count", frozenset())] == 6
        pipelined_commits(b.port, 5)
        assert samples(get(b.http_url + "/metrics")[2])[(counter, frozenset())] == 5


def test_admin_faults_endpoint(tmp_path):
    with KafkaBroker(tmp_path / "d", metrics=True) as b:
        status, state = post(b.http_url + "/admin/faults", {"fault": "errors", "api": "Heartbeat",
                                                             "errors": ["REBALANCE_IN_PROGRESS"]})
        assert status == 200 and state["rules"][0]["errors"] == ["REBALANCE_IN_PROGRESS"]
        assert post(b.http_url + "/admin/faults", {"fault": "nope"})[0] == 400
    with KafkaBroker(tmp_path / "e", {"kgroup.fault.injection.enable": "false"}, metrics=True) as b:
        status, body = post(b.http_url + "/admin/faults", {"fault": "list"})
        assert status == 403 and "disabled" in body["error"]


def test_prometheus_scrapes_consumer_lag(tmp_path):
    prometheus = shutil.which("prometheus")
    assert prometheus, "prometheus is not installed (scripts/install-test-deps.sh installs Debian's package)"
    with KafkaBroker(tmp_path / "d", metrics=True) as b:
        b.create_topic("lagging", partitions=3)
        b.produce("lagging", [f"v{i}" for i in range(30)], partition=0)
        b.produce("lagging", [f"w{i}" for i in range(12)], partition=2)
        b.consume("lagging", 25, group="reporting")    # commits what it returns, per partition
        committed = b.committed_offsets("reporting")
        hw = {0: 30, 1: 0, 2: 12}
        expected = sum(hw[tp.partition] - off for tp, off in committed.items() if off is not None and off >= 0)
        port = free_port()
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: kgroup\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{b.http_port}']\n")
        proc = subprocess.Popen([prometheus, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                 f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "wb"))
        try:
            query = urllib.parse.quote('sum(kafka_consumergroup_lag{consumergroup="reporting",topic="lagging"})')
            deadline = time.monotonic() + 60
            value = None
            while time.monotonic() < deadline:
                try:
                    _, _, body = get(f"http://127.0.0.1:{port}/api/v1/query?query={query}", timeout=5)
                    result = json.loads(body)["data"]["result"]
                    if result:
                        value = float(result[0]["value"][1])
                        break
                except (urllib.error.URLError, ConnectionError, OSError):
                    pass
                assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()
                time.sleep(0.5)
            assert value == expected and expected > 0, (value, expected)
            # The target is healthy and Prometheus read Kafka's group coordinator metrics too.
            _, _, body = get(f"http://127.0.0.1:{port}/api/v1/targets")
            target = json.loads(body)["data"]["activeTargets"][0]
            assert target["health"] == "up", target
            q = urllib.parse.quote('kafka_server_group_coordinator_metrics_group_count{protocol="classic"}')
            _, _, body = get(f"http://127.0.0.1:{port}/api/v1/query?query={q}")
            assert float(json.loads(body)["data"]["result"][0]["value"][1]) == 1
        finally:
            proc.terminate()
            proc.wait(10)


def test_metrics_listener_is_validated():
    from kgroup.broker.config import BrokerConfig, ConfigError
    assert BrokerConfig({"metrics.listener": "http://127.0.0.1:9404"})["metrics.listener"] == "http://127.0.0.1:9404"
    with pytest.raises(ConfigError, match="metrics.listener"):
        BrokerConfig({"metrics.listener": "127.0.0.1:9404"})


@pytest.mark.parametrize("faults", ["false", "true"])
def test_requests_counted_exactly_and_one_in_sample_every_timed(tmp_path, faults):
    # Metrics alone: the server counts each request itself (no request layer); with fault
    # injection on, the metrics request layer counts. Both count every request and time the
    # 1st, (SAMPLE_EVERY + 1)th, ... of each API and version.
    from kgroup.broker.metrics import SAMPLE_EVERY
    from kgroup.protocol.messages.heartbeat import HeartbeatRequest
    from tests.harness import RawClient
    with KafkaBroker(tmp_path / "d", {"kgroup.fault.injection.enable": faults}, metrics=True) as b:
        assert (b.broker.request_counts is b.broker.metrics.recent) == (faults == "false")
        assert (b.broker.request_hook is None) == (faults == "false")
        c = RawClient(b.port)
        labels = frozenset({("request", "Heartbeat"), ("version", "0")})
        sent = 0
        # the 1st, (SAMPLE_EVERY + 1)th and (2 SAMPLE_EVERY + 1)th timed; no more up to 3 SAMPLE_EVERY
        for total, timed in ((2 * SAMPLE_EVERY + 1, 3), (3 * SAMPLE_EVERY, 3)):
            for _ in range(total - sent):
                c.request(HeartbeatRequest(group_id="nobody", generation_id=1, member_id="m"), 0)
            sent = total
            s = samples(get(b.http_url + "/metrics")[2])
            assert s[("kafka_network_requestmetrics_requests_total", labels)] == total
            assert s[("kafka_network_requestmetrics_total_time_seconds_count", labels)] == timed
            assert s[("kafka_network_requestmetrics_total_time_seconds_bucket", labels | {("le", "+Inf")})] == timed
