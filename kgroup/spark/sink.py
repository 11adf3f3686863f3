"""The ``kgroup`` sink: ``df.write.format("kgroup")`` and ``df.writeStream.format("kgroup")`` with
the columns and options of Spark's Kafka sink, producing through kgroup's producer.

Columns (Spark's ``KafkaWriter``): ``value`` (string or binary, required), ``key`` (string or
binary), ``topic`` (string; the ``topic`` option, when set, wins), ``partition`` (int; else the
producer's partitioner: murmur2 of the key, sticky for keyless records), ``headers``
(array<struct<key: string, value: binary>>), ``timestamp`` (timestamp, or double seconds as Spark
casts them; else the producer's clock).
Options: ``kafka.bootstrap.servers``, ``topic``, ``kafka.<producer config>`` (idempotence on by
default, ``kafka.compression.type``, ``kafka.linger.ms``, ``kafka.batch.size``, ...).

Delivery: without ``kafka.transactional.id.prefix`` every task produces with an idempotent
producer and waits for its acknowledgements, which is Spark's at-least-once (a retried task or a
re-run micro-batch writes its rows again). With the prefix the writes are two-phase:

* each task produces inside a transaction of its own, ``transactional.id = <prefix>-<task
  partition id>`` (streaming: the same id in every micro-batch), and does *not* commit it: it
  returns the producer id and epoch to the driver. ``init_transactions`` at the start of a task
  fences any earlier attempt with that id and aborts what it left open, so a retried task's first
  attempt never becomes visible;
* the driver commits every task's transaction (EndTxn with that producer id and epoch) when Spark
  commits the job or the epoch, and aborts them when Spark aborts it;
* streaming: each task's transaction also commits, through TxnOffsetCommit to the group named
  like its transactional id, the micro-batch id (offset ``batchId + 1`` on partition 0 of the
  first topic written). A re-run micro-batch (the driver died between committing the
  transactions and recording the epoch in its checkpoint) finds that marker and writes nothing,
  so read_committed readers see each output record exactly once.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass, field

from kgroup.client.config import PRODUCER, ConfigError, ProducerConfig

from .options import OptionError

log = logging.getLogger("kgroup.spark")

PREFIX_OPTION = "kafka.transactional.id.prefix"
FAULT_DIR_ENV = "KGROUP_SPARK_FAULT_DIR"  # tests: fail a write or a commit once (see tests/spark)

# kafka.* keys the sink refuses (Spark's kafkaParamsForProducer), or manages itself
_PRODUCER_MANAGED = {
    "key.serializer": "Kafka option 'key.serializer' is not supported as keys are serialized with "
                      "ByteArraySerializer.",
    "value.serializer": "Kafka option 'value.serializer' is not supported as value are serialized with "
                        "ByteArraySerializer.",
    "transactional.id": "Kafka option 'transactional.id' is not supported: set 'kafka.transactional.id.prefix' "
                        "and the sink names one transactional id per writer task.",
}


# options Spark itself passes to every writer (DataStreamWriter / DataFrameWriter)
_SPARK_WRITE_OPTIONS = {"checkpointlocation", "path", "queryname"}


@dataclass
class SinkOptions:
    bootstrap_servers: str
    topic: str | None = None
    kafka_params: dict = field(default_factory=dict)
    transactional_id_prefix: str | None = None

    def producer_config(self, transactional_id: str | None = None) -> dict:
        cfg = dict(self.kafka_params)
        cfg.setdefault("client.id", f"kgroup-spark-writer-{os.getpid()}")
        cfg["bootstrap.servers"] = self.bootstrap_servers
        if transactional_id is not None:
            cfg["transactional.id"] = transactional_id
        return cfg


def parse_sink_options(options) -> SinkOptions:
    raw = {str(k).lower(): str(v) for k, v in dict(options).items()}
    params: dict[str, str] = {}
    prefix = None
    for key, value in raw.items():
        if key == "topic" or key in _SPARK_WRITE_OPTIONS:
            continue
        if key == PREFIX_OPTION:
            prefix = value.strip()
            if not prefix:
                raise OptionError(f"Option '{PREFIX_OPTION}' must not be empty")
            continue
        if key.startswith("kafka."):
            kkey = key[len("kafka."):]
            if kkey in _PRODUCER_MANAGED:
                raise OptionError(_PRODUCER_MANAGED[kkey])
            if kkey not in PRODUCER:
                raise OptionError(f"Unknown option '{key}': '{kkey}' is not a producer configuration of the kgroup "
                                  "client")
            params[kkey] = value
            continue
        raise OptionError(f"Unknown option '{key}' for the kgroup sink (known options: topic, "
                          f"{PREFIX_OPTION}, and kafka.<producer config>)")
    bootstrap = params.pop("bootstrap.servers", "").strip()
    if not bootstrap:
        raise OptionError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer")
    try:
        ProducerConfig({"bootstrap.servers": bootstrap, **params})
    except ConfigError as e:
        raise OptionError(f"Invalid Kafka producer option: {e}") from None
    topic = raw.get("topic")
    return SinkOptions(bootstrap, topic.strip() if topic is not None else None, params, prefix)


# --- the input schema (Spark's KafkaWriter.validateQuery) ----------------------------------------

def _type_name(dt) -> str:
    return dt.simpleString()


def validate_schema(schema, topic: str | None) -> None:
    """Spark's checks and messages for the columns the sink reads."""
    from pyspark.sql.types import (ArrayType, BinaryType, DoubleType, IntegerType, StringType, StructField,
                                   StructType, TimestampType)
    headers_type = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
    fields = {f.name: f.dataType for f in schema.fields}

    def check(name, allowed, missing):
        dt = fields.get(name)
        if dt is None:
            if missing is not None:
                raise OptionError(missing)
            return
        if not any(_same_type(dt, a) for a in allowed):
            raise OptionError(f"{name} attribute unsupported type {_type_name(dt)}. {name} must be a(n) "
                              f"{' or '.join(_type_name(a) for a in allowed)}")
    if topic is None:
        check("topic", [StringType()], "topic option required when no 'topic' attribute is present. Use the "
                                       "topic option for setting a topic.")
    check("key", [StringType(), BinaryType()], None)
    check("value", [StringType(), BinaryType()], "Required attribute 'value' not found")
    check("headers", [headers_type], None)
    check("partition", [IntegerType()], None)
    check("timestamp", [DoubleType(), TimestampType()], None)


