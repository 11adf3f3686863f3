"""Executor side: read one offset range of one topic-partition with the kgroup client and hand
Spark Arrow record batches in the Kafka source's schema.

The reader assigns itself the partition (no group), seeks to the range start and polls until its
position reaches the range end; records at or past the end are dropped, so a task -- and any retry
of it -- returns exactly the records of ``[from, until)``. Records are decoded in bulk (the consumer's ``poll_batch``:
whole batches to Arrow columns, no Python step per record). A start below the log start offset
(retention or truncation deleted records) fails the task when ``failOnDataLoss`` is true (Spark's
behaviour), otherwise the range continues from the earliest offset still present. No progress for
``kafkaConsumer.pollTimeoutMs`` fails the task.

The asyncio consumer runs on a private event loop driven by the task's own thread (no client
thread, so no hand-over between threads per poll): each poll returns with the next Fetch already
sent, so the broker answers while the batch is converted and handed to Spark.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa

from kgroup.client.assignors import TopicPartition
from kgroup.client.errors import OffsetOutOfRangeError
from kgroup.client.consumer import Consumer

from .offsets import OffsetRange

log = logging.getLogger("kgroup.spark")

# executors never join a group or commit: the driver owns the group
_DRIVER_ONLY = ("group.id", "group.instance.id", "session.timeout.ms", "heartbeat.interval.ms",
                "max.poll.interval.ms", "auto.commit.interval.ms", "group.protocol", "group.remote.assignor")
DEFAULT_MAX_POLL_RECORDS = 20000
FAULT_DIR_ENV = "KGROUP_SPARK_FAULT_DIR"  # tests: fail a range's first attempt (see tests/spark)


class DataLossError(RuntimeError):
    """Records of a planned range are gone and failOnDataLoss is true."""


@dataclass
class FetchSettings:
    """What an executor needs to read ranges (pickled into each input partition)."""

    bootstrap_servers: str
    kafka_params: dict = field(default_factory=dict)
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120000

    @property
    def max_poll_records(self) -> int:
        return int(self.kafka_params.get("max.poll.records", DEFAULT_MAX_POLL_RECORDS))

    def consumer_config(self) -> dict:
        cfg = {k: v for k, v in self.kafka_params.items() if k not in _DRIVER_ONLY}
        cfg.setdefault("max.poll.records", DEFAULT_MAX_POLL_RECORDS)
        cfg.setdefault("client.id", f"kgroup-spark-executor-{os.getpid()}")
        cfg.update({"bootstrap.servers": self.bootstrap_servers, "enable.auto.commit": False,
                    "auto.offset.reset": "none"})
        return cfg


def _fault_requested(r: OffsetRange) -> bool:
    fault_dir = os.environ.get(FAULT_DIR_ENV)
    if not fault_dir:
        return False
    try:
        os.remove(os.path.join(fault_dir, f"fail-{r.topic}-{r.partition}-{r.from_offset}"))
    except FileNotFoundError:
        return False
    return True


def _freeze_worker_heap() -> None:
    """PySpark's daemon runs ``gc.collect()`` after every task of a reused Python worker; with
    pyspark, pyarrow, numpy and the client loaded that is a full scan of ~100k long-lived objects
    per task. Moving the objects alive at a worker's first read to the permanent generation
    (``gc.freeze``, as pre-forking servers do) leaves each collection only the task's own."""
    global _heap_frozen
    if not _heap_frozen:
        gc.freeze()
        _heap_frozen = True


_heap_frozen = False


class _TaskConsumer:
    """The asyncio :class:`Consumer` on a private event loop run by the calling thread."""

    def __init__(self, config: dict):
        self.loop = asyncio.new_event_loop()
        try:
            self.core = self.run(_create_consumer(config))
        except BaseException:
            self.loop.close()
            raise

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def close(self, timeout_ms: int) -> None:
        try:
            self.run(self.core.close(timeout_ms))
        finally:
            try:  # let the tasks close() cancelled (a fetch in flight) finish, as asyncio.run does
                pending = asyncio.all_tasks(self.loop)
                for task in pending:
                    task.cancel()
                if pending:
                    self.run(asyncio.gather(*pending, return_exceptions=True))
            finally:
                self.loop.close()


async def _create_consumer(config: dict) -> Consumer:
    return Consumer(config=config)


def read_range(r: OffsetRange, settings: FetchSettings, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``[r.from_offset, r.until_offset)`` as Arrow batches."""
    if r.until_offset <= r.from_offset:
        return
    _freeze_worker_heap()
    inject_fault = _fault_requested(r)
    tp = TopicPartition(r.topic, r.partition)
    task_consumer = _TaskConsumer(settings.consumer_config())
    consumer, run = task_consumer.core, task_consumer.run
    try:
        consumer.assign([tp])
        consumer.seek(tp, r.from_offset)
        position = r.from_offset
        last_progress = time.monotonic()
        while position < r.until_offset:
            try:
                # whole batches are decoded until this many records: none far past the range's end
                wanted = min(settings.max_poll_records, r.until_offset - position)
                polled = run(consumer.poll_batch(200, wanted, headers=settings.include_headers))
            except OffsetOutOfRangeError as out_of_range:
                earliest = run(consumer.beginning_offsets([tp]))[tp]
                latest = run(consumer.end_offsets([tp]))[tp]
                message = (f"Cannot fetch offset {position} of {tp.topic}-{tp.partition}: the log now holds "
                           f"[{earliest}, {latest}). Some data may have been lost because they are not available "
                           "in Kafka any more; either the data was aged out by Kafka or the topic may have been "
                           "deleted before all the data in the topic was processed.")
                if settings.fail_on_data_loss:
                    raise DataLossError(message + " If you don't want your query to fail on such cases, set the "
                                        "source option \"failOnDataLoss\" to \"false\".") from out_of_range
                log.warning(message)
                if earliest >= r.until_offset or earliest <= position:
                    return
                consumer.seek(tp, earliest)
                position = earliest
                continue
            cols = polled.get(tp)
            if cols is not None and len(cols):
                if cols.offset[-1] >= r.until_offset:
                    cols = cols.take(cols.offset < r.until_offset)
                if len(cols):
                    yield cols.to_arrow(r.topic, r.partition, schema=schema)
                    if inject_fault:
                        raise RuntimeError(f"injected fault reading {r} (test hook {FAULT_DIR_ENV})")
                    # the position is past the last record (or at the end, when the rest was cut off)
                    new_position = min(r.until_offset, int(cols.offset[-1]) + 1)
                else:
                    new_position = r.until_offset
            else:  # nothing this poll: the position tells whether markers or aborted records were skipped
                new_position = run(consumer.position(tp))
            if new_position > position:
                position = new_position
                last_progress = time.monotonic()
            elif (time.monotonic() - last_progress) * 1000 > settings.poll_timeout_ms:
                raise TimeoutError(f"Cannot fetch records in [{position}, {r.until_offset}) of "
                                   f"{tp.topic}-{tp.partition} within kafkaConsumer.pollTimeoutMs="
                                   f"{settings.poll_timeout_ms}")
    finally:
        task_consumer.close(timeout_ms=2000)
