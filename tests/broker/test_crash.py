"""Crash safety of the data path.

- A confluent-kafka idempotent producer (acks=all) sends continuously while the broker is killed
  with SIGKILL at random moments and restarted on the same data directory and port: afterwards
  every acknowledged message is in the log exactly once (and no message at all is duplicated),
  in production order per partition. 3 kills by default, 20 with --long.
- A segment whose tail was damaged while the broker was down after an unclean kill (garbage
  appended, a byte of the last batch flipped, the last batch cut short) is truncated at restart
  with a WARNING naming the segment, and everything before the damage survives.
"""
import os
import random
import socket
import threading
import time

import pytest

from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.fetch import FetchRequest
from kgroup.protocol.messages.produce import ProduceRequest
from kgroup.protocol.records import Record, build_batch, decode_records, iter_batches
from tests.harness import BrokerProcess, RawClient

CT = CreateTopicsRequest.CreatableTopic
TPD = ProduceRequest.TopicProduceData
FT = FetchRequest.FetchTopic
PARTITIONS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def create_topic(port, name, partitions):
    c = RawClient(port)
    r = c.request(CreateTopicsRequest(topics=[CT(name=name, num_partitions=partitions, replication_factor=1,
                                                 configs=[])]), 7)
    assert r.topics[0].error_code == 0
    c.close()


def consume_all(bootstrap, topic, partitions):
    """Every message of the topic: {partition: [value, ...]} in offset order."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-check", "enable.auto.commit": False})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        out = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + 60
        while sum(map(len, out.values())) < sum(ends.values()) and time.monotonic() < deadline:
            for m in c.consume(10_000, 0.5):
                assert m.error() is None, m.error()
                assert m.offset() == len(out[m.partition()]), "gap or repeat in offsets"
                out[m.partition()].append(int(m.value()))
        assert {p: len(v) for p, v in out.items()} == ends
        return out
    finally:
        c.close()


def run_kill_loop(tmp_path, kills, seed):
    from confluent_kafka import Producer
    rng = random.Random(seed)
    port = free_port()
    broker = BrokerProcess(tmp_path / "data", [f"listeners=PLAINTEXT://127.0.0.1:{port}"]).start()
    create_topic(port, "crash", PARTITIONS)
    acked, failed, errors = set(), set(), []
    stop = threading.Event()

    def report(err, msg):
        if err is None:
            acked.add(int(msg.value()))
        else:
            failed.add(int(msg.value()))
            errors.append(err)

    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 2, "message.timeout.ms": 120000, "reconnect.backoff.ms": 20,
                         "reconnect.backoff.max.ms": 200, "topic.metadata.refresh.interval.ms": 1000})
    sent = 0

    def produce_loop():
        nonlocal sent
        while not stop.is_set():
            for _ in range(200):
                try:
                    producer.produce("crash", value=b"%d" % sent, key=b"%d" % (sent % 101), on_delivery=report)
                    sent += 1
                except BufferError:
                    break
            producer.poll(0.005)

    t = threading.Thread(target=produce_loop)
    t.start()
    try:
        for k in range(kills):
            time.sleep(rng.uniform(0.2, 1.2))
            before = len(acked)
            broker.kill()
            time.sleep(rng.uniform(0, 0.3))
            broker.start()
            # the producer must make progress after each restart
            deadline = time.monotonic() + 30
            while len(acked) <= before and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(acked) > before, f"no progress after restart {k + 1}"
        time.sleep(rng.uniform(0.2, 0.5))
    finally:
        stop.set()
        t.join()
    try:
        assert producer.flush(60) == 0
        assert not errors, errors[:5]
        assert acked, "nothing was acknowledged"
        broker.kill()  # the final state too is read back after an unclean restart
        broker.start()
        log = consume_all(broker.bootstrap, "crash", PARTITIONS)
    finally:
        broker.stop()
    values = [v for vs in log.values() for v in vs]
    assert len(values) == len(set(values)), "a message is in the log twice"
    missing = acked - set(values)
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:5]}"
    for p, vs in log.items():
        assert vs == sorted(vs), f"partition {p}: production order not kept"
    text = broker.log_text()
    assert text.count("No clean shutdown marker") >= kills + 1
    return len(acked), sent


def test_sigkill_loses_no_acknowledged_message(tmp_path):
    print(run_kill_loop(tmp_path, kills=3, seed=random.randrange(1 << 30)))


@pytest.mark.long
def test_sigkill_loses_no_acknowledged_message_long(tmp_path):
    print(run_kill_loop(tmp_path, kills=20, seed=random.randrange(1 << 30)))


# -- damaged segment tails ------------------------------------------------------------------------------

def produce_batches(port, topic, n):
    c = RawClient(port)
    for i in range(n):
        b = build_batch([Record(key=b"k", value=b"batch-%d-%d" % (i, j), timestamp=int(time.time() * 1000))
                         for j in range(5)])
        r = c.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
            TPD(name=topic, partition_data=[TPD.PartitionProduceData(index=0, records=b)])]), 9)
        assert r.responses[0].partition_responses[0].error_code == 0
    c.close()


def fetch_all(port, topic):
    c = RawClient(port)
    out, offset = [], 0
    while True:
        r = c.request(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=2**24, topics=[
            FT(topic=topic, partitions=[FT.FetchPartition(partition=0, fetch_offset=offset,
                                                          partition_max_bytes=2**24)])]), 12)
        pd = r.responses[0].partitions[0]
        assert pd.error_code == 0
        recs = [rec for _, h, b in iter_batches(memoryview(pd.records or b"")) for rec in decode_records(b, h)]
        if not recs:
            c.close()
            return out, pd.high_watermark
        out += [(rec.offset, rec.value) for rec in recs]
        offset = recs[-1].offset + 1


@pytest.mark.parametrize("damage", ["garbage", "flip", "torn"])
def test_damaged_segment_tail_is_truncated_at_restart(tmp_path, damage):
    port = free_port()
    broker = BrokerProcess(tmp_path / "data", [f"listeners=PLAINTEXT://127.0.0.1:{port}"]).start()
    try:
        create_topic(port, "dmg", 1)
        produce_batches(port, "dmg", 10)
        before, _ = fetch_all(port, "dmg")
        assert len(before) == 50
        broker.kill()
        seg = os.path.join(broker.data_dir, "dmg-0", "00000000000000000000.log")
        size = os.path.getsize(seg)
        with open(seg, "r+b") as f:
            data = f.read()
            last = [pos for pos, _, _ in iter_batches(memoryview(data))][-1]
            if damage == "garbage":
                f.seek(size)
                f.write(os.urandom(100))
            elif damage == "flip":
                f.seek(last + 70)
                f.write(bytes([data[last + 70] ^ 0x5A]))
            else:
                f.truncate(size - 7)
        mark = len(broker.log_text())
        broker.start()
        text = broker.log_text(mark)
        assert "WARNING" in text and "Found invalid batch in log segment" in text and seg in text
        kept = 50 if damage == "garbage" else 45
        after, hw = fetch_all(port, "dmg")
        assert after == before[:kept] and hw == kept
        expect = size if damage == "garbage" else last
        assert os.path.getsize(seg) == expect
        produce_batches(port, "dmg", 1)  # appends continue at the new log end
        after, hw = fetch_all(port, "dmg")
        assert hw == kept + 5 and [o for o, _ in after] == list(range(kept + 5))
        # and a clean restart keeps it all
        broker.stop()
        broker.start()
        assert fetch_all(port, "dmg") == (after, hw)
    finally:
        broker.stop()
