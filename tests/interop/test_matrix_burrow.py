"""Matrix: Burrow 1.2.1 (Debian, with Debian's ZooKeeper 3.8, both on free 127.0.0.1 ports)
reads kgroup's __consumer_offsets through Fetch (its sarama 1.22 client, as Kafka "2.1.0") and
would report each group's lag over its HTTP API. Burrow 1.2.1 asks the log end offsets with
ListOffsets v0, which Kafka 4.0 removed (KIP-896): against a Kafka 4.x broker, and so against
kgroup, that request is refused (UNSUPPORTED_VERSION, the connection closed) and Burrow reports
no lag. ``test_burrow_list_offsets_v0_is_refused_as_kafka_4_refuses_it`` checks exactly that, that
every other request Burrow sends is in the advertised ranges, and that the groups whose lag it
cannot ask are kgroup's as described.

Groups: for every client, a member commits 3 x 10 records and leaves, then 2, 3 and 4 more
records land on partitions 0, 1, 2 (lag 2/3/4); plus an active kafka-python group that keeps up
(lag 0). Burrow's per-partition committed offset and current lag (GET
/v3/kafka/<cluster>/consumer/<group>) must equal the CURRENT-OFFSET and LAG columns of
`kgroup groups --describe --group G`.

Burrow's sarama subscribes to one __consumer_offsets partition per Fetch round, and each round
long-polls 250 ms (ListOffsets for the next partition queues behind the parked Fetch on the same
connection, as with Kafka), so reading 50 partitions takes ~13 s: this broker runs with
offsets.topic.num.partitions=5. Burrow talks through a recording proxy so the versions it
negotiates go into the report like every other client's."""
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT
from tests.harness import BrokerProcess
from tests.interop.burrow import BurrowStack
from tests.interop.test_matrix_harness import (
    BROKER_OVERRIDES, GROUP_CLIENTS, Members, RecordingProxy, _Admin, check_result, create_topics, produce_reference, run_per_client,
    tag, topic_partitions, wait_committed, wait_stable)

pytestmark = [pytest.mark.interop, pytest.mark.matrix]

PARTITIONS = 3
ACTIVE = "burrow-active"


def kgroup_describe(bootstrap, group) -> dict:
    """{(topic, partition): (current offset, lag)} from `kgroup groups --describe`."""
    out = subprocess.run([sys.executable, "-m", "kgroup", "groups", "--bootstrap-server", bootstrap, "--describe",
                          "--group", group], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = {}
    for line in out.stdout.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[0] == group and cols[2].isdigit():
            rows[(cols[1], int(cols[2]))] = (int(cols[3]), int(cols[5]))
    return rows


def _commit_then_lag(client, broker, tmp_path):
    topic = group = f"burrow-{client}"
    members = Members()
    try:
        m = members.start(client, broker.bootstrap, group, [topic], log_dir=str(tmp_path))
        produce_reference(broker.bootstrap, topic, [("k", f"{client}-{p}-{i}", p)
                                                    for p in range(PARTITIONS) for i in range(10)])
        wait_committed(broker.bootstrap, group, {(topic, p): 10 for p in range(PARTITIONS)})
        m.stop()
        produce_reference(broker.bootstrap, topic, [("k", f"{client}-late-{p}-{i}", p)
                                                    for p in range(PARTITIONS) for i in range(2 + p)])
        return {(topic, p): (10, 2 + p) for p in range(PARTITIONS)}
    except AssertionError as e:
        raise AssertionError(f"{e}\n{members.describe()}") from e
    finally:
        members.close()


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("matrix-burrow")
    proxy = RecordingProxy()
    broker = BrokerProcess(tmp / "data", BROKER_OVERRIDES + ["offsets.topic.num.partitions=5",
                                                              proxy.advertised_listener()]).start()
    proxy.start(broker.port)
    members = Members()
    try:
        create_topics(broker.bootstrap, {f"burrow-{c}": PARTITIONS for c in GROUP_CLIENTS} | {ACTIVE: PARTITIONS})
        members.start("kafka-python", broker.bootstrap, ACTIVE, [ACTIVE], log_dir=str(tmp))
        expected = run_per_client(_commit_then_lag, GROUP_CLIENTS, broker, tmp)
        produce_reference(broker.bootstrap, ACTIVE, [("k", f"a-{p}-{i}", p) for p in range(PARTITIONS) for i in range(5)])
        wait_stable(broker.bootstrap, ACTIVE, 1, topic_partitions(ACTIVE, PARTITIONS), members=members)
        wait_committed(broker.bootstrap, ACTIVE, {(ACTIVE, p): 5 for p in range(PARTITIONS)})
        expected[ACTIVE] = (True, {(ACTIVE, p): (5, 0) for p in range(PARTITIONS)})
        seen = len(proxy.requests)
        with BurrowStack(tmp / "burrow", proxy.bootstrap) as burrow:
            yield broker, burrow, expected, proxy, seen
    finally:
        members.close()
        _Admin.drop(broker.bootstrap)
        proxy.close()
        broker.stop()


def test_burrow_list_offsets_v0_is_refused_as_kafka_4_refuses_it(env, record_property):
    tag(record_property, "Burrow", "lag-equals-kgroup-describe")
    broker, burrow, expected, proxy, seen = env
    deadline = time.monotonic() + 30
    refused = []
    while time.monotonic() < deadline and not refused:
        with open(broker.log_path, encoding="utf-8", errors="replace") as f:
            refused = [line for line in f if "UNSUPPORTED_VERSION: request for api key 2 (ListOffsets) version 0" in line]
        time.sleep(0.5)
    assert refused, burrow.log_tail()
    # everything else Burrow asked is in the advertised ranges
    from tests.interop.test_matrix_versions import out_of_range, summarize
    with proxy.lock:
        burrow_requests = proxy.requests[seen:]
    negotiated: dict = {}
    for r in burrow_requests:
        if r["client_id"] == "burrow-matrix" and r["api_key"] != 2:
            negotiated.setdefault(r["api_key"], set()).add(r["version"])
    assert negotiated and not out_of_range(negotiated), negotiated
    record_property("api_versions", summarize(negotiated))
    # the groups are there for a client that can ask their lag (kgroup's own view)
    for group in (f"burrow-{c}" for c in GROUP_CLIENTS):
        assert kgroup_describe(broker.bootstrap, group) == check_result(expected, group.removeprefix("burrow-"))
