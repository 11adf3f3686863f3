"""The generic coordinator runtime in-process (kgroup/broker/coordinator_runtime.py): partitions
loaded and unloaded at run time (parked requests answered NOT_COORDINATOR, timers cancelled,
epochs fencing stale loads and unloads, a reload rebuilding exactly the live state), and its
one append path with one failure policy on every coordinator write (group records,
TxnOffsetCommit batches, transaction records, markers)."""
from __future__ import annotations

import asyncio
import errno

import pytest

from kgroup.broker.coordinator_runtime import CoordinatorAppendError, CoordinatorState
from kgroup.broker.pending import PendingResponse
from kgroup.coordinator import group_partition
from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kgroup.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kgroup.protocol.messages.heartbeat import HeartbeatRequest
from kgroup.protocol.messages.init_producer_id import InitProducerIdRequest
from kgroup.protocol.messages.join_group import JoinGroupRequest
from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from kgroup.protocol.messages.sync_group import SyncGroupRequest
from kgroup.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kgroup.storage.errors import KafkaStorageError
from kgroup.transaction_coordinator import transaction_partition
from tests.broker.support import answer_of, inproc, submit

GROUP = "runtime-g"
P = group_partition(GROUP, 50)
PROTOCOLS = [JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x01\x00\x01t"
                                                                             b"\xff\xff\xff\xff")]


def join_request(member_id="", group=GROUP):
    return JoinGroupRequest(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                            member_id=member_id, protocol_type="consumer", protocols=PROTOCOLS)


def commit_request(group, offsets, generation=-1, member_id=""):
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
                               topics=[T(name="t", partitions=[
                                   T.OffsetCommitRequestPartition(partition_index=p, committed_offset=o)
                                   for p, o in offsets.items()])])


def fetch_request(group):
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest(group_id=group, topics=[T(name="t", partition_indexes=[0, 1])])


async def stable_member(b):
    """A classic group of one Stable member with a committed offset; returns its member id."""
    first = await answer_of(submit(b, join_request(), 9))
    joined = await answer_of(submit(b, join_request(first.member_id), 9))
    assert joined.error_code == 0
    mid = joined.member_id
    synced = await answer_of(submit(b, SyncGroupRequest(group_id=GROUP, generation_id=joined.generation_id,
                                                        member_id=mid, protocol_type="consumer",
                                                        protocol_name="range", assignments=[
                                                            SyncGroupRequest.SyncGroupRequestAssignment(
                                                                member_id=mid, assignment=b"\x00\x00a")]), 5))
    assert synced.error_code == 0
    committed = await answer_of(submit(b, commit_request(GROUP, {0: 5}, joined.generation_id, mid), 8))
    assert [p.error_code for t in committed.topics for p in t.partitions] == [0]
    return mid


def test_unload_answers_parked_requests_and_reload_rebuilds_the_state(tmp_path):
    async def scenario(b):
        gc = b.group_coordinator
        rt = gc.runtime
        await stable_member(b)
        cg = await answer_of(submit(b, ConsumerGroupHeartbeatRequest(
            group_id="modern", member_id="m1", member_epoch=0, rebalance_timeout_ms=30000,
            subscribed_topic_names=["t"], topic_partitions=[]), 0))
        assert cg.error_code == 0
        live = rt.shards[P].durable_state()
        # a second member's JoinGroup parks: the group waits for the first to rejoin
        first = await answer_of(submit(b, join_request(), 9))
        parked = submit(b, join_request(first.member_id), 9)
        assert type(parked) is PendingResponse and not parked.answered
        assert P in rt._timers and rt.shards[P].next_deadline() is not None
        gc.unload_partition(P)
        assert (await answer_of(parked)).error_code == E.NOT_COORDINATOR
        assert P not in rt.shards and P not in rt._timers and rt.state_error(P) == E.NOT_COORDINATOR
        hb = submit(b, HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="x"), 4)
        assert hb.error_code == E.NOT_COORDINATOR
        fetched = submit(b, fetch_request(GROUP), 7)
        assert fetched.error_code == E.NOT_COORDINATOR
        # loaded again at a newer epoch: loading, then the same durable state as before
        gc.load_partition(P, epoch=1)
        assert rt.state_error(P) in (E.COORDINATOR_LOAD_IN_PROGRESS, None)
        for _ in range(200):
            if rt.is_active(P):
                break
            await asyncio.sleep(0.01)
        assert rt.is_active(P) and rt.epochs[P] == 1
        reloaded = rt.shards[P].durable_state()
        assert reloaded == live
        fetched = await answer_of(submit(b, fetch_request(GROUP), 7))
        assert fetched.error_code == 0 and fetched.topics[0].partitions[0].committed_offset == 5
        # a stale unload (older epoch) is ignored; a stale load too
        gc.unload_partition(P, epoch=0)
        assert rt.is_active(P)
        gc.load_partition(P, epoch=0)
        assert rt.is_active(P) and rt.epochs[P] == 1
    inproc(tmp_path, scenario)


