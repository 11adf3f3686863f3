"""The share coordinator's shard (KIP-932) on the fake clock: Initialize/Read/Write/Delete/
ReadSummary of share-partition state, fencing by leader and state epochs, updates folded into a
snapshot every share.coordinator.snapshot.update.records.per.snapshot writes, the state batches
combined as Kafka's PersisterStateBatchCombiner does, cold-partition snapshots. After every
operation: live state == a shard replayed from the records written."""
import itertools

from kgroup.coordinator.result import gate
from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from kgroup.protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from kgroup.protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from kgroup.protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest
from kgroup.protocol.messages.write_share_group_state import WriteShareGroupStateRequest
from kgroup.share_coordinator import ShareCoordinatorConfig, ShareCoordinatorShard, share_state_partition
from kgroup.share_coordinator import share_state_records as rec
from kgroup.share_coordinator.state_batches import StateBatch, combine

S = ShareCoordinatorShard
T = bytes(range(1, 17))
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4


class Ctx:
    def __init__(self, **props):
        self.config = ShareCoordinatorConfig.from_props(props)
        self.topics = {T: 3}
        self.now = 1000
        self.shard = S(0, self.config, topics=lambda: self.topics)
        self.log = []
        self.tokens = itertools.count()
        self.run(self.shard.on_loaded(self.now))

    def run(self, result):
        self.log.extend((r.key, r.value) for r in result.records)
        out = self.shard.commit(result)
        other = S(0, self.config, topics=lambda: self.topics)
        for offset, (k, v) in enumerate(self.log):
            other.replay(k, v, offset)
        assert other.durable_state() == self.shard.durable_state(), "replay does not rebuild the live state"
        return out

    def call(self, handler, req, version=0):
        token = next(self.tokens)
        refused = gate(handler, req, version, self.config, None if self.shard.is_loaded else E.NOT_COORDINATOR)
        if refused is not None:
            return refused
        out = self.run(handler(self.shard, req, version, self.now, token))
        [(t, response)] = out
        assert t == token
        return response.results[0].partitions[0]

    def init(self, p=0, state_epoch=0, start_offset=-1, group="g"):
        R = InitializeShareGroupStateRequest.InitializeStateData
        return self.call(S.handle_initialize_share_group_state, InitializeShareGroupStateRequest(group_id=group, topics=[
            R(topic_id=T, partitions=[R.PartitionData(partition=p, state_epoch=state_epoch, start_offset=start_offset)])]))

    def write(self, batches, p=0, start_offset=-1, leader_epoch=0, state_epoch=0, complete=-1, version=1):
        R = WriteShareGroupStateRequest.WriteStateData
        P = R.PartitionData
        return self.call(S.handle_write_share_group_state, WriteShareGroupStateRequest(group_id="g", topics=[R(
            topic_id=T, partitions=[P(partition=p, state_epoch=state_epoch, leader_epoch=leader_epoch,
                                      start_offset=start_offset, delivery_complete_count=complete,
                                      state_batches=[P.StateBatch(first_offset=a, last_offset=b, delivery_state=s,
                                                                  delivery_count=c) for a, b, s, c in batches])])]),
            version)

    def read(self, p=0, leader_epoch=0):
        R = ReadShareGroupStateRequest.ReadStateData
        return self.call(S.handle_read_share_group_state, ReadShareGroupStateRequest(group_id="g", topics=[
            R(topic_id=T, partitions=[R.PartitionData(partition=p, leader_epoch=leader_epoch)])]))

    def summary(self, p=0):
        R = ReadShareGroupStateSummaryRequest.ReadStateSummaryData
        return self.call(S.handle_read_share_group_state_summary, ReadShareGroupStateSummaryRequest(
            group_id="g", topics=[R(topic_id=T, partitions=[R.PartitionData(partition=p, leader_epoch=0)])]), 1)

    def delete(self, p=0):
        R = DeleteShareGroupStateRequest.DeleteStateData
        return self.call(S.handle_delete_share_group_state, DeleteShareGroupStateRequest(group_id="g", topics=[
            R(topic_id=T, partitions=[R.PartitionData(partition=p)])]))


def batches(part):
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in part.state_batches]


def test_initialize_read_write_delete():
    c = Ctx()
    r = c.read()
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST,
                                               "Read operation on uninitialized share partition not allowed.")
    assert c.write([(0, 4, ACKNOWLEDGED, 1)]).error_message == \
        "Write operation on uninitialized share partition not allowed."
    s = c.summary()
    assert (s.error_code, s.start_offset, s.delivery_complete_count) == (0, -1, -1)
    assert c.init(state_epoch=1).error_code == 0
    r = c.read()
    assert (r.error_code, r.state_epoch, r.start_offset, batches(r)) == (0, 1, -1, [])
    assert c.write([(0, 4, ACKNOWLEDGED, 1), (5, 9, AVAILABLE, 1)], start_offset=0, state_epoch=1).error_code == 0
    assert c.write([(5, 6, ARCHIVED, 2)], state_epoch=1).error_code == 0
    r = c.read()
    assert (r.start_offset, batches(r)) == (0, [(0, 4, ACKNOWLEDGED, 1), (5, 6, ARCHIVED, 2), (7, 9, AVAILABLE, 1)])
    assert c.write([], start_offset=5, state_epoch=1, complete=2).error_code == 0
    r = c.read()
    assert (r.start_offset, batches(r)) == (5, [(5, 6, ARCHIVED, 2), (7, 9, AVAILABLE, 1)])
    s = c.summary()
    assert (s.start_offset, s.delivery_complete_count, s.state_epoch) == (5, 2, 1)
    assert c.delete().error_code == 0
    assert c.read().error_code == E.INVALID_REQUEST
    assert c.delete().error_code == 0           # deleting nothing is fine


