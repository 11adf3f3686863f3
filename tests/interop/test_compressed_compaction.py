"""A compacted topic fed with snappy, lz4 and zstd batches by confluent-kafka producers and
compacted while consumers read it: the cleaner decompresses and re-compresses each codec (the
codec packages are dependencies), no batch is skipped with a warning, and readers see the latest
value of every key."""
import glob
import os
import threading
import time

import pytest

from tests.harness import BrokerProcess

pytestmark = pytest.mark.interop

KEYS = 200
ROUNDS = 6


def _segments(data_dir, topic):
    return sorted(glob.glob(os.path.join(data_dir, f"{topic}-0", "*.log")))


def test_compacted_topic_with_every_codec(tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    b = BrokerProcess(tmp_path / "d", ["log.cleaner.backoff.ms=200"]).start()
    stop = threading.Event()
    live_errors, live_seen = [], []

    def live_reader():   # reads from the start, the whole time the cleaner works
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "live", "auto.offset.reset": "earliest",
                      "enable.auto.commit": False})
        c.assign([TopicPartition("compact", 0, 0)])
        while not stop.is_set():
            for m in c.consume(500, 0.1):
                if m.error() is None:
                    live_seen.append((m.key(), m.value()))
                else:
                    live_errors.append(m.error())
        c.close()

    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("compact", 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": "8000", "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "100"})])["compact"].result(10)
        reader = threading.Thread(target=live_reader, daemon=True)
        reader.start()
        latest = {}
        for rnd in range(ROUNDS):
            codec = ("snappy", "lz4", "zstd")[rnd % 3]
            p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": codec, "linger.ms": 5,
                          "batch.num.messages": 20})
            for k in range(KEYS):
                v = b"%s-round%d-%s" % (codec.encode(), rnd, b"x" * 40)
                p.produce("compact", key=b"k%d" % k, value=v, partition=0)
                latest[b"k%d" % k] = v
            assert p.flush(10) == 0
        total = KEYS * ROUNDS
        # the cleaner runs by itself (dirty ratio, backoff), not at the retention interval (5 min)
        deadline = time.time() + 30
        while time.time() < deadline:
            c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "check", "auto.offset.reset": "earliest",
                          "enable.auto.commit": False})
            c.assign([TopicPartition("compact", 0, 0)])
            got, idle = [], 0
            while idle < 5:
                msgs = [m for m in c.consume(1000, 0.2) if m.error() is None]
                idle = 0 if msgs else idle + 1
                got += [(m.key(), m.value()) for m in msgs]
            c.close()
            if len(got) <= total - 2 * KEYS:    # at least two rounds' worth of superseded records gone
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"no compaction: a reader still sees {len(got)} of {total} records")
        assert dict(got) == latest             # the latest value of every key survived
        assert len(got) < total
        stop.set()
        reader.join(20)
        assert not live_errors, live_errors
        assert dict(live_seen) == latest       # the concurrent reader ended on the same state
        log_text = b.log_text()
        assert "Cannot clean batch" not in log_text and "UNSUPPORTED_COMPRESSION" not in log_text
        assert len(_segments(b.data_dir, "compact")) >= 2
    finally:
        stop.set()
        b.stop()