def test_a_newer_epoch_of_the_same_leadership_keeps_the_partition_loaded(tmp_path):
    """The controller changing the ISR bumps the leader epoch of a partition whose leader stays:
    the loaded partition goes on (its shard, its parked requests), only its epoch moves, as
    CoordinatorRuntime.scheduleLoadOperation does; unloaded and reloaded instead, its clients
    would get NOT_COORDINATOR and the group's state would be replayed again for nothing."""
    async def scenario(b):
        gc = b.group_coordinator
        rt = gc.runtime
        await stable_member(b)
        shard = rt.shards[P]
        first = await answer_of(submit(b, join_request(), 9))
        parked = submit(b, join_request(first.member_id), 9)
        assert type(parked) is PendingResponse and not parked.answered
        gc.load_partition(P, epoch=rt.epochs[P] + 3)
        assert rt.is_active(P) and rt.shards[P] is shard and not parked.answered
        epoch = rt.epochs[P]
        fetched = await answer_of(submit(b, fetch_request(GROUP), 7))
        assert fetched.error_code == 0 and fetched.topics[0].partitions[0].committed_offset == 5
        gc.unload_partition(P, epoch=epoch - 1)       # older than the epoch it moved to: ignored
        assert rt.is_active(P) and not parked.answered
        gc.unload_partition(P, epoch=epoch + 1)       # the leadership moved away
        assert (await answer_of(parked)).error_code == E.NOT_COORDINATOR
    inproc(tmp_path, scenario)


def test_a_partition_that_does_not_load_fails_alone(tmp_path):
    """A log that does not replay leaves its partition FAILED (NOT_COORDINATOR), the others load
    (Kafka's runtime transitions the context to FAILED)."""
    async def scenario(b):
        gc = b.group_coordinator
        rt = gc.runtime
        await stable_member(b)
        other = next(p for p in range(50) if p != P)
        gc.unload_partition(P)
        gc.unload_partition(other)
        from kgroup.protocol.records import Record, build_batch
        from kgroup.storage.producer_state import AppendOrigin
        plog = b.data_path.log("__consumer_offsets", P)
        plog.append(build_batch([Record(key=b"\x00\x01garbage", value=b"\x00\x03\xff", timestamp=0)]),
                    origin=AppendOrigin.COORDINATOR)
        gc.load_partition(P, epoch=1)
        gc.load_partition(other, epoch=1)
        for _ in range(200):
            if rt.is_active(other) and rt.states[P] is not CoordinatorState.LOADING:
                break
            await asyncio.sleep(0.01)
        assert rt.states[P] is CoordinatorState.FAILED and rt.state_error(P) == E.NOT_COORDINATOR
        assert rt.is_active(other)
        assert submit(b, fetch_request(GROUP), 7).error_code == E.NOT_COORDINATOR
    inproc(tmp_path, scenario)


def _errors(resp):
    return [p.error_code for t in resp.topics for p in t.partitions]


