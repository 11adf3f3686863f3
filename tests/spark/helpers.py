"""Helpers for the Spark tests: topics and records on the test broker."""
from __future__ import annotations


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from kgroup.client.admin import NewTopic
    from kgroup.client.sync import KafkaAdmin
    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        err = admin.create_topics([NewTopic(name, partitions, 1)])[name]
        assert err is None, err


def produce(bootstrap: str, topic: str, start: int, count: int, headers: bool = False) -> dict:
    """Send records k<i>/v<i> (i in [start, start+count)); {(partition, offset): (key, value)}."""
    from kgroup.client.sync import KafkaProducer
    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=262144) as producer:
        futures = []
        for i in range(start, start + count):
            key, value = f"k{i}".encode(), f"value-{i}-{'x' * (i % 17)}".encode()
            h = [("i", str(i).encode()), ("n", None)] if headers else None
            futures.append((producer.send(topic, value, key, headers=h), key, value))
        producer.flush()
        out = {}
        for f, key, value in futures:
            md = f.get(30)
            out[(md.partition, md.offset)] = (key, value)
    return out
