"""Matrix: transactions / exactly-once, per client. Each client's transactional producer runs
three transactions on a 2-partition output topic, each with its group's offsets on the input
topic (send_offsets_to_transaction / sendOffsets): commit, abort, commit. Then exactly the
committed records are visible to read_committed readers (this client's own consumer where it has
one, and confluent-kafka's), each once, and the group's committed offset is the last committed
transaction's. kcat has no transactional producer: its row is a read_committed consumer of a
confluent-kafka producer's committed and aborted transactions.

All clients run at once against one broker."""
import asyncio
import json
import subprocess

import pytest

from tests.harness import BrokerProcess
from tests.interop.test_matrix_harness import (BROKER_OVERRIDES, NODE_DIR, check_result, create_topics, kcat_bin,
                                               node_bin, run_per_client, tag)
from tests.interop.test_transactions import (committed_offsets, produce_plain, read_aiokafka, read_confluent,
                                             read_kafka_python)

pytestmark = [pytest.mark.interop, pytest.mark.matrix]

CLIENTS = ("confluent-kafka", "aiokafka", "kafka-python", "kafkajs", "kcat")
# (values, offset committed with them, commit?)
TRANSACTIONS = [([b"c%d" % i for i in range(10)], 10, True),
                ([b"a%d" % i for i in range(5)], 15, False),
                ([b"c%d" % i for i in range(10, 20)], 20, True)]
COMMITTED = sorted(v for values, _, commit in TRANSACTIONS if commit for v in values)


def _confluent(bs, tid, out, src, group):
    from confluent_kafka import Consumer, Producer, TopicPartition
    p = Producer({"bootstrap.servers": bs, "transactional.id": tid})
    p.init_transactions(10)
    meta = Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        for values, offset, commit in TRANSACTIONS:
            p.begin_transaction()
            for i, v in enumerate(values):
                p.produce(out, value=v, partition=i % 2)
            p.send_offsets_to_transaction([TopicPartition(src, 0, offset)], meta.consumer_group_metadata(), 10)
            p.commit_transaction(10) if commit else p.abort_transaction(10)
    finally:
        meta.close()


def _aiokafka(bs, tid, out, src, group):
    async def run():
        from aiokafka import AIOKafkaProducer, TopicPartition
        p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=tid, enable_idempotence=True)
        await p.start()
        try:
            for values, offset, commit in TRANSACTIONS:
                await p.begin_transaction()
                for i, v in enumerate(values):
                    await p.send_and_wait(out, v, partition=i % 2)
                await p.send_offsets_to_transaction({TopicPartition(src, 0): offset}, group)
                await (p.commit_transaction() if commit else p.abort_transaction())
        finally:
            await p.stop()
    asyncio.run(run())


def _kafka_python(bs, tid, out, src, group):
    from kafka import KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    p = KafkaProducer(bootstrap_servers=bs, transactional_id=tid)
    try:
        p.init_transactions()
        for values, offset, commit in TRANSACTIONS:
            p.begin_transaction()
            for i, v in enumerate(values):
                p.send(out, v, partition=i % 2).get(10)
            p.send_offsets_to_transaction({TopicPartition(src, 0): OffsetAndMetadata(offset, "", -1)}, group)
            p.commit_transaction() if commit else p.abort_transaction()
    finally:
        p.close()


def _kafkajs(bs, tid, out, src, group):
    conf = {"role": "transactional", "bootstrap": bs, "transactional_id": tid, "topic": out, "log_level": "WARN",
            "transactions": [{"messages": [[None, v.decode(), i % 2] for i, v in enumerate(values)],
                              "offsets": {"group": group, "topic": src, "partitions": [[0, offset]]},
                              "commit": commit} for values, offset, commit in TRANSACTIONS]}
    r = subprocess.run([node_bin(), "driver.js", json.dumps(conf)], cwd=NODE_DIR, capture_output=True, text=True,
                       timeout=120)
    events = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert r.returncode == 0 and events and events[-1]["ev"] == "transactions", (r.stdout, r.stderr[-3000:])
    assert events[-1]["ended"] == ["commit", "abort", "commit"]


def _read_kcat(bs, out, want):
    r = subprocess.run([kcat_bin(), "-C", "-b", bs, "-t", out, "-o", "beginning", "-e", "-q", "-f", "%s\\n",
                        "-X", "isolation.level=read_committed"], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line for line in r.stdout.split(b"\n") if line]


PRODUCERS = {"confluent-kafka": _confluent, "aiokafka": _aiokafka, "kafka-python": _kafka_python,
             "kafkajs": _kafkajs, "kcat": _confluent}
READERS = {"confluent-kafka": read_confluent, "aiokafka": read_aiokafka, "kafka-python": read_kafka_python}


def _scenario(client, broker):
    bs = broker.bootstrap
    out, src, group = f"eos-out-{client}", f"eos-in-{client}", f"eos-group-{client}"
    PRODUCERS[client](bs, f"eos-{client}", out, src, group)
    seen = {"confluent-kafka": sorted(read_confluent(bs, out, 2, len(COMMITTED)))}
    if client in READERS:
        seen[client] = sorted(READERS[client](bs, out, 2, len(COMMITTED)))
    if client == "kcat":
        seen["kcat"] = sorted(_read_kcat(bs, out, len(COMMITTED)))
    for reader, got in seen.items():
        assert got == COMMITTED, f"{reader} read {got}"
    assert committed_offsets(bs, group, src, 1) == {0: 20}
    return {"readers": sorted(seen)}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("matrix-eos")
    broker = BrokerProcess(tmp / "data", BROKER_OVERRIDES).start()
    try:
        topics = {}
        for c in CLIENTS:
            topics[f"eos-out-{c}"] = 2
            topics[f"eos-in-{c}"] = 1
        create_topics(broker.bootstrap, topics)
        for c in CLIENTS:
            produce_plain(broker.bootstrap, f"eos-in-{c}", [b"in"] * 20, 1)
        yield run_per_client(_scenario, CLIENTS, broker)
    finally:
        broker.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_transactions_exactly_once(results, client, record_property):
    tag(record_property, client, "transactions-eos-read-committed" if client == "kcat" else "transactions-eos")
    check_result(results, client)
