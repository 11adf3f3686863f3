"""ConsumerGroupHeartbeat validation (Kafka 4.3's throwIfConsumerGroupHeartbeatRequestIsInvalid and
throwIfRegularExpressionIsInvalid): each rule, its error code and Kafka's message."""
import pytest

from kgroup.coordinator.consumer_group.validation import check_regex, validate_heartbeat
from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest as Req

ASSIGNORS = ("uniform", "range")


def join(**kw):
    base = dict(group_id="g", member_id="m-uuid", member_epoch=0, rebalance_timeout_ms=300000,
                subscribed_topic_names=["t"], topic_partitions=[])
    base.update(kw)
    return Req(**base)


def refused(req, version=1):
    with pytest.raises(KafkaError) as e:
        validate_heartbeat(req, version, ASSIGNORS)
    return e.value.code, str(e.value)


@pytest.mark.parametrize("req,version,message", [
    (join(member_id=""), 1, "MemberId can't be empty."),              # KIP-1082: v1 joins carry an id
    (Req(group_id="g", member_id=" ", member_epoch=3), 0, "MemberId can't be empty."),
    (Req(group_id="g", member_id="", member_epoch=-1), 0, "MemberId can't be empty."),
    (join(group_id="  "), 1, "GroupId can't be empty."),
    (join(instance_id=""), 1, "InstanceId can't be empty."),
    (join(rack_id="\t"), 1, "RackId can't be empty."),
    (join(rebalance_timeout_ms=-1), 1, "RebalanceTimeoutMs must be provided in first request."),
    (join(topic_partitions=None), 1, "TopicPartitions must be empty when (re-)joining."),
    (join(topic_partitions=[Req.TopicPartitions(topic_id=b"\x01" * 16, partitions=[0])]), 1,
     "TopicPartitions must be empty when (re-)joining."),
    (join(subscribed_topic_names=None), 1,
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    (Req(group_id="g", member_id="m", member_epoch=-2), 1, "InstanceId can't be null."),
    (Req(group_id="g", member_id="m", member_epoch=-3), 1, "MemberEpoch is invalid."),
])
def test_invalid_requests(req, version, message):
    assert refused(req, version) == (ErrorCode.INVALID_REQUEST, message)


def test_valid_requests():
    validate_heartbeat(join(member_id=""), 0, ASSIGNORS)       # v0: the coordinator picks the id
    validate_heartbeat(join(subscribed_topic_names=None, subscribed_topic_regex="t.*"), 1, ASSIGNORS)
    # subscribed to nothing (Kafka 4.0+, KAFKA-18095)
    validate_heartbeat(join(subscribed_topic_names=[]), 1, ASSIGNORS)
    validate_heartbeat(join(subscribed_topic_names=None, subscribed_topic_regex=""), 1, ASSIGNORS)
    validate_heartbeat(Req(group_id="g", member_id="m", member_epoch=7), 1, ASSIGNORS)    # nulls: unchanged
    validate_heartbeat(Req(group_id="g", member_id="m", member_epoch=-2, instance_id="i"), 1, ASSIGNORS)
    validate_heartbeat(Req(group_id="g", member_id="m", member_epoch=-1), 1, ASSIGNORS)


def test_unknown_assignor():
    assert refused(join(server_assignor="sticky")) == (
        ErrorCode.UNSUPPORTED_ASSIGNOR, "ServerAssignor sticky is not supported. Supported assignors: uniform, range.")
    validate_heartbeat(join(server_assignor="range"), 1, ASSIGNORS)


@pytest.mark.parametrize("regex", ["orders-(", "a{2,1}", "(?=x)", "(a)\\1", "[z-a]"])
def test_invalid_regex(regex):
    with pytest.raises(KafkaError) as e:
        check_regex(regex)
    assert e.value.code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert str(e.value).startswith(f"SubscribedTopicRegex `{regex}` is not a valid regular expression: ")


def test_valid_regex_matches_whole_names():
    p = check_regex("orders-.*")
    assert p.fullmatch("orders-eu") and not p.fullmatch("xorders-eu")
