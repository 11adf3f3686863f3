"""TxnOffsetCommit in the group coordinator (fake clock, the live == replayed check after every
operation): pending offsets per producer that become the committed ones at the producer's COMMIT
marker and vanish at its ABORT; OffsetFetch require_stable answers UNSTABLE_OFFSET_COMMIT while
they are pending; a regular commit and a transactional one in both orders around the marker;
KIP-447 generation/member/instance fencing from v3; any offset tombstone (OffsetDelete, DeleteGroups,
a deleted topic) drops the pending offsets too (KAFKA-14505), and expiry waits for them."""
from kgroup.coordinator import GroupCoordinatorShard
from kgroup.coordinator.coordinator_records import OFFSET_COMMIT, decode_record
from kgroup.coordinator.result import gate
from kgroup.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from tests.coordinator.support import E, Ctx, assignment, assert_replay_consistent

T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
P = T.TxnOffsetCommitRequestPartition
PID, PID2 = 4000, 4001


class TxnCtx(Ctx):
    def txn_commit(self, group_id, offsets, *, pid=PID, version=4, generation=-1, member_id="", instance_id=None):
        """offsets: {(topic, partition): offset}. Returns the response."""
        token = self.token()
        by_topic: dict = {}
        for (t, p), o in offsets.items():
            by_topic.setdefault(t, []).append(P(partition_index=p, committed_offset=o, committed_metadata="m"))
        req = TxnOffsetCommitRequest(transactional_id="tx", group_id=group_id, producer_id=pid, producer_epoch=0,
                                     generation_id=generation, member_id=member_id, group_instance_id=instance_id,
                                     topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])
        refused = gate(GroupCoordinatorShard.handle_txn_offset_commit, req, version, self.config,
                       None if self.shard.is_loaded else E.COORDINATOR_LOAD_IN_PROGRESS)
        if refused is not None:
            return refused
        result = self.shard.handle_txn_offset_commit(req, version, self.now, token)
        # What the runtime does: the records go in the producer's transactional batch.
        self.log.extend(("txn", pid, r.key, r.value) for r in result.records)
        self.sent.extend(self.shard.commit(result, pid))
        assert_replay_consistent(self.shard, self.log, self.now)
        return self.answer(token)

    def marker(self, pid, committed):
        self.log.append(("marker", pid, committed))
        self.shard.replay_end_transaction_marker(pid, committed)
        assert_replay_consistent(self.shard, self.log, self.now)

    def offsets(self, group_id, topic="t", partitions=(0, 1), require_stable=False):
        r = self.fetch(group_id, {topic: list(partitions)}, version=7, require_stable=require_stable)
        return {p.partition_index: (p.committed_offset, p.error_code) for p in r.topics[0].partitions}


def errors(resp):
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def test_pending_until_commit_marker():
    c = TxnCtx()
    assert errors(c.txn_commit("g", {("t", 0): 10, ("t", 1): 20})) == {("t", 0): 0, ("t", 1): 0}
    assert c.offsets("g") == {0: (-1, 0), 1: (-1, 0)}          # not visible yet
    assert c.offsets("g", require_stable=True) == {0: (-1, E.UNSTABLE_OFFSET_COMMIT),
                                                   1: (-1, E.UNSTABLE_OFFSET_COMMIT)}
    assert c.offsets("g", partitions=(2,), require_stable=True) == {2: (-1, 0)}   # no pending there
    c.marker(PID, True)
    assert c.offsets("g") == {0: (10, 0), 1: (20, 0)}
    assert c.offsets("g", require_stable=True) == {0: (10, 0), 1: (20, 0)}
    assert not c.shard.offset_metadata_manager.open_transactions


def test_abort_marker_drops_pending_and_keeps_the_old_offset():
    c = TxnCtx()
    c.commit("g", {("t", 0): 5})
    c.txn_commit("g", {("t", 0): 10})
    c.marker(PID, False)
    assert c.offsets("g", require_stable=True) == {0: (5, 0), 1: (-1, 0)}
    c.marker(PID, True)                      # a marker with nothing pending changes nothing
    assert c.offsets("g") == {0: (5, 0), 1: (-1, 0)}


