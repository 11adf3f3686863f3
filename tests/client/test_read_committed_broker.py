"""read_committed end to end against the kgroup broker: a partition log holding an aborted, a
committed and an open transaction (written with the storage layer, as the transaction
coordinator's markers would be, while the broker is stopped), then served by the broker, whose
Fetch with isolation_level=1 stops at the last stable offset and lists the aborted transactions.
Our consumer must return exactly the committed records and never a control record; end offsets
under read_committed are the LSO."""
import asyncio
import time

import pytest

from kgroup.client import TopicPartition as TP
from kgroup.client.consumer import Consumer
from kgroup.client.sync import KafkaAdmin
from kgroup.client.admin import NewTopic
from kgroup.protocol.records import Record, build_batch, build_end_txn_marker_batch
from kgroup.storage.log import PartitionLog
from kgroup.storage.producer_state import AppendOrigin
from tests.harness import BrokerProcess

TOPIC = "rc"


def _txn_batch(pid, seq, values, base_offset=0):
    return build_batch([Record(None, v, (), 1_700_000_000_000) for v in values], producer_id=pid,
                       producer_epoch=0, base_sequence=seq, is_transactional=True)


def seed_transactions(directory):
    """offsets: 0 plain | 1-2 pid 1 (aborted) | 3 pid 2 | 4 ABORT pid 1 | 5 plain | 6 COMMIT pid 2 |
    7 pid 3 (open) | 8 plain. Committed view: plain-0, c-1, plain-1 (LSO 7)."""
    plog = PartitionLog(directory)
    try:
        plog.append(build_batch([Record(None, b"plain-0", (), 1_700_000_000_000)]))
        plog.append(_txn_batch(1, 0, [b"a-1", b"a-2"]))
        plog.append(_txn_batch(2, 0, [b"c-1"]))
        plog.append(build_end_txn_marker_batch(1, 0, False, 0, 1_700_000_000_000), origin=AppendOrigin.COORDINATOR)
        plog.append(build_batch([Record(None, b"plain-1", (), 1_700_000_000_000)]))
        plog.append(build_end_txn_marker_batch(2, 0, True, 0, 1_700_000_000_000), origin=AppendOrigin.COORDINATOR)
        plog.append(_txn_batch(3, 0, [b"open-1"]))
        plog.append(build_batch([Record(None, b"plain-2", (), 1_700_000_000_000)]))
        plog.flush()
    finally:
        plog.close()
    return 7  # the last stable offset: pid 3's transaction is still open


@pytest.fixture(scope="module")
def seeded_broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("rc-broker") / "data"
    broker = BrokerProcess(data).start()
    with KafkaAdmin(bootstrap_servers=broker.bootstrap) as admin:
        assert admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC] is None
    broker.stop()
    lso = seed_transactions(str(data / f"{TOPIC}-0"))
    broker = BrokerProcess(data).start()
    yield broker, lso
    broker.stop()


async def read_until(bootstrap, isolation, stop_at):
    async with Consumer(bootstrap_servers=bootstrap, isolation_level=isolation, fetch_max_wait_ms=50,
                        max_poll_records=1) as c:
        tp = TP(TOPIC, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + 10
        while await c.position(tp) < stop_at and time.monotonic() < deadline:
            got += await c.poll(100)
        end = (await c.end_offsets([tp]))[tp]
        # nothing more arrives: read_committed stops at the LSO
        got += await c.poll(300)
        return [(r.offset, r.value) for r in got], await c.position(tp), end


def test_read_committed_consumer_against_the_broker(seeded_broker):
    broker, lso = seeded_broker
    got, position, end = asyncio.run(read_until(broker.bootstrap, "read_committed", lso))
    assert got == [(0, b"plain-0"), (3, b"c-1"), (5, b"plain-1")]
    assert position == lso and end == lso


def test_read_uncommitted_consumer_against_the_broker(seeded_broker):
    broker, _ = seeded_broker
    got, position, end = asyncio.run(read_until(broker.bootstrap, "read_uncommitted", 9))
    assert got == [(0, b"plain-0"), (1, b"a-1"), (2, b"a-2"), (3, b"c-1"), (5, b"plain-1"), (7, b"open-1"),
                   (8, b"plain-2")]
    assert position == 9 and end == 9
