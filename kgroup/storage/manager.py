"""LogManager: every partition log of a broker, across one or more log directories.

Owns the log-directory level state Kafka keeps next to the ``<topic>-<partition>/`` folders:
the clean-shutdown marker ``.kafka_cleanshutdown`` (present => logs open without recovery;
deleted once loaded so a later crash is detected), and the ``recovery-point-offset-checkpoint``
and ``log-start-offset-checkpoint`` files (Kafka's text format: version, count, then
``topic partition offset`` lines). Also places new partitions on the directory holding the
fewest, and runs the periodic passes (retention, compaction, flush.ms) over all logs.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from typing import Any, Callable, Iterator, Mapping

from kgroup.storage import cleaner
from kgroup.storage.config import LogConfig
from kgroup.storage.log import PartitionLog, now_ms as _wall_ms
from kgroup.storage.open_files import OpenFiles
from kgroup.storage.segment import fsync_dir

__all__ = ["LogConfig", "LogManager", "read_checkpoint", "write_checkpoint", "parse_topic_partition_dir",
           "CLEAN_SHUTDOWN_FILE", "RECOVERY_POINT_CHECKPOINT", "LOG_START_OFFSET_CHECKPOINT"]

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
_DELETE_DIR_SUFFIX = "-delete"

TopicPartition = tuple[str, int]


def parse_topic_partition_dir(name: str) -> TopicPartition | None:
    """``my-topic-3`` -> ("my-topic", 3); None for anything else (``-delete``, ``-future``...)."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit() or "." in partition:
        return None
    return topic, int(partition)


