"""Kill -9 cycles under offset-commit and idempotent-produce load, every acknowledged
commit and record checked after each restart: no acknowledged commit or record lost, no
committed offset that was never committed, no record twice. 3 cycles here, 100 with --long."""
import os
import random
import threading
import time

import pytest

from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from kgroup.protocol.records import decode_records, iter_batches
from tests.broker.test_crash import create_topic, free_port
from tests.broker.test_data_path import fetch_request
from tests.faults.test_disk_faults import commit
from tests.harness import BrokerProcess, RawClient

FT = OffsetFetchRequest.OffsetFetchRequestTopic
GROUPS = [f"kill-g{i}" for i in range(4)]
PARTITIONS = 3


class CommitLoad(threading.Thread):
    """Commits increasing offsets for each group in turn; remembers the last acknowledged and
    the last attempted value per group. ``pause`` holds it between commits."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.acked = dict.fromkeys(GROUPS, 0)
        self.attempted = dict.fromkeys(GROUPS, 0)
        self.stop = threading.Event()
        self.pause = threading.Event()
        self.idle = threading.Event()

    def run(self):
        c, n = None, 0
        while not self.stop.is_set():
            if self.pause.is_set():
                self.idle.set()
                c = None
                time.sleep(0.01)
                continue
            self.idle.clear()
            g = GROUPS[n % len(GROUPS)]
            n += 1
            try:
                if c is None:
                    c = RawClient(self.port)
                value = self.attempted[g] + 1
                self.attempted[g] = value
                if commit(c, g, "kc", value) == 0:
                    self.acked[g] = value
            except (OSError, ConnectionError, AssertionError):
                c = None
                time.sleep(0.02)


def committed(port, group):
    """The group's committed offset, once its __consumer_offsets partition is loaded (after a
    restart it loads in the background: COORDINATOR_LOAD_IN_PROGRESS until then)."""
    c = RawClient(port)
    deadline = time.monotonic() + 30
    while True:
        r = c.request(OffsetFetchRequest(group_id=group, topics=[FT(name="kc", partition_indexes=[0])]), 7)
        if r.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    c.close()
    assert r.error_code == 0, r
    return r.topics[0].partitions[0].committed_offset


def read_all(port):
    """Every record of "kc" now in the log, in offset order per partition (records produced
    meanwhile may be included)."""
    c, values = RawClient(port), []
    for p in range(PARTITIONS):
        offset = 0
        while True:
            pd = c.request(fetch_request("kc", offset, partition=p), 12).responses[0].partitions[0]
            assert pd.error_code == 0, pd
            got = [r for _, h, b in iter_batches(memoryview(pd.records or b"")) for r in decode_records(b, h)]
            if not got:
                break
            assert [r.offset for r in got] == list(range(offset, offset + len(got))), "gap in offsets"
            values += [int(r.value) for r in got]
            offset = got[-1].offset + 1
    c.close()
    return values


def run_cycles(tmp_path, kills, seed):
    from confluent_kafka import Producer
    rng = random.Random(seed)
    port = free_port()
    broker = BrokerProcess(tmp_path / "data", [f"listeners=PLAINTEXT://127.0.0.1:{port}"]).start()
    create_topic(port, "kc", PARTITIONS)
    acked, errors = set(), []

    def report(err, msg):
        (errors.append(err) if err is not None else acked.add(int(msg.value())))

    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 2, "message.timeout.ms": 300000, "reconnect.backoff.ms": 20,
                         "reconnect.backoff.max.ms": 200})
    stop, sent = threading.Event(), [0]

    def produce_loop():
        while not stop.is_set():
            for _ in range(100):
                try:
                    producer.produce("kc", value=b"%d" % sent[0], on_delivery=report)
                    sent[0] += 1
                except BufferError:
                    break
            producer.poll(0.005)

    commits = CommitLoad(port)
    commits.start()
    t = threading.Thread(target=produce_loop, daemon=True)
    t.start()
    try:
        for k in range(kills):
            time.sleep(rng.uniform(0.3, 1.0))
            commits.pause.set()
            assert commits.idle.wait(10)
            records_acked = set(acked)          # acknowledged before the kill
            commits_acked, commits_tried = dict(commits.acked), dict(commits.attempted)
            broker.kill()
            broker.start()
            for g in GROUPS:
                got = committed(port, g)
                assert commits_acked[g] <= got <= commits_tried[g], (k, g, commits_acked[g], got, commits_tried[g])
            values = read_all(port)
            assert len(values) == len(set(values)), f"cycle {k + 1}: a record is in the log twice"
            missing = records_acked - set(values)
            assert not missing, f"cycle {k + 1}: {len(missing)} acknowledged records lost"
            assert set(values) <= set(range(sent[0])), "a record never produced"
            commits.pause.clear()
    finally:
        stop.set()
        commits.stop.set()
        t.join(10)
        producer.flush(30)
        broker.stop()
    assert not errors, errors[:5]
    assert len(acked) > 0 and all(v > 0 for v in commits.acked.values())
    return len(acked), sum(commits.acked.values())


def test_kill_cycles_under_commit_and_produce_load(tmp_path):
    print(run_cycles(tmp_path, kills=3, seed=random.randrange(1 << 30)))


@pytest.mark.long
def test_kill_cycles_under_commit_and_produce_load_long(tmp_path):
    """100 cycles (KGROUP_KILL_CYCLES=N: N). Each cycle reads the whole log back, so later cycles
    take longer: ~15 s each at first, ~2 min by the 60th on a loaded 2-core machine."""
    kills = int(os.environ.get("KGROUP_KILL_CYCLES", "100"))
    print(run_cycles(tmp_path, kills=kills, seed=random.randrange(1 << 30)))
