"""Fault injection (kgroup/broker/faults.py) through the fixture, ``kgroup inject`` and the wire,
seen by raw requests and by real clients (confluent-kafka, kafka-python)."""
import time

import pytest

from kgroup.cli import main as kgroup_main
from kgroup.client.fault_injection import FaultCommandError, FaultInjectionRefused
from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.describe_groups import DescribeGroupsRequest
from kgroup.protocol.messages.find_coordinator import FindCoordinatorRequest
from kgroup.protocol.messages.heartbeat import HeartbeatRequest
from kgroup.protocol.messages.join_group import JoinGroupRequest
from kgroup.protocol.messages.sync_group import SyncGroupRequest
from kgroup.testing.broker import KafkaBroker
from tests.harness import RawClient

pytestmark = pytest.mark.interop


def find_coordinator(c, group):
    return c.request(FindCoordinatorRequest(key=group), 3)


def join(c, group, session_ms=10000):
    P = JoinGroupRequest.JoinGroupRequestProtocol
    return c.request(JoinGroupRequest(group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=10000,
                                      member_id="", protocol_type="consumer",
                                      protocols=[P(name="range", metadata=b"")]), 3)


def describe(c, group):
    return c.request(DescribeGroupsRequest(groups=[group]), 3).groups[0]


def test_a_broker_without_it_refuses(tmp_path, capsys):
    with KafkaBroker(tmp_path / "d", {"kgroup.fault.injection.enable": "false"}) as b:
        assert b.broker.faults is None
        with pytest.raises(FaultInjectionRefused, match="kgroup.fault.injection.enable=true"):
            b.inject_errors("Heartbeat", ["NOT_COORDINATOR"])
        assert kgroup_main(["inject", "--bootstrap-server", b.bootstrap_servers, "list"]) == 1
        assert "refuses fault injection" in capsys.readouterr().err
        with b.admin() as admin:   # ...and the control topic was not created
            assert "kgroup/fault-injection" not in admin.list_topics(include_internal=True)


def test_error_sequence_by_api_client_and_group(kafka_broker):
    c = RawClient(kafka_broker.port)            # client id "raw-test"
    kafka_broker.inject_errors("FindCoordinator", ["COORDINATOR_NOT_AVAILABLE", 0, "NOT_COORDINATOR"], group="g1")
    kafka_broker.inject_errors("FindCoordinator", ["GROUP_AUTHORIZATION_FAILED"], client_id="someone-else")
    assert find_coordinator(c, "other").error_code == E.NONE          # another group: untouched
    assert find_coordinator(c, "g1").error_code == E.COORDINATOR_NOT_AVAILABLE
    assert find_coordinator(c, "g1").error_code == E.NONE             # 0 lets one through
    assert find_coordinator(c, "g1").error_code == E.NOT_COORDINATOR
    assert find_coordinator(c, "g1").error_code == E.NONE             # the sequence is used up
    state = kafka_broker.inject("list")
    assert state["rules"] == [{"fault": "errors", "api": "FindCoordinator", "client_id": "someone-else",
                               "errors": ["GROUP_AUTHORIZATION_FAILED"]}]
    other = RawClient(kafka_broker.port, client_id="someone-else")
    assert find_coordinator(other, "g1").error_code == E.GROUP_AUTHORIZATION_FAILED
    assert kafka_broker.inject("list")["rules"] == []


def test_bad_commands_are_refused(kafka_broker):
    with pytest.raises(FaultCommandError, match="unknown API"):
        kafka_broker.inject_errors("NoSuchApi", ["NOT_COORDINATOR"])
    with pytest.raises(FaultCommandError, match="unknown error code"):
        kafka_broker.inject_errors("Heartbeat", ["NO_SUCH_ERROR"])
    with pytest.raises(FaultCommandError, match="unknown fault"):
        kafka_broker.inject("explode")


def test_delay(kafka_broker):
    c = RawClient(kafka_broker.port)
    kafka_broker.inject_delay("FindCoordinator", 400, count=1)
    t0 = time.monotonic()
    assert find_coordinator(c, "g").error_code == E.NONE
    assert time.monotonic() - t0 >= 0.4
    t0 = time.monotonic()
    find_coordinator(c, "g")
    assert time.monotonic() - t0 < 0.3


def test_drop_connection_after_n_requests(kafka_broker):
    kafka_broker.drop_connection(after=2, client_id="raw-test")
    c = RawClient(kafka_broker.port)
    find_coordinator(c, "g")
    find_coordinator(c, "g")
    c.send(FindCoordinatorRequest(key="g"), 3)
    assert c.is_closed_by_peer()
    c2 = RawClient(kafka_broker.port)          # used up: the next connection is left alone
    assert find_coordinator(c2, "g").error_code == E.NONE


