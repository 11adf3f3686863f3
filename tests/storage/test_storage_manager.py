"""LogManager: directories, checkpoints, the clean-shutdown marker, deletion; LogConfig names."""
from __future__ import annotations

import logging
import os

import pytest

from kgroup.storage import LogConfig, LogManager
from kgroup.storage.manager import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    parse_topic_partition_dir,
    read_checkpoint,
)
from tests.storage.helpers import batch


def test_creates_partitions_on_the_least_loaded_dir(tmp_path, clock):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    mgr = LogManager(dirs, clock=clock)
    logs = [mgr.get_or_create("my-topic.x", p) for p in range(4)]
    assert mgr.get_or_create("my-topic.x", 2) is logs[2]
    assert mgr.get("my-topic.x", 9) is None
    assert sorted(os.listdir(dirs[0]) + os.listdir(dirs[1])) == [f"my-topic.x-{p}" for p in range(4)]
    assert len(os.listdir(dirs[0])) == len(os.listdir(dirs[1])) == 2
    assert mgr.topic_partitions() == [("my-topic.x", p) for p in range(4)]
    assert parse_topic_partition_dir("a-b-3") == ("a-b", 3)
    assert parse_topic_partition_dir("t-0.abc-delete") is None
    assert parse_topic_partition_dir("nodash") is None


