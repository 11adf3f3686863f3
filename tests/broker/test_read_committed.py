"""read_committed over raw sockets against a real broker process: Fetch isolation_level=1 stops
at the last stable offset and lists the aborted transactions of what it returns; ListOffsets
latest under read_committed is the LSO. The ABORT marker is written by WriteTxnMarkers, the
transaction coordinator's marker path, while the broker runs."""
import time

import pytest

from kgroup.protocol.messages.list_offsets import ListOffsetsRequest
from kgroup.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from kgroup.protocol.records import Record, build_batch, decode_records, iter_batches
from tests.broker.test_data_path import LP, LT, fetch_request, new_topic, produce, produce_request, topic_id
from tests.harness import BrokerProcess, RawClient

PID, EPOCH = 4242, 0


def now_ms():
    return int(time.time() * 1000)


def records(n, start, ts, **kw):
    return build_batch([Record(key=b"k", value=b"v%d" % i, timestamp=ts + i) for i in range(start, start + n)], **kw)


def produce_txn(c, topic, batch):
    """A transactional batch, as its producer sends it: with its transactional id."""
    req = produce_request(topic, batch)
    req.transactional_id = "no-coordinator"
    return c.request(req, 9).responses[0].partition_responses[0]


def values(pd):
    return [r.value for _, h, b in iter_batches(memoryview(pd.records or b"")) for r in decode_records(b, h)]


def latest(c, topic, isolation, version=7, timestamp=-1):
    r = c.request(ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
        LT(name=topic, partitions=[LP(partition_index=0, timestamp=timestamp)])]), version)
    return r.topics[0].partitions[0]


@pytest.fixture
def broker(tmp_path):
    # the transactions here have no coordinator (their markers come by WriteTxnMarkers), so their
    # batches are written unverified
    b = BrokerProcess(tmp_path / "data", ["auto.create.topics.enable=false",
                                          "transaction.partition.verification.enable=false"]).start()
    yield b
    b.stop()


@pytest.mark.parametrize("version", [4, 12, 17])
def test_read_committed_fetch_and_list_offsets(broker, version):
    c = RawClient(broker.port)
    t = new_topic(c)
    tid = topic_id(c, t) if version >= 13 else bytes(16)
    ts = now_ms()
    assert produce(c, t, records(2, 0, ts)).error_code == 0                                     # 0-1
    assert produce_txn(c, t, records(2, 2, ts, producer_id=PID, producer_epoch=EPOCH, base_sequence=0,
                                     is_transactional=True)).error_code == 0                    # 2-3 open
    assert produce(c, t, records(1, 4, ts)).error_code == 0                                     # 4

    def fetch_v(offset, isolation):
        req = fetch_request(t, offset, topic_id=tid)
        req.isolation_level = isolation
        return c.request(req, version).responses[0].partitions[0]

    committed = fetch_v(0, 1)
    assert (committed.error_code, committed.high_watermark, committed.last_stable_offset) == (0, 5, 2)
    assert values(committed) == [b"v0", b"v1"]
    assert committed.aborted_transactions == []                  # a list under read_committed
    uncommitted = fetch_v(0, 0)
    assert values(uncommitted) == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    assert uncommitted.aborted_transactions is None and uncommitted.last_stable_offset == 2
    at_lso = fetch_v(2, 1)
    assert at_lso.error_code == 0 and values(at_lso) == [] and at_lso.aborted_transactions == []

    assert latest(c, t, 1).offset == 2
    assert latest(c, t, 0).offset == 5
    assert latest(c, t, 0, version=1).offset == 5                # v1 has no isolation level
    assert latest(c, t, 1, timestamp=-2).offset == 0
    assert (latest(c, t, 1, timestamp=ts + 3).offset, latest(c, t, 0, timestamp=ts + 3).offset) == (-1, 3)
    assert latest(c, t, 1, timestamp=ts + 1).offset == 1         # before the LSO: found

    # The transaction aborts: its marker arrives by WriteTxnMarkers, the transaction
    # coordinator's path (answered once the marker is fsynced).
    M = WriteTxnMarkersRequest.WritableTxnMarker
    r = c.request(WriteTxnMarkersRequest(markers=[M(
        producer_id=PID, producer_epoch=EPOCH, transaction_result=False, coordinator_epoch=0,
        topics=[M.WritableTxnMarkerTopic(name=t, partition_indexes=[0])])]), 1)
    assert r.markers[0].topics[0].partitions[0].error_code == 0
    committed = fetch_v(0, 1)
    assert (committed.high_watermark, committed.last_stable_offset) == (6, 6)
    assert values(committed)[:5] == [b"v0", b"v1", b"v2", b"v3", b"v4"] and len(values(committed)) == 6
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [(PID, 2)]
    after = fetch_v(4, 1)
    assert [(a.producer_id, a.first_offset) for a in after.aborted_transactions] == [(PID, 2)]  # marker at 5 overlaps
    assert latest(c, t, 1).offset == latest(c, t, 0).offset == 6
    c.close()
    # ... and it is on disk: the same after a SIGKILL.
    broker.kill()
    broker.start()
    c = RawClient(broker.port)
    committed = fetch_v(0, 1)
    assert (committed.high_watermark, committed.last_stable_offset) == (6, 6)
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [(PID, 2)]
    c.close()
