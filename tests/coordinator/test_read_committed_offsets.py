"""OffsetFetch reads at the partition's last committed offset (Kafka's read operations at
``lastCommittedOffset``): a commit whose record is above the high watermark (appended, not yet in
the ISR) is not shown by a fetch without ``require_stable`` until the high watermark passes it;
the same for tombstones (OffsetDelete, DeleteGroups) and for a transaction's COMMIT marker; a
stable fetch reads the latest state and asks to be answered once everything written is committed.
Fake clock; the live == replayed check after every step (the undo entries are not replayed state)."""
from __future__ import annotations

from kgroup.coordinator import GroupCoordinatorShard
from kgroup.coordinator import coordinator_records as rec
from kgroup.coordinator.result import gate
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from kgroup.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from tests.coordinator.support import E, S, Ctx, assert_replay_consistent, fresh_shard


class ReplicatedCtx(Ctx):
    """The runtime of a partition whose followers lag: each write is appended at the log's end
    (its last offset told to the shard), the high watermark moves only with ``replicate``."""

    def __init__(self, **props):
        super().__init__(**props)
        self.hw = len(self.log)
        self.shard.update_last_committed_offset(self.hw)

    def run(self, result):
        if result.records and self.fail_writes is None:
            self.shard.update_last_written_offset(len(self.log) + len(result.records) - 1)
        return super().run(result)

    def replicate(self, upto=None):
        """The high watermark moves to ``upto`` (the log end by default)."""
        self.hw = len(self.log) if upto is None else upto
        self.shard.update_last_committed_offset(self.hw)

    def stable_result(self, group_id, topics):
        """The shard's Result of a require_stable fetch (what the runtime defers), and its token."""
        token = self.token()
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        req = OffsetFetchRequest(group_id=group_id, require_stable=True,
                                 topics=[T(name=t, partition_indexes=ps) for t, ps in topics.items()])
        assert gate(S.handle_offset_fetch, req, 7, self.config, None) is None
        return S.handle_offset_fetch(self.shard, req, 7, self.now, token), token


def test_a_commit_above_the_high_watermark_is_not_fetched_until_it_is_committed():
    c = ReplicatedCtx()
    assert c.commit("g", {("t", 0): 5}) == {("t", 0): 0}
    c.replicate()
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (5, 0)}
    assert c.commit("g", {("t", 0): 9}) == {("t", 0): 0}
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (5, 0)}         # not in the ISR yet
    assert c.fetched("g") == {("t", 0): (5, 0)}                     # all topics too
    assert c.shard.offset_metadata_manager.offset("g", "t", 0).committed_offset == 9   # the live state has it
    c.replicate(c.hw)                                              # the high watermark did not pass it
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (5, 0)}
    c.replicate()
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (9, 0)}
    assert c.shard.offset_metadata_manager.uncommitted == {}


def test_a_first_commit_is_absent_until_committed():
    c = ReplicatedCtx()
    c.commit("g", {("t", 0): 5, ("t", 1): 6})
    assert c.fetched("g", {"t": [0, 1]}) == {("t", 0): (-1, 0), ("t", 1): (-1, 0)}
    assert c.fetched("g") == {}
    c.replicate()
    assert c.fetched("g", {"t": [0, 1]}) == {("t", 0): (5, 0), ("t", 1): (6, 0)}


def test_several_uncommitted_writes_to_one_partition():
    c = ReplicatedCtx()
    c.commit("g", {("t", 0): 1})
    c.replicate()
    marks = []
    for o in (2, 3, 4):
        c.commit("g", {("t", 0): o})
        marks.append(len(c.log))            # the high watermark just past this commit
    assert len(c.shard.offset_metadata_manager.uncommitted["g"][("t", 0)]) == 3
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (1, 0)}
    for hw, o in zip(marks, (2, 3, 4)):
        c.replicate(hw)
        assert c.fetched("g", {"t": [0]}) == {("t", 0): (o, 0)}
    assert c.shard.offset_metadata_manager.uncommitted == {}


def test_several_writes_in_one_batch_read_as_before_the_batch():
    """Writes appended in one batch sit at its last offset: none is seen before all are."""
    c = ReplicatedCtx()
    c.commit("g", {("t", 0): 1})
    c.replicate()
    omm = c.shard.offset_metadata_manager
    result = c.shard._begin(c.now)
    for o in (2, 3):
        result.add_record(rec.offset_commit_record("g", "t", 0, o, -1, "", c.now, None))
    c.run(result)
    assert omm.offset("g", "t", 0).committed_offset == 3
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (1, 0)}
    c.replicate(len(c.log) - 1)             # not past the batch's last record
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (1, 0)}
    c.replicate()
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (3, 0)}