@pytest.mark.parametrize("failure", ["offline", "storage", "eio"])
def test_one_failure_policy_on_every_write_path(tmp_path, failure):
    """Group records, a TxnOffsetCommit batch, a transaction record and markers into
    ``__consumer_offsets`` all go through one append path: the same failure gets the same
    answer on each (mapped by the shard as Kafka maps append errors), and nothing changes."""
    async def scenario(b):
        gc, tc = b.group_coordinator, b.transaction_coordinator
        await answer_of(submit(b, commit_request(GROUP, {0: 1}), 8))
        init = await answer_of(submit(b, InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4))
        assert init.error_code == 0
        added = await answer_of(submit(b, AddOffsetsToTxnRequest(transactional_id="tx", producer_id=init.producer_id,
                                                                 producer_epoch=init.producer_epoch, group_id=GROUP), 3))
        assert added.error_code == 0
        offsets_log = b.data_path.log("__consumer_offsets", P)
        txn_log = b.data_path.log("__transaction_state", transaction_partition("tx", 50))

        def broken(*a, **kw):
            if failure == "storage":
                raise KafkaStorageError("disk on fire")
            raise OSError(errno.EIO, "Input/output error")
        if failure == "offline":
            b.log_dir_failure.offline = True
        else:
            offsets_log.append = broken
            txn_log.append = broken
        # group records (OffsetCommit)
        commit = await answer_of(submit(b, commit_request(GROUP, {0: 99}), 8))
        assert _errors(commit) == [E.NOT_COORDINATOR]
        # a TxnOffsetCommit batch
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        txn_commit = await answer_of(submit(b, TxnOffsetCommitRequest(
            transactional_id="tx", group_id=GROUP, producer_id=init.producer_id, producer_epoch=init.producer_epoch,
            generation_id=-1, member_id="", topics=[T(name="t", partitions=[
                T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=77)])]), 3))
        assert _errors(txn_commit) == [E.NOT_COORDINATOR]
        # a transaction record (InitProducerId bumps the epoch)
        again = await answer_of(submit(b, InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4))
        assert again.error_code == E.NOT_COORDINATOR
        # markers into __consumer_offsets
        with pytest.raises(CoordinatorAppendError) as raised:
            gc.write_txn_markers(P, [(init.producer_id, init.producer_epoch, True, 0)])
        assert raised.value.code == E.KAFKA_STORAGE_ERROR
        if failure == "eio":
            assert b.log_dir_failure.offline      # a disk I/O error takes the directory offline
        # nothing changed
        shard = gc.runtime.shards[P]
        assert shard.offset_metadata_manager.offset(GROUP, "t", 0).committed_offset == 1
        assert not shard.offset_metadata_manager.pending_transactional_offsets
        tshard = tc.runtime.shards[transaction_partition("tx", 50)]
        assert tshard.transactions["tx"].producer_epoch == init.producer_epoch
        assert tshard.transactions["tx"].state.kafka_name == "Ongoing"
    inproc(tmp_path, scenario)


def test_txn_offset_commit_below_v2_answers_loading_as_coordinator_not_available(tmp_path):
    """KafkaApis.handleTxnOffsetCommitRequest: while the group's offsets partition loads, v2+ is
    answered COORDINATOR_LOAD_IN_PROGRESS and v0-1 COORDINATOR_NOT_AVAILABLE (clients before 2.0
    do not know the former)."""
    async def scenario(b):
        gc = b.group_coordinator
        await answer_of(submit(b, commit_request(GROUP, {0: 1}), 8))
        init = await answer_of(submit(b, InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4))
        added = await answer_of(submit(b, AddOffsetsToTxnRequest(transactional_id="tx", producer_id=init.producer_id,
                                                                 producer_epoch=init.producer_epoch, group_id=GROUP), 3))
        assert added.error_code == 0
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic

        async def txn_commit(version):
            return _errors(await answer_of(submit(b, TxnOffsetCommitRequest(
                transactional_id="tx", group_id=GROUP, producer_id=init.producer_id,
                producer_epoch=init.producer_epoch, generation_id=-1, member_id="", topics=[T(name="t", partitions=[
                    T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=7)])]), version)))
        gc.runtime.states[P] = CoordinatorState.LOADING       # the partition's log being replayed
        assert await txn_commit(0) == [E.COORDINATOR_NOT_AVAILABLE]
        assert await txn_commit(1) == [E.COORDINATOR_NOT_AVAILABLE]
        assert await txn_commit(2) == [E.COORDINATOR_LOAD_IN_PROGRESS]
        assert await txn_commit(3) == [E.COORDINATOR_LOAD_IN_PROGRESS]
        gc.runtime.states[P] = CoordinatorState.ACTIVE
        assert await txn_commit(1) == [0]
    inproc(tmp_path, scenario)


