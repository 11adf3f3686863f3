"""The leader epoch cache (Kafka's LeaderEpochFileCache and its leader-epoch-checkpoint file), and
the log's use of it: epochs assigned on leader appends, kept by follower appends, cut by
truncation from the end and the start, reloaded from the checkpoint."""
from __future__ import annotations

import pytest

from kgroup.protocol.records import InvalidRecordError, Record, build_batch, read_batch_header
from kgroup.storage.leader_epoch_cache import (CHECKPOINT_FILE, EpochEntry, LeaderEpochCheckpointError,
                                               LeaderEpochFileCache, read_checkpoint)
from kgroup.storage.log import PartitionLog


def cache_with(tmp_path, *entries) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(str(tmp_path))
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def test_checkpoint_file_has_kafkas_format(tmp_path):
    cache_with(tmp_path, (0, 0), (3, 10), (5, 42))
    assert (tmp_path / CHECKPOINT_FILE).read_text() == "0\n3\n0 0\n3 10\n5 42\n"
    assert read_checkpoint(str(tmp_path / CHECKPOINT_FILE)) == [EpochEntry(0, 0), EpochEntry(3, 10), EpochEntry(5, 42)]
    assert LeaderEpochFileCache(str(tmp_path)).entries == [(0, 0), (3, 10), (5, 42)]


def test_malformed_checkpoint_is_refused(tmp_path):
    (tmp_path / CHECKPOINT_FILE).write_text("0\n2\n1 0\n")
    with pytest.raises(LeaderEpochCheckpointError):
        LeaderEpochFileCache(str(tmp_path))
    (tmp_path / CHECKPOINT_FILE).write_text("1\n0\n")
    with pytest.raises(LeaderEpochCheckpointError):
        LeaderEpochFileCache(str(tmp_path))


def test_assign_keeps_epochs_and_offsets_monotonic(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (2, 5))
    assert not cache.assign(2, 7)           # the latest epoch, from a later offset: nothing to do
    assert cache.assign(2, 3)               # same epoch, earlier offset: replaces it
    assert cache.entries == [(1, 0), (2, 3)]
    assert cache.assign(4, 2)               # entries at or after the new offset go
    assert cache.entries == [(1, 0), (4, 2)]
    assert cache.assign(3, 8)               # entries at or above the new epoch go
    assert cache.entries == [(1, 0), (3, 8)]
    assert cache.latest_epoch == 3
    with pytest.raises(ValueError):
        cache.assign(-1, 0)


def test_end_offset_for_as_kafka(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (3, 10), (6, 25))
    leo = 40
    assert cache.end_offset_for(-1, leo) == (-1, -1)         # undefined
    assert cache.end_offset_for(6, leo) == (6, 40)           # the latest: the log end
    assert cache.end_offset_for(7, leo) == (-1, -1)          # newer than any
    assert cache.end_offset_for(3, leo) == (3, 25)           # ends where the next starts
    assert cache.end_offset_for(4, leo) == (3, 25)           # unknown epoch: the largest below it
    assert cache.end_offset_for(0, leo) == (0, 0)            # older than all: the first start
    (tmp_path / "empty").mkdir()
    assert LeaderEpochFileCache(str(tmp_path / "empty")).end_offset_for(0, 5) == (-1, -1)


def test_truncate_from_end_and_start(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (3, 10), (6, 25))
    assert cache.truncate_from_end(25)
    assert cache.entries == [(1, 0), (3, 10)]
    assert not cache.truncate_from_end(30)
    assert cache.truncate_from_start(12)
    assert cache.entries == [(3, 12)]
    assert not cache.truncate_from_start(12)
    assert LeaderEpochFileCache(str(tmp_path)).entries == [(3, 12)]    # written
    cache.clear()
    assert cache.entries == [] and cache.latest_epoch == -1


def _batch(n: int, epoch: int = -1, base_offset: int = 0) -> bytes:
    data = bytearray(build_batch([Record(value=b"v%d" % i) for i in range(n)], partition_leader_epoch=epoch))
    data[0:8] = base_offset.to_bytes(8, "big")
    return bytes(data)


def test_a_single_nodes_log_keeps_no_checkpoint(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"))
    plog.append(_batch(3))
    assert plog.leader_epoch_cache.entries == []
    assert not (tmp_path / "t-0" / CHECKPOINT_FILE).exists()


def test_log_assigns_epochs_on_leader_appends_and_truncates(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"))
    plog.set_high_watermark(0)          # replicated
    plog.append(_batch(3))
    assert plog.leader_epoch_cache.entries == [(0, 0)]
    plog.leader_epoch = 2
    plog.append(_batch(2))
    plog.append(_batch(2))
    assert plog.leader_epoch_cache.entries == [(0, 0), (2, 3)]
    plog.truncate_to(3)
    assert plog.leader_epoch_cache.entries == [(0, 0)]
    plog.close()
    reopened = PartitionLog(str(tmp_path / "t-0"))
    assert reopened.leader_epoch_cache.entries == [(0, 0)]
    assert reopened.log_end_offset == 3
    reopened.set_high_watermark(3)
    reopened.delete_records_before(2)
    assert reopened.leader_epoch_cache.entries == [(0, 2)]


def test_follower_append_keeps_offsets_and_epochs(tmp_path):
    leader = PartitionLog(str(tmp_path / "l-0"))
    leader.set_high_watermark(0)
    leader.append(_batch(2))
    leader.leader_epoch = 4
    leader.append(_batch(3))
    follower = PartitionLog(str(tmp_path / "f-0"))
    got = leader.read(0, 1 << 20)
    assert follower.append_as_follower(got.records) == 5
    assert bytes(follower.read(0, 1 << 20).records) == bytes(got.records)       # byte for byte
    assert follower.leader_epoch_cache.entries == [(0, 0), (4, 2)]
    # a partial trailing batch is left for the next fetch
    leader.append(_batch(1))
    tail = bytes(leader.read(5, 1 << 20).records)
    assert follower.append_as_follower(tail[:-3]) == 5
    assert follower.append_as_follower(tail) == 6
    with pytest.raises(InvalidRecordError, match="Out of order offsets"):
        follower.append_as_follower(tail)       # offsets before the follower's end


def test_follower_starts_over_at_a_later_leader_start(tmp_path):
    follower = PartitionLog(str(tmp_path / "f-0"))
    follower.append_as_follower(_batch(2, epoch=1, base_offset=0))
    batch = _batch(2, epoch=3, base_offset=100)
    assert read_batch_header(batch).base_offset == 100
    from kgroup.protocol.records import compute_batch_crc  # the base offset is outside the CRC
    assert compute_batch_crc(batch) == read_batch_header(batch).crc
    assert follower.append_as_follower(batch) == 102
    assert follower.log_start_offset == 100
    assert follower.leader_epoch_cache.entries == [(3, 100)]


def test_high_watermark_follows_the_log_end_until_set(tmp_path):
    plog = PartitionLog(str(tmp_path / "t-0"))
    plog.append(_batch(3))
    assert plog.high_watermark == 3 and not plog.replicated
    plog.set_high_watermark(1)
    plog.append(_batch(2))
    assert plog.high_watermark == 1 and plog.log_end_offset == 5
    assert len(plog.read(0, 1 << 20, max_offset=plog.high_watermark).records) > 0
    assert plog.set_high_watermark(99) == 5          # never past the log end
    plog.truncate_to(3)
    assert plog.high_watermark == 3
    plog.follow_log_end()
    assert plog.high_watermark == plog.log_end_offset
