"""Matrix, cross-cutting: the protocol vote across clients with different assignor lists, as
Kafka's classic group decides it: candidates = the protocols every member supports; each member votes for the
first candidate in its own list; the most votes wins. A member sharing no protocol with the
group gets INCONSISTENT_GROUP_PROTOCOL, and its client must surface it.

One mixed group, grown step by step (6 partitions):
  kafka-python [range, roundrobin], confluent-kafka [roundrobin, range], aiokafka [roundrobin,
  range]: candidates {range, roundrobin}, votes 1 : 2 -> roundrobin (the leader's first choice
  does not decide);
  + kcat [roundrobin, range]: 1 : 3 -> roundrobin;
  + kafkajs [range] (kafkajs' own round robin is "RoundRobinAssigner", shared by nobody, so it
  offers only a Java-compatible "range" written with kafkajs' PartitionAssigner API):
  candidates {range} -> range, although roundrobin has 4 first choices;
  - kafkajs leaves: candidates {range, roundrobin} again -> roundrobin.
Every step: Stable, each member's own view equals the coordinator's, every partition owned once.

INCONSISTENT_GROUP_PROTOCOL: a group of one kafka-python member [range]; one member of each
client offering only round robin joins (all at once): each is refused and its client reports
the error; the incumbent never notices.
"""
import re
import time

import pytest

from tests.harness import BrokerProcess
from tests.interop.test_matrix_harness import (
    BROKER_OVERRIDES, GROUP_CLIENTS, Members, check_result, create_topics, describe, run_per_client, tag,
    topic_partitions, wait_stable, wait_until)

pytestmark = [pytest.mark.interop, pytest.mark.matrix]

PARTITIONS = 6


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("matrix-voting") / "data", BROKER_OVERRIDES).start()
    create_topics(b.bootstrap, {"vote": PARTITIONS, "vote-x": PARTITIONS})
    yield b
    b.stop()


def test_protocol_vote_across_clients(broker, tmp_path, record_property):
    tag(record_property, "all", "protocol-vote")
    group, everything = "vote-mixed", topic_partitions("vote", PARTITIONS)
    members = Members()
    steps = []

    def step(expected, n):
        state, protocol, by_member = wait_stable(broker.bootstrap, group, n, everything, members=members, timeout=60)
        steps.append((n, protocol))
        assert protocol == expected, f"{n} members voted {protocol!r}, the vote rule gives {expected!r}"
        if expected == "roundrobin":  # the winning assignor really ran: 6 partitions dealt evenly
            sizes = sorted(len(p) for _, _, p in by_member.values())
            assert max(sizes) - min(sizes) <= 1, by_member

    try:
        members.start("kafka-python", broker.bootstrap, group, ["vote"], assignors=["range", "roundrobin"],
                      log_dir=str(tmp_path), client_id="kp-range-first")
        wait_stable(broker.bootstrap, group, 1, everything, members=members)  # kafka-python leads
        members.start("confluent-kafka", broker.bootstrap, group, ["vote"], assignors=["roundrobin", "range"],
                      log_dir=str(tmp_path), client_id="ck-rr-first")
        members.start("aiokafka", broker.bootstrap, group, ["vote"], assignors=["roundrobin", "range"],
                      log_dir=str(tmp_path), client_id="aio-rr-first")
        step("roundrobin", 3)
        members.start("kcat", broker.bootstrap, group, ["vote"], assignors=["roundrobin", "range"],
                      log_dir=str(tmp_path), client_id="kcat-rr-first")
        step("roundrobin", 4)
        js = members.start("kafkajs", broker.bootstrap, group, ["vote"], assignors=["range"],
                           log_dir=str(tmp_path), client_id="kafkajs-range-only")
        step("range", 5)
        js.stop()
        step("roundrobin", 4)
        record_property("steps", str(steps))
    except AssertionError as e:
        raise AssertionError(f"{e}\nsteps so far: {steps}\n--- members ---\n{members.describe()}") from e
    finally:
        members.close()


INCONSISTENT = re.compile(r"inconsistent.?group.?protocol", re.I)


@pytest.fixture(scope="module")
def refused(broker, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("matrix-refused")
    group, everything = "vote-x", topic_partitions("vote-x", PARTITIONS)
    incumbent = Members()
    incumbent.start("kafka-python", broker.bootstrap, group, ["vote-x"], assignors=["range"], log_dir=str(tmp))
    try:
        wait_stable(broker.bootstrap, group, 1, everything, members=incumbent)
        events_before = len(incumbent[0].events)

        def join(client):
            members = Members()
            try:
                m = members.start(client, broker.bootstrap, group, ["vote-x"], assignors=["roundrobin"],
                                  log_dir=str(tmp), client_id=f"{client}-rr-only")
                wait_until(lambda: INCONSISTENT.search(m.error_text() + m.stderr_tail(200)), 30,
                           lambda: f"{client} to report INCONSISTENT_GROUP_PROTOCOL: {m.describe()}")
                assert not m.owned(), f"{client} got partitions in a group it cannot join"
                return next(line for line in (m.error_text() + "\n" + m.stderr_tail(200)).splitlines()
                            if INCONSISTENT.search(line))[:200]
            except AssertionError as e:
                raise AssertionError(f"{e}\n{members.describe()}") from e
            finally:
                members.close()
        results = run_per_client(join, GROUP_CLIENTS)
        time.sleep(1)
        state, protocol, by_member = describe(broker.bootstrap, group)
        undisturbed = (state == "Stable" and len(by_member) == 1 and protocol == "range" and
                       not [e for e in incumbent[0].events[events_before:] if e["ev"] in ("assigned", "revoked")])
        return results, undisturbed, (state, protocol, by_member)
    finally:
        incumbent.close()


@pytest.mark.parametrize("client", GROUP_CLIENTS)
def test_member_sharing_no_protocol_is_refused_and_client_reports_it(refused, client, record_property):
    tag(record_property, client, "inconsistent-group-protocol")
    results, undisturbed, view = refused
    record_property("reported", str(check_result(results, client)))
    assert undisturbed, f"the incumbent member was disturbed: {view}"