def test_a_group_deleted_by_an_uncommitted_tombstone_still_shows_its_offsets():
    c = ReplicatedCtx()
    c.commit("g", {("t", 0): 5, ("u", 1): 7})
    c.replicate()
    assert c.delete_groups("g") == {"g": 0}
    assert "g" not in c.shard.groups
    assert c.fetched("g", {"t": [0], "u": [1]}) == {("t", 0): (5, 0), ("u", 1): (7, 0)}
    assert c.fetched("g") == {("t", 0): (5, 0), ("u", 1): (7, 0)}
    c.replicate()
    assert c.fetched("g", {"t": [0], "u": [1]}) == {("t", 0): (-1, 0), ("u", 1): (-1, 0)}


def test_offset_delete_and_expiry_tombstones_wait_for_the_high_watermark():
    c = ReplicatedCtx(**{"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "1000"})
    c.commit("g", {("t", 0): 5, ("t", 1): 6})
    c.replicate()
    c.delete_offsets("g", {"t": [0]})
    assert c.fetched("g", {"t": [0, 1]}) == {("t", 0): (5, 0), ("t", 1): (6, 0)}
    c.replicate()
    assert c.fetched("g", {"t": [0, 1]}) == {("t", 0): (-1, 0), ("t", 1): (6, 0)}
    c.advance(61_000)                       # the rest expires, and the empty group goes
    assert c.shard.offset_metadata_manager.offset("g", "t", 1) is None
    assert c.fetched("g", {"t": [1]}) == {("t", 1): (6, 0)}
    c.replicate()
    assert c.fetched("g", {"t": [1]}) == {("t", 1): (-1, 0)}


def test_a_transaction_commit_marker_above_the_high_watermark():
    c = ReplicatedCtx()
    c.commit("g", {("t", 0): 1})
    c.replicate()
    T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    req = TxnOffsetCommitRequest(transactional_id="tx", group_id="g", producer_id=9, producer_epoch=0,
                                 generation_id=-1, member_id="", topics=[T(name="t", partitions=[
                                     T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=8)])])
    result = GroupCoordinatorShard.handle_txn_offset_commit(c.shard, req, 4, c.now, c.token())
    c.shard.update_last_written_offset(len(c.log) + len(result.records) - 1)
    c.log.extend(("txn", 9, r.key, r.value) for r in result.records)
    c.shard.commit(result, 9)
    c.replicate()
    c.log.append(("marker", 9, True))
    c.shard.replay_end_transaction_marker(9, True, len(c.log) - 1)
    assert_replay_consistent(c.shard, c.log, c.now)
    assert c.shard.offset_metadata_manager.offset("g", "t", 0).committed_offset == 8
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (1, 0)}
    c.replicate()
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (8, 0)}


def test_a_stable_fetch_reads_the_latest_state_and_waits_for_it_to_be_committed():
    c = ReplicatedCtx()
    c.commit("g", {("t", 0): 5})
    result, token = c.stable_result("g", {"t": [0]})
    assert result.wait_committed and not result.records
    [(answered, response)] = c.shard.commit(result)
    assert answered == token
    assert [(p.committed_offset, p.error_code) for t in response.topics for p in t.partitions] == [(5, 0)]
    # the form it takes if the wait fails (the runtime's timeout, a lost leadership)
    [(_, failed)] = result.failure_responses(E.NOT_COORDINATOR)
    assert failed.error_code == E.NOT_COORDINATOR
    plain = c.fetch("g", {"t": [0]})
    assert [p.committed_offset for t in plain.topics for p in t.partitions] == [-1]


def test_a_load_above_the_high_watermark_keeps_what_each_record_replaced():
    """A new leader's log may hold records its high watermark has not passed: loaded, they are
    replayed after the committed ones, each with its offset."""
    c = ReplicatedCtx()
    c.commit("g", {("t", 0): 5})
    c.replicate()
    hw = c.hw
    c.commit("g", {("t", 0): 9})
    loaded = GroupCoordinatorShard(c.shard.partition, c.shard.config)
    loaded.update_last_committed_offset(hw)
    for offset, (key, value) in enumerate(c.log):
        loaded.replay(key, value, offset)
    omm = loaded.offset_metadata_manager
    assert omm.offset("g", "t", 0).committed_offset == 9
    assert omm.fetch_offsets("g", [("t", [0])], False, committed_offset=hw).topics[0][1][0][1] == 5
    loaded.update_last_committed_offset(len(c.log))
    assert omm.uncommitted == {}
    assert fresh_shard(c.shard, c.log, c.now).offset_metadata_manager.uncommitted == {}


def test_a_shard_never_told_a_committed_offset_reads_everything():
    c = Ctx()
    c.commit("g", {("t", 0): 5})
    assert c.fetched("g", {"t": [0]}) == {("t", 0): (5, 0)}
    assert c.shard.offset_metadata_manager.uncommitted == {}
