"""Issue 17, finding 9: loading a __consumer_offsets partition replays only the last record of
each key (the state a compacted log gives). Checked against the full replay on a history with
overwritten commits, group generations, deletions and tombstones; and 1M commit records load
within the goal (3 s) in benchmarks/footprint_bench.py, not here (no timed unit tests)."""
from kgroup.broker.group_runtime import GroupRuntime
from kgroup.broker.offsets_loader import load_steps
from kgroup.coordinator import GroupCoordinatorShard, TimerQueue
from kgroup.protocol.records import Record, build_batch
from kgroup.storage.log import PartitionLog
from tests.coordinator.support import Ctx, fresh_shard


def write_log(tmp_path, records, per_batch=7):
    plog = PartitionLog(str(tmp_path / "__consumer_offsets-7"))
    for i in range(0, len(records), per_batch):
        plog.append(build_batch([Record(key=k, value=v, timestamp=1) for k, v in records[i:i + per_batch]]))
    return plog


def history():
    ctx = Ctx(check=False)
    for round_ in range(5):
        for g in ("a", "b", "c"):
            ctx.commit(g, {("t", p): round_ * 10 + p for p in range(3)})
    gen, members, leader = ctx.stable_group("live", 3)
    ctx.commit("live", {("t", 0): 99}, member_id=leader, generation=gen)
    ctx.leave("live", members[0])
    ctx.advance(ctx.config.initial_rebalance_delay_ms)
    ctx.delete_offsets("a", {"t": [1]})
    ctx.delete_groups("b")                      # tombstones for b's offsets and group
    ctx.commit("b", {("t", 0): 7})              # b comes back after its tombstones
    ctx.stable_group("other", 2)
    ctx.delete_groups("other")
    return ctx


def test_last_record_per_key_gives_the_full_replays_state(tmp_path):
    ctx = history()
    full = fresh_shard(ctx.shard, ctx.log, ctx.now)
    plog = write_log(tmp_path, ctx.log)
    for _ in range(2):
        shard = GroupCoordinatorShard(ctx.shard.partition, ctx.shard.config, TimerQueue(), lambda: "x")
        steps = sum(1 for _ in load_steps(shard, plog, GroupRuntime._replay_transactional))
        shard.on_loaded(ctx.now)
        assert shard.durable_state() == full.durable_state() == ctx.shard.durable_state()
        offsets = shard.durable_state()["offsets"]
        assert offsets["b"]["t"][0][0] == 7 and 1 not in offsets["a"]["t"] and "other" not in offsets
        assert steps >= len(ctx.log) // 7      # yields after every batch read



def test_transactional_batches_are_replayed_record_by_record(tmp_path):
    """A partition with a transactional batch (TxnOffsetCommit's offsets, pending until the
    producer's marker) is replayed record by record, the batch as the producer's pending offsets."""
    ctx = history()
    plog = write_log(tmp_path, ctx.log)
    k, v = ctx.log[-1]
    plog.append(build_batch([Record(key=k, value=v, timestamp=1)], producer_id=5, producer_epoch=0,
                            base_sequence=0, is_transactional=True))
    full = fresh_shard(ctx.shard, ctx.log + [("txn", 5, k, v)], ctx.now)
    shard = GroupCoordinatorShard(ctx.shard.partition, ctx.shard.config, TimerQueue(), lambda: "x")
    list(load_steps(shard, plog, GroupRuntime._replay_transactional))
    shard.on_loaded(ctx.now)
    assert shard.durable_state() == full.durable_state()
