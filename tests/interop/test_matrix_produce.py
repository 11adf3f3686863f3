"""Matrix: produce, per client. 1,000 keyed records through each client's own partitioner to a
4-partition topic, read back with kgroup's consumer: each exactly once, offsets 0..n-1 per
partition in production order, one partition per key, and (where the client reports it) each
record at the partition and offset its acknowledgement named. tests/interop/test_data_path.py
does the 100k-record runs for the Python clients and kcat; this is the matrix's cell."""
import pytest

from tests.harness import BrokerProcess
from tests.interop.test_matrix_harness import BROKER_OVERRIDES, create_topics, messages, produce, read_all, tag

pytestmark = [pytest.mark.interop, pytest.mark.matrix]

N = 1000
PARTITIONS = 4
CASES = [  # (client, scenario, idempotent: None = the client's default)
    ("kafka-python", "produce-idempotent-default", None),
    ("aiokafka", "produce", None),
    ("confluent-kafka", "produce-idempotent", True),
    ("confluent-kafka", "produce-plain", False),
    ("kcat", "produce", None),
    ("kafkajs", "produce", None),
    ("kafkajs", "produce-idempotent", True),
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("matrix-produce") / "data", BROKER_OVERRIDES).start()
    yield b
    b.stop()


@pytest.mark.parametrize("client,scenario,idempotent", CASES, ids=[f"{c}-{s}" for c, s, _ in CASES])
def test_produce(broker, client, scenario, idempotent, record_property):
    tag(record_property, client, scenario)
    topic = f"mp-{client}-{scenario}"
    create_topics(broker.bootstrap, {topic: PARTITIONS})
    msgs = messages(f"{client}-{scenario}", N)
    acks = produce(client, broker.bootstrap, topic, msgs, idempotent=idempotent)
    got = read_all(broker.bootstrap, topic, PARTITIONS, N)
    values = sorted(v for _, _, _, v in got)
    assert values == sorted(v for _, v, _ in msgs), f"{len(values)} of {N} records, or duplicates"
    per_partition: dict = {}
    key_partition: dict = {}
    for p, o, k, v in got:
        per_partition.setdefault(p, []).append((o, int(v.rsplit("-", 1)[1])))
        assert key_partition.setdefault(k, p) == p, f"key {k} in partitions {key_partition[k]} and {p}"
    for p, rows in per_partition.items():
        assert [o for o, _ in rows] == list(range(len(rows))), f"partition {p}: offsets not contiguous"
        assert [i for _, i in rows] == sorted(i for _, i in rows), f"partition {p}: production order not kept"
    assert len(per_partition) > 1, "every key landed in one partition"
    if acks is not None:
        found = {v: (p, o) for p, o, _, v in got}
        assert {v: (p, o) for p, o, v in acks} == found, "a record is not where its acknowledgement said"
    assert "ERROR" not in broker.log_text()
