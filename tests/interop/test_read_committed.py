"""Real read_committed consumers (confluent-kafka, kafka-python, aiokafka, ours) on a partition
holding committed, aborted and still-open transactions: each sees exactly the non-transactional
and committed records, stops at the last stable offset while a transaction is open, and goes on
once it commits. A read_uncommitted consumer sees the aborted records too (the test can tell).

The transactions are confluent-kafka transactional producers interleaved on one partition; their
COMMIT/ABORT markers come from the broker's transaction coordinator (EndTxn)."""
import pytest

from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from tests.harness import RawClient
from tests.interop.test_transactions import READERS, read_kafka_python, read_kgroup

pytestmark = pytest.mark.interop

TOPIC = "rc"
CT = CreateTopicsRequest.CreatableTopic
CLIENTS = {**READERS, "kgroup": read_kgroup}


def test_read_committed_consumers_see_exactly_the_committed_records(broker):
    from confluent_kafka import Producer
    c = RawClient(broker.port)
    r = c.request(CreateTopicsRequest(topics=[CT(name=TOPIC, num_partitions=1, replication_factor=1)]), 7)
    assert r.topics[0].error_code == 0
    c.close()
    bs = broker.bootstrap
    plain = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    a, b, cc = (Producer({"bootstrap.servers": bs, "transactional.id": f"rc-{n}"}) for n in "abc")
    for p in (a, b, cc):
        p.init_transactions(10)
        p.begin_transaction()

    def send(p, *values):
        for v in values:
            p.produce(TOPIC, value=v, key=b"k", partition=0)
        p.flush(10)

    send(plain, b"p0", b"p1")
    send(a, b"a0", b"a1")
    send(b, b"b0")
    send(a, b"a2")
    send(plain, b"p2")
    a.abort_transaction(10)
    b.commit_transaction(10)
    send(cc, b"c0")              # open: the LSO stops here
    send(plain, b"p3")

    committed = [b"p0", b"p1", b"b0", b"p2"]
    everything = [b"p0", b"p1", b"a0", b"a1", b"b0", b"a2", b"p2", b"c0", b"p3"]
    assert read_kafka_python(bs, TOPIC, 1, len(everything), "read_uncommitted") == everything
    for name, read in CLIENTS.items():
        assert read(bs, TOPIC, 1, len(committed)) == committed, name

    cc.commit_transaction(10)
    committed += [b"c0", b"p3"]
    for name, read in CLIENTS.items():
        assert read(bs, TOPIC, 1, len(committed)) == committed, name