def _same_type(a, b) -> bool:
    """DataTypeUtils.sameType: equal ignoring nullability."""
    from pyspark.sql.types import ArrayType, StructType
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same_type(a.elementType, b.elementType)
    if isinstance(a, StructType) and isinstance(b, StructType):
        return len(a.fields) == len(b.fields) and all(
            x.name == y.name and _same_type(x.dataType, y.dataType) for x, y in zip(a.fields, b.fields))
    return type(a) is type(b)


# --- the task side --------------------------------------------------------------------------------

@dataclass
class TaskCommit:
    """What a writer task reports to the driver (a pyspark WriterCommitMessage)."""

    records: int = 0
    transactional_id: str | None = None
    producer_id: int = -1
    producer_epoch: int = -1
    skipped: bool = False  # streaming: this micro-batch was already committed by an earlier run


def _fault(name: str) -> bool:
    fault_dir = os.environ.get(FAULT_DIR_ENV)
    if not fault_dir:
        return False
    try:
        os.remove(os.path.join(fault_dir, name))
    except FileNotFoundError:
        return False
    return True


def _column(batch, name):
    idx = batch.schema.get_field_index(name)
    return None if idx < 0 else batch.column(idx)


_NULL_TOPIC = ("The Kafka message data sent to the producer contains a null topic. Use the `topic` option for "
               "setting a default topic.")


def _binary(arr):
    import pyarrow as pa
    if arr is None:
        return None
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if not pa.types.is_binary(arr.type):
        arr = arr.cast(pa.binary())
    return arr


def _timestamps_ms(batch):
    import pyarrow as pa
    tcol = _column(batch, "timestamp")
    if tcol is None:
        return None
    if pa.types.is_floating(tcol.type):
        return _seconds_to_ms(tcol)
    # Spark's timestamps are microseconds; Kafka's milliseconds (truncated, as Spark's sink does)
    return tcol.cast(pa.timestamp("ms", tz=tcol.type.tz), safe=False).cast(pa.int64())