def test_fencing():
    c = Ctx()
    c.init(state_epoch=2)
    assert c.init(state_epoch=1).error_code == E.FENCED_STATE_EPOCH
    assert c.write([], state_epoch=1).error_code == E.FENCED_STATE_EPOCH
    # a read by a new leader records its epoch: the old leader's writes are fenced
    n = len(c.log)
    assert c.read(leader_epoch=5).error_code == 0 and len(c.log) == n + 1
    assert c.read(leader_epoch=5).error_code == 0 and len(c.log) == n + 1   # nothing more to record
    assert c.write([], leader_epoch=4, state_epoch=2).error_code == E.FENCED_LEADER_EPOCH
    assert c.read(leader_epoch=4).error_code == E.FENCED_LEADER_EPOCH
    assert c.write([], leader_epoch=5, state_epoch=2).error_code == 0
    assert c.write([], leader_epoch=-1, state_epoch=-1).error_code == 0      # -1: not checked


def test_unknown_topic_and_bad_ids():
    c = Ctx()
    assert c.init(p=3).error_code == E.UNKNOWN_TOPIC_OR_PARTITION
    assert (c.init(p=-1).error_code, c.init(p=-1).error_message) == (
        E.INVALID_REQUEST, "The partition id cannot be a negative number.")


def test_a_snapshot_every_n_updates():
    c = Ctx(**{"share.coordinator.snapshot.update.records.per.snapshot": 3})
    c.init()
    types = []
    for i in range(8):
        c.write([(i, i, ACKNOWLEDGED, 1)], start_offset=0)
        types.append(int.from_bytes(c.log[-1][0][:2], "big"))
    assert types == [1, 1, 1, 0, 1, 1, 1, 0]
    r = c.read()
    assert batches(r) == [(0, 7, ACKNOWLEDGED, 1)]
    snapshot = rec.decode_record(*c.log[4]).value_struct
    assert snapshot.snapshot_epoch == 1 and snapshot.write_timestamp == c.now


def test_cold_partitions_are_snapshotted():
    c = Ctx(**{"share.coordinator.cold.partition.snapshot.interval.ms": 10_000})
    c.init()
    c.write([(0, 0, ACKNOWLEDGED, 1)], start_offset=0)       # an update: the snapshot is cold
    c.now += 10_000
    for result in c.shard.poll_timers(c.now):
        c.run(result)
    last = rec.decode_record(*c.log[-1])
    assert last.record_type == rec.SHARE_SNAPSHOT and last.value_struct.snapshot_epoch == 1
    assert [(b.first_offset, b.last_offset) for b in last.value_struct.state_batches] == [(0, 0)]


def test_topics_deleted_drop_their_state():
    c = Ctx()
    c.init(p=0)
    c.init(p=1, group="h")
    c.run(c.shard.handle_topics_deleted({T}, c.now, "t"))
    assert c.shard.state == {}


def test_combine_state_batches():
    B = StateBatch
    # a later delivery wins where batches overlap; equal neighbours merge
    assert combine([B(0, 9, AVAILABLE, 1)], [B(3, 5, ACKNOWLEDGED, 1)], -1) == [
        B(0, 2, AVAILABLE, 1), B(3, 5, ACKNOWLEDGED, 1), B(6, 9, AVAILABLE, 1)]
    assert combine([B(0, 4, ARCHIVED, 2)], [B(2, 8, AVAILABLE, 1)], -1) == [B(0, 4, ARCHIVED, 2), B(5, 8, AVAILABLE, 1)]
    assert combine([B(0, 4, AVAILABLE, 1)], [B(5, 8, AVAILABLE, 1)], -1) == [B(0, 8, AVAILABLE, 1)]
    # the start offset prunes
    assert combine([B(0, 4, AVAILABLE, 1), B(5, 9, ACKNOWLEDGED, 1)], [], 7) == [B(7, 9, ACKNOWLEDGED, 1)]
    assert combine([], [], -1) == []


def test_state_partition_of_a_share_partition_key():
    # Kafka: abs(("g:" + Uuid.toString + ":0").hashCode()) % 50
    assert share_state_partition("g", T, 0, 50) == share_state_partition("g", T, 0, 50)
    assert {share_state_partition("g", T, p, 50) for p in range(30)} != {0}
    assert all(0 <= share_state_partition("grp", T, p, 7) < 7 for p in range(100))
