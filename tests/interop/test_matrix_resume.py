"""Matrix: commit, broker restart, resume, per client. A member of each client consumes 3 x 20
records with its own commits (kcat: librdkafka's auto-commit) and leaves; 3 x 5 more records
wait uncommitted; the broker is SIGKILLed and restarted on the same data; 3 x 2 more records
arrive. A new member of the same group must start exactly at the committed offsets (20 on every
partition: not 0, not the log end) and read offsets 20..26 of each partition exactly once.

Every client's first phase runs at once, then one broker restart, then every second phase."""
import pytest

from tests.harness import BrokerProcess
from tests.interop.test_matrix_harness import (
    BROKER_OVERRIDES, CONSUMER_PROTOCOL_CLIENTS, GROUP_CLIENTS, Members, _Admin, check_result, create_topics,
    end_offsets, produce_reference, run_per_client, tag, wait_committed, wait_until)

pytestmark = [pytest.mark.interop, pytest.mark.matrix]

PARTITIONS = 3
CLIENTS = GROUP_CLIENTS + CONSUMER_PROTOCOL_CLIENTS  # the consumer-protocol ones commit with their member epoch


def _batch(client, label, per_partition):
    return [(f"k{i}", f"{client}-{label}-{p}-{i}", p) for p in range(PARTITIONS) for i in range(per_partition)]


def _before_restart(client, broker, tmp_path):
    topic = group = f"resume-{client}"
    members = Members()
    try:
        m = members.start(client, broker.bootstrap, group, [topic], log_dir=str(tmp_path))
        first = _batch(client, "a", 20)
        produce_reference(broker.bootstrap, topic, first)
        wait_until(lambda: {r[3] for r in m.records()} >= {v for _, v, _ in first}, 30,
                   lambda: f"the first 60 records: {m.describe()}")
        wait_committed(broker.bootstrap, group, {(topic, p): 20 for p in range(PARTITIONS)})
        m.stop()
        produce_reference(broker.bootstrap, topic, _batch(client, "b", 5))  # waits, uncommitted
        return True
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- members ---\n{members.describe()}") from e
    finally:
        members.close()


def _after_restart(client, broker, tmp_path):
    topic = group = f"resume-{client}"
    members = Members()
    try:
        produce_reference(broker.bootstrap, topic, _batch(client, "c", 2))
        m = members.start(client, broker.bootstrap, group, [topic], log_dir=str(tmp_path))
        want = {f"{client}-b-{p}-{i}" for p in range(PARTITIONS) for i in range(5)} | \
               {f"{client}-c-{p}-{i}" for p in range(PARTITIONS) for i in range(2)}
        wait_until(lambda: {r[3] for r in m.records()} >= want, 40,
                   lambda: f"the 21 records after the commits: {m.describe()}")
        wait_committed(broker.bootstrap, group, end_offsets(broker.bootstrap, topic, PARTITIONS))
        got = sorted((p, o) for _, p, o, _ in m.records())
        assert got == [(p, o) for p in range(PARTITIONS) for o in range(20, 27)], f"read {got}"
        return True
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- members ---\n{members.describe()}") from e
    finally:
        members.close()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("matrix-resume")
    broker = BrokerProcess(tmp / "data", BROKER_OVERRIDES).start()
    try:
        create_topics(broker.bootstrap, {f"resume-{c}": PARTITIONS for c in CLIENTS})
        first = run_per_client(_before_restart, CLIENTS, broker, tmp)
    finally:
        _Admin.drop(broker.bootstrap)
        broker.kill()
    broker = BrokerProcess(tmp / "data", BROKER_OVERRIDES).start()
    try:
        ready = [c for c in CLIENTS if first[c][0]]
        second = run_per_client(_after_restart, ready, broker, tmp)
        yield {c: first[c] if not first[c][0] else second[c] for c in CLIENTS}
    finally:
        _Admin.drop(broker.bootstrap)
        broker.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_commits_survive_broker_restart_and_consumer_resumes(results, client, record_property):
    tag(record_property, client, "commit-resume-after-restart")
    check_result(results, client)
