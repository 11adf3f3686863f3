"""The transaction coordinator shard on a fake clock: every transition, fencing, KIP-360,
timeouts, expiration, load and failed writes. The harness checks live == replayed state after
every operation."""
import pytest

from kgroup.coordinator.partitioner import group_partition
from kgroup.protocol.offsets_records import TransactionLogValue
from kgroup.transaction_coordinator import TransactionState as S
from kgroup.transaction_coordinator import transaction_log_records as rec
from kgroup.transaction_coordinator.metadata import TransactionMetadata

from .support import E, Ctx, fresh_shard


def value_of(record):
    key, value = record
    assert rec.decode_key(key) is not None
    return None if value is None else TransactionLogValue.from_versioned_bytes(value)[0]


# -- InitProducerId ------------------------------------------------------------------------------

def test_init_new_transactional_id_gets_allocated_id_epoch_0_and_writes_empty():
    c = Ctx()
    r = c.init("tx", 30000)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 0)
    [record] = c.last_records
    assert rec.decode_key(record[0]) == "tx"
    v = value_of(record)
    assert (v.producer_id, v.producer_epoch, v.transaction_status, v.transaction_timeout_ms) == (1000, 0, 0, 30000)
    assert v.transaction_partitions is None and v.transaction_start_timestamp_ms == -1
    assert v.transaction_last_update_timestamp_ms == c.now
    assert c.txn("tx").state is S.EMPTY


def test_init_again_bumps_the_epoch_and_keeps_the_producer_id():
    c = Ctx()
    c.init("tx")
    r = c.init("tx", 45000)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 1)
    assert c.txn("tx").txn_timeout_ms == 45000
    assert c.allocated == [1000]


@pytest.mark.parametrize("tid,timeout,pid,epoch,error", [
    ("", 1000, -1, -1, E.INVALID_REQUEST),
    ("tx", 0, -1, -1, E.INVALID_TRANSACTION_TIMEOUT),
    ("tx", 900001, -1, -1, E.INVALID_TRANSACTION_TIMEOUT),
    ("tx", 1000, 5, -1, E.INVALID_REQUEST),          # producer id without an epoch
    ("tx", 1000, -1, 3, E.INVALID_REQUEST),
])
def test_init_validation(tid, timeout, pid, epoch, error):
    c = Ctx()
    r = c.init(tid, timeout, producer_id=pid, producer_epoch=epoch)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (error, -1, -1)
    assert c.log == [] and c.allocated == []


def test_max_timeout_is_configurable():
    c = Ctx(**{"transaction.max.timeout.ms": 5000})
    assert c.init("tx", 5001).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert c.init("tx", 5000).error_code == E.NONE


def test_handlers_answer_load_in_progress_until_loaded():
    c = Ctx(load=False)
    assert c.init("tx").error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert c.add_offsets("tx", 1, 0, "g") == E.COORDINATOR_LOAD_IN_PROGRESS
    assert c.end("tx", 1, 0, True) == E.COORDINATOR_LOAD_IN_PROGRESS
    assert c.describe("tx")[0].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert c.list().error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    c.run(c.shard.on_loaded(c.now))
    assert c.init("tx").error_code == E.NONE


def test_allocator_failure_is_answered():
    from kgroup.protocol.errors import KafkaError
    c = Ctx()

    def fail():
        raise KafkaError(E.COORDINATOR_LOAD_IN_PROGRESS)
    c.shard.allocate_producer_id = fail
    assert c.init("tx").error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert c.log == []


# -- AddPartitionsToTxn / AddOffsetsToTxn --------------------------------------------------------

def test_add_partitions_starts_the_transaction():
    c = Ctx()
    r = c.init("tx")
    c.now += 50
    errors = c.add_partitions("tx", r.producer_id, r.producer_epoch, [("t", 0), ("u", 2)])
    assert errors == {("t", 0): E.NONE, ("u", 2): E.NONE}
    m = c.txn("tx")
    assert m.state is S.ONGOING and m.partitions == {("t", 0), ("u", 2)} and m.txn_start_timestamp == c.now
    v = value_of(c.last_records[0])
    assert [(p.topic, p.partition_ids) for p in v.transaction_partitions] == [("t", [0]), ("u", [2])]
    # More partitions: the start time stays, the set grows.
    c.now += 50
    c.add_partitions("tx", r.producer_id, r.producer_epoch, [("t", 1)])
    assert c.txn("tx").partitions == {("t", 0), ("t", 1), ("u", 2)}
    assert c.txn("tx").txn_start_timestamp == c.now - 50
    # Partitions already in the transaction: answered without a write.
    assert c.add_partitions("tx", r.producer_id, r.producer_epoch, [("t", 1)]) == {("t", 1): E.NONE}
    assert c.last_records == []


@pytest.mark.parametrize("version,fenced", [(0, E.INVALID_PRODUCER_EPOCH), (1, E.INVALID_PRODUCER_EPOCH),
                                            (2, E.PRODUCER_FENCED), (3, E.PRODUCER_FENCED)])
