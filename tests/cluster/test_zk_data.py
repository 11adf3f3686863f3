"""Kafka's znode JSON (ZkData): what Kafka 3.9 writes decodes, and what kgroup writes has Kafka's
fields."""
import json

from hypothesis import given, strategies as st

from kgroup.cluster import zk_data as zd


def test_kafka_broker_registration_decodes():
    data = json.dumps({"features": {}, "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
                       "endpoints": ["PLAINTEXT://host1:9092", "SSL://host1:9093"], "jmx_port": -1,
                       "port": 9092, "host": "host1", "version": 5, "timestamp": "1700000000000",
                       "rack": "dc1"}).encode()
    reg = zd.decode_broker(7, data, czxid=42)
    assert reg.broker_id == 7 and reg.rack == "dc1" and reg.czxid == 42
    assert reg.endpoint("SSL") == zd.EndPoint("SSL", "host1", 9093, "SSL")
    assert reg.endpoint(None).port == 9092


def test_broker_registration_fields():
    eps = [zd.EndPoint("CLIENT", "h", 1, "SASL_SSL"), zd.EndPoint("PLAINTEXT", "h", 2, "PLAINTEXT")]
    doc = json.loads(zd.encode_broker(eps, "r1"))
    assert doc["version"] == 5 and doc["host"] == "h" and doc["port"] == 2 and doc["rack"] == "r1"
    assert doc["endpoints"] == ["CLIENT://h:1", "PLAINTEXT://h:2"]
    assert doc["listener_security_protocol_map"] == {"CLIENT": "SASL_SSL", "PLAINTEXT": "PLAINTEXT"}
    assert zd.decode_broker(1, zd.encode_broker(eps, "r1")).endpoints == tuple(eps)


def test_partition_state_and_topic_and_controller():
    kafka_state = b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":7,"isr":[2,1]}'
    assert zd.decode_partition_state(kafka_state, 9) == zd.LeaderAndIsr(2, 7, (2, 1), 3, 9)
    assert json.loads(zd.encode_partition_state(zd.LeaderAndIsr(2, 7, (2, 1), 0), 3)) == json.loads(kafka_state)
    kafka_topic = (b'{"partitions":{"0":[1,2],"1":[2,1]},"topic_id":"mUyz2m3ZTnK8Duzl5r0KUw",'
                   b'"adding_replicas":{},"removing_replicas":{},"version":3}')
    assignment, tid = zd.decode_topic(kafka_topic)
    assert assignment == {0: (1, 2), 1: (2, 1)} and zd.uuid_to_str(tid) == "mUyz2m3ZTnK8Duzl5r0KUw"
    assert json.loads(zd.encode_topic({0: [1, 2], 1: [2, 1]}, tid)) == json.loads(kafka_topic)
    assert zd.decode_controller(b'{"version":1,"brokerid":3,"timestamp":"1"}') == 3
    assert json.loads(zd.encode_controller(3, 5)) == {"version": 2, "brokerid": 3, "timestamp": "5",
                                                      "kraftControllerEpoch": -1}
    assert zd.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    assert zd.partition_state_path("t", 4) == "/brokers/topics/t/partitions/4/state"


@given(st.binary(min_size=16, max_size=16))
def test_uuid_round_trip(b):
    assert zd.uuid_from_str(zd.uuid_to_str(b)) == b