def test_markers_carry_the_transaction_coordinator_epoch(tmp_path):
    """The COMMIT/ABORT markers carry the epoch at which this broker leads the transaction's
    __transaction_state partition (TransactionMarkerChannelManager: coordinatorEpoch), so a
    partition refuses the markers of an older coordinator (TRANSACTION_COORDINATOR_FENCED)."""
    from kgroup.protocol.messages.end_txn import EndTxnRequest
    from kgroup.protocol.records import read_end_txn_marker_batch
    from kgroup.storage.errors import TransactionCoordinatorFencedError
    from kgroup.storage.producer_state import AppendOrigin

    async def scenario(b):
        tc = b.transaction_coordinator
        tp = transaction_partition("tx-epoch", 50)
        init = await answer_of(submit(b, InitProducerIdRequest(transactional_id="tx-epoch",
                                                               transaction_timeout_ms=60000), 4))
        tc.unload_partition(tp)
        tc.load_partition(tp, epoch=7)
        for _ in range(200):
            if tc.runtime.is_active(tp):
                break
            await asyncio.sleep(0.01)
        added = await answer_of(submit(b, AddOffsetsToTxnRequest(transactional_id="tx-epoch", producer_id=init.producer_id,
                                                                 producer_epoch=init.producer_epoch, group_id=GROUP), 3))
        assert added.error_code == 0
        ended = await answer_of(submit(b, EndTxnRequest(transactional_id="tx-epoch", producer_id=init.producer_id,
                                                        producer_epoch=init.producer_epoch, committed=True), 4))
        assert ended.error_code == 0
        offsets_log = b.data_path.log("__consumer_offsets", P)
        for _ in range(200):
            markers = [read_end_txn_marker_batch(bytes(batch), h) for h, batch in offsets_log.iter_batches()
                       if h.is_control]
            if markers:
                break
            await asyncio.sleep(0.01)
        assert [(m.control_type, m.coordinator_epoch) for m in markers] == [(1, 7)]
        # a marker of an older coordinator epoch for this producer is fenced
        from kgroup.protocol.records import build_end_txn_marker_batch
        with pytest.raises(TransactionCoordinatorFencedError):
            offsets_log.append(build_end_txn_marker_batch(init.producer_id, init.producer_epoch, False, 6, 0),
                               origin=AppendOrigin.COORDINATOR)
    inproc(tmp_path, scenario)


def test_a_transaction_state_partition_holding_markers_loads(tmp_path):
    """A COMMIT/ABORT marker in __transaction_state (the clients' AddPartitionsToTxn refuses internal
    topics, but a log may hold one) settles nothing there: the partition loads, with its
    transactions, instead of staying in loading."""
    from kgroup.protocol.records import build_end_txn_marker_batch
    from kgroup.storage.producer_state import AppendOrigin

    async def scenario(b):
        tc = b.transaction_coordinator
        tp = transaction_partition("tx-m", 50)
        init = await answer_of(submit(b, InitProducerIdRequest(transactional_id="tx-m", transaction_timeout_ms=60000), 4))
        plog = b.data_path.log("__transaction_state", tp)
        plog.append(build_end_txn_marker_batch(77, 0, False, 0, 0), origin=AppendOrigin.COORDINATOR)
        tc.unload_partition(tp)
        tc.load_partition(tp, epoch=1)
        for _ in range(300):
            if tc.runtime.states.get(tp) is not CoordinatorState.LOADING:
                break
            await asyncio.sleep(0.01)
        assert tc.runtime.is_active(tp)
        assert tc.runtime.shards[tp].transactions["tx-m"].producer_id == init.producer_id
    inproc(tmp_path, scenario)


def test_an_answer_made_after_a_write_that_is_not_durable_gets_its_error_form():
    """The SyncGroup replies a leader's assignment releases are made after the write (they have
    no failure form of their own): when the write cannot be made durable (an fsync failure, or
    in a cluster the ISR not reached) each is answered NOT_COORDINATOR, as Kafka answers every
    member; an answer with no error form at all still fails."""
    from kgroup.broker.coordinator_runtime import answer_flushed
    from kgroup.protocol.messages.sync_group import SyncGroupResponse
    synced, other = PendingResponse(), PendingResponse()
    flushed = PendingResponse(flush_only=True)
    flushed.fail(KafkaStorageError("fsync failed"))
    answer_flushed([(synced, SyncGroupResponse(assignment=b"\x00\x01")), (other, object())], flushed)
    assert synced.error is None
    assert (synced.response.error_code, synced.response.assignment) == (E.NOT_COORDINATOR, b"")
    assert other.error is not None and other.response is None


def test_one_node_commits_are_committed_at_once(tmp_path):
    """On one node the committed offset is the log end after each append (Kafka's high watermark
    of a partition with one replica): a commit is fetched at once, no undo entry is kept, and a
    require_stable fetch is answered at once."""
    async def scenario(b):
        rt = b.group_coordinator.runtime
        assert (await answer_of(submit(b, commit_request("one-node", {0: 3, 1: 4}), 8))).topics[0].partitions[0] \
            .error_code == 0
        p = group_partition("one-node", 50)
        shard = rt.shards[p]
        plog = b.data_path.log("__consumer_offsets", p)
        assert shard.last_committed_offset == plog.log_end_offset
        assert shard.offset_metadata_manager.uncommitted == {}
        fetched = await answer_of(submit(b, fetch_request("one-node"), 7))
        assert [q.committed_offset for q in fetched.topics[0].partitions] == [3, 4]
        stable = fetch_request("one-node")
        stable.require_stable = True
        answered = submit(b, stable, 7)
        assert type(answered) is not PendingResponse
        assert [q.committed_offset for q in answered.topics[0].partitions] == [3, 4]
    inproc(tmp_path, scenario)