def test_markers_settle_only_their_producer():
    c = TxnCtx()
    c.txn_commit("g", {("t", 0): 10}, pid=PID)
    c.txn_commit("g", {("t", 1): 30}, pid=PID2)
    c.marker(PID2, True)
    assert c.offsets("g", require_stable=True) == {0: (-1, E.UNSTABLE_OFFSET_COMMIT), 1: (30, 0)}
    c.marker(PID, False)
    assert c.offsets("g", require_stable=True) == {0: (-1, 0), 1: (30, 0)}


def test_regular_commit_before_and_after_the_transactional_one():
    # A regular commit older than the transactional record: the marker makes the transactional one win.
    c = TxnCtx()
    c.commit("g", {("t", 0): 5})
    c.txn_commit("g", {("t", 0): 10})
    c.marker(PID, True)
    assert c.offsets("g")[0] == (10, 0)
    # A regular commit newer than the transactional record: it stays (Kafka keeps the newest record).
    c = TxnCtx()
    c.txn_commit("g", {("t", 0): 10})
    c.commit("g", {("t", 0): 7})
    assert c.offsets("g")[0] == (7, 0)
    c.marker(PID, True)
    assert c.offsets("g")[0] == (7, 0)
    # A regular commit after the marker replaces it as usual.
    c = TxnCtx()
    c.txn_commit("g", {("t", 0): 10})
    c.marker(PID, True)
    c.commit("g", {("t", 0): 12})
    assert c.offsets("g")[0] == (12, 0)


def test_offset_delete_drops_the_pending_transactional_offset():
    # Kafka's replay of a tombstone removes the partition's pending offsets too (KAFKA-14505;
    # OffsetMetadataManagerTest.testReplayWithTombstoneAndPendingTransactionalOffsets): the
    # COMMIT marker then has nothing to make committed.
    c = TxnCtx()
    c.txn_commit("g", {("t", 0): 10})
    c.commit("g", {("t", 0): 7})
    assert c.delete_offsets("g", {"t": [0]}).error_code == 0
    assert c.offsets("g", require_stable=True)[0] == (-1, 0)     # nothing pending any more
    c.marker(PID, True)
    assert c.offsets("g")[0] == (-1, 0)


def test_offset_delete_of_a_partition_with_only_a_pending_offset_writes_a_tombstone():
    # testGenericGroupOffsetDeleteWithPendingTransactionalOffsets: no committed offset, a pending one
    c = TxnCtx()
    c.txn_commit("g", {("t", 0): 10, ("t", 1): 20})
    before = len(c.log)
    assert c.delete_offsets("g", {"t": [0]}).error_code == 0
    assert len(c.log) == before + 1 and c.log[-1][1] is None
    c.marker(PID, True)
    assert c.offsets("g") == {0: (-1, 0), 1: (20, 0)}


def test_pending_offsets_of_a_deleted_topic_are_tombstoned():
    # onPartitionsDeleted tombstones pending offsets too (OffsetMetadataManagerTest.testOnPartitionsDeleted),
    # one per store holding the partition: a committed and a pending offset give two.
    c = TxnCtx()
    c.txn_commit("g", {("gone", 0): 10, ("kept", 0): 4})
    c.commit("h", {("gone", 0): 3})
    c.txn_commit("h", {("gone", 0): 11}, pid=PID2)
    c.run(c.shard.handle_partitions_deleted([("gone", 0)], c.now, "del"))
    assert c.answer("del") == 3
    assert not c.shard.offset_metadata_manager.has_pending_transactional_offsets("g", "gone", 0)
    c.marker(PID, True)
    c.marker(PID2, True)
    assert c.offsets("g", topic="gone", partitions=(0,)) == {0: (-1, 0)}
    assert c.offsets("h", topic="gone", partitions=(0,)) == {0: (-1, 0)}
    assert c.offsets("g", topic="kept", partitions=(0,)) == {0: (4, 0)}    # other topics untouched