def test_add_partitions_checks_producer_id_and_epoch(version, fenced):
    c = Ctx()
    r = c.init("tx")
    assert c.add_partitions("tx", r.producer_id + 1, 0, [("t", 0)], version=version) == \
        {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert c.add_partitions("nobody", r.producer_id, 0, [("t", 0)], version=version) == \
        {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert c.add_partitions("tx", r.producer_id, 7, [("t", 0)], version=version) == {("t", 0): fenced}
    assert c.add_partitions("", r.producer_id, 0, [("t", 0)], version=version) == {("t", 0): E.INVALID_REQUEST}
    assert c.txn("tx").state is S.EMPTY


def test_add_partitions_with_an_unknown_partition_adds_none():
    c = Ctx()
    r = c.init("tx")
    errors = c.add_partitions("tx", r.producer_id, 0, [("t", 0), ("gone", 0)],
                              exists=lambda t, p: t != "gone")
    assert errors == {("t", 0): E.OPERATION_NOT_ATTEMPTED, ("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert c.txn("tx").state is S.EMPTY and c.last_records == []


def test_add_offsets_adds_the_groups_consumer_offsets_partition():
    c = Ctx(**{"offsets.topic.num.partitions": 7})
    r = c.init("tx")
    assert c.add_offsets("tx", r.producer_id, 0, "my-group") == E.NONE
    assert c.txn("tx").partitions == {("__consumer_offsets", group_partition("my-group", 7))}
    assert c.txn("tx").state is S.ONGOING
    assert c.add_offsets("tx", r.producer_id, 3, "my-group", version=1) == E.INVALID_PRODUCER_EPOCH
    assert c.add_offsets("tx", r.producer_id, 3, "my-group", version=2) == E.PRODUCER_FENCED


# -- EndTxn and markers --------------------------------------------------------------------------

@pytest.mark.parametrize("committed", [True, False])
def test_end_txn_prepares_then_markers_complete(committed):
    c = Ctx()
    pid, epoch = c.ongoing("tx", [("t", 1), ("t", 0)])
    c.add_offsets("tx", pid, epoch, "g")
    offsets_tp = ("__consumer_offsets", group_partition("g", 50))
    assert c.end("tx", pid, epoch, committed) == E.NONE
    prepare = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
    assert c.txn("tx").state is prepare
    assert value_of(c.last_records[0]).transaction_status == prepare
    [markers] = c.markers
    assert (markers.producer_id, markers.producer_epoch, markers.committed) == (pid, epoch, committed)
    assert markers.partitions == tuple(sorted([("t", 0), ("t", 1), offsets_tp]))
    req = markers.request()
    assert req.markers[0].transaction_result is committed
    assert {(t.name, p) for t in req.markers[0].topics for p in t.partition_indexes} == set(markers.partitions)
    # While the markers are being written, everything else waits.
    assert c.end("tx", pid, epoch, committed) == E.CONCURRENT_TRANSACTIONS
    assert c.add_partitions("tx", pid, epoch, [("t", 5)]) == {("t", 5): E.CONCURRENT_TRANSACTIONS}
    assert c.init("tx").error_code == E.CONCURRENT_TRANSACTIONS
    c.now += 10
    assert c.complete_all()
    m = c.txn("tx")
    assert m.state is (S.COMPLETE_COMMIT if committed else S.COMPLETE_ABORT)
    assert m.partitions == frozenset() and m.producer_epoch == epoch
    v = value_of(c.log[-1])
    assert v.transaction_partitions == [] and v.transaction_last_update_timestamp_ms == c.now
    # A retry of the same EndTxn succeeds; the opposite outcome is refused.
    assert c.end("tx", pid, epoch, committed) == E.NONE
    assert c.end("tx", pid, epoch, not committed) == E.INVALID_TXN_STATE
    # The next transaction starts from Complete*.
    c.add_partitions("tx", pid, epoch, [("t", 9)])
    assert c.txn("tx").state is S.ONGOING and c.txn("tx").partitions == {("t", 9)}


def test_end_txn_without_a_transaction_is_invalid_state():
    c = Ctx()
    r = c.init("tx")
    assert c.end("tx", r.producer_id, 0, True) == E.INVALID_TXN_STATE
    assert c.end("tx", r.producer_id, 0, False) == E.INVALID_TXN_STATE


def test_end_txn_checks_ids_and_epochs():
    c = Ctx()
    pid, epoch = c.ongoing("tx")
    assert c.end("tx", pid + 1, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert c.end("other", pid, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert c.end("tx", pid, epoch + 1, True, version=1) == E.INVALID_PRODUCER_EPOCH
    assert c.end("tx", pid, epoch + 1, True, version=2) == E.PRODUCER_FENCED
    assert c.end("", pid, epoch, True) == E.INVALID_REQUEST
    assert c.txn("tx").state is S.ONGOING


def test_stale_markers_completion_writes_nothing():
    c = Ctx()
    pid, epoch = c.ongoing("tx")
    c.end("tx", pid, epoch, True)
    [markers] = c.markers
    assert c.complete(markers._replace(producer_epoch=epoch + 1)) == []
    assert c.complete(markers._replace(committed=False)) == []
    assert c.txn("tx").state is S.PREPARE_COMMIT
    assert len(c.complete(markers)) == 1
    assert c.complete(markers) == []       # done already


# -- fencing -------------------------------------------------------------------------------------

def test_new_producer_fences_the_old_one_and_aborts_its_transaction():
    c = Ctx()
    pid, epoch = c.ongoing("tx")
    r = c.init("tx")                 # a new instance with the same transactional id
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.CONCURRENT_TRANSACTIONS, -1, -1)
    m = c.txn("tx")
    assert m.state is S.PREPARE_ABORT and m.producer_epoch == epoch + 1
    [markers] = c.markers
    assert (markers.committed, markers.producer_epoch) == (False, epoch + 1)
    assert markers.partitions == (("t", 0), ("t", 1))
    # The old producer is fenced whatever it tries.
    assert c.end("tx", pid, epoch, True) == E.PRODUCER_FENCED
    # AddPartitionsToTxn checks the pending transition first (the markers being written)
    assert c.add_partitions("tx", pid, epoch, [("t", 2)]) == {("t", 2): E.CONCURRENT_TRANSACTIONS}
    # Until the abort markers are written the new instance is told to retry.
    assert c.init("tx").error_code == E.CONCURRENT_TRANSACTIONS
    c.complete_all()
    assert c.txn("tx").state is S.COMPLETE_ABORT
    assert c.add_partitions("tx", pid, epoch, [("t", 2)]) == {("t", 2): E.PRODUCER_FENCED}
    r = c.init("tx")
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, pid, epoch + 2)
    assert c.end("tx", pid, epoch + 1, False) == E.PRODUCER_FENCED


def _durable(record):
    v = value_of(record)
    return (rec.decode_key(record[0]), S(v.transaction_status).kafka_name, v.producer_id, v.producer_epoch,
            v.previous_producer_id, v.next_producer_id, v.client_transaction_version,
            v.transaction_start_timestamp_ms, v.transaction_last_update_timestamp_ms)


@pytest.mark.parametrize("tv", [0, 1])
def test_fencing_an_ongoing_transaction_under_transaction_version_1_writes_kafkas_records(tv):
    """handleInitProducerId on Ongoing (server transaction.version below 2): the fence is a pending
    PrepareEpochFence, not a record; then endTransactionWithTV1 writes PrepareAbort at the fenced
    epoch (a TV1 transaction), CONCURRENT_TRANSACTIONS answered; the markers complete it at that
    epoch; the retry bumps once more."""
    c = Ctx()
    c.shard.transaction_version = lambda: tv
    pid, epoch = c.ongoing("tx")
    started = c.txn("tx").txn_start_timestamp
    c.now += 5
    assert c.init("tx").error_code == E.CONCURRENT_TRANSACTIONS
    assert [_durable(r) for r in c.last_records] == [
        ("tx", "PrepareAbort", pid, epoch + 1, pid, -1, 0, started, c.now)]
    c.now += 5
    c.complete_all()
    assert [_durable(r) for r in c.log[-1:]] == [
        ("tx", "CompleteAbort", pid, epoch + 1, pid, -1, 0, started, c.now)]
    r = c.init("tx")
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, pid, epoch + 2)
    assert [_durable(x) for x in c.last_records] == [("tx", "Empty", pid, epoch + 2, pid, -1, 0, -1, c.now)]


def test_fencing_an_ongoing_transaction_under_transaction_version_2_writes_kafkas_records():
    """The same under transaction.version 2: endTransaction (TV2) from the pending fence, so the
    abort bumps the epoch as a version 2 abort (prepareAbortOrCommit from the epoch in memory),
    and at an exhausted epoch allocates the next producer id, which takes over at completion."""
    c = Ctx()
    c.shard.transaction_version = lambda: 2
    pid, epoch = c.ongoing("tx")
    started = c.txn("tx").txn_start_timestamp
    assert c.init("tx").error_code == E.CONCURRENT_TRANSACTIONS
    assert [_durable(r) for r in c.last_records] == [
        ("tx", "PrepareAbort", pid, epoch + 1, pid, -1, 2, started, c.now)]
    [markers] = c.markers
    assert (markers.producer_epoch, markers.transaction_version) == (epoch + 1, 2)
    c.complete_all()
    assert [_durable(r) for r in c.log[-1:]] == [("tx", "CompleteAbort", pid, epoch + 1, pid, -1, 2, started, c.now)]
    r = c.init("tx")
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, pid, epoch + 2)


def test_fencing_write_failure_under_transaction_version_1_keeps_the_fenced_epoch_in_memory():
    """endTransactionWithTV1 sets the fenced epoch (and no last epoch) before the write: when it
    fails, the old producer stays fenced at this coordinator though the log still has its epoch
    (hasFailedEpochFence), and the retry writes the same fenced epoch, not one more."""
    c = Ctx()
    pid, epoch = c.ongoing("tx")
    c.fail_writes = E.KAFKA_STORAGE_ERROR
    r = c.init("tx")
    assert r.error_code == E.NOT_COORDINATOR
    assert c.txn("tx").state is S.ONGOING and c.txn("tx").producer_epoch == epoch + 1 and c.markers == []
    assert c.shard.durable_state()["tx"][3] == epoch            # the log's epoch
    c.fail_writes = None
    # the old producer cannot end (nor extend) its transaction: no record
    assert c.end("tx", pid, epoch, True) == E.PRODUCER_FENCED and c.last_records == []
    assert c.add_partitions("tx", pid, epoch, [("t", 2)]) == {("t", 2): E.PRODUCER_FENCED}
    assert c.describe("tx")[0].producer_epoch == epoch + 1
    c.fail_writes = E.KAFKA_STORAGE_ERROR
    assert c.init("tx").error_code == E.NOT_COORDINATOR       # a second failure: still the same epoch
    assert c.txn("tx").producer_epoch == epoch + 1
    c.fail_writes = None
    assert c.init("tx").error_code == E.CONCURRENT_TRANSACTIONS
    assert [_durable(r)[1:4] for r in c.last_records] == [("PrepareAbort", pid, epoch + 1)]
    c.complete_all()
    r = c.init("tx")
    assert (r.error_code, r.producer_epoch) == (E.NONE, epoch + 2)


def test_fencing_write_failure_under_transaction_version_2_changes_nothing():
    """Under transaction.version 2 the epoch is not set before the write (endTransaction leaves
    it to prepareAbortOrCommit): a failed fence changes nothing and the retry bumps once."""
    c = Ctx()
    c.shard.transaction_version = lambda: 2
    pid, epoch = c.ongoing("tx")
    c.fail_writes = E.KAFKA_STORAGE_ERROR
    assert c.init("tx").error_code == E.NOT_COORDINATOR
    assert c.txn("tx").state is S.ONGOING and c.txn("tx").producer_epoch == epoch and c.markers == []
    c.fail_writes = None
    assert c.init("tx").error_code == E.CONCURRENT_TRANSACTIONS
    assert [_durable(r)[1:4] for r in c.last_records] == [("PrepareAbort", pid, epoch + 1)]


def test_a_failed_fence_is_reused_by_the_timed_out_abort():
    """abortTimedOutTransactions fences with prepareFenceProducerEpoch too: after a failed fence
    (transaction.version 1) it aborts at the same fenced epoch."""
    c = Ctx()
    pid, epoch = c.ongoing("tx", timeout=15000)
    c.fail_writes = E.KAFKA_STORAGE_ERROR
    assert c.init("tx", timeout=15000).error_code == E.NOT_COORDINATOR
    c.fail_writes = None
    written = c.advance(20000)
    assert [_durable(r)[1:4] for r in written] == [("PrepareAbort", pid, epoch + 1)]


@pytest.mark.parametrize("error,mapped", [
    (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR), (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
    (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE), (E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.COORDINATOR_NOT_AVAILABLE),
    (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR), (E.RECORD_LIST_TOO_LARGE, E.UNKNOWN_SERVER_ERROR)])
def test_failed_writes_are_mapped_and_change_nothing(error, mapped):
    c = Ctx()
    r = c.init("tx")
    c.fail_writes = error
    assert c.add_partitions("tx", r.producer_id, 0, [("t", 0)]) == {("t", 0): mapped}
    assert c.init("tx").error_code == mapped
    assert c.txn("tx").state is S.EMPTY and c.txn("tx").producer_epoch == 0
    c.fail_writes = None
    c.add_partitions("tx", r.producer_id, 0, [("t", 0)])
    c.fail_writes = error
    assert c.end("tx", r.producer_id, 0, True) == mapped
    assert c.txn("tx").state is S.ONGOING and c.markers == []


# -- KIP-360 -------------------------------------------------------------------------------------

def test_kip360_recovery_bumps_the_epoch_of_the_same_producer():
    c = Ctx()
    r = c.init("tx")
    pid = r.producer_id
    r2 = c.init("tx", producer_id=pid, producer_epoch=0)
    assert (r2.error_code, r2.producer_id, r2.producer_epoch) == (E.NONE, pid, 1)
    # The same request again (its response was lost): the same epoch, no second bump.
    r3 = c.init("tx", producer_id=pid, producer_epoch=0)
    assert (r3.error_code, r3.producer_epoch) == (E.NONE, 1)
    # An older epoch, or another producer id, is fenced (INVALID_PRODUCER_EPOCH before v4).
    c.init("tx")                                                 # epoch 2, last epoch forgotten
    assert c.init("tx", producer_id=pid, producer_epoch=1).error_code == E.PRODUCER_FENCED
    assert c.init("tx", producer_id=pid, producer_epoch=1, version=3).error_code == E.INVALID_PRODUCER_EPOCH
    assert c.init("tx", producer_id=pid + 7, producer_epoch=2).error_code == E.PRODUCER_FENCED
    assert c.txn("tx").producer_epoch == 2


def test_kip360_with_a_producer_id_on_a_new_transactional_id_is_accepted():
    c = Ctx()
    r = c.init("fresh", producer_id=55, producer_epoch=3)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 0)


def test_kip360_last_epoch_is_not_durable():
    """Kafka does not log the last epoch: a retry after the coordinator reloaded is fenced."""
    c = Ctx()
    pid = c.init("tx").producer_id
    c.init("tx", producer_id=pid, producer_epoch=0)
    assert c.txn("tx").last_producer_epoch == 0
    reloaded = fresh_shard(c.shard, c.log)
    assert reloaded.transactions["tx"].last_producer_epoch == -1
    c.shard = reloaded
    c.run(c.shard.on_loaded(c.now))
    assert c.init("tx", producer_id=pid, producer_epoch=0).error_code == E.PRODUCER_FENCED


def exhausted_ctx():
    """A transactional id whose producer is at epoch Short.MaxValue - 1 (from a crafted record)."""
    c = Ctx()
    m = TransactionMetadata("tx", 77, producer_epoch=32766, txn_timeout_ms=60000,
                            txn_last_update_timestamp=c.now)
    record = (rec.key_bytes("tx"), rec.value_bytes(m))
    c.log.append(record)
    c.shard.replay(*record)
    return c


def test_exhausted_epoch_rotates_to_a_new_producer_id():
    c = exhausted_ctx()
    r = c.init("tx")
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 0)
    m = c.txn("tx")
    assert (m.previous_producer_id, m.producer_id) == (77, 1000)
    assert value_of(c.log[-1]).previous_producer_id == 77


def test_exhausted_epoch_rotation_retry_is_recognised():
    c = exhausted_ctx()
    r = c.init("tx", producer_id=77, producer_epoch=32766)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 0)
    again = c.init("tx", producer_id=77, producer_epoch=32766)      # response lost: same answer
    assert (again.error_code, again.producer_id, again.producer_epoch) == (E.NONE, 1000, 0)
    assert c.allocated == [1000]


