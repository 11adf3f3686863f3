"""Matrix soak (long: `pytest --long`, `make test-long`): one group with a member of every client
(kafka-python, aiokafka, confluent-kafka, kcat, kafkajs; all offering "range") consumes a steady
stream while, every cycle, one member (in turn) is SIGKILLed and started again, and every fourth
cycle the broker is SIGKILLed and restarted on the same port. At the end every record produced
has been consumed (at least once: a killed member's uncommitted records come again), nothing
below a partition's committed offset was skipped, and the group's commits reach the log end."""
import itertools
import random
import threading
import time

import pytest

from tests.harness import BrokerProcess
from tests.interop.test_matrix_harness import (
    BROKER_OVERRIDES, GROUP_CLIENTS, Members, _Admin, create_topics, end_offsets, free_port,
    produce_reference, tag, topic_partitions, wait_committed, wait_stable, wait_until)

pytestmark = [pytest.mark.interop, pytest.mark.matrix, pytest.mark.long]

PARTITIONS = 10
CYCLES = 15


@pytest.mark.long
def test_mixed_group_soak_with_member_and_broker_kills(tmp_path, record_property):
    tag(record_property, "all", "soak-kills")
    port = free_port()
    overrides = BROKER_OVERRIDES + [f"listeners=PLAINTEXT://127.0.0.1:{port}"]
    broker = BrokerProcess(tmp_path / "data", overrides).start()
    topic = group = "soak"
    everything = topic_partitions(topic, PARTITIONS)
    members = Members()
    live: dict = {}
    stop = threading.Event()
    produced: list = []
    rng = random.Random(0)

    def producer():
        n = 0
        while not stop.is_set():
            batch = [(f"k{i}", f"soak-{i}", None) for i in range(n, n + 20)]
            try:
                produce_reference(broker.bootstrap, topic, batch)
                produced.extend(v for _, v, _ in batch)
                n += 20
            except Exception:  # noqa: BLE001 - the broker is restarting: try again
                time.sleep(0.5)
            time.sleep(0.2)

    def start(client):
        live[client] = members.start(client, broker.bootstrap, group, [topic], assignors=["range"],
                                     log_dir=str(tmp_path), client_id=f"soak-{client}")

    try:
        create_topics(broker.bootstrap, {topic: PARTITIONS})
        for c in GROUP_CLIENTS:
            start(c)
        wait_stable(broker.bootstrap, group, len(GROUP_CLIENTS), everything, timeout=60)
        feeder = threading.Thread(target=producer, daemon=True)
        feeder.start()
        for cycle, victim in zip(range(CYCLES), itertools.cycle(GROUP_CLIENTS)):
            time.sleep(rng.uniform(2, 5))
            live[victim].kill()
            start(victim)
            if cycle % 4 == 3:
                broker.kill()
                broker = BrokerProcess(tmp_path / "data", overrides).start()
        stop.set()
        feeder.join(30)
        wait_stable(broker.bootstrap, group, len(GROUP_CLIENTS), everything, timeout=90)
        want = set(produced)
        wait_until(lambda: {r[3] for m in members for r in m.records()} >= want, 120,
                   lambda: f"{len(want - {r[3] for m in members for r in m.records()})} records never consumed")
        wait_committed(broker.bootstrap, group, end_offsets(broker.bootstrap, topic, PARTITIONS), timeout=60)
        for m in live.values():
            assert m.alive, m.describe()
    finally:
        stop.set()
        members.close()
        _Admin.drop(broker.bootstrap)
        broker.stop()
