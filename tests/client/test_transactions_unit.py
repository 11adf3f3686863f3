"""Transactions in our client without a broker: the read_committed filter of the fetcher (Java's
CompletedFetch: per producer id, records from the first offset of an aborted transaction up to
its ABORT marker are dropped; control records are never returned) and the producer's
transaction state machine and error classification (Java's TransactionManager)."""
import pytest
from hypothesis import given, settings, strategies as st

from kgroup.client.assignors import TopicPartition as TP
from kgroup.client.errors import IllegalStateError
from kgroup.client.fetcher import CompletedFetch
from kgroup.client.config import ConfigError, ProducerConfig
from kgroup.client.transactions import (Outcome, ProducerFencedError, State, TransactionAbortableError,
                                        TransactionManager, classify)
from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.fetch import FetchResponse
from kgroup.protocol.records import Compression, Record, build_batch, build_end_txn_marker_batch

Aborted = FetchResponse.FetchableTopicResponse.PartitionData.AbortedTransaction
TPX = TP("t", 0)


class Log:
    """A partition log built batch by batch, as a broker would serve it."""

    def __init__(self):
        self.buf = bytearray()
        self.next = 0
        self.aborted = []  # (producer id, first offset) of aborted transactions

    def data(self, pid, values, transactional=True, compression=Compression.NONE):
        recs = [Record(None, v.encode(), (), 1000) for v in values]
        self.buf += build_batch(recs, base_offset=self.next, producer_id=pid, producer_epoch=0,
                                base_sequence=0 if pid >= 0 else -1, is_transactional=transactional,
                                compression=compression)
        first = self.next
        self.next += len(values)
        return first

    def marker(self, pid, committed):
        self.buf += build_end_txn_marker_batch(pid, 0, committed, 0, 1000, base_offset=self.next)
        self.next += 1

    def fetch(self, read_committed, fetch_offset=0, aborted=None):
        aborted = self.aborted if aborted is None else aborted
        return CompletedFetch(TPX, fetch_offset, ErrorCode.NONE, self.next, bytes(self.buf),
                              [Aborted(producer_id=p, first_offset=o) for p, o in aborted], read_committed)


def values(cf, step=1000):
    out = []
    while True:
        got = cf.take(step)
        if not got:
            break
        out += [r.value.decode() for r in got]
    return out


def test_aborted_transaction_records_are_dropped_and_markers_never_returned():
    log = Log()
    first = log.data(1, ["a1", "a2"])          # producer 1, aborted
    log.aborted.append((1, first))
    log.data(2, ["c1"])                        # producer 2, committed, interleaved
    log.data(1, ["a3"])
    log.marker(1, committed=False)
    log.data(2, ["c2"])
    log.marker(2, committed=True)
    log.data(-1, ["plain"], transactional=False)
    cf = log.fetch(read_committed=True)
    assert values(cf) == ["c1", "c2", "plain"]
    assert cf.next_offset == log.next  # the position moves past the markers and aborted batches
    # read_uncommitted: everything but the control records
    assert values(log.fetch(read_committed=False)) == ["a1", "a2", "c1", "a3", "c2", "plain"]


def test_same_producer_aborted_then_committed_then_aborted():
    log = Log()
    log.aborted.append((7, log.data(7, ["x1"])))
    log.marker(7, committed=False)
    log.data(7, ["keep1", "keep2"])
    log.marker(7, committed=True)
    log.aborted.append((7, log.data(7, ["x2"], compression=Compression.GZIP)))
    log.data(7, ["x3"])
    log.marker(7, committed=False)
    log.data(7, ["keep3"])                     # an open transaction after the last marker
    assert values(log.fetch(read_committed=True)) == ["keep1", "keep2", "keep3"]


def test_without_the_aborted_list_nothing_is_dropped_but_markers():
    """Only the broker's aborted-transaction list marks data as aborted (Kafka's design: the
    consumer never buffers a transaction waiting for its marker)."""
    log = Log()
    log.data(3, ["a"])
    log.marker(3, committed=False)
    assert values(log.fetch(read_committed=True, aborted=[])) == ["a"]