def test_delete_groups_tombstones_pending_offsets_once_per_partition():
    # testDeleteGroupAllOffsetsWithPendingTransactionalOffsets: 3 committed, 2 pending of which
    # one also committed -> 4 tombstones; a later COMMIT marker restores nothing.
    c = TxnCtx()
    c.commit("g", {("a", 0): 1, ("a", 1): 1, ("b", 0): 1})
    c.txn_commit("g", {("b", 0): 2, ("c", 0): 2})
    before = len(c.log)
    assert c.delete_groups("g") == {"g": 0}
    records = [decode_record(key, value) for key, value in c.log[before:]]
    tombstones = sorted((r.key_struct.topic, r.key_struct.partition) for r in records
                        if r.record_type == OFFSET_COMMIT and r.value is None)
    assert tombstones == [("a", 0), ("a", 1), ("b", 0), ("c", 0)]
    c.marker(PID, True)
    assert c.offsets("g", topic="b", partitions=(0,)) == {0: (-1, 0)}
    assert c.offsets("g", topic="c", partitions=(0,)) == {0: (-1, 0)}


def test_expiry_waits_for_a_pending_transactional_offset():
    # testCleanupExpiredOffsetsWithPendingTransactionalOffsets: an expired offset with a
    # transactional one pending is kept, and the group with an open transaction stays.
    c = TxnCtx(**{"offsets.retention.minutes": 1})
    c.commit("g", {("t", 0): 5})
    c.txn_commit("g", {("t", 0): 6})
    c.advance(c.shard.config.offsets_retention_check_interval_ms + 60_000)
    assert c.offsets("g", require_stable=True)[0] == (-1, E.UNSTABLE_OFFSET_COMMIT)
    assert c.group("g") is not None
    c.marker(PID, True)
    assert c.offsets("g")[0] == (6, 0)


def test_kip447_fencing_from_v3():
    c = TxnCtx()
    member, tok = c.join_dynamic("g")
    while c.answer(tok) is None:
        c.advance(3000)
    gen = c.answer(tok).generation_id
    # Completing rebalance: a transactional commit is not refused for that (a regular one is).
    ok = c.txn_commit("g", {("t", 0): 1}, generation=gen, member_id=member)
    assert errors(ok) == {("t", 0): 0}
    c.answer(c.sync("g", member, gen, {member: assignment(t=[0])}))
    assert errors(c.txn_commit("g", {("t", 0): 2}, generation=gen + 1, member_id=member)) == \
        {("t", 0): E.ILLEGAL_GENERATION}
    assert errors(c.txn_commit("g", {("t", 0): 2}, generation=gen, member_id="someone")) == \
        {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert errors(c.txn_commit("g", {("t", 0): 2}, generation=gen, member_id=member, instance_id="i")) == \
        {("t", 0): E.UNKNOWN_MEMBER_ID}
    # v0-2 carry no generation: accepted while the group has members (no fencing before KIP-447).
    assert errors(c.txn_commit("g", {("t", 0): 3}, version=2, generation=gen + 5, member_id="x")) == {("t", 0): 0}
    # An unknown group: accepted with generation -1 (a simple group is created), refused otherwise.
    assert errors(c.txn_commit("new", {("t", 0): 1}, generation=3, member_id="m")) == {("t", 0): E.ILLEGAL_GENERATION}
    assert errors(c.txn_commit("new2", {("t", 0): 1})) == {("t", 0): 0}
    assert c.group("new2") is not None
    c.marker(PID, True)
    assert c.offsets("new2")[0] == (1, 0)
    assert c.offsets("g")[0] == (3, 0)


def test_loading_and_empty_group_id():
    c = TxnCtx()
    assert errors(c.txn_commit("", {("t", 0): 1})) == {("t", 0): E.INVALID_GROUP_ID}
    c.shard.is_loaded = False
    assert errors(c.txn_commit("g", {("t", 0): 1})) == {("t", 0): E.COORDINATOR_LOAD_IN_PROGRESS}
