"""The ``kgroup`` PySpark data source: ``spark.read.format("kgroup")`` (batch) and
``spark.readStream.format("kgroup")`` (micro-batch streaming), with the schema and the options of
Spark's built-in Kafka source (see :mod:`kgroup.spark.options`).

Planning runs on the driver with a kgroup Admin (:class:`~kgroup.spark.group.DriverClient`); every
topic-partition offset range becomes one Spark input partition (large ranges split to honour
``minPartitions``) that an executor reads with a kgroup consumer (:mod:`kgroup.spark.fetch`).

Streaming offsets are Spark's checkpointed offsets: a restarted query continues from its checkpoint
and a replayed batch reads the same ranges, so an idempotent sink (file sink, foreachBatch keyed by
batch id) gets every record exactly once. The group on the broker mirrors the checkpoint: when
Spark builds a micro-batch the previous one is complete, and ``commit(end)`` reports completed
batches, so the driver commits those offsets to the group (``kafka.group.id``, or
``<groupIdPrefix>-<uuid>``), and ``kgroup groups --describe`` shows the job's lag.

``groupMode=standalone`` (default): the query reads every partition of its subscription, like
Spark's Kafka source; commits use generation -1 (the group has no members).
``groupMode=coordinated``: the driver is a member of ``kafka.group.id`` (via
:class:`~kgroup.spark.group.CoordinatedMember`, assignor from ``assignor``) and plans only the
partitions assigned to it, so several applications share a topic; a partition taken over in a
rebalance starts at the group's committed offset, which its previous owner committed when it gave
the partition up (or when it stopped and left the group).
"""
from __future__ import annotations

import logging
import signal
import threading
import time

from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader, DataSourceStreamArrowWriter,
                                    DataSourceStreamReader, InputPartition, WriterCommitMessage)
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxRows, ReadMinRows,
                                              SupportsTriggerAvailableNow)
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType,
                               TimestampType)

from kgroup.client.assignors import TopicPartition

from .fetch import DataLossError, FetchSettings, read_range
from .group import CoordinatedMember, DriverClient, group_id_for
from .offsets import OffsetRange, from_json, plan_ranges, rate_limit, split_ranges, to_json
from .options import EARLIEST, LATEST, OptionError, SourceOptions, parse_options

log = logging.getLogger("kgroup.spark")

JOIN_TIMEOUT_MS = 60000  # the first join of a coordinated query
REBALANCE_WAIT_MS = 10000  # how long one trigger waits for a rebalance before planning nothing


def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema."""
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                                   StructField("value", BinaryType())]))))
    return StructType(fields)


def _stop_on_sigterm() -> None:
    """Spark ends the driver's stream-reader worker with SIGTERM when the query stops; turn it into
    SystemExit so the worker's ``finally: reader.stop()`` runs (commit, LeaveGroup) before it exits."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        return

    def on_sigterm(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # let the clean-up finish
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_sigterm)


class RangePartition(InputPartition):
    """One offset range, read by one Spark task."""

    def __init__(self, rng: OffsetRange, settings: FetchSettings):
        super().__init__(tuple(rng))
        self.range = rng
        self.settings = settings


def _fetch_settings(opts: SourceOptions) -> FetchSettings:
    return FetchSettings(opts.bootstrap_servers, opts.consumer_params(), opts.include_headers,
                         opts.fail_on_data_loss, opts.poll_timeout_ms)


def _read(schema: StructType, partition: RangePartition):
    from pyspark.sql.pandas.types import to_arrow_schema
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    yield from read_range(partition.range, partition.settings, arrow_schema)


def resolve_timestamps(driver: DriverClient, spec, tps, start: bool, strategy: str, strict: bool
                       ) -> dict[TopicPartition, int]:
    """Spark's KafkaOffsetReaderAdmin for ``startingTimestamp`` / ``*OffsetsByTimestamp``: the first
    offset whose timestamp is at or after the given one (ListOffsets by timestamp). No such offset:
    an ending position is the latest offset; a starting one fails, or is the latest offset with
    ``startingOffsetsByTimestampStrategy=latest``."""
    tps = set(tps)
    if isinstance(spec, dict):
        given = {TopicPartition(t, p): ts for (t, p), ts in spec.items()}
        if strict and set(given) != tps:
            raise OptionError(f"Partitions specified for Kafka timestamp based {'start' if start else 'end'} offsets "
                              "don't match what are assigned. Maybe topic partitions are created or deleted while the "
                              "query is running, or you didn't specify all the partitions.\n"
                              f"Specified: {sorted(given)} Assigned: {sorted(tps)}")
        wanted = {tp: ts for tp, ts in given.items() if tp in tps}
        missing = tps - set(wanted)
    else:
        wanted = {tp: spec for tp in tps}
        missing = set()
    found = driver.offsets_for_times(wanted)
    out = {}
    no_match = set()
    for tp, ts in wanted.items():
        offset = found.get(tp, -1)
        if offset >= 0:
            out[tp] = offset
        elif start and strategy == "error":
            raise OptionError(f"No offset matched from request of topic-partition {tp.topic}-{tp.partition} and "
                              f"timestamp {ts}.")
        else:
            no_match.add(tp)
    out.update(driver.latest(no_match))
    if missing:  # not strict (a partition a coordinated member takes over): as startingOffsets' default
        out.update(driver.earliest(missing) if start else driver.latest(missing))
    return out