def test_fetch_from_the_middle_and_small_polls():
    log = Log()
    log.data(1, ["k0", "k1", "k2"])
    log.marker(1, committed=True)
    log.aborted.append((2, log.data(2, ["x0", "x1"])))
    log.marker(2, committed=False)
    log.data(1, ["k3", "k4"])
    log.marker(1, committed=True)
    assert values(log.fetch(read_committed=True, fetch_offset=1), step=1) == ["k1", "k2", "k3", "k4"]
    cf = log.fetch(read_committed=True)
    assert [r.offset for r in cf.take(2)] == [0, 1]
    assert cf.next_offset == 2
    assert [r.offset for r in cf.take(5)] == [2, 7, 8]
    assert cf.take(5) == [] and cf.next_offset == log.next


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 3), st.sampled_from(["data", "commit", "abort"])),
                max_size=25))
def test_read_committed_matches_a_reference_model(ops):
    """Random interleavings of three producers: the records returned are exactly those of
    transactions that were not aborted (open transactions are returned, as the broker bounds
    read_committed fetches at the last stable offset)."""
    log = Log()
    open_txn: dict[int, list[str]] = {}
    open_first: dict[int, int] = {}
    expected_by_offset: dict[int, str] = {}
    counter = 0
    for pid, n, op in ops:
        if op == "data":
            vals = [f"p{pid}-{counter + i}" for i in range(n)]
            counter += n
            first = log.data(pid, vals)
            open_first.setdefault(pid, first)
            for i, v in enumerate(vals):
                expected_by_offset[first + i] = v
            open_txn.setdefault(pid, []).extend(range(first, first + n))
        elif pid in open_txn:
            if op == "abort":
                log.aborted.append((pid, open_first[pid]))
                for o in open_txn[pid]:
                    del expected_by_offset[o]
            log.marker(pid, committed=op == "commit")
            del open_txn[pid], open_first[pid]
    log.aborted.sort(key=lambda a: a[1])
    got = log.fetch(read_committed=True)
    assert values(got, step=2) == [expected_by_offset[o] for o in sorted(expected_by_offset)]
    assert got.next_offset == log.next


# --- the transaction state machine ---------------------------------------------------------------

def ready():
    txn = TransactionManager("tid", 60000)
    txn.begin_init()
    txn.init_done()
    return txn


def test_state_transitions_of_a_commit_and_an_abort():
    txn = TransactionManager("tid", 60000)
    with pytest.raises(IllegalStateError, match="initTransactions"):
        txn.begin_transaction()
    with pytest.raises(IllegalStateError, match="before completing a call to initTransactions"):
        txn.check_send()
    txn.begin_init()
    txn.init_done()
    assert txn.state == State.READY
    with pytest.raises(IllegalStateError, match="Cannot call send in state READY"):
        txn.check_send()
    txn.begin_transaction()
    assert not txn.transaction_started
    txn.maybe_add_partition(TPX)
    assert txn.new_partitions == {TPX}
    txn.partitions_added([TPX])
    assert txn.transaction_started and not txn.new_partitions
    txn.begin_commit()
    with pytest.raises(IllegalStateError, match="COMMITTING_TRANSACTION"):
        txn.check_send()
    txn.complete()
    assert txn.state == State.READY and not txn.partitions_in_transaction
    txn.begin_transaction()
    txn.offsets_added = True
    txn.begin_abort()
    assert txn.state == State.ABORTING_TRANSACTION
    txn.complete()
    assert txn.state == State.READY and not txn.transaction_started


