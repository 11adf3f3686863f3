"""Loading a __consumer_offsets partition replays only the last record of
each key (the state a compacted log gives). Checked against the full replay on a history with
overwritten commits, group generations, deletions and tombstones; and 1M commit records load
within the goal (3 s) in benchmarks/footprint_bench.py, not here (no timed unit tests)."""
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
        steps = sum(1 for _ in load_steps(shard, plog))
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
    list(load_steps(shard, plog))
    shard.on_loaded(ctx.now)
    assert shard.durable_state() == full.durable_state()


class ReadSpy:
    """A log whose reads are recorded: the bytes each returned."""

    def __init__(self, plog):
        self.plog, self.sizes = plog, []

    def __getattr__(self, name):
        return getattr(self.plog, name)

    def read(self, *args, **kwargs):
        got = self.plog.read(*args, **kwargs)
        self.sizes.append(len(got.records))
        return got


def test_offsets_load_buffer_size_bounds_each_read(tmp_path):
    """Kafka's offsets.load.buffer.size (CoordinatorLoaderImpl): the log is read that many bytes
    at a time, whole batches, at least one: a buffer of 1 byte, or one smaller than a batch,
    still loads everything, reading one batch at a time; what a read holds is bounded by the
    larger of the buffer and the largest batch."""
    ctx = history()
    records = ctx.log + [(k, v) for k, v in ctx.log[-3:]] * 40     # one batch larger than the others
    plog = write_log(tmp_path, ctx.log)
    plog.append(build_batch([Record(key=k, value=v, timestamp=1) for k, v in records[len(ctx.log):]]))
    full = fresh_shard(ctx.shard, records, ctx.now)
    largest = max(h.size for h, _ in plog.iter_batches())
    batches = sum(1 for _ in plog.iter_batches())
    for buffer_size, reads_at_least in ((1, batches), (largest // 4, 2), (largest, 2),
                                        (5 * 2**20, 1)):
        spy = ReadSpy(plog)
        shard = GroupCoordinatorShard(ctx.shard.partition, ctx.shard.config, TimerQueue(), lambda: "x")
        list(load_steps(shard, spy, buffer_size))
        shard.on_loaded(ctx.now)
        assert shard.durable_state() == full.durable_state(), buffer_size
        assert max(spy.sizes) <= max(buffer_size, largest), (buffer_size, spy.sizes)
        assert len(spy.sizes) >= reads_at_least, (buffer_size, len(spy.sizes))
        if buffer_size == 1:
            assert len(spy.sizes) == batches          # one batch per read


def test_load_buffer_size_keys_are_accepted_with_kafkas_minimum():
    import pytest
    from kgroup.broker.config import BrokerConfig, ConfigError
    assert BrokerConfig({})["offsets.load.buffer.size"] == 5 * 2**20
    assert BrokerConfig({})["transaction.state.log.load.buffer.size"] == 5 * 2**20
    assert BrokerConfig({"offsets.load.buffer.size": "1"})["offsets.load.buffer.size"] == 1
    for key in ("offsets.load.buffer.size", "transaction.state.log.load.buffer.size"):
        with pytest.raises(ConfigError, match="at least 1"):
            BrokerConfig({key: "0"})


def test_a_group_answers_once_its_own_partition_is_loaded(tmp_path):
    """After a restart __consumer_offsets loads partition by partition in the background: a
    group whose partition is loaded answers (OffsetFetch) while a later partition, holding 200k
    commits, is still loading (its groups get COORDINATOR_LOAD_IN_PROGRESS), with a small
    offsets.load.buffer.size; then that group answers too, with its last commit."""
    import time
    from kgroup.coordinator import group_partition
    from kgroup.coordinator.coordinator_records import offset_commit_record
    from kgroup.protocol.errors import ErrorCode
    from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
    from kgroup.storage.manager import LogManager
    from kgroup.storage.producer_state import AppendOrigin
    from tests.faults.test_disk_faults import commit, set_up
    from tests.harness import BrokerProcess, RawClient
    FT = OffsetFetchRequest.OffsetFetchRequestTopic
    early = next(f"early-{i}" for i in range(10**6) if group_partition(f"early-{i}", 50) == 0)
    late = next(f"late-{i}" for i in range(10**6) if group_partition(f"late-{i}", 50) == 49)
    data = tmp_path / "d"
    b = BrokerProcess(data).start()
    try:
        set_up(b)                   # topic "t"
        c = RawClient(b.port)
        assert commit(c, early, "t", 11) == 0 and commit(c, late, "t", 1) == 0
    finally:
        b.stop()
    logs = LogManager(str(data))
    plog = logs.get("__consumer_offsets", 49)
    n = 200_000
    for start in range(0, n, 1000):     # distinct keys: none is skipped as overwritten
        plog.append(build_batch([Record(key=r.key, value=r.value, timestamp=1) for r in (
            offset_commit_record(late, "t", i, i + 7, -1, "", 1, None) for i in range(start, start + 1000))]),
            origin=AppendOrigin.COORDINATOR)
    logs.close_all(clean=True)

    def fetch(c, group, partition):
        r = c.request(OffsetFetchRequest(group_id=group, topics=[FT(name="t", partition_indexes=[partition])]), 7)
        return r.error_code, (r.topics[0].partitions[0].committed_offset if r.error_code == 0 else None)
    b = BrokerProcess(data, ["offsets.load.buffer.size=65536"]).start()
    try:
        c = RawClient(b.port)
        deadline = time.monotonic() + 60
        while (got := fetch(c, early, 0))[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        assert got == (0, 11)
        assert fetch(c, late, 0)[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        while (got := fetch(c, late, n - 1))[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert got == (0, n - 1 + 7)
    finally:
        b.stop()


def test_records_above_the_high_watermark_are_loaded_with_what_they_replaced(tmp_path):
    """A new leader's log may end with records its high watermark has not passed: they are
    replayed after the compacted rest, one by one, so a read at the high watermark still sees
    what each replaced (the offset committed below it, or none)."""
    ctx = Ctx(check=False)
    ctx.commit("g", {("t", 0): 5})
    ctx.commit("g", {("t", 0): 6})
    hw = len(ctx.log)
    ctx.commit("g", {("t", 0): 9, ("t", 1): 1})
    ctx.delete_offsets("g", {"t": [1]})
    plog = write_log(tmp_path, ctx.log, per_batch=1)
    plog.set_high_watermark(hw)
    shard = GroupCoordinatorShard(ctx.shard.partition, ctx.shard.config, TimerQueue(), lambda: "x")
    shard.update_last_committed_offset(plog.high_watermark)
    for _ in load_steps(shard, plog):
        pass
    shard.on_loaded(ctx.now)
    assert shard.durable_state() == ctx.shard.durable_state()
    omm = shard.offset_metadata_manager
    read = omm.fetch_offsets("g", [("t", [0, 1])], False, committed_offset=shard.last_committed_offset)
    assert [(p, o) for p, o, *_ in read.topics[0][1]] == [(0, 6), (1, -1)]
    shard.update_last_committed_offset(len(ctx.log))
    assert omm.uncommitted == {}