def resolve_positions(driver: DriverClient, spec, tps, name: str, strict: bool,
                      strategy: str = "error") -> dict[TopicPartition, int]:
    """Concrete offsets for ``tps`` from "earliest" / "latest" / {(t, p): offset, -2, -1} or a
    timestamp spec ("timestamp", ts or {(t, p): ts}); with ``strict`` a JSON spec must name exactly
    these partitions (Spark's rule), otherwise partitions it does not name start at the earliest
    offset."""
    tps = set(tps)
    if isinstance(spec, tuple):
        return resolve_timestamps(driver, spec[1], tps, name.startswith("starting"), strategy, strict)
    if spec == "earliest":
        return driver.earliest(tps)
    if spec == "latest":
        return driver.latest(tps)
    given = {TopicPartition(t, p): o for (t, p), o in spec.items()}
    if strict and set(given) != tps:
        raise OptionError(f"If {name} contains specific offsets, you must specify all TopicPartitions.\n"
                          f"Use -1 for latest, -2 for earliest.\nSpecified: {sorted(given)} "
                          f"Assigned: {sorted(tps)}")
    given = {tp: o for tp, o in given.items() if tp in tps}
    out = {tp: o for tp, o in given.items() if o >= 0}
    out.update(driver.earliest({tp for tp in tps if given.get(tp, EARLIEST) == EARLIEST}))
    out.update(driver.latest({tp for tp, o in given.items() if o == LATEST}))
    return out


class KgroupBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions, schema: StructType):
        self.opts = opts
        self.schema = schema

    def partitions(self):
        opts = self.opts
        driver = DriverClient(opts)
        try:
            tps = driver.partitions(missing_ok=False)
            froms = resolve_positions(driver, opts.starting_spec("earliest"), tps, "startingOffsets", True,
                                      opts.timestamp_strategy)
            untils = resolve_positions(driver, opts.ending_spec(), tps, "endingOffsets", True)
        finally:
            driver.close()
        ranges = []
        for tp in sorted(tps):
            if untils[tp] < froms[tp]:
                raise ValueError(f"The resolved start offset {froms[tp]} is greater than the resolved end offset "
                                 f"{untils[tp]} for topic {tp.topic} partition {tp.partition}.\n"
                                 "There may be multiple reasons:\n"
                                 "1. Start offset is set to too big a value that after resolution, end offset is "
                                 "smaller than it. There are multiple input cases:\n"
                                 "  (a) Start offset is set to a timestamp, and the end offset is set to an index.\n"
                                 "  (b) Start offset is set to an index, and the end offset is set to a timestamp.\n"
                                 "  (c) Start offset is set, and the end offset is set to latest.\n"
                                 "2. The Kafka topic partition is broken.")
            ranges.append(OffsetRange(tp.topic, tp.partition, froms[tp], untils[tp]))
        settings = _fetch_settings(opts)
        planned = [RangePartition(r, settings)
                   for r in split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)]
        return planned or [RangePartition(OffsetRange("", 0, 0, 0), settings)]

    def read(self, partition):
        return _read(self.schema, partition)


class KgroupStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader; one instance lives in the driver's Python worker for the whole run."""

    def __init__(self, opts: SourceOptions, schema: StructType):
        self.opts = opts
        self.schema = schema
        self.coordinated = opts.group_mode == "coordinated"
        self._driver: DriverClient | None = None
        self._member: CoordinatedMember | None = None
        self._group_id: str | None = None
        self._target: dict | None = None  # Trigger.AvailableNow: offsets not to go past
        self._processed: dict = {}
        self._committed: dict = {}
        self._last_trigger_ms = 0.0  # minOffsetsPerTrigger / maxTriggerDelay

    def __getstate__(self):  # the instance is pickled to executors: without its clients
        state = dict(self.__dict__)
        state.update(_driver=None, _member=None)
        return state

    # --- clients (created lazily: only the driver's long-lived worker needs them) -------------

    @property
    def group_id(self) -> str:
        if self._group_id is None:
            self._group_id = group_id_for(self.opts)
        return self._group_id

    @property
    def driver(self) -> DriverClient:
        if self._driver is None:
            self._driver = DriverClient(self.opts)
            _stop_on_sigterm()
        return self._driver

    @property
    def member(self) -> CoordinatedMember:
        if self._member is None:
            self._member = CoordinatedMember(self.opts)
            _stop_on_sigterm()
        return self._member

    def _all_partitions(self) -> set[TopicPartition]:
        return self.driver.partitions(missing_ok=True)

    # --- Spark callbacks ------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        starting = self.opts.starting_spec("latest")
        if not self.coordinated:
            tps = self._all_partitions()
            return to_json(resolve_positions(self.driver, starting, tps, "startingOffsets", True,
                                             self.opts.timestamp_strategy))
        assigned = self.member.sync(JOIN_TIMEOUT_MS)
        if assigned is None:
            raise TimeoutError(f"could not join consumer group {self.group_id} within {JOIN_TIMEOUT_MS} ms")
        self.member.take_acquired()
        return to_json(self._acquire_positions(assigned, {}))

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.driver.latest(self._all_partitions())

    def latestOffset(self, start: dict, limit) -> dict:
        begin, _ = from_json(start)
        self._commit_processed(begin)  # Spark builds a batch only once the previous one is complete
        if self.coordinated:
            assigned = self.member.sync(REBALANCE_WAIT_MS)
            if assigned is None:
                log.info("group %s is rebalancing: no new batch yet", self.group_id)
                return start
            acquired = self.member.take_acquired() & assigned
            froms = {tp: begin[tp] for tp in assigned if tp in begin and tp not in acquired}
            froms.update(self._acquire_positions({tp for tp in assigned if tp not in froms}, begin))
            tps = set(assigned)
        else:
            tps = self._all_partitions()
            gone = set(begin) - tps
            if gone:
                self._data_loss(f"partitions {sorted(gone)} are gone: some data may have been missed")
            froms = {tp: begin[tp] for tp in tps if tp in begin}
            froms.update(self.driver.earliest(tps - set(begin)))  # discovered partitions start at earliest
        latest = self.driver.latest(tps)
        behind = {tp for tp in tps if latest[tp] < froms[tp]}
        if behind:
            self._data_loss(f"the offsets of {sorted(behind)} went back from "
                            f"{[froms[tp] for tp in sorted(behind)]} to {[latest[tp] for tp in sorted(behind)]}: "
                            "some data may have been missed")
            froms.update(self.driver.earliest(behind))
        if self._target is not None:
            latest = {tp: max(froms[tp], min(latest[tp], self._target.get(tp, froms[tp]))) for tp in tps}
        available = sum(latest[tp] - froms[tp] for tp in tps)
        if self.opts.min_offsets_per_trigger and self._target is None and \
                self._delay_batch(available, self.opts.min_offsets_per_trigger):
            until = dict(froms)
        elif isinstance(limit, ReadMaxRows):
            until = rate_limit(froms, latest, limit.max_rows)
        elif isinstance(limit, ReadMinRows) and available < limit.min_rows:
            until = dict(froms)
        else:
            until = dict(latest)
        starts = {tp: froms[tp] for tp in tps if begin.get(tp) != froms[tp]}
        if not starts and until == begin:
            return start  # nothing new: the very same offset, so Spark plans no batch
        return to_json(until, starts)

    def _delay_batch(self, available: int, min_rows: int) -> bool:
        """Spark's KafkaMicroBatchStream.delayBatch: hold the batch back while fewer than
        ``minOffsetsPerTrigger`` records are new, unless ``maxTriggerDelay`` passed since the last one."""
        now = time.time() * 1000
        if now - self._last_trigger_ms >= self.opts.max_trigger_delay_ms or available >= min_rows:
            self._last_trigger_ms = now
            return False
        return True

    def partitions(self, start: dict, end: dict):
        settings = _fetch_settings(self.opts)
        return [RangePartition(r, settings) for r in plan_ranges(start, end, self.opts.min_partitions,
                                                                 self.opts.max_records_per_partition)]

    def read(self, partition):
        return _read(self.schema, partition)

    def commit(self, end: dict) -> None:
        until, _ = from_json(end)
        self._commit_processed(until)

    def stop(self) -> None:
        try:
            if self._member is not None:
                self._member.close()  # revocation commits what was processed, then LeaveGroup
            elif self._driver is not None and self._processed:
                self._commit_processed(dict(self._processed))
        finally:
            if self._driver is not None:
                self._driver.close()
            self._driver = self._member = None

    # --- helpers --------------------------------------------------------------------------------

    def _data_loss(self, message: str) -> None:
        if self.opts.fail_on_data_loss:
            raise DataLossError(message + '. If you don\'t want your streaming query to fail on such cases, set the '
                                'source option "failOnDataLoss" to "false".')
        log.warning(message)

    def _acquire_positions(self, tps, begin: dict) -> dict:
        """Where partitions newly owned by this member start: the later of the group's committed
        offset (its previous owner's progress) and this query's own checkpoint; else startingOffsets."""
        if not tps:
            return {}
        committed = self.member.committed_offsets(tps)
        out = {}
        for tp in tps:
            known = [o for o in (committed.get(tp), begin.get(tp)) if o is not None]
            if known:
                out[tp] = max(known)
        rest = set(tps) - set(out)
        if rest:
            out.update(resolve_positions(self.driver, self.opts.starting_spec("latest"), rest,
                                         "startingOffsets", False, self.opts.timestamp_strategy))
        self.member.processed.update(out)
        return out

    def _commit_processed(self, offsets: dict) -> None:
        if not offsets:
            return
        self._processed.update(offsets)
        if self.coordinated:
            self.member.commit(offsets)
            return
        todo = {tp: o for tp, o in offsets.items() if self._committed.get(tp) != o}
        if todo and self.driver.commit(self.group_id, todo):
            self._committed.update(todo)