def _seconds_to_ms(col):
    """A double timestamp column as Spark's sink reads it: Cast(double AS timestamp) takes seconds
    (NaN and infinities become null: the producer's clock), truncated to microseconds, then to
    milliseconds."""
    import numpy as np
    import pyarrow as pa
    secs = col.to_numpy(zero_copy_only=False).astype(np.float64)  # nulls are NaN
    with np.errstate(invalid="ignore", over="ignore"):
        micros = secs * 1e6
    valid = np.isfinite(micros)
    us = np.clip(np.trunc(np.where(valid, micros, 0)), -2.0**63, 2.0**63 - 1024).astype(np.int64)
    ms = np.sign(us) * (np.abs(us) // 1000)  # Java's long division truncates toward zero
    return pa.array(ms, pa.int64(), mask=~valid)


async def _send_columns(producer, opts: SinkOptions, batch, futures: list) -> str | None:
    """A header-less Arrow batch through ``Producer.send_columns`` (one call per topic)."""
    import numpy as np
    import pyarrow as pa
    values, keys = _binary(_column(batch, "value")), _binary(_column(batch, "key"))
    parts = _column(batch, "partition")
    stamps = _timestamps_ms(batch)
    if stamps is not None:
        now = int(time.time() * 1000)
        stamps = stamps.fill_null(now).to_numpy(zero_copy_only=False)
    if opts.topic is not None:
        groups = [(opts.topic, None)]
    else:
        topics = _column(batch, "topic")
        if topics.null_count:
            raise OptionError(_NULL_TOPIC)
        names = topics.to_numpy(zero_copy_only=False)
        groups = [(t, np.nonzero(names == t)[0]) for t in dict.fromkeys(names.tolist())]
    for topic, rows in groups:
        if rows is None or len(rows) == batch.num_rows:
            k, v, p, ts = keys, values, parts, stamps
        else:
            idx = pa.array(rows)
            k = None if keys is None else keys.take(idx)
            v = values.take(idx)
            p = None if parts is None else parts.take(idx)
            ts = None if stamps is None else stamps[rows]
        futures.extend(await producer.send_columns(topic, v, k, partitions=p, timestamps=ts))
    return groups[0][0] if groups else None


async def _send_rows(producer, opts: SinkOptions, batch, futures: list) -> str | None:
    """A batch with headers, record by record through ``Producer.send``."""
    n = batch.num_rows
    values = _binary(_column(batch, "value")).to_pylist()
    keys = _binary(_column(batch, "key"))
    keys = keys.to_pylist() if keys is not None else [None] * n
    topics = None if opts.topic is not None else _column(batch, "topic").to_pylist()
    parts = _column(batch, "partition")
    parts = parts.to_pylist() if parts is not None else None
    headers = _column(batch, "headers").to_pylist()
    stamps = _timestamps_ms(batch)
    stamps = stamps.to_pylist() if stamps is not None else None
    first = None
    for i in range(n):
        topic = opts.topic if topics is None else topics[i]
        if topic is None:
            raise OptionError(_NULL_TOPIC)
        first = first or topic
        hs = [(h["key"], h["value"]) for h in headers[i]] if headers[i] else None
        futures.append(await producer.send(topic, values[i], keys[i], partition=None if parts is None else parts[i],
                                           timestamp_ms=None if stamps is None else stamps[i], headers=hs))
    return first


async def _produce(opts: SinkOptions, batches, transactional_id: str | None, marker) -> TaskCommit:
    import pyarrow.compute as pc

    from kgroup.client.producer import Producer
    producer = Producer(config=opts.producer_config(transactional_id))
    result = TaskCommit(transactional_id=transactional_id)
    futures = []
    marker_topic = None
    try:
        if transactional_id is not None:
            await producer.init_transactions()
            if marker is not None and await _already_committed(opts, marker):
                log.info("%s: micro-batch %s already committed by an earlier run; not written again",
                         transactional_id, marker[1])
                result.skipped = True
                return result
            producer.begin_transaction()
        fail_after = None
        for batch in batches:
            n = batch.num_rows
            if not n:
                continue
            hcol = _column(batch, "headers")
            if hcol is not None and pc.list_value_length(hcol).fill_null(0).to_numpy(zero_copy_only=False).any():
                marker_topic = await _send_rows(producer, opts, batch, futures) or marker_topic
            else:
                marker_topic = await _send_columns(producer, opts, batch, futures) or marker_topic
            result.records += n
            if fail_after is None:
                fail_after = transactional_id is not None and _fault(f"fail-write-{transactional_id}") or \
                    transactional_id is None and _fault("fail-write-once")
            if fail_after:
                await producer.flush()
                raise RuntimeError("injected fault in a writer task after its first Arrow batch "
                                   f"(test hook {FAULT_DIR_ENV})")
        if transactional_id is not None and marker is not None and marker_topic is not None:
            group, batch_id = marker
            from kgroup.client.types import OffsetAndMetadata
            await producer.send_offsets_to_transaction(
                {(marker_topic, 0): OffsetAndMetadata(batch_id + 1, f"spark micro-batch {batch_id}")}, group)
        await producer.flush()
        for f in futures:
            f.result()  # raises the first failed send
        result.producer_id, result.producer_epoch = producer._producer_id, producer._producer_epoch
        return result
    finally:
        await producer.close()  # a transaction left open is the driver's to commit or abort


async def _already_committed(opts: SinkOptions, marker) -> bool:
    """Did an earlier run commit this task's micro-batch? (its marker offset is batchId + 1)"""
    from kgroup.client.admin import Admin
    group, batch_id = marker
    async with Admin(config={"bootstrap.servers": opts.bootstrap_servers}) as admin:
        offsets = await admin.list_group_offsets(group)
    return any(om is not None and om.offset >= batch_id + 1 for om in offsets.values())


def write_task(opts: SinkOptions, batches, batch_id: int | None = None) -> TaskCommit:
    """Run in a Spark task: produce every row of ``batches`` (pyarrow RecordBatches)."""
    transactional_id = marker = None
    if opts.transactional_id_prefix is not None:
        from pyspark import TaskContext
        ctx = TaskContext.get()
        partition_id = ctx.partitionId() if ctx is not None else 0
        transactional_id = f"{opts.transactional_id_prefix}-{partition_id}"
        if batch_id is not None:
            marker = (transactional_id, batch_id)
    return asyncio.run(_produce(opts, batches, transactional_id, marker))


# --- the driver side ------------------------------------------------------------------------------

async def _end_transactions(opts: SinkOptions, commits: list[TaskCommit], committed: bool) -> None:
    """EndTxn for each task's transaction with the producer id and epoch the task reported (the
    second phase, run by the driver)."""
    from kgroup.client.connection import KafkaClient
    from kgroup.client.config import ProducerConfig
    from kgroup.client.transactions import COORDINATOR_KEY_TRANSACTION, TRANSACTIONAL_MAX_VERSIONS
    from kgroup.client.types import NodeInfo
    from kgroup.protocol.errors import ErrorCode, KafkaError
    from kgroup.protocol.messages.end_txn import EndTxnRequest
    from kgroup.protocol.messages.find_coordinator import FindCoordinatorRequest
    cfg = ProducerConfig(opts.producer_config())
    client = KafkaClient(cfg, max_versions=TRANSACTIONAL_MAX_VERSIONS)
    try:
        for c in commits:
            if c.transactional_id is None or c.skipped or c.producer_id < 0 or not c.records:
                continue
            for attempt in range(20):
                resp = await client.send_any(FindCoordinatorRequest(key=c.transactional_id,
                                                                    key_type=COORDINATOR_KEY_TRANSACTION,
                                                                    coordinator_keys=[c.transactional_id]))
                coord = resp.coordinators[0] if resp.coordinators else resp
                if coord.error_code:
                    await asyncio.sleep(0.1 * (attempt + 1))
                    continue
                node = NodeInfo(coord.node_id, coord.host, coord.port)
                answer = await client.send(node.node_id, EndTxnRequest(
                    transactional_id=c.transactional_id, producer_id=c.producer_id,
                    producer_epoch=c.producer_epoch, committed=committed), group="coordinator", node=node)
                err = ErrorCode(answer.error_code)
                if err == ErrorCode.NONE:
                    break
                if err in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                           ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                    await asyncio.sleep(0.1 * (attempt + 1))
                    continue
                raise KafkaError(err, f"EndTxn({'commit' if committed else 'abort'}) of {c.transactional_id} "
                                      f"(producer id {c.producer_id}, epoch {c.producer_epoch}) failed: {err.name}")
            else:
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                 f"no transaction coordinator answered for {c.transactional_id}")
    finally:
        await client.close()


def commit_job(opts: SinkOptions, messages, batch_id: int | None = None) -> None:
    commits = [m.commit for m in messages if m is not None]
    tag = f"-{batch_id}" if batch_id is not None else ""
    if _fault(f"fail-commit{tag}"):
        raise RuntimeError(f"injected fault before committing the transactions (test hook {FAULT_DIR_ENV})")
    if opts.transactional_id_prefix is not None:
        asyncio.run(_end_transactions(opts, commits, True))
    if _fault(f"fail-after-commit{tag}"):
        raise RuntimeError(f"injected fault after committing the transactions (test hook {FAULT_DIR_ENV})")


def abort_job(opts: SinkOptions, messages) -> None:
    if opts.transactional_id_prefix is None:
        return
    commits = [m.commit for m in messages if m is not None]
    try:
        asyncio.run(_end_transactions(opts, commits, False))
    except Exception as e:  # already committed, or fenced by a newer attempt: nothing to undo
        log.warning("aborting the write's transactions: %s", e)