def test_fencing_at_an_exhausted_epoch_then_rotation():
    c = exhausted_ctx()
    c.add_partitions("tx", 77, 32766, [("t", 0)])
    assert c.init("tx").error_code == E.CONCURRENT_TRANSACTIONS
    assert c.txn("tx").producer_epoch == 32767                       # the fence may use MaxValue
    c.complete_all()
    r = c.init("tx")
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 0)


# -- timeouts and expiration ---------------------------------------------------------------------

def test_timed_out_transaction_is_aborted_with_the_producer_fenced():
    c = Ctx()
    pid, epoch = c.ongoing("slow", timeout=15000)
    c.ongoing("fast", [("u", 0)], timeout=60000)
    assert c.advance(10000) == []                                  # first check: not yet expired
    written = c.advance(10000)                                     # 20 s > 15 s
    assert [rec.decode_key(k) for k, _ in written] == ["slow"]
    m = c.txn("slow")
    assert m.state is S.PREPARE_ABORT and m.producer_epoch == epoch + 1
    assert [(x.transactional_id, x.committed, x.producer_epoch) for x in c.markers] == [("slow", False, epoch + 1)]
    assert c.txn("fast").state is S.ONGOING
    assert c.end("slow", pid, epoch, True) == E.PRODUCER_FENCED
    c.complete_all()
    assert c.advance(10000) == []                                  # nothing left to abort
    assert c.txn("slow").state is S.COMPLETE_ABORT