def test_hold_loading(kafka_broker):
    c = RawClient(kafka_broker.port)
    kafka_broker.hold_loading(600, group="slow")
    assert join(c, "slow").error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert describe(c, "slow").error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert find_coordinator(c, "slow").error_code == E.NONE              # as in Kafka while loading
    assert join(c, "fast").error_code == E.NONE
    time.sleep(0.7)
    assert join(c, "slow").error_code == E.NONE


@pytest.mark.kafka_broker_config(group_min_session_timeout_ms=100)
def test_pause_heartbeat_expiry(kafka_broker):
    c = RawClient(kafka_broker.port)
    j = join(c, "paused", session_ms=300)
    assert j.error_code == E.NONE
    assert c.request(SyncGroupRequest(group_id="paused", generation_id=j.generation_id, member_id=j.member_id,
                                      assignments=[]), 3).error_code == E.NONE
    kafka_broker.pause_heartbeat_expiry()
    time.sleep(1.0)                                                       # > 3 session timeouts, no heartbeat
    assert [m.member_id for m in describe(c, "paused").members] == [j.member_id]
    assert c.request(HeartbeatRequest(group_id="paused", generation_id=j.generation_id, member_id=j.member_id),
                     3).error_code == E.NONE
    kafka_broker.resume_heartbeat_expiry()
    time.sleep(0.8)
    g = describe(c, "paused")
    assert (g.group_state, g.members) == ("Empty", [])


def test_kgroup_inject_cli(kafka_broker, capsys):
    assert kgroup_main(["inject", "--bootstrap-server", kafka_broker.bootstrap_servers, "errors",
                        "--api", "FindCoordinator", "--errors", "NOT_COORDINATOR", "--group", "cli"]) == 0
    assert '"NOT_COORDINATOR"' in capsys.readouterr().out
    c = RawClient(kafka_broker.port)
    assert find_coordinator(c, "cli").error_code == E.NOT_COORDINATOR
    assert kgroup_main(["inject", "--bootstrap-server", kafka_broker.bootstrap_servers, "loading", "--ms", "5000"]) == 0
    assert join(c, "any").error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert kgroup_main(["inject", "--bootstrap-server", kafka_broker.bootstrap_servers, "clear"]) == 0
    assert join(c, "any").error_code == E.NONE


def test_confluent_consumer_rides_through_injected_coordinator_errors(kafka_broker):
    from confluent_kafka import Consumer, TopicPartition
    kafka_broker.create_topic("rides", partitions=2)
    kafka_broker.produce("rides", [f"r{i}" for i in range(20)])
    # Its first joins meet a loading coordinator and a moved one; its first commit too.
    kafka_broker.inject_errors("JoinGroup", ["COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"], group="riders")
    kafka_broker.inject_errors("OffsetCommit", ["COORDINATOR_LOAD_IN_PROGRESS"], group="riders")
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "riders",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["rides"])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert sorted(got) == sorted(f"r{i}".encode() for i in range(20))
        committed = None
        while committed is None and time.monotonic() < deadline:
            try:
                committed = consumer.commit(asynchronous=False)
            except Exception as e:                  # the injected error, reported to the caller
                assert "COORDINATOR_LOAD_IN_PROGRESS" in str(e) or "Coordinator" in str(e), e
        assert committed is not None
        assert kafka_broker.inject("list")["rules"] == []      # every injected error was met
        offsets = consumer.committed([TopicPartition("rides", 0), TopicPartition("rides", 1)], timeout=10)
        assert sum(tp.offset for tp in offsets if tp.offset >= 0) == 20     # (-1001: nothing committed)
    finally:
        consumer.close()
    assert sum(o for o in kafka_broker.committed_offsets("riders").values() if o is not None and o >= 0) == 20


def test_producer_retries_an_injected_error(kafka_broker):
    from confluent_kafka import Producer
    kafka_broker.create_topic("retried")
    kafka_broker.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT"])
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers, "enable.idempotence": True,
                         "retry.backoff.ms": 50})
    reports = []
    producer.produce("retried", value=b"once", on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert producer.flush(20) == 0
    assert reports == [(None, 0)]
    assert kafka_broker.inject("list")["rules"] == []          # both errors were answered
    assert [r.value for r in kafka_broker.consume("retried", 1)] == [b"once"]


def test_kafka_python_producer_retries_an_injected_error(kafka_broker):
    from kafka import KafkaProducer
    kafka_broker.create_topic("retried-kp")
    kafka_broker.inject_errors("Produce", ["NOT_LEADER_OR_FOLLOWER"])
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers, retries=5, retry_backoff_ms=50)
    md = producer.send("retried-kp", b"once").get(timeout=20)
    producer.close()
    assert md.offset == 0
    assert kafka_broker.inject("list")["rules"] == []