def read_checkpoint(path: str) -> dict[TopicPartition, int]:
    """Kafka's OffsetCheckpointFile; a missing or malformed file reads as empty (logged)."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != 0:
            raise ValueError(f"unknown version {lines[0]}")
        count = int(lines[1])
        out = {}
        for line in lines[2:2 + count]:
            topic, partition, offset = line.split(" ")
            out[(topic, int(partition))] = int(offset)
        if len(out) != count:
            raise ValueError("fewer entries than declared")
        return out
    except (ValueError, IndexError) as e:
        log.warning("Ignoring malformed checkpoint file %s: %s", path, e)
        return {}


def checkpoint_text(offsets: Mapping[TopicPartition, int]) -> str:
    lines = ["0", str(len(offsets))] + [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    return "\n".join(lines) + "\n"


def write_checkpoint(path: str, offsets: Mapping[TopicPartition, int]) -> None:
    """Write atomically (temp file, fsync, rename, fsync of the directory)."""
    write_text_atomically(path, checkpoint_text(offsets))


def write_text_atomically(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")


def write_checkpoint_files(contents: Mapping[str, str]) -> None:
    """Write what ``LogManager.checkpoint_contents`` gave (pure I/O: the broker runs it on a
    thread)."""
    for path, text in contents.items():
        write_text_atomically(path, text)


def prepare_partition_files(directories: list[str]) -> None:
    """Create each new partition's directory with the empty first segment and indexes that
    PartitionLog creates, so opening it there is only reads. Touches no LogManager state: the
    broker runs it on a thread, since creating files waits for the filesystem's journal (tens
    to hundreds of milliseconds each on a busy disk), which the event loop must not."""
    for directory in directories:
        os.makedirs(directory, exist_ok=True)
        prefix = os.path.join(directory, f"{0:020d}")
        for suffix in (".log", ".index", ".timeindex"):
            if not os.path.exists(prefix + suffix):
                os.close(os.open(prefix + suffix, os.O_WRONLY | os.O_CREAT, 0o644))


class LogManager:
    def __init__(self, log_dirs: list[str] | str, default_config: LogConfig | None = None, *,
                 topic_configs: Mapping[str, LogConfig | Mapping[str, Any]] | None = None,
                 clock: Callable[[], int] | None = None, max_open_files: int | None = None):
        self.log_dirs = [os.path.abspath(d) for d in ([log_dirs] if isinstance(log_dirs, str) else log_dirs)]
        if not self.log_dirs:
            raise ValueError("at least one log directory is needed")
        self.default_config = default_config or LogConfig()
        self._topic_configs: dict[str, LogConfig] = {}
        for topic, cfg in (topic_configs or {}).items():
            self._topic_configs[topic] = self._resolve(cfg)
        self._clock = clock
        # Segment and index descriptors open at once, least recently used closed first
        # (open_files.py): a data directory of any size opens, and creating many partitions
        # does not take a descriptor per file. None: unbounded.
        self.open_files = OpenFiles(max_open_files)
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._checkpointed: dict[str, str] = {}     # checkpoint path -> the text last written
        self._checkpointed_state: tuple | None = None   # the offsets it holds (checkpoint_contents)
        self.had_clean_shutdown: dict[str, bool] = {}
        self._closed = False
        self._cleaning: cleaner.CleanPlan | None = None    # being built (plan_clean .. finish_clean)
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)
            self._load_dir(d)

    def _resolve(self, cfg: LogConfig | Mapping[str, Any] | None) -> LogConfig:
        if cfg is None:
            return self.default_config
        if isinstance(cfg, LogConfig):
            return cfg
        return self.default_config.with_overrides(cfg)

    def _config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def _load_dir(self, log_dir: str) -> None:
        marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        self.had_clean_shutdown[log_dir] = clean
        recovery_points = read_checkpoint(os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT))
        start_offsets = read_checkpoint(os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT))
        cleaned_to = read_checkpoint(os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT))
        if not clean and any(parse_topic_partition_dir(n) for n in os.listdir(log_dir)):
            log.info("No clean shutdown marker in %s: recovering unflushed segments", log_dir)
        for name in sorted(os.listdir(log_dir)):
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(_DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)  # a deletion interrupted by a restart
                continue
            tp = parse_topic_partition_dir(name)
            if tp is None:
                continue
            if tp in self._logs:
                raise RuntimeError(f"duplicate log directories for {tp}: {self._dir_of[tp]} and {log_dir}")
            self._logs[tp] = PartitionLog(
                path, self._config_for(tp[0]), recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0), had_clean_shutdown=clean, clock=self._clock,
                files=self.open_files)
            self._dir_of[tp] = log_dir
            if tp in cleaned_to:
                self._logs[tp].cleaner_checkpoint = max(cleaned_to[tp], self._logs[tp].log_start_offset)
        if clean:
            os.unlink(marker)

    # --- partitions ------------------------------------------------------------------------

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int,
                      topic_config: LogConfig | Mapping[str, Any] | None = None) -> PartitionLog:
        """The log of a partition, created on the least loaded directory when missing;
        ``topic_config`` (a LogConfig or Kafka topic overrides) updates the topic's config."""
        self._check_open()
        if topic_config is not None:
            self.update_topic_config(topic, topic_config)
        tp = (topic, partition)
        plog = self._logs.get(tp)
        if plog is not None:
            return plog
        log_dir = self._placement(tp)
        plog = PartitionLog(os.path.join(log_dir, f"{topic}-{partition}"), self._config_for(topic),
                            had_clean_shutdown=True, clock=self._clock, files=self.open_files)
        self._logs[tp] = plog
        self._dir_of[tp] = log_dir
        return plog

    def _placement(self, tp: TopicPartition) -> str:
        """The directory of a new partition: where prepare_partition_files put it, else the
        one holding the fewest partitions."""
        if len(self.log_dirs) == 1:
            return self.log_dirs[0]
        name = f"{tp[0]}-{tp[1]}"
        for d in self.log_dirs:
            if os.path.isdir(os.path.join(d, name)):
                return d
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] += 1
        return min(self.log_dirs, key=lambda d: counts[d])

    def new_partition_directories(self, topic: str, partitions) -> list[str]:
        """Where new partitions of ``topic`` go, for prepare_partition_files (decided here, on
        the caller's thread; spread over the directories as get_or_create would)."""
        counts = {d: 0 for d in self.log_dirs}
        if len(self.log_dirs) > 1:
            for d in self._dir_of.values():
                counts[d] += 1
        out = []
        for p in partitions:
            d = min(self.log_dirs, key=lambda d: counts[d])
            counts[d] += 1
            out.append(os.path.join(d, f"{topic}-{p}"))
        return out

    def update_topic_config(self, topic: str, config: LogConfig | Mapping[str, Any]) -> None:
        """A LogConfig, or the topic's complete set of overrides (Kafka topic config names)
        applied to the broker defaults, as Kafka rebuilds a LogConfig on a config change."""
        cfg = self._resolve(config)
        self._topic_configs[topic] = cfg
        for (t, _), plog in self._logs.items():
            if t == topic:
                plog.update_config(cfg)

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Close the log and remove its directory (renamed to ``*-delete`` first, as Kafka
        does, so a crash mid-way cannot resurrect the partition)."""
        tp = (topic, partition)
        plog = self._logs.pop(tp, None)
        if plog is None:
            return False
        self._dir_of.pop(tp, None)
        self.abort_cleaning(tp)
        plog.close(clean=False)
        doomed = f"{plog.directory}.{uuid.uuid4().hex}{_DELETE_DIR_SUFFIX}"
        os.rename(plog.directory, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    def topic_partitions(self) -> list[TopicPartition]:
        return sorted(self._logs)

    def __iter__(self) -> Iterator[tuple[TopicPartition, PartitionLog]]:
        return iter(list(self._logs.items()))

    def __len__(self) -> int:
        return len(self._logs)

    # --- periodic passes -------------------------------------------------------------------

    def flush_all(self) -> None:
        for plog in self._logs.values():
            plog.flush()
        self.checkpoint()

    def _each(self, what: str, fn, logs=None) -> int:
        """Apply a housekeeping step to every log; one failing log is logged and skipped, never
        stopping the step for the others (as Kafka's scheduler tasks do per log)."""
        total = 0
        for tp, plog in list(self._logs.items()) if logs is None else logs:
            try:
                total += fn(plog)
            except Exception:
                log.exception("%s of %s-%d failed", what, tp[0], tp[1])
        return total

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """Kafka's flush scheduler: flush logs whose flush.ms has elapsed (only logs with
        unflushed messages are looked at: this runs every second over every log)."""
        now = (self._clock or _wall_ms)() if now_ms is None else now_ms
        dirty = [(tp, plog) for tp, plog in self._logs.items() if plog.unflushed_messages > 0]
        return self._each("flush", lambda plog: plog.maybe_flush(now), dirty) if dirty else 0

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        return self._each("retention", lambda plog: plog.delete_old_segments(now_ms))

    def compact_logs(self, now_ms: int | None = None) -> int:
        """Clean every compacted log; returns the number of segments rewritten."""
        return self._each("compaction", lambda plog: cleaner.clean(plog, now_ms).segments_rewritten,
                          [(tp, p) for tp, p in self._logs.items() if p.config.compact])

    def clean_filthiest(self, now_ms: int | None = None) -> tuple[str, int] | None:
        """One whole pass of Kafka's log cleaner on the calling thread: plan_clean, its build,
        finish_clean. Returns the (topic, partition) cleaned or None when no log needs cleaning
        (the cleaner then backs off)."""
        plan = self.plan_clean(now_ms)
        if plan is None:
            return None
        built: cleaner.CleanedSegments | Exception
        try:
            built = cleaner.build_cleaned(plan)
        except Exception as e:
            built = e
        try:
            self.finish_clean(plan, built)
        except Exception:
            log.exception("compaction of %s-%d failed", *plan.tp)
        return plan.tp

    def plan_clean(self, now_ms: int | None = None) -> "cleaner.CleanPlan | None":
        """Kafka's LogCleanerManager.grabFilthiestCompactedLog: among compacted logs whose dirty
        ratio is above min.cleanable.dirty.ratio, or whose max.compaction.lag.ms has passed with
        cleanable bytes, plan the clean of the one with the highest dirty ratio (the first of
        equals; None: no log needs cleaning). Build it anywhere
        (cleaner.build_cleaned, e.g. on the broker's cleaner thread), then give the outcome to
        finish_clean on this thread. One clean at a time."""
        now = (self._clock or _wall_ms)() if now_ms is None else now_ms
        best, best_ratio = None, -1.0
        for tp, plog in list(self._logs.items()):
            if not plog.config.compact:
                continue
            try:
                info = cleaner.cleanable_info(plog, now)
            except Exception:
                log.exception("cleanable range of %s-%d failed", tp[0], tp[1])
                continue
            if info.cleanable_bytes <= 0:
                continue
            ratio = info.dirty_ratio
            # strictly above the ratio; a log past its max compaction lag is cleanable but, as
            # LogToClean orders by cleanableRatio only, does not jump ahead of filthier logs
            if (info.needs_compaction_now or ratio > plog.config.min_cleanable_dirty_ratio) and ratio > best_ratio:
                best, best_ratio = tp, ratio
        if best is None:
            return None
        try:
            plan = cleaner.plan_clean(self._logs[best], now)
        except Exception:
            log.exception("planning the compaction of %s-%d failed", best[0], best[1])
            return None
        if plan is not None:
            plan.tp = best
            self._cleaning = plan
        return plan

    def finish_clean(self, plan: "cleaner.CleanPlan", built, abandon: bool = False) -> "cleaner.CleanerStats | None":
        """Swap in what build_cleaned made for ``plan`` (or re-raise what it raised: the broker
        takes the log directory offline for an I/O error, as Kafka's cleaner); None when
        the clean was abandoned: ``abandon`` (e.g. the log directory failed), the log closed,
        deleted or replaced meanwhile, or its planned segments changed (PartitionLog.segments_changed_since)."""
        if self._cleaning is plan:
            self._cleaning = None
        current = not abandon and not self._closed and self._logs.get(plan.tp) is plan.log
        if isinstance(built, BaseException):
            # A build that failed while its planned segments changed (e.g. a file retention
            # removed as it was read) met the change, not a fault: abandoned like its swap.
            if current and not isinstance(built, cleaner.CleanAborted) and not plan.log.segments_changed_since(plan):
                raise built
            return None
        if not current:
            built.discard()
            return None
        return cleaner.swap_cleaned(plan, built)

    def abort_cleaning(self, tp: TopicPartition | None = None) -> None:
        """Abort the clean being built (of ``tp`` only, when given): its builder stops at the
        next batch (Kafka's abortCleaning)."""
        plan = self._cleaning
        if plan is not None and (tp is None or plan.tp == tp):
            plan.abort.set()

    def checkpoint(self) -> None:
        """Write the recovery points and log start offsets of every directory."""
        contents, state = self.checkpoint_contents(changed_only=False)
        write_checkpoint_files(contents)
        self.checkpoint_written(contents, state)

    def checkpoint_contents(self, changed_only: bool = True) -> tuple[dict[str, str], tuple]:
        """(path -> text of the checkpoint files, the state they hold); with ``changed_only``,
        only the files whose text differs from what checkpoint_written last recorded, and
        nothing at all (cheaply: no text is built) when no offset changed. Write them with
        write_checkpoint_files (anywhere, e.g. on a thread), then call checkpoint_written."""
        logs = self._logs
        state = (tuple(logs), [p.recovery_point for p in logs.values()],
                 [p.log_start_offset for p in logs.values()], [p.cleaner_checkpoint for p in logs.values()])
        if changed_only and state == self._checkpointed_state:
            return {}, state
        out = {}
        for d in self.log_dirs:
            tps = [tp for tp, dd in self._dir_of.items() if dd == d]
            for name, offsets in (
                    (RECOVERY_POINT_CHECKPOINT, {tp: logs[tp].recovery_point for tp in tps}),
                    (LOG_START_OFFSET_CHECKPOINT, {tp: logs[tp].log_start_offset for tp in tps}),
                    (CLEANER_OFFSET_CHECKPOINT,   # Kafka's LogCleanerManager file
                     {tp: logs[tp].cleaner_checkpoint for tp in tps if logs[tp].config.compact})):
                path = os.path.join(d, name)
                text = checkpoint_text(offsets)
                if not changed_only or self._checkpointed.get(path) != text:
                    out[path] = text
        return out, state

    def checkpoint_written(self, contents: Mapping[str, str], state: tuple) -> None:
        self._checkpointed.update(contents)
        self._checkpointed_state = state

    def close_all(self, clean: bool = True) -> None:
        """Clean: close every log cleanly, checkpoint, then write the clean-shutdown marker.
        Unclean: drop the handles only (for tests of crash recovery)."""
        if self._closed:
            return
        self.abort_cleaning()
        for plog in self._logs.values():
            plog.close(clean=clean)
        if clean:
            self.checkpoint()
            for d in self.log_dirs:
                path = os.path.join(d, CLEAN_SHUTDOWN_FILE)
                with open(path, "w", encoding="utf-8") as f:
                    json.dump({"version": 0, "brokerEpoch": -1}, f)
                    f.flush()
                    os.fsync(f.fileno())
                fsync_dir(d)
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("log manager is closed")
