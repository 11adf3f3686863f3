"""Matrix: group consumption, per client and assignor. Two members of one client share a
4-partition topic: the group goes Stable with the assignor every member asked for, each member's
own view equals the coordinator's, 200 records are consumed exactly once (synchronous commits
after every batch), commits reach the log end; then one member leaves (LeaveGroup) and the other
takes every partition and continues from the commits (40 more records, no duplicate).
Cooperative assignors must not revoke what does not move (KIP-429), nor may the consumer group
protocol (KIP-848; the "protocol" is then the server-side assignor); confluent-kafka's
"incremental assign" case calls incremental_assign/incremental_unassign itself.

The combinations run at once against one broker (one module fixture); each has its own test."""
import time

import pytest

from tests.harness import BrokerProcess
from tests.interop.test_matrix_harness import (
    BROKER_OVERRIDES, Members, RecordingProxy, check_result, committed, create_topics, end_offsets, messages,
    produce_reference, run_per_client, tag, topic_partitions, wait_committed, wait_stable, wait_until)

pytestmark = [pytest.mark.interop, pytest.mark.matrix]

PARTITIONS = 4
# (client, scenario name, assignors it is configured with, protocol the group must vote, extra)
CASES = [
    ("kafka-python", "consume-range", ["range"], "range", {}),
    ("kafka-python", "consume-roundrobin", ["roundrobin"], "roundrobin", {}),
    ("kafka-python", "consume-sticky", ["sticky"], "sticky", {}),
    ("kafka-python", "consume-cooperative-sticky", ["cooperative-sticky"], "cooperative-sticky", {}),
    ("aiokafka", "consume-roundrobin-default", None, "roundrobin", {}),
    ("aiokafka", "consume-range", ["range"], "range", {}),
    ("confluent-kafka", "consume-range", ["range"], "range", {}),
    ("confluent-kafka", "consume-roundrobin", ["roundrobin"], "roundrobin", {}),
    ("confluent-kafka", "consume-cooperative-sticky", ["cooperative-sticky"], "cooperative-sticky", {}),
    ("confluent-kafka", "incremental-assign", ["cooperative-sticky"], "cooperative-sticky", {"incremental": True}),
    ("kcat", "consume-balanced", None, "range", {}),
    ("kafkajs", "consume-roundrobin-default", None, "RoundRobinAssigner", {}),
    # KIP-848: the broker's assignor (group.remote.assignor), reconciled incrementally
    ("confluent-kafka.consumer", "consume-uniform", ["uniform"], "uniform", {}),
    ("confluent-kafka.consumer", "consume-range", ["range"], "range", {}),
    ("kgroup.consumer", "consume-uniform", ["uniform"], "uniform", {}),
    ("kgroup.consumer", "consume-range", ["range"], "range", {}),
]
IDS = [f"{c}-{s}" for c, s, *_ in CASES]


def _scenario(case_id, broker, proxy, tmp_path):
    client, scenario, assignors, protocol, extra = CASES[IDS.index(case_id)]
    slug = case_id.replace("_", "-")
    topic, group = f"mc-{slug}", f"mc-{slug}"
    everything = topic_partitions(topic, PARTITIONS)
    members = Members()
    try:
        a = members.start(client, proxy.bootstrap, group, [topic], assignors=assignors, log_dir=str(tmp_path),
                          client_id=f"{slug}-a", **extra)
        wait_stable(broker.bootstrap, group, 1, everything, members=members)
        b_joined = time.time()
        b = members.start(client, proxy.bootstrap, group, [topic], assignors=assignors, log_dir=str(tmp_path),
                          client_id=f"{slug}-b", **extra)
        state, voted, by_member = wait_stable(broker.bootstrap, group, 2, everything, members=members)
        assert voted == protocol, f"the group voted {voted!r}, expected {protocol!r}"
        assert a.owned() and b.owned() and not a.owned() & b.owned()
        if protocol == "cooperative-sticky" or client.endswith(".consumer"):
            # KIP-429: when b joined, a gave up only what moved to b (never everything at once)
            revoked = {tuple(tp) for e in a.of("revoked") if e["t"] >= b_joined for tp in e["parts"]}
            assert revoked <= b.owned(), f"cooperative rebalance revoked {revoked}, b got {b.owned()}"
            assert a.owned() and all(tp in a.owned() for tp in everything - b.owned())

        first = messages(f"{slug}-1", 200, PARTITIONS)
        produce_reference(broker.bootstrap, topic, first)
        want = {v for _, v, _ in first}
        wait_until(lambda: {r[3] for m in members for r in m.records()} >= want, 30,
                   lambda: f"200 records consumed: {members.describe()}")
        ends = end_offsets(broker.bootstrap, topic, PARTITIONS)
        wait_committed(broker.bootstrap, group, ends)
        values = [r[3] for m in members for r in m.records()]
        assert len(values) == len(set(values)) == 200, "a record was consumed twice"
        for m in members:  # each read only its own partitions, and read something
            assert m.records() and {(t, p) for t, p, _, _ in m.records()} <= m.owned(), m.describe()

        b.stop()
        wait_stable(broker.bootstrap, group, 1, everything, members=Members([a]))
        second = messages(f"{slug}-2", 40, PARTITIONS)
        produce_reference(broker.bootstrap, topic, second)
        want |= {v for _, v, _ in second}
        wait_until(lambda: {r[3] for m in members for r in m.records()} >= want, 30,
                   lambda: f"40 more records after b left: {members.describe()}")
        wait_committed(broker.bootstrap, group, end_offsets(broker.bootstrap, topic, PARTITIONS))
        values = [r[3] for m in members for r in m.records()]
        assert len(values) == len(set(values)) == 240, "a record was consumed twice after the rebalance"
        errors = [e for m in members for e in m.errors() if e.get("where") != "error_cb"]
        assert not errors, errors
        return {"protocol": voted, "committed": committed(broker.bootstrap, group)}
    except AssertionError as e:
        wire = proxy.transcript({f"{slug}-a", f"{slug}-b"})
        raise AssertionError(f"{e}\n--- members ---\n{members.describe()}\n--- their requests ---\n{wire}") from e
    finally:
        members.close()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("matrix-consume")
    proxy = RecordingProxy()  # the members go through it: a stuck one can be read off the wire
    broker = BrokerProcess(tmp / "data", BROKER_OVERRIDES + [proxy.advertised_listener()]).start()
    proxy.start(broker.port)
    try:
        create_topics(broker.bootstrap, {f"mc-{i}": PARTITIONS for i in IDS})
        yield run_per_client(_scenario, IDS, broker, proxy, tmp)
    finally:
        proxy.close()
        broker.stop()


@pytest.mark.parametrize("case_id", IDS)
def test_group_consume(results, case_id, record_property):
    client, scenario, *_ = CASES[IDS.index(case_id)]
    tag(record_property, client, scenario)
    check_result(results, case_id)