def test_clean_shutdown_marker_and_checkpoints(tmp_path, clock, caplog):
    mgr = LogManager(str(tmp_path), clock=clock)
    plog = mgr.get_or_create("t", 0)
    for _ in range(5):
        plog.append(batch(2))
    plog.delete_records_before(3)
    mgr.close_all()
    assert os.path.exists(tmp_path / CLEAN_SHUTDOWN_FILE)
    assert (tmp_path / RECOVERY_POINT_CHECKPOINT).read_text() == "0\n1\nt 0 10\n"
    assert read_checkpoint(str(tmp_path / LOG_START_OFFSET_CHECKPOINT)) == {("t", 0): 3}
    with caplog.at_level(logging.WARNING):
        again = LogManager(str(tmp_path), clock=clock)
    assert again.had_clean_shutdown[str(tmp_path)] is True
    assert not os.path.exists(tmp_path / CLEAN_SHUTDOWN_FILE)  # a later crash must not look clean
    plog = again.get("t", 0)
    assert (plog.log_start_offset, plog.log_end_offset, plog.recovery_point) == (3, 10, 10)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_unclean_shutdown_recovers_the_active_segment(tmp_path, clock, caplog):
    mgr = LogManager(str(tmp_path), LogConfig(segment_bytes=400), clock=clock)
    plog = mgr.get_or_create("t", 0)
    for _ in range(10):
        plog.append(batch(1, value=b"x" * 100))
    mgr.flush_all()
    plog.append(batch(1))
    seg = plog.active_segment
    mgr.close_all(clean=False)
    assert not os.path.exists(tmp_path / CLEAN_SHUTDOWN_FILE)
    with open(seg.log_path, "ab") as f:
        f.write(b"\x00\x01\x02")  # a torn write
    with caplog.at_level(logging.WARNING):
        again = LogManager(str(tmp_path), LogConfig(segment_bytes=400), clock=clock)
    assert again.had_clean_shutdown[str(tmp_path)] is False
    plog = again.get("t", 0)
    assert plog.log_end_offset == 11
    assert any(seg.log_path in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_delete_partition_and_periodic_passes(tmp_path, clock):
    mgr = LogManager(str(tmp_path), clock=clock,
                     topic_configs={"c": {"cleanup.policy": "compact", "segment.bytes": 300}})
    plog = mgr.get_or_create("t", 1)
    plog.append(batch(1))
    compacted = mgr.get_or_create("c", 0)
    assert compacted.config.compact and compacted.config.segment_bytes == 300
    for _i in range(6):
        compacted.append(batch(1, key=b"same", value=b"v" * 80))
    assert mgr.compact_logs() >= 1
    assert mgr.delete_old_segments() == 0
    assert mgr.delete_partition("t", 1) is True
    assert not os.path.exists(tmp_path / "t-1") and mgr.get("t", 1) is None
    assert mgr.delete_partition("t", 1) is False
    mgr.update_topic_config("c", {"retention.ms": 5, "cleanup.policy": "compact"})  # the full override set
    assert compacted.config.retention_ms == 5 and compacted.config.compact
    assert compacted.config.segment_bytes == 1 << 30
    os.makedirs(tmp_path / "old-0.1234-delete")
    mgr.close_all()
    again = LogManager(str(tmp_path), clock=clock)
    assert not os.path.exists(tmp_path / "old-0.1234-delete")
    assert again.topic_partitions() == [("c", 0)]


def test_log_config_from_kafka_names():
    cfg = LogConfig.from_props({"segment.bytes": "2048", "log.retention.hours": 1, "cleanup.policy": "compact,delete",
                                "message.timestamp.type": "LogAppendTime", "log.flush.interval.messages": 7,
                                "log.index.interval.bytes": 100, "unrelated.setting": "x"})
    assert cfg.segment_bytes == 2048 and cfg.retention_ms == 3600 * 1000
    assert cfg.compact and cfg.delete and cfg.log_append_time
    assert cfg.flush_messages == 7 and cfg.index_interval_bytes == 100
    assert LogConfig.from_props({"log.retention.ms": 5, "log.retention.hours": 1}).retention_ms == 5
    assert LogConfig.from_props({"retention.ms": 9, "log.retention.ms": 5}).retention_ms == 9
    d = LogConfig()
    assert (d.segment_bytes, d.retention_ms, d.retention_bytes, d.delete_retention_ms, d.max_message_bytes,
            d.index_interval_bytes, d.message_timestamp_type) == (
        1 << 30, 7 * 86400000, -1, 86400000, 1048588, 4096, "CreateTime")
    with pytest.raises(ValueError):
        LogConfig.from_props({"message.timestamp.type": "Whenever"})
    with pytest.raises(ValueError):
        LogConfig.from_props({"cleanup.policy": "shred"})


def test_one_failing_log_does_not_stop_housekeeping_for_the_others(tmp_path, caplog):
    from kgroup.storage.manager import LogManager
    mgr = LogManager(str(tmp_path))
    a = mgr.get_or_create("a", 0)
    b = mgr.get_or_create("b", 0)
    seen = []

    def boom(now_ms=None):
        raise OSError("disk says no")

    a.delete_old_segments = boom
    b.delete_old_segments = lambda now_ms=None: seen.append("b") or 1
    assert mgr.delete_old_segments() == 1
    assert seen == ["b"] and "retention of a-0 failed" in caplog.text
    mgr.close_all()


def test_checkpoint_contents_holds_only_what_changed(tmp_path, clock):
    """The broker's housekeeping writes the checkpoint files every second on a thread: only
    those whose offsets changed, and with nothing changed no text is even built."""
    mgr = LogManager(str(tmp_path), clock=clock)
    plog = mgr.get_or_create("t", 0)
    mgr.checkpoint()
    contents, state = mgr.checkpoint_contents()
    assert contents == {}
    plog.append(batch(3))
    plog.flush()
    contents, state = mgr.checkpoint_contents()
    assert list(contents) == [os.path.join(str(tmp_path), RECOVERY_POINT_CHECKPOINT)]
    assert contents[os.path.join(str(tmp_path), RECOVERY_POINT_CHECKPOINT)].splitlines() == ["0", "1", "t 0 3"]
    from kgroup.storage.manager import write_checkpoint_files
    write_checkpoint_files(contents)
    mgr.checkpoint_written(contents, state)
    assert mgr.checkpoint_contents()[0] == {}
    assert read_checkpoint(os.path.join(str(tmp_path), RECOVERY_POINT_CHECKPOINT)) == {("t", 0): 3}
    mgr.get_or_create("t", 1)                         # a new partition changes every file
    assert len(mgr.checkpoint_contents()[0]) == 2     # (not the cleaner's: no compacted log)
    mgr.close_all()
