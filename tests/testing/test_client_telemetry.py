"""Client metrics (KIP-714) with a real client: a CLIENT_METRICS subscription set with
IncrementalAlterConfigs, librdkafka (confluent-kafka) fetching it with GetTelemetrySubscriptions and
pushing its metrics with PushTelemetry, which /metrics then shows per client instance; the
protocol's own checks over the wire; the APIs offered only with a metrics listener."""
import time
import uuid

from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.api_versions import ApiVersionsRequest
from kgroup.protocol.messages.describe_configs import DescribeConfigsRequest
from kgroup.protocol.messages.get_telemetry_subscriptions import GetTelemetrySubscriptionsRequest
from kgroup.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kgroup.protocol.messages.list_config_resources import ListConfigResourcesRequest
from kgroup.protocol.messages.push_telemetry import PushTelemetryRequest
from kgroup.testing import KafkaBroker
from tests.harness import RawClient
from tests.testing.test_metrics import get, samples

R = IncrementalAlterConfigsRequest.AlterConfigsResource


def _subscribe(c, name, **configs):
    ops = [R.AlterableConfig(name=k.replace("_", "."), config_operation=0, value=v) for k, v in configs.items()]
    r = c.request(IncrementalAlterConfigsRequest(resources=[R(resource_type=16, resource_name=name, configs=ops)]), 1)
    return r.responses[0].error_code, r.responses[0].error_message


def test_telemetry_apis_need_a_metrics_listener(tmp_path):
    with KafkaBroker(tmp_path / "d") as b:
        keys = {k.api_key for k in RawClient(b.port).request(ApiVersionsRequest(client_software_name="raw", client_software_version="1"), 3).api_keys}
        assert 71 not in keys and 72 not in keys
    with KafkaBroker(tmp_path / "e", metrics=True) as b:
        keys = {k.api_key for k in RawClient(b.port).request(ApiVersionsRequest(client_software_name="raw", client_software_version="1"), 3).api_keys}
        assert {71, 72} <= keys


def test_subscription_protocol_checks(tmp_path):
    with KafkaBroker(tmp_path / "d", metrics=True) as b:
        c = RawClient(b.port, client_id="raw-telemetry")
        assert _subscribe(c, "bad", interval_ms="50")[0] == E.INVALID_REQUEST
        assert _subscribe(c, "bad", match="colour=red")[0] == E.INVALID_CONFIG
        assert _subscribe(c, "other", metrics="org.apache.kafka.producer.", interval_ms="60000",
                          match="client_id=someone-else") == (0, None)
        assert _subscribe(c, "mine", metrics="org.apache.kafka.consumer.,org.apache.kafka.producer.",
                          interval_ms="1000", match="client_id=raw-.*") == (0, None)
        r = c.request(ListConfigResourcesRequest(resource_types=[]), 0)
        assert sorted(x.resource_name for x in r.config_resources) == ["mine", "other"]
        d = c.request(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=16, resource_name="mine", configuration_keys=None)]), 4).results[0]
        assert {e.name: (e.value, e.config_source) for e in d.configs}["interval.ms"] == ("1000", 7)
        sub = c.request(GetTelemetrySubscriptionsRequest(client_instance_id=bytes(16)), 0)
        assert sub.error_code == 0 and sub.client_instance_id != bytes(16)
        assert (sub.push_interval_ms, sub.requested_metrics) == (1000, ["org.apache.kafka.consumer.",
                                                                         "org.apache.kafka.producer."])
        assert sub.accepted_compression_types == [4, 3, 1, 2] and sub.delta_temporality
        again = c.request(GetTelemetrySubscriptionsRequest(client_instance_id=sub.client_instance_id), 0)
        assert again.error_code == E.THROTTLING_QUOTA_EXCEEDED           # before the push interval

        def push(sid, **kw):
            return c.request(PushTelemetryRequest(client_instance_id=sub.client_instance_id, subscription_id=sid,
                                                  compression_type=0, metrics=b"", **kw), 0).error_code
        assert push(sub.subscription_id + 1) == E.UNKNOWN_SUBSCRIPTION_ID
        assert push(sub.subscription_id) == E.THROTTLING_QUOTA_EXCEEDED    # the first push was that one
        time.sleep(1.1)
        assert push(sub.subscription_id, terminating=True) == 0
        assert push(sub.subscription_id) == E.INVALID_REQUEST             # nothing after terminating
        assert c.request(PushTelemetryRequest(client_instance_id=bytes(16)), 0).error_code == E.INVALID_REQUEST


def test_librdkafka_pushes_its_metrics(tmp_path):
    from confluent_kafka import Producer
    with KafkaBroker(tmp_path / "d", metrics=True) as b:
        b.create_topic("tm", partitions=1)
        c = RawClient(b.port)
        assert _subscribe(c, "all", metrics="*", interval_ms="500") == (0, None)
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "client.id": "telemetry-app",
                      "enable.metrics.push": True})
        try:
            deadline = time.monotonic() + 30
            found = {}
            while time.monotonic() < deadline:
                p.produce("tm", b"v")
                p.poll(0.2)
                found = {labels: v for (name, labels), v in samples(get(b.http_url + "/metrics")[2]).items()
                         if name == "kgroup_client_telemetry" and ("client_id", "telemetry-app") in labels}
                if any(("metric", "org.apache.kafka.producer.connection.creation.total") in labels
                       for labels in found) or len(found) > 5:
                    break
            assert found, "librdkafka pushed no metrics"
            instance_ids = {v for labels in found for k, v in labels if k == "client_instance_id"}
            assert len(instance_ids) == 1 and uuid.UUID(instance_ids.pop())
            assert any(dict(labels)["metric"].startswith("org.apache.kafka.producer.") for labels in found)
            assert any(dict(labels).get("client_software_name") == "confluent-kafka-python" for labels in found) \
                or all(dict(labels).get("client_software_name") for labels in found)
        finally:
            p.flush(5)