class TaskCommitMessage(WriterCommitMessage):
    def __init__(self, commit):
        self.commit = commit


class KgroupBatchWriter(DataSourceArrowWriter):
    """``df.write.format("kgroup")``: every task produces its rows (see :mod:`kgroup.spark.sink`)."""

    def __init__(self, opts):
        self.opts = opts

    def write(self, iterator):
        from .sink import write_task
        return TaskCommitMessage(write_task(self.opts, iterator))

    def commit(self, messages):
        from .sink import commit_job
        commit_job(self.opts, messages)

    def abort(self, messages):
        from .sink import abort_job
        abort_job(self.opts, messages)


class KgroupStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("kgroup")``: one transaction per task and micro-batch when
    ``kafka.transactional.id.prefix`` is set, committed when Spark commits the epoch."""

    def __init__(self, opts):
        self.opts = opts

    def write(self, iterator):
        from pyspark import TaskContext

        from .sink import write_task
        ctx = TaskContext.get()
        batch_id = None
        if ctx is not None:
            value = ctx.getLocalProperty("streaming.sql.batchId")
            batch_id = int(value) if value is not None else None
        return TaskCommitMessage(write_task(self.opts, iterator, batch_id))

    def commit(self, messages, batchId):
        from .sink import commit_job
        commit_job(self.opts, messages, batchId)

    def abort(self, messages, batchId):
        from .sink import abort_job
        abort_job(self.opts, messages)


class KgroupDataSource(DataSource):
    """``format("kgroup")``: Kafka records from a kgroup (or any Kafka) broker, and to it."""

    def __init__(self, options):
        super().__init__(options)
        self._opts = None

    @property
    def opts(self) -> SourceOptions:
        if self._opts is None:
            self._opts = parse_options(self.options)
        return self._opts

    def writer(self, schema: StructType, overwrite: bool):
        from .sink import parse_sink_options, validate_schema
        if overwrite:
            raise OptionError("Save mode Overwrite not allowed for Kafka. Allowed save modes are Append and "
                              "ErrorIfExists (default).")
        opts = parse_sink_options(self.options)
        validate_schema(schema, opts.topic)
        return KgroupBatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool):
        from .sink import parse_sink_options, validate_schema
        opts = parse_sink_options(self.options)
        validate_schema(schema, opts.topic)
        return KgroupStreamWriter(opts)

    @classmethod
    def name(cls) -> str:
        return "kgroup"

    def schema(self):
        return kafka_schema(self.opts.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        self.opts.check_batch()
        return KgroupBatchReader(self.opts, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        self.opts.check_stream()
        return KgroupStreamReader(self.opts, schema)