def test_abortable_error_allows_only_abort():
    txn = ready()
    txn.begin_transaction()
    assert txn.on_error("Produce", ErrorCode.MESSAGE_TOO_LARGE) == Outcome.ABORTABLE
    assert txn.state == State.ABORTABLE_ERROR
    with pytest.raises(TransactionAbortableError):
        txn.check_send()
    with pytest.raises(TransactionAbortableError):
        txn.begin_commit()
    with pytest.raises(TransactionAbortableError):
        txn.check_send_offsets()
    txn.begin_abort()
    txn.complete()
    txn.begin_transaction()  # usable again


def test_fenced_is_fatal_for_every_api():
    for api in ("InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "TxnOffsetCommit", "EndTxn", "Produce"):
        for code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
            txn = ready()
            txn.begin_transaction()
            assert txn.on_error(api, code) == Outcome.FATAL
            assert txn.state == State.FATAL_ERROR
            assert isinstance(txn.last_error, ProducerFencedError)
            with pytest.raises(ProducerFencedError):
                txn.begin_abort()
            with pytest.raises(ProducerFencedError):
                txn.check_send()


@pytest.mark.parametrize("api,code,outcome", [
    ("EndTxn", ErrorCode.CONCURRENT_TRANSACTIONS, Outcome.RETRY),
    ("EndTxn", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, Outcome.RETRY),
    ("EndTxn", ErrorCode.NOT_COORDINATOR, Outcome.LOOKUP),
    ("EndTxn", ErrorCode.INVALID_TXN_STATE, Outcome.FATAL),
    ("EndTxn", ErrorCode.UNKNOWN_PRODUCER_ID, Outcome.ABORTABLE),
    ("InitProducerId", ErrorCode.CONCURRENT_TRANSACTIONS, Outcome.RETRY),
    ("InitProducerId", ErrorCode.COORDINATOR_NOT_AVAILABLE, Outcome.LOOKUP),
    ("InitProducerId", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Outcome.FATAL),
    ("AddPartitionsToTxn", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, Outcome.RETRY),
    ("AddPartitionsToTxn", ErrorCode.TOPIC_AUTHORIZATION_FAILED, Outcome.ABORTABLE),
    ("AddOffsetsToTxn", ErrorCode.GROUP_AUTHORIZATION_FAILED, Outcome.ABORTABLE),
    ("TxnOffsetCommit", ErrorCode.ILLEGAL_GENERATION, Outcome.ABORTABLE),
    ("TxnOffsetCommit", ErrorCode.UNKNOWN_MEMBER_ID, Outcome.ABORTABLE),
    ("TxnOffsetCommit", ErrorCode.FENCED_INSTANCE_ID, Outcome.ABORTABLE),
    ("TxnOffsetCommit", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, Outcome.RETRY),
    ("TxnOffsetCommit", ErrorCode.REQUEST_TIMED_OUT, Outcome.LOOKUP),
    ("FindCoordinator", ErrorCode.COORDINATOR_NOT_AVAILABLE, Outcome.LOOKUP),
    ("FindCoordinator", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Outcome.FATAL),
])
def test_error_classification_as_the_java_client(api, code, outcome):
    assert classify(api, code) == outcome


def test_transactional_config():
    B = dict(bootstrap_servers="h:9092")
    c = ProducerConfig(transactional_id="t", **B)
    assert c["enable.idempotence"] and c["transaction.timeout.ms"] == 60000
    assert ProducerConfig(transactional_id="t", transaction_timeout_ms="9000", **B)["transaction.timeout.ms"] == 9000
    with pytest.raises(ConfigError, match="without also enabling idempotence"):
        ProducerConfig(transactional_id="t", enable_idempotence=False, **B)
    with pytest.raises(ConfigError, match="without also enabling idempotence"):
        ProducerConfig(transactional_id="t", acks="1", **B)


def test_the_transaction_state_machine_does_no_io():
    """Like the membership machine, the transaction manager is sans-IO: no asyncio, socket or
    clock among its (transitive) kgroup imports."""
    from tests.coordinator.test_purity import walk_imports
    seen, bad = walk_imports(["kgroup.client.transactions"])
    assert not bad, bad
    assert "kgroup.protocol.errors" in seen