def test_abort_check_interval_is_configurable():
    c = Ctx(**{"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000})
    c.ongoing("tx", timeout=1500)
    assert c.advance(1000) == []
    assert len(c.advance(1000)) == 1


def test_idle_transactional_ids_expire_with_a_tombstone():
    c = Ctx(**{"transactional.id.expiration.ms": 100000,
               "transaction.remove.expired.transaction.cleanup.interval.ms": 60000})
    c.init("idle")
    pid, epoch = c.ongoing("busy", timeout=900000)
    c.ongoing("done")
    done = c.txn("done")
    c.end("done", done.producer_id, done.producer_epoch, True)
    c.complete_all()
    assert c.advance(60000) == []
    written = c.advance(60000)                                     # 120 s idle > 100 s
    assert sorted((rec.decode_key(k), v) for k, v in written) == [("done", None), ("idle", None)]
    assert c.txn("idle") is None and c.txn("done") is None
    assert c.txn("busy").state is S.ONGOING                        # Ongoing never expires
    assert c.describe("idle")[0].error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    r = c.init("idle")                                             # starts afresh
    assert (r.error_code, r.producer_epoch) == (E.NONE, 0) and r.producer_id not in (1000,)


# -- load ----------------------------------------------------------------------------------------

def test_load_resends_markers_of_prepared_transactions():
    c = Ctx()
    pid, epoch = c.ongoing("a")
    c.end("a", pid, epoch, True)
    pid_b, epoch_b = c.ongoing("b", [("u", 3)])
    c.end("b", pid_b, epoch_b, False)
    c.ongoing("c")
    c.markers.clear()
    # The broker dies before the markers are written; a new shard loads the log.
    c.shard = fresh_shard(c.shard, c.log)
    c.shard.allocate_producer_id = c._allocate
    assert c.init("a").error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    c.run(c.shard.on_loaded(c.now))
    assert [(m.transactional_id, m.committed, m.partitions) for m in c.markers] == [
        ("a", True, (("t", 0), ("t", 1))), ("b", False, (("u", 3),))]
    c.complete_all()
    assert c.txn("a").state is S.COMPLETE_COMMIT and c.txn("b").state is S.COMPLETE_ABORT
    assert c.txn("c").state is S.ONGOING


def test_replay_skips_unknown_key_versions_and_rejects_garbage():
    c = Ctx()
    c.shard.replay(b"\x00\x05whatever", b"\x00\x01")
    assert c.shard.skipped_records == 1
    with pytest.raises(rec.TransactionLogDecodeError, match="offset 9"):
        c.shard.replay(rec.key_bytes("x"), b"\x00\x01\x00", 9)
    with pytest.raises(rec.TransactionLogDecodeError):
        c.shard.replay(rec.key_bytes("x"), b"\x00\x07" + bytes(40), 10)


def test_unloading_forgets_everything():
    c = Ctx()
    c.ongoing("tx")
    assert c.shard.on_unloaded(c.now) == []
    assert c.shard.transactions == {} and not c.shard.is_loaded
    assert c.shard.next_deadline() is None


# -- admin ---------------------------------------------------------------------------------------

def test_describe_transactions():
    c = Ctx()
    c.now += 5
    pid, epoch = c.ongoing("tx", [("b", 1), ("a", 2), ("a", 0)], timeout=30000)
    [st, missing, empty] = c.describe("tx", "nope", "")
    assert (st.error_code, st.transaction_state, st.producer_id, st.producer_epoch) == (E.NONE, "Ongoing", pid, epoch)
    assert (st.transaction_timeout_ms, st.transaction_start_time_ms) == (30000, c.now)
    assert [(t.topic, t.partitions) for t in st.topics] == [("a", [0, 2]), ("b", [1])]
    assert missing.error_code == E.TRANSACTIONAL_ID_NOT_FOUND and missing.transactional_id == "nope"
    assert empty.error_code == E.INVALID_REQUEST


def test_list_transactions_filters():
    c = Ctx()
    c.init("e")
    pid_o, _ = c.ongoing("o")
    c.now += 5000
    c.ongoing("young")
    names = lambda resp: [(s.transactional_id, s.transaction_state) for s in resp.transaction_states]  # noqa: E731
    assert names(c.list()) == [("e", "Empty"), ("o", "Ongoing"), ("young", "Ongoing")]
    assert names(c.list(states=["Ongoing"])) == [("o", "Ongoing"), ("young", "Ongoing")]
    resp = c.list(states=["Ongoing", "Bogus"])
    assert resp.unknown_state_filters == ["Bogus"]
    assert names(c.list(pids=[pid_o])) == [("o", "Ongoing")]
    # v1 (KIP-994): only transactions running longer than the duration.
    assert names(c.list(states=["Ongoing"], duration=1000)) == [("o", "Ongoing")]
    assert names(c.list(states=["Ongoing"], duration=1000, version=0)) == [("o", "Ongoing"), ("young", "Ongoing")]


# -- the state machine itself --------------------------------------------------------------------

LEGAL = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},   # 4.x (TV2)
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


@pytest.mark.parametrize("source", list(S), ids=lambda s: s.kafka_name)
@pytest.mark.parametrize("target", list(S), ids=lambda s: s.kafka_name)
def test_transition_table_is_kafkas(source, target):
    from kgroup.transaction_coordinator.metadata import IllegalTransition
    parts = frozenset({("t", 0)}) if source not in (S.EMPTY,) else frozenset()
    m = TransactionMetadata("x", 1, producer_epoch=0, state=source, partitions=parts,
                            txn_start_timestamp=5 if parts else -1)
    changes = {"partitions": frozenset(), "txn_start_timestamp": -1} if target is S.EMPTY else {}
    if source in LEGAL[target]:
        assert m.transit(target, now_ms=9, **changes).state is target
    else:
        with pytest.raises(IllegalTransition):
            m.transit(target, now_ms=9, **changes)


def test_state_names_and_ids_are_kafkas():
    assert [(int(s), s.kafka_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"), (4, "CompleteCommit"),
        (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]


def test_init_without_a_transactional_id_is_not_a_shards_request():
    from kgroup.protocol.messages.init_producer_id import InitProducerIdRequest
    c = Ctx()
    with pytest.raises(ValueError, match="idempotent"):
        c.shard.handle_init_producer_id(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000),
                                        4, c.now, "t")


def add_v4(c, *txns, exists=None, version=5):
    """txns: (tid, pid, epoch, partitions, verify_only). Returns {tid: {(t, p): error}}."""
    from kgroup.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest as Req
    T = Req.AddPartitionsToTxnTransaction
    req = Req(transactions=[T(transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=verify,
                              topics=[Req.AddPartitionsToTxnTopic(name=t, partitions=[p]) for t, p in parts])
                            for tid, pid, epoch, parts, verify in txns])
    resp = c.call(c.shard.handle_add_partitions_to_txn, req, version, partition_exists=exists)
    assert resp.error_code == 0 and resp.results_by_topic_v3_and_below == []
    return {r.transactional_id: {(t.name, p.partition_index): p.partition_error_code
                                 for t in r.topic_results for p in t.results_by_partition}
            for r in resp.results_by_transaction}


def test_add_partitions_v4_batches_adds_and_verifications():
    c = Ctx()
    a = c.init("a")
    pid_b, epoch_b = c.ongoing("b", [("t", 0)])
    got = add_v4(c, ("a", a.producer_id, 0, [("t", 1)], False),
                 ("b", pid_b, epoch_b, [("t", 0), ("t", 9)], True),
                 ("nobody", 1, 0, [("t", 0)], True))
    assert got == {"a": {("t", 1): E.NONE},
                   "b": {("t", 0): E.NONE, ("t", 9): E.TRANSACTION_ABORTABLE},
                   "nobody": {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}}
    assert c.txn("a").partitions == {("t", 1)} and c.txn("b").partitions == {("t", 0)}
    assert add_v4(c, ("b", pid_b, epoch_b + 1, [("t", 0)], True)) == {"b": {("t", 0): E.PRODUCER_FENCED}}
    c.end("b", pid_b, epoch_b, True)
    assert add_v4(c, ("b", pid_b, epoch_b, [("t", 0)], True)) == {"b": {("t", 0): E.CONCURRENT_TRANSACTIONS}}
    assert add_v4(c, ("a", a.producer_id, 0, [("gone", 0), ("t", 2)], False), exists=lambda t, p: t != "gone") == \
        {"a": {("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION, ("t", 2): E.OPERATION_NOT_ATTEMPTED}}


def test_add_partitions_v4_failed_write_fails_only_the_writers():
    c = Ctx()
    a = c.init("a")
    c.init("b")
    c.fail_writes = E.NOT_LEADER_OR_FOLLOWER
    got = add_v4(c, ("a", a.producer_id, 0, [("t", 1)], False), ("b", 99, 0, [("t", 1)], False))
    assert got == {"a": {("t", 1): E.NOT_COORDINATOR}, "b": {("t", 1): E.INVALID_PRODUCER_ID_MAPPING}}
    assert c.txn("a").state is S.EMPTY


# -- transaction version 2 (KIP-890 part 2) ------------------------------------------------------

def _end_v5(c, tid, pid, epoch, committed):
    from kgroup.protocol.messages.end_txn import EndTxnRequest
    r = c.call(c.shard.handle_end_txn, EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                                    committed=committed), 5)
    return r.error_code, r.producer_id, r.producer_epoch


def test_end_txn_v5_bumps_the_epoch_every_transaction():
    c = Ctx()
    pid, epoch = c.ongoing("tx")
    assert _end_v5(c, "tx", pid, epoch, True) == (E.NONE, pid, epoch + 1)
    m = c.txn("tx")
    assert (m.state, m.producer_epoch, m.client_transaction_version) == (S.PREPARE_COMMIT, epoch + 1, 2)
    [markers] = c.markers
    assert (markers.producer_id, markers.producer_epoch) == (pid, epoch + 1)     # the markers fence the old epoch
    # the markers are being written (Kafka's pending transition): checked before anything else
    assert _end_v5(c, "tx", pid, epoch, True) == (E.CONCURRENT_TRANSACTIONS, -1, -1)
    assert _end_v5(c, "tx", 12345, epoch, False) == (E.CONCURRENT_TRANSACTIONS, -1, -1)
    assert c.complete_all()
    assert _end_v5(c, "tx", pid, epoch, True) == (E.NONE, pid, epoch + 1)       # and after
    assert _end_v5(c, "tx", pid, epoch, False)[0] == E.INVALID_TXN_STATE        # not the outcome it had
    assert _end_v5(c, "tx", pid, epoch + 1, True)[0] == E.INVALID_TXN_STATE     # no transaction open
    assert c.add_partitions("tx", pid, epoch, [("t", 0)]) == {("t", 0): E.PRODUCER_FENCED}
    assert set(c.add_partitions("tx", pid, epoch + 1, [("t", 0)]).values()) == {E.NONE}
    assert _end_v5(c, "tx", pid, epoch + 1, False) == (E.NONE, pid, epoch + 2)


def test_end_txn_v5_at_an_exhausted_epoch_moves_to_a_new_producer_id():
    c = exhausted_ctx()
    assert set(c.add_partitions("tx", 77, 32766, [("t", 0)]).values()) == {E.NONE}
    # (the crafted producer is at 32766 already: its EndTxn bumps past the exhaustion mark)
    assert _end_v5(c, "tx", 77, 32766, True) == (E.NONE, 1000, 0)
    m = c.txn("tx")
    assert (m.producer_id, m.producer_epoch, m.next_producer_id) == (77, 32767, 1000)
    [markers] = c.markers
    assert (markers.producer_id, markers.producer_epoch) == (77, 32767)
    assert c.complete_all()
    m = c.txn("tx")
    assert (m.state, m.producer_id, m.previous_producer_id, m.producer_epoch, m.next_producer_id) == (
        S.COMPLETE_COMMIT, 1000, 77, 0, -1)
    assert _end_v5(c, "tx", 77, 32766, True) == (E.NONE, 1000, 0)              # a retry after the rotation
    assert c.allocated == [1000]


def test_end_txn_v5_abort_with_no_transaction_open_bumps_the_epoch():
    """TransactionCoordinator.endTransaction under TV2: an ABORT in Empty, CompleteCommit or
    CompleteAbort (not a retry) is a PrepareAbort with no partitions and the epoch bumped, its
    start time the update time; a COMMIT there is INVALID_TXN_STATE; the epoch must be the
    current one (PRODUCER_FENCED otherwise)."""
    c = Ctx()
    r = c.init("e")
    pid, epoch = r.producer_id, r.producer_epoch
    assert c.txn("e").state is S.EMPTY
    assert _end_v5(c, "e", pid, epoch, True)[0] == E.INVALID_TXN_STATE
    assert _end_v5(c, "e", pid, epoch + 1, False)[0] == E.PRODUCER_FENCED
    c.now += 5
    assert _end_v5(c, "e", pid, epoch, False) == (E.NONE, pid, epoch + 1)
    m = c.txn("e")
    assert (m.state, m.producer_epoch, m.partitions, m.txn_start_timestamp, m.client_transaction_version) == (
        S.PREPARE_ABORT, epoch + 1, frozenset(), c.now, 2)
    [markers] = c.complete_all()
    assert (markers.partitions, markers.producer_epoch, markers.transaction_version) == ((), epoch + 1, 2)
    assert c.txn("e").state is S.COMPLETE_ABORT
    assert _end_v5(c, "e", pid, epoch, False) == (E.NONE, pid, epoch + 1)      # a retry: same answer
    assert _end_v5(c, "e", pid, epoch, True)[0] == E.INVALID_TXN_STATE         # retry of the other outcome
    # CompleteAbort, current epoch: another abort bumps again
    assert _end_v5(c, "e", pid, epoch + 1, False) == (E.NONE, pid, epoch + 2)
    c.complete_all()
    # CompleteCommit, current epoch: an abort bumps, a commit is refused
    assert add_v4(c, ("e", pid, epoch + 2, [("t", 0)], False)) == {"e": {("t", 0): E.NONE}}
    assert _end_v5(c, "e", pid, epoch + 2, True) == (E.NONE, pid, epoch + 3)
    c.complete_all()
    assert _end_v5(c, "e", pid, epoch + 3, True)[0] == E.INVALID_TXN_STATE
    assert _end_v5(c, "e", pid, epoch + 3, False) == (E.NONE, pid, epoch + 4)
    c.complete_all()
    assert _end_v5(c, "e", pid, epoch + 1, False)[0] == E.PRODUCER_FENCED       # an old epoch


def test_end_txn_v5_retry_after_rotation_needs_the_exhausted_epoch():
    """retryOnOverflow: the previous producer id at Short.MaxValue - 1 only; the previous id
    becomes the current one at the next transition, as Kafka's prepareTransitionTo sets it."""
    c = exhausted_ctx()
    assert add_v4(c, ("tx", 77, 32766, [("t", 0)], False)) == {"tx": {("t", 0): E.NONE}}
    assert _end_v5(c, "tx", 77, 32766, False) == (E.NONE, 1000, 0)
    c.complete_all()
    assert _end_v5(c, "tx", 77, 32765, False)[0] == E.INVALID_PRODUCER_ID_MAPPING
    assert _end_v5(c, "tx", 77, 32766, False) == (E.NONE, 1000, 0)
    assert add_v4(c, ("tx", 1000, 0, [("t", 0)], False)) == {"tx": {("t", 0): E.NONE}}
    assert c.txn("tx").previous_producer_id == 1000
    assert _end_v5(c, "tx", 77, 32766, False)[0] == E.INVALID_PRODUCER_ID_MAPPING


def test_transaction_version_recorded_per_request_and_carried_by_the_markers():
    """prepareAddPartitions and prepareAbortOrCommit record the client's transaction version:
    AddPartitionsToTxn v0-3 and EndTxn v0-4 are version 0, v4+/v5 version 2; the markers are
    written with the transaction's version (WriteTxnMarkers v2's TransactionVersion)."""
    c = Ctx()
    r = c.init("tx")
    pid = r.producer_id
    assert add_v4(c, ("tx", pid, 0, [("t", 0)], False)) == {"tx": {("t", 0): E.NONE}}
    assert c.txn("tx").client_transaction_version == 2
    assert _end_v5(c, "tx", pid, 0, True) == (E.NONE, pid, 1)
    [m] = c.complete_all()
    assert m.transaction_version == 2 and m.request().markers[0].transaction_version == 2
    # the same id driven by a transaction version 1 client
    assert set(c.add_partitions("tx", pid, 1, [("t", 0)], version=3).values()) == {E.NONE}
    assert c.txn("tx").client_transaction_version == 0
    assert c.end("tx", pid, 1, True) == E.NONE
    [m] = c.complete_all()
    assert (m.producer_epoch, m.transaction_version) == (1, 0)


def test_timed_out_transaction_under_transaction_version_2_is_aborted_as_one():
    """abortTimedOutTransactions ends the transaction with the broker's finalized transaction
    version: under version 2 the epoch is bumped once, the transaction recorded as version 2
    and its markers written as such, whatever version the client ran."""
    c = Ctx()
    c.shard.transaction_version = lambda: 2
    pid, epoch = c.ongoing("slow", timeout=15000)                  # a TV1 client (AddPartitionsToTxn v3)
    assert c.txn("slow").client_transaction_version == 0
    c.advance(10000)
    c.advance(10000)
    m = c.txn("slow")
    assert (m.state, m.producer_epoch, m.client_transaction_version) == (S.PREPARE_ABORT, epoch + 1, 2)
    [markers] = c.complete_all()
    assert (markers.committed, markers.producer_epoch, markers.transaction_version) == (False, epoch + 1, 2)
    assert c.txn("slow").state is S.COMPLETE_ABORT


def test_add_partitions_checks_a_pending_transition_before_the_producer():
    """handleAddPartitionsToTransaction: CONCURRENT_TRANSACTIONS while markers are written comes
    before the producer id and epoch checks (with TV2 the producer may use the id still
    pending); EndTxn v0-4 checks the id and epoch first."""
    c = Ctx()
    pid, epoch = c.ongoing("tx")
    assert c.end("tx", pid, epoch, True) == E.NONE
    assert c.txn("tx").state is S.PREPARE_COMMIT
    assert c.add_partitions("tx", pid + 1, epoch, [("t", 5)]) == {("t", 5): E.CONCURRENT_TRANSACTIONS}
    assert c.add_partitions("tx", pid, epoch + 3, [("t", 5)]) == {("t", 5): E.CONCURRENT_TRANSACTIONS}
    assert c.end("tx", pid + 1, epoch, True) == E.INVALID_PRODUCER_ID_MAPPING
    assert c.end("tx", pid, epoch, True) == E.CONCURRENT_TRANSACTIONS


def test_init_producer_id_after_a_v5_end_txn_with_the_epoch_before_it_is_a_retry():
    """prepareAbortOrCommit under TV2 keeps the epoch before the bump as lastProducerEpoch, so an
    InitProducerId naming it (a producer that missed the EndTxn answer) is a retry answered with
    the current epoch, not PRODUCER_FENCED; naming the current epoch bumps (KIP-360)."""
    c = Ctx()
    pid, epoch = c.ongoing("tx")
    assert _end_v5(c, "tx", pid, epoch, True) == (E.NONE, pid, epoch + 1)
    c.complete_all()
    r = c.init("tx", producer_id=pid, producer_epoch=epoch)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, pid, epoch + 1)
    r = c.init("tx", producer_id=pid, producer_epoch=epoch + 1)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, pid, epoch + 2)
    r = c.init("tx", producer_id=pid, producer_epoch=epoch)
    assert r.error_code == E.PRODUCER_FENCED


def test_init_producer_id_after_a_rotation_retries_with_the_exhausted_epoch():
    c = exhausted_ctx()
    assert add_v4(c, ("tx", 77, 32766, [("t", 0)], False)) == {"tx": {("t", 0): E.NONE}}
    assert _end_v5(c, "tx", 77, 32766, True) == (E.NONE, 1000, 0)
    c.complete_all()
    r = c.init("tx", producer_id=77, producer_epoch=32766)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 0)


@pytest.mark.parametrize("timeouts", [[15000], [15000, 42000], [], [95000]])
def test_time_travel_skips_only_abort_scans_that_find_nothing(timeouts):
    """During a time-travel jump (no request can arrive) the abort scans before the earliest
    Ongoing deadline are skipped: every transaction is aborted at the same scan time as when
    each scan runs, and the scans after the jump keep their phase."""
    def run(travel: bool):
        c = Ctx()
        for i, timeout in enumerate(timeouts):
            c.ongoing(f"tx{i}", timeout=timeout)
        target = c.now + 100000
        c.shard.time_travel_target_ms = target if travel else None
        aborted_at, fired = {}, 0
        while (deadline := c.shard.next_deadline()) is not None and deadline <= target:
            c.advance(deadline - c.now)          # from one deadline to the next, as time travel
            fired += 1
            for i in range(len(timeouts)):
                m = c.txn(f"tx{i}")
                if m.state is not S.ONGOING:
                    aborted_at.setdefault(i, m.txn_last_update_timestamp)
        c.shard.time_travel_target_ms = None
        return aborted_at, fired, c.shard.next_deadline()

    normal, travelled = run(False), run(True)
    assert travelled[0] == normal[0] and len(normal[0]) == sum(t < 100000 for t in timeouts)
    assert travelled[2] == normal[2]             # the scan after the jump: same time
    assert travelled[1] < normal[1] == 10        # ten scans in 100 s, fewer when skipped
