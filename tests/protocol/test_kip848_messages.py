"""KIP-848 messages on the wire, byte for byte where the layout is new to the codec: the nullable
``Assignment`` struct of ConsumerGroupHeartbeatResponse carries Kafka's int8 marker (-1 null, 1
present), and the heartbeat request's "unchanged" fields are nulls."""
import uuid

from kgroup.broker.handlers import advertised
from kgroup.protocol.api import API_BY_KEY, ApiKey
from kgroup.protocol.messages.consumer_group_heartbeat import (ConsumerGroupHeartbeatRequest,
                                                               ConsumerGroupHeartbeatResponse)

TOPIC = uuid.UUID("12345678-1234-5678-1234-567812345678").bytes


def test_response_null_assignment_is_a_minus_one_marker():
    raw = ConsumerGroupHeartbeatResponse(member_epoch=3, heartbeat_interval_ms=5000).to_bytes(0)
    # throttle, error, error message (compact null), member id (compact null), epoch, interval,
    # assignment marker -1, no tagged fields
    assert raw == (b"\x00\x00\x00\x00" b"\x00\x00" b"\x00" b"\x00" b"\x00\x00\x00\x03"
                   b"\x00\x00\x13\x88" b"\xff" b"\x00")
    assert ConsumerGroupHeartbeatResponse.from_bytes(raw, 0).assignment is None


def test_response_present_assignment():
    R = ConsumerGroupHeartbeatResponse
    resp = R(member_id="m", member_epoch=1, heartbeat_interval_ms=5000,
             assignment=R.Assignment(topic_partitions=[R.TopicPartitions(topic_id=TOPIC, partitions=[0, 2])]))
    raw = resp.to_bytes(1)
    tail = (b"\x01"                       # assignment present
            b"\x02" + TOPIC +              # one topic
            b"\x03\x00\x00\x00\x00\x00\x00\x00\x02"   # partitions [0, 2]
            b"\x00"                        # topic tags
            b"\x00"                        # assignment tags
            b"\x00")                       # response tags
    assert raw.endswith(tail)
    assert R.from_bytes(raw, 1) == resp
    # Kafka reads any negative marker as null
    assert R.from_bytes(raw[:-len(tail)] + b"\x80\x00", 1).assignment is None


def test_request_defaults_mean_unchanged():
    req = ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=5)
    assert (req.instance_id, req.rack_id, req.rebalance_timeout_ms, req.subscribed_topic_names,
            req.subscribed_topic_regex, req.server_assignor, req.topic_partitions) == (
        None, None, -1, None, None, None, None)
    back = ConsumerGroupHeartbeatRequest.from_bytes(req.to_bytes(1), 1)
    assert back == req
    # the regex is v1-only: a v0 encoding does not carry it
    with_regex = ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", subscribed_topic_regex="t.*")
    assert ConsumerGroupHeartbeatRequest.from_bytes(with_regex.to_bytes(0), 0).subscribed_topic_regex is None


def test_registered_and_advertised():
    """The broker answers them: ConsumerGroupHeartbeat v0-1 and ConsumerGroupDescribe v0-1."""
    assert ApiKey.CONSUMER_GROUP_HEARTBEAT in API_BY_KEY and ApiKey.CONSUMER_GROUP_DESCRIBE in API_BY_KEY
    keys = {k: (lo, hi) for k, lo, hi in advertised()}
    assert keys[ApiKey.CONSUMER_GROUP_HEARTBEAT] == (0, 1) and keys[ApiKey.CONSUMER_GROUP_DESCRIBE] == (0, 1)
