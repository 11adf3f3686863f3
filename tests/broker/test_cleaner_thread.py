"""The broker builds a clean on its cleaner thread (Kafka's CleanerThread) while the event loop
keeps serving the log: produce and fetch of the topic being cleaned go on, a topic deleted
mid-clean is deleted (the clean abandoned, no file left behind) and can be recreated, and a
shutdown does not wait for the clean. The build is held in flight by wrapping it."""
from __future__ import annotations

import glob
import os
import threading
import time

import pytest

import kgroup.broker.broker as broker_module
import kgroup.testing

pytestmark = pytest.mark.interop

KEYS = 50


@pytest.fixture
def held_cleans(monkeypatch):
    """Cleans of a topic wait, once built on the cleaner thread is about to start, until the
    test releases that topic (or the clean is aborted)."""
    started: dict[str, threading.Event] = {}
    released: dict[str, threading.Event] = {}
    real = broker_module.build_cleaned

    def held(plan):
        topic = plan.tp[0]
        started.setdefault(topic, threading.Event()).set()
        gate = released.setdefault(topic, threading.Event())
        while not gate.is_set() and not plan.abort.is_set():
            time.sleep(0.01)
        return real(plan)

    monkeypatch.setattr(broker_module, "build_cleaned", held)

    class Holds:
        def wait_started(self, topic, timeout=20):
            assert started.setdefault(topic, threading.Event()).wait(timeout), f"no clean of {topic} started"

        def release(self, topic):
            released.setdefault(topic, threading.Event()).set()
    return Holds()


def create(admin, *topics):
    from confluent_kafka.admin import NewTopic
    for f in admin.create_topics([NewTopic(t, 1, 1, config={
            "cleanup.policy": "compact", "segment.bytes": "2000", "min.cleanable.dirty.ratio": "0.01"})
            for t in topics]).values():
        f.result(10)


def produce(bootstrap, topic, rounds, start=0):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    latest = {}
    for r in range(start, start + rounds):
        for k in range(KEYS):
            v = b"r%d-%s" % (r, b"x" * 20)
            p.produce(topic, key=b"k%d" % k, value=v, partition=0)
            latest[b"k%d" % k] = v
        p.flush(10)
    assert p.flush(10) == 0
    return latest


def consume(bootstrap, topic):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got, idle = [], 0
    while idle < 4:
        msgs = [m for m in c.consume(1000, 0.2) if m.error() is None]
        idle = 0 if msgs else idle + 1
        got += [(m.key(), m.value()) for m in msgs]
    c.close()
    return got


def leftovers(data_dir):
    return glob.glob(os.path.join(data_dir, "*", "*.cleaned"))


def test_produce_fetch_and_topic_deletion_while_a_clean_is_built(tmp_path, held_cleans, caplog):
    from confluent_kafka.admin import AdminClient
    with kgroup.testing.broker(tmp_path / "d", {"log.cleaner.backoff.ms": 50}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        create(admin, "a")
        latest = produce(b.bootstrap_servers, "a", 4)
        held_cleans.wait_started("a")
        # the clean of "a" is in flight: its log takes appends and serves fetches
        latest.update(produce(b.bootstrap_servers, "a", 2, start=4))
        assert len(consume(b.bootstrap_servers, "a")) == 6 * KEYS     # nothing cleaned yet
        held_cleans.release("a")
        deadline = time.time() + 20
        while len(got := consume(b.bootstrap_servers, "a")) >= 6 * KEYS and time.time() < deadline:
            time.sleep(0.2)
        assert len(got) < 6 * KEYS and dict(got) == latest           # cleaned, nothing lost

        # a clean of "b" in flight when "b" is deleted, then "b" created again
        create(admin, "b")
        produce(b.bootstrap_servers, "b", 4)
        held_cleans.wait_started("b")
        admin.delete_topics(["b"])["b"].result(10)
        time.sleep(0.3)                                 # the aborted build finishes on its thread
        create(admin, "b")
        fresh = produce(b.bootstrap_servers, "b", 1)
        assert dict(consume(b.bootstrap_servers, "b")) == fresh
        assert not leftovers(b.data_dir)
    assert "log cleaner failed" not in caplog.text and "compaction of" not in caplog.text


def test_shutdown_with_a_clean_in_flight(tmp_path, held_cleans):
    from confluent_kafka.admin import AdminClient
    b = kgroup.testing.broker(tmp_path / "d", {"log.cleaner.backoff.ms": 50})
    with b as running:
        create(AdminClient({"bootstrap.servers": running.bootstrap_servers}), "a")
        latest = produce(running.bootstrap_servers, "a", 4)
        held_cleans.wait_started("a")       # never released: stop() aborts it
        t = time.monotonic()
        running.stop()
        assert time.monotonic() - t < 5
        assert not leftovers(running.data_dir)
        running.start()                     # the data is as produced, and cleans again
        held_cleans.release("a")
        got = consume(running.bootstrap_servers, "a")
        assert dict(got) == latest


def test_an_io_error_of_the_clean_takes_the_log_directory_offline(tmp_path, monkeypatch):
    # Kafka's LogCleaner.cleanLog: an IOException marks the log directory offline (and the
    # broker, whose only directory it is, stops taking requests)
    import errno
    from confluent_kafka.admin import AdminClient

    def failing(plan):
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(broker_module, "build_cleaned", failing)
    with kgroup.testing.broker(tmp_path / "d", {"log.cleaner.backoff.ms": 50}) as b:
        create(AdminClient({"bootstrap.servers": b.bootstrap_servers}), "a")
        produce(b.bootstrap_servers, "a", 4)
        deadline = time.time() + 20
        while not b.broker.log_dir_failure.offline and time.time() < deadline:
            time.sleep(0.05)
        assert b.broker.log_dir_failure.offline
