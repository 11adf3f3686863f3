"""Rebalance timelines (kgroup/broker/timeline.py) of real groups: confluent-kafka members joining
and leaving, a raw member expiring; read through the fixture and ``kgroup groups --timeline``."""
import time

import pytest

from kgroup.cli import main as kgroup_main
from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.join_group import JoinGroupRequest
from kgroup.protocol.messages.sync_group import SyncGroupRequest
from kgroup.testing.broker import KafkaBroker
from tests.harness import RawClient

pytestmark = pytest.mark.interop


def poll_until(consumers, done, timeout=30):
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        for c in consumers:
            c.poll(0.1)


def test_timeline_of_a_confluent_group(kafka_broker, capsys):
    from confluent_kafka import Consumer
    kafka_broker.create_topic("tl", partitions=4)
    conf = {"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "tl-g",
            "partition.assignment.strategy": "range", "auto.offset.reset": "earliest"}
    alpha = Consumer({**conf, "client.id": "alpha"})
    alpha.subscribe(["tl"])
    poll_until([alpha], lambda: len(alpha.assignment()) == 4)
    beta = Consumer({**conf, "client.id": "beta"})
    beta.subscribe(["tl"])
    poll_until([alpha, beta], lambda: len(alpha.assignment()) == 2 and len(beta.assignment()) == 2)
    beta.close()
    poll_until([alpha], lambda: len(alpha.assignment()) == 4)
    events = kafka_broker.timeline("tl-g")
    alpha.close()
    kinds = [e["event"] for e in events]
    # alpha alone: joined, generation 1 stable with every partition
    joined = [e for e in events if e["event"] == "member-joined"]
    assert [e["client_id"] for e in joined] == ["alpha", "beta"]
    stables = [e for e in events if e["event"] == "stable"]
    assert len(stables) == 3, kinds
    assert [e["generation"] for e in stables] == [1, 2, 3]
    alpha_id, beta_id = joined[0]["member_id"], joined[1]["member_id"]
    assert stables[0]["assignment"] == {alpha_id: {"tl": [0, 1, 2, 3]}}
    assert {m: sum(len(p) for p in a.values()) for m, a in stables[1]["assignment"].items()} == {alpha_id: 2, beta_id: 2}
    assert stables[2]["assignment"] == {alpha_id: {"tl": [0, 1, 2, 3]}}
    # why each rebalance started, and the phases
    started = [e for e in events if e["event"] == "rebalance-started"]
    assert "beta" in started[1]["cause"] and "joined" in started[1]["cause"], started
    assert "beta" in started[2]["cause"] and "left" in started[2]["cause"], started
    left = [e for e in events if e["event"] == "member-left"]
    assert [(e["member_id"], e["client_id"]) for e in left] == [(beta_id, "beta")]
    joins = [e for e in events if e["event"] == "join-phase-done"]
    assert all(e["duration_ms"] >= 0 for e in joins) and joins[1]["leader"] in (alpha_id, beta_id)
    assert joins[1]["waited_for"], joins[1]                       # the JoinGroup that completed the phase
    assert all(e["rebalance_ms"] >= 0 for e in stables)
    # the same through the command line
    assert kgroup_main(["groups", "--bootstrap-server", kafka_broker.bootstrap_servers, "--describe",
                        "--group", "tl-g", "--timeline"]) == 0
    out = capsys.readouterr().out
    assert "rebalance timeline" in out and "member-left" in out and f"{beta_id} (client beta)" in out
    assert "tl[0, 1, 2, 3]" in out


@pytest.mark.kafka_broker_config(group_min_session_timeout_ms=100)
def test_an_expired_member(kafka_broker):
    c = RawClient(kafka_broker.port, client_id="silent")
    P = JoinGroupRequest.JoinGroupRequestProtocol
    j = c.request(JoinGroupRequest(group_id="ex", session_timeout_ms=200, rebalance_timeout_ms=5000, member_id="",
                                   protocol_type="consumer", protocols=[P(name="range", metadata=b"")]), 3)
    assert j.error_code == E.NONE
    assert c.request(SyncGroupRequest(group_id="ex", generation_id=j.generation_id, member_id=j.member_id,
                                      assignments=[]), 3).error_code == E.NONE
    time.sleep(0.8)                       # no heartbeat: the session expires (the timeline's tick sees it)
    events = kafka_broker.timeline("ex")
    expired = [e for e in events if e["event"] == "member-expired"]
    assert [(e["member_id"], e["client_id"]) for e in expired] == [(j.member_id, "silent")]
    assert "session timeout" in expired[0]["reason"]
    assert events[-1]["event"] == "empty"


def test_no_timelines_without_ops_features(tmp_path, capsys):
    with KafkaBroker(tmp_path / "d", {"kgroup.fault.injection.enable": "false"}) as b:
        assert kgroup_main(["groups", "--bootstrap-server", b.bootstrap_servers, "--describe", "--group", "g",
                            "--timeline"]) == 1
        assert "keeps no rebalance timelines" in capsys.readouterr().err


def test_timelines_through_the_metrics_layer_alone(tmp_path):
    # metrics.listener without fault injection: no request layer; the server counts, and hands
    # the group requests to metrics' sampled path, which routes them to the timelines; the
    # timeline query (a Produce) reaches them through the Produce handler's control topics.
    with KafkaBroker(tmp_path / "d", {"kgroup.fault.injection.enable": "false"}, metrics=True) as b:
        assert b.broker.request_hook is None and b.broker.request_counts is not None  # counted by the server
        c = RawClient(b.port, client_id="solo")
        P = JoinGroupRequest.JoinGroupRequestProtocol
        j = c.request(JoinGroupRequest(group_id="solo-g", session_timeout_ms=10000, rebalance_timeout_ms=5000,
                                       member_id="", protocol_type="consumer", protocols=[P(name="range", metadata=b"")]), 3)
        assert c.request(SyncGroupRequest(group_id="solo-g", generation_id=j.generation_id, member_id=j.member_id,
                                          assignments=[]), 3).error_code == E.NONE
        events = b.timeline("solo-g")
        assert [e["event"] for e in events] == ["group-created", "member-joined", "rebalance-started",
                                                "join-phase-done", "stable"]
        assert events[1]["client_id"] == "solo" and events[-1]["generation"] == 1
