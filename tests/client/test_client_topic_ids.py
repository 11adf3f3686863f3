"""Our client names topics by id where Kafka 4.3's Java client does (KIP-516), against a kgroup
broker: Produce v13 and Fetch v13+ whenever the metadata gave every topic's id, OffsetCommit and
OffsetFetch v10 for the KIP-848 consumer (Java's CommitRequestManager), by name (v9) for the
classic consumer and the admin (Java's forTopicNames builders); and by name again, at the older
versions, when the broker offers nothing newer."""
import asyncio
import uuid

import pytest

from kgroup.client import TopicPartition as TP
from kgroup.client import connection
from kgroup.client.admin import Admin
from kgroup.client.consumer import Consumer
from kgroup.client.producer import Producer
from kgroup.client.types import OffsetAndMetadata
from kgroup.testing.broker import KafkaBroker

PRODUCE, FETCH, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 8, 9


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    with KafkaBroker(tmp_path_factory.mktemp("topic-ids") / "data",
                     {"group.initial.rebalance.delay.ms": 0, "num.partitions": 2}) as broker:
        yield broker.bootstrap_servers


@pytest.fixture
def seen(monkeypatch):
    """(api key, version) of every response our client decodes."""
    got: list[tuple[int, int]] = []
    decode = connection._decode_response

    def record(key, version, frame):
        got.append((key, version))
        return decode(key, version, frame)
    monkeypatch.setattr(connection, "_decode_response", record)
    return got


def versions(seen, key):
    return {v for k, v in seen if k == key}


def run(coro, timeout=60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def _round_trip(bootstrap, protocol):
    topic, group = f"ids-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([(topic, 2)])
    async with Producer(bootstrap_servers=bootstrap, linger_ms=1) as p:
        metas = await asyncio.gather(*[await p.send(topic, b"v%d" % i, partition=i % 2) for i in range(6)])
    assert sorted((m.partition, m.offset) for m in metas) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    got = []
    async with Consumer(topic, bootstrap_servers=bootstrap, group_id=group, group_protocol=protocol,
                        auto_offset_reset="earliest", enable_auto_commit=False) as c:
        while len(got) < 6:
            got += await c.poll(200)
        await c.commit({TP(topic, 0): OffsetAndMetadata(3, "m0"), TP(topic, 1): OffsetAndMetadata(2)})
        committed = await c.committed([TP(topic, 0), TP(topic, 1)])
    assert sorted(r.value for r in got) == [b"v%d" % i for i in range(6)]
    assert {tp: (o.offset, o.metadata) for tp, o in committed.items()} == {TP(topic, 0): (3, "m0"),
                                                                          TP(topic, 1): (2, "")}
    async with Admin(bootstrap_servers=bootstrap) as admin:
        listed = await admin.list_group_offsets(group)
    assert {tp: o.offset for tp, o in listed.items()} == {TP(topic, 0): 3, TP(topic, 1): 2}


def test_kip848_consumer_and_producer_name_topics_by_id(bootstrap, seen):
    run(_round_trip(bootstrap, "consumer"))
    assert versions(seen, PRODUCE) == {13}
    assert min(versions(seen, FETCH)) >= 13
    assert versions(seen, OFFSET_COMMIT) == {10}
    # the consumer's OffsetFetch by id; the admin's by name (Java's admin: forTopicNames)
    assert versions(seen, OFFSET_FETCH) == {9, 10}


def test_classic_consumer_names_its_offsets_topics(bootstrap, seen):
    run(_round_trip(bootstrap, "classic"))
    assert versions(seen, PRODUCE) == {13} and min(versions(seen, FETCH)) >= 13
    assert versions(seen, OFFSET_COMMIT) == {9} and versions(seen, OFFSET_FETCH) == {9}


def test_names_again_when_the_broker_has_no_topic_id_versions(bootstrap, seen, monkeypatch):
    """A broker whose newest versions predate topic ids: every request names its topics, and
    the round trip works the same."""
    negotiate = connection.BrokerConnection._negotiate

    async def older_broker(self):
        await negotiate(self)
        for key, top in ((PRODUCE, 12), (FETCH, 12), (OFFSET_COMMIT, 9), (OFFSET_FETCH, 9)):
            lo, hi = self.broker_versions[key]
            self.broker_versions[key] = (lo, min(hi, top))
    monkeypatch.setattr(connection.BrokerConnection, "_negotiate", older_broker)
    run(_round_trip(bootstrap, "consumer"))
    assert versions(seen, PRODUCE) == {12} and versions(seen, FETCH) == {12}
    assert versions(seen, OFFSET_COMMIT) == {9} and versions(seen, OFFSET_FETCH) == {9}
