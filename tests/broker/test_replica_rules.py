"""The replication rules of a Partition (Kafka's Partition / Replica), on a real log and a fake
clock, without a broker: the high watermark is the ISR's smallest log end offset and never goes
back, followers fall out of sync after replica.lag.time.max.ms and are eligible again once caught
up, acks=all completes once the ISR has the records, and a follower's truncation point is Kafka's
getOffsetTruncationState."""
from __future__ import annotations

from types import SimpleNamespace

from kgroup.cluster.partition_state import PartitionState
from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.records import Record, build_batch
from kgroup.broker.replica_manager import Partition, epoch_error, truncation_offset
from kgroup.storage.leader_epoch_cache import LeaderEpochFileCache
from kgroup.storage.log import PartitionLog

LAG_MS = 10_000


def _manager(broker_id=1, alive=(1, 2, 3)):
    return SimpleNamespace(broker_id=broker_id, replica_lag_time_max_ms=LAG_MS,
                           is_alive=lambda b: b in alive)


def _state(leader=1, epoch=1, isr=(1, 2, 3), replicas=(1, 2, 3), partition_epoch=0):
    return PartitionState("t", 0, bytes(16), leader, epoch, tuple(isr), tuple(replicas), partition_epoch)


def _append(plog, n=1):
    plog.append(build_batch([Record(value=b"x") for _ in range(n)]))


def _leader(tmp_path, now=1_000_000, **kw):
    plog = PartitionLog(str(tmp_path / "t-0"))
    p = Partition(_manager(), _state(**kw), plog)
    p.make_leader(_state(**kw), now)
    return p, plog


def test_high_watermark_is_the_isr_minimum_and_never_goes_back(tmp_path):
    p, plog = _leader(tmp_path)
    _append(plog, 10)
    assert plog.high_watermark == 0          # followers' log end offsets are not known yet
    p.update_follower_fetch_state(2, 6, 0, 1100)
    assert plog.high_watermark == 0
    assert p.update_follower_fetch_state(3, 4, 0, 1100)
    assert plog.high_watermark == 4
    p.update_follower_fetch_state(2, 10, 0, 1200)
    assert plog.high_watermark == 4
    p.update_follower_fetch_state(3, 10, 0, 1200)
    assert plog.high_watermark == 10
    p.update_follower_fetch_state(3, 7, 0, 1300)     # a follower that truncated: HW stays
    assert plog.high_watermark == 10


def test_an_isr_of_one_moves_the_high_watermark_at_once(tmp_path):
    p, plog = _leader(tmp_path, isr=(1,))
    _append(plog, 3)
    assert p.maybe_increment_high_watermark(1_000_100)
    assert plog.high_watermark == 3


def test_shrink_after_lag_time_and_expand_once_caught_up(tmp_path):
    p, plog = _leader(tmp_path, now=0)
    _append(plog, 5)
    p.update_follower_fetch_state(2, 5, 0, 100)       # caught up at 100
    p.update_follower_fetch_state(3, 2, 0, 100)       # behind
    assert p.out_of_sync_replicas(LAG_MS, LAG_MS) == []
    assert p.out_of_sync_replicas(LAG_MS + 50, LAG_MS) == [3]   # last caught up when leadership began (0)
    assert p.out_of_sync_replicas(LAG_MS + 150, LAG_MS) == [3]     # at the leader's end: in sync
    _append(plog, 1)                                  # ... until the leader has more
    assert p.out_of_sync_replicas(LAG_MS + 150, LAG_MS) == [2, 3]
    p.isr = (1, 2)                                    # the shrink was accepted
    p.update_follower_fetch_state(2, 6, 0, 20_000)
    assert plog.high_watermark == 6
    assert not p.follower_in_sync(3)                  # below the high watermark
    p.update_follower_fetch_state(3, 6, 0, 20_100)
    assert p.follower_in_sync(3)


def test_a_caught_up_replica_outside_the_isr_holds_the_high_watermark(tmp_path):
    p, plog = _leader(tmp_path, now=0, isr=(1, 2))
    _append(plog, 5)
    p.update_follower_fetch_state(2, 5, 0, 100)
    p.update_follower_fetch_state(3, 3, 0, 100)       # out of the ISR, but fetching within the lag
    p.remote[3].last_caught_up_ms = 100
    assert p.maybe_increment_high_watermark(200) is False and plog.high_watermark == 3


def test_acks_all_waits_for_the_isr_and_min_insync(tmp_path):
    p, plog = _leader(tmp_path)
    _append(plog, 2)
    assert p.check_enough_replicas(2, 2) == (False, ErrorCode.NONE)
    p.update_follower_fetch_state(2, 2, 0, 1100)
    p.update_follower_fetch_state(3, 2, 0, 1100)
    assert p.check_enough_replicas(2, 2) == (True, ErrorCode.NONE)
    p.isr = (1,)
    assert p.check_enough_replicas(2, 2) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    p.make_follower(_state(leader=2, epoch=2))
    assert p.check_enough_replicas(2, 2) == (True, ErrorCode.NOT_LEADER_OR_FOLLOWER)


def test_a_new_leader_epoch_starts_at_the_log_end(tmp_path):
    p, plog = _leader(tmp_path)
    _append(plog, 3)
    p.make_follower(_state(leader=2, epoch=2))
    p.make_leader(_state(leader=1, epoch=3), 2000)
    assert p.leader_epoch_start_offset == 3
    assert plog.leader_epoch_cache.entries == [(1, 0), (3, 3)]
    _append(plog, 1)
    assert plog.read(3, 1 << 20).batches()[0][12:16] == (3).to_bytes(4, "big")   # stamped with epoch 3


def test_epoch_errors():
    assert epoch_error(-1, 5) is None
    assert epoch_error(5, 5) is None
    assert epoch_error(4, 5) == ErrorCode.FENCED_LEADER_EPOCH
    assert epoch_error(6, 5) == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_truncation_offsets(tmp_path):
    cache = LeaderEpochFileCache(str(tmp_path))
    for epoch, start in ((1, 0), (2, 10), (4, 20)):
        cache.assign(epoch, start)
    leo, hw = 30, 12
    # the leader knows the follower's latest epoch and it ended earlier there: cut at its end
    assert truncation_offset(4, 25, cache, leo, hw) == (25, True)
    # ... or later: nothing to cut beyond the follower's own end
    assert truncation_offset(4, 40, cache, leo, hw) == (30, True)
    # the leader answers an older epoch the follower has: the smaller of both ends
    assert truncation_offset(2, 15, cache, leo, hw) == (15, True)
    # an epoch the follower does not know (3): cut to the end of its largest epoch below, ask again
    assert truncation_offset(3, 22, cache, leo, hw) == (20, False)
    # the leader does not know the epoch: its end offset
    assert truncation_offset(-1, 18, cache, leo, hw) == (18, True)
    # no end offset at all: the high watermark
    assert truncation_offset(-1, -1, cache, leo, hw) == (12, True)
