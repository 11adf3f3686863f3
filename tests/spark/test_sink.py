"""The ``kgroup`` sink: batch and streaming writes read back byte for byte, Spark's Kafka sink
errors, and exactly-once streaming writes (``kafka.transactional.id.prefix``) across a query
killed between its tasks' writes and its epoch commit, next to the at-least-once default, which
shows the duplicates (so the check can fail)."""
from __future__ import annotations

import collections

import pytest

from kgroup.client.assignors import TopicPartition
from kgroup.client.sync import KafkaAdmin, KafkaConsumer

from .helpers import create_topic, produce


def read_back(bootstrap: str, topic: str, isolation: str = "read_committed") -> list:
    """Every record of ``topic``: (partition, key, value, headers)."""
    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        parts = admin.describe_topics([topic])[topic].partitions
        tps = [TopicPartition(topic, p) for p in parts]
        ends = {tp: v[0] for tp, v in admin.list_offsets({tp: -1 for tp in tps}, isolation_level=isolation).items()}
    out = []
    with KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, auto_offset_reset="earliest") as c:
        c.assign(tps)
        c.seek_to_beginning(*tps)
        while any(c.position(tp) < ends[tp] for tp in tps):
            for r in c.poll(500):
                out.append((r.partition, r.key, r.value, [(k, v) for k, v in r.headers]))
    return out


def writer(df, bootstrap, **options):
    # PySpark runs Python data source writes in Append (or Overwrite) mode only, not ErrorIfExists
    w = df.write.format("kgroup").mode("append").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        w = w.option(k, v)
    return w


ROWS = [(b"k0", b"v0", 0, [("a", b"1")]), (None, b"v1", 1, []), (b"k2", b"", 2, [("b", None), ("c", b"")]),
        (b"\x00\xff", b"\x01" * 300, 0, [("x" * 20, b"y" * 40)]), (b"k4", b"v4", 1, None)]


def rows_df(spark, rows=ROWS):
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType
    schema = StructType([StructField("key", BinaryType()), StructField("value", BinaryType()),
                         StructField("partition", IntegerType()),
                         StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                                      StructField("value", BinaryType())])))])
    return spark.createDataFrame([(k, v, p, [{"key": a, "value": b} for a, b in h] if h is not None else None)
                                  for k, v, p, h in rows], schema)


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_batch_write_reads_back_byte_for_byte(spark, spark_broker, topic_name, compression):
    bootstrap = spark_broker.bootstrap
    create_topic(bootstrap, topic_name, 3)
    writer(rows_df(spark), bootstrap, topic=topic_name, **{"kafka.compression.type": compression}).save()
    got = sorted(read_back(bootstrap, topic_name), key=lambda r: (r[2], r[0]))
    want = sorted(((p, k, v, list(h or [])) for k, v, p, h in ROWS), key=lambda r: (r[2], r[0]))
    assert got == want


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_bulk_write_partitions_like_the_producer(spark, spark_broker, topic_name, compression):
    """Header-less rows go through Producer.send_columns: keyed rows land where murmur2 puts them,
    a partition column wins, null keys and values survive, timestamps are kept."""
    from kgroup.client.partitioner import partition_for_key
    bootstrap = spark_broker.bootstrap
    create_topic(bootstrap, topic_name, 5)
    n = 20000
    df = spark.range(n, numPartitions=2).selectExpr(
        "CASE WHEN id % 7 = 0 THEN NULL ELSE CAST(concat('key-', id) AS BINARY) END AS key",
        "CASE WHEN id % 11 = 0 THEN NULL ELSE CAST(repeat('v', CAST(id % 50 AS INT)) AS BINARY) END AS value",
        "CASE WHEN id % 13 = 0 THEN 4 ELSE NULL END AS partition",
        "timestamp_micros(1700000000000000 + id * 1000 + 999) AS timestamp")  # sub-ms part truncated
    writer(df, bootstrap, topic=topic_name, **{"kafka.compression.type": compression,
                                               "kafka.batch.size": "65536"}).save()
    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        tps = [TopicPartition(topic_name, p) for p in range(5)]
        ends = {tp: v[0] for tp, v in admin.list_offsets({tp: -1 for tp in tps}).items()}
    rows = []
    with KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign(tps)
        c.seek_to_beginning(*tps)
        while any(c.position(tp) < ends[tp] for tp in tps):
            rows.extend(c.poll(500))
    assert len(rows) == n
    for r in rows:
        i = r.timestamp - 1700000000000
        assert r.key == (None if i % 7 == 0 else b"key-%d" % i)
        assert r.value == (None if i % 11 == 0 else b"v" * (i % 50))
        want = 4 if i % 13 == 0 else (partition_for_key(r.key, 5) if r.key is not None else None)
        if want is not None:
            assert r.partition == want


@pytest.mark.parametrize("with_headers", [False, True])
def test_double_timestamp_column_is_seconds(spark, spark_broker, topic_name, with_headers):
    """Spark's sink casts a double ``timestamp`` column to a timestamp: seconds, truncated to
    microseconds and then to milliseconds; NaN, infinities and nulls leave the producer's clock.
    Both write routes: header-less rows (columns) and rows with headers (record by record)."""
    import time
    bootstrap = spark_broker.bootstrap
    create_topic(bootstrap, topic_name, 1)
    seconds = [1700000000.1234567, 2.9999999, 0.0019, float("nan"), float("inf"), None]
    df = spark.createDataFrame([(str(i), s) for i, s in enumerate(seconds)], "value string, timestamp double")
    if with_headers:
        df = df.selectExpr("value", "timestamp", "array(named_struct('key', 'h', 'value', CAST('x' AS BINARY))) "
                           "AS headers")
    before = int(time.time() * 1000)
    writer(df, bootstrap, topic=topic_name).save()
    with KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        tp = TopicPartition(topic_name, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = {}
        while len(got) < len(seconds):
            for r in c.poll(500):
                got[int(r.value)] = r.timestamp
    assert [got[0], got[1], got[2]] == [1700000000123, 2999, 1]
    assert all(before <= got[i] <= int(time.time() * 1000) for i in (3, 4, 5))


def test_topic_column_and_string_columns(spark, spark_broker, topic_name):
    bootstrap = spark_broker.bootstrap
    other = topic_name + "-b"
    create_topic(bootstrap, topic_name, 2)
    create_topic(bootstrap, other, 2)
    df = spark.createDataFrame([(topic_name, "k1", "v1"), (other, "k2", "v2"), (other, None, "v3")],
                               "topic string, key string, value string")
    writer(df, bootstrap).save()
    assert sorted((k, v) for _, k, v, _ in read_back(bootstrap, topic_name)) == [(b"k1", b"v1")]
    assert sorted((k or b"", v) for _, k, v, _ in read_back(bootstrap, other)) == [(b"", b"v3"), (b"k2", b"v2")]
    # the topic option wins over the column (Spark's KafkaWriter.topicExpression)
    writer(df, bootstrap, topic=topic_name).save()
    assert len(read_back(bootstrap, topic_name)) == 4


@pytest.mark.parametrize("ddl,options,message", [
    ("key binary", {"topic": "t"}, "Required attribute 'value' not found"),
    ("value binary", {}, "topic option required when no 'topic' attribute is present"),
    ("value int", {"topic": "t"}, "value attribute unsupported type int. value must be a(n) string or binary"),
    ("key int, value string", {"topic": "t"}, "key attribute unsupported type int"),
    ("value string, partition string", {"topic": "t"}, "partition attribute unsupported type string"),
    ("value string, timestamp string", {"topic": "t"},
     "timestamp attribute unsupported type string. timestamp must be a(n) double or timestamp"),
    ("value string", {"topic": "t", "kafka.key.serializer": "x"}, "Kafka option 'key.serializer' is not supported"),
    ("value string", {"topic": "t", "kafka.value.serializer": "x"}, "Kafka option 'value.serializer' is not supported"),
    ("value string", {"topic": "t", "kafka.no.such.key": "x"}, "not a producer configuration"),
])
def test_sink_errors_are_sparks(spark, spark_broker, ddl, options, message):
    df = spark.createDataFrame([], ddl)
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
        writer(df, spark_broker.bootstrap, **options).save()


def test_overwrite_mode_is_refused(spark, spark_broker):
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="Save mode Overwrite not allowed for Kafka"):
        writer(df, spark_broker.bootstrap, topic="t").mode("overwrite").save()


def test_null_topic_in_data(spark, spark_broker):
    df = spark.createDataFrame([(None, "v")], "topic string, value string")
    with pytest.raises(Exception, match="contains a null topic"):
        writer(df, spark_broker.bootstrap).save()


@pytest.mark.parametrize("exactly_once", [False, True])
def test_batch_write_task_retry(spark, spark_broker, fault_dir, topic_name, exactly_once):
    """A task fails after producing part of its rows and is retried: with transactions the first
    attempt is aborted (fenced by the retry's InitProducerId), without them its rows stay."""
    bootstrap = spark_broker.bootstrap
    create_topic(bootstrap, topic_name, 2)
    n = 3000
    df = spark.range(n).selectExpr("CAST(id AS STRING) AS value").repartition(1)
    opts = {"topic": topic_name, "kafka.batch.size": "2048"}
    if exactly_once:
        prefix = f"{topic_name}-txn"
        opts["kafka.transactional.id.prefix"] = prefix
        (fault_dir / f"fail-write-{prefix}-0").touch()
    else:
        (fault_dir / "fail-write-once").touch()
    # Arrow batches of 1000 rows: the fault fires after the first one has been produced
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
    try:
        writer(df, bootstrap, **opts).save()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    counts = collections.Counter(v for _, _, v, _ in read_back(bootstrap, topic_name))
    assert set(counts) == {str(i).encode() for i in range(n)}
    dups = sum(c - 1 for c in counts.values())
    if exactly_once:
        assert dups == 0
    else:
        assert dups >= 1000


def _stream(spark, bootstrap, source, sink_topic, checkpoint, prefix):
    w = (spark.readStream.format("kgroup").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", source).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "500")
         .load().selectExpr("key", "value")
         .writeStream.format("kgroup").option("kafka.bootstrap.servers", bootstrap).option("topic", sink_topic)
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True))
    if prefix:
        w = w.option("kafka.transactional.id.prefix", prefix)
    return w.start()


@pytest.mark.parametrize("fault", ["fail-commit-1", "fail-after-commit-1"])
@pytest.mark.parametrize("exactly_once", [False, True])
def test_stream_killed_mid_epoch_and_restarted(spark, spark_broker, fault_dir, tmp_path, topic_name, fault,
                                               exactly_once):
    """The query dies in micro-batch 1 after its tasks wrote, before (or just after) its writes are
    committed and before the epoch is recorded; restarted from the checkpoint, Spark runs batch 1
    again. read_committed readers see each record exactly once with the transactional sink; the
    at-least-once sink shows batch 1's records twice."""
    bootstrap = spark_broker.bootstrap
    source, out = topic_name, topic_name + "-out"
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, out, 2)
    produced = produce(bootstrap, source, 0, 2000)
    prefix = f"{topic_name}-eos" if exactly_once else None
    (fault_dir / fault).touch()
    q = _stream(spark, bootstrap, source, out, tmp_path / "cp", prefix)
    with pytest.raises(Exception, match="injected fault"):
        q.awaitTermination(120)
    q = _stream(spark, bootstrap, source, out, tmp_path / "cp", prefix)
    q.awaitTermination(120)
    assert q.exception() is None
    got = collections.Counter((k, v) for _, k, v, _ in read_back(bootstrap, out))
    want = collections.Counter(produced.values())
    assert set(got) == set(want)
    dups = sum(c - 1 for c in got.values())
    if exactly_once:
        assert dups == 0
    else:
        assert 400 <= dups <= 500  # batch 1 (maxOffsetsPerTrigger 500, prorated) written twice


def test_pipeline_job(spark, spark_broker, topic_name, capsys):
    """spark_jobs/pipeline.py: orders -> watermarked per-customer window totals -> a topic, exactly
    once; every emitted window result matches a batch computation of the same window."""
    from pyspark.sql import functions as F

    from spark_jobs.pipeline import main, read_results
    bootstrap, out = spark_broker.bootstrap, topic_name + "-totals"
    assert main(["--bootstrap-server", bootstrap, "--input", topic_name, "--output", out, "--group", topic_name,
                 "--generate", "3000", "--generate-minutes", "4", "--partitions", "3", "--available-now",
                 "--max-offsets-per-trigger", "1000", "--report-every", "1"]) == 0
    printed = capsys.readouterr().out
    assert f"lag of group {topic_name} on {topic_name}: 0 " in printed
    results = read_results(bootstrap, out)
    assert results and len({(r["window_start"], r["customer"]) for r in results}) == len(results)
    orders = (spark.read.format("kgroup").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic_name)
              .load().select(F.from_json(F.col("value").cast("string"), "customer string, amount double").alias("o"),
                             "timestamp"))
    expected = {(str(r["start"]), r["customer"]): r["n"] for r in orders.groupBy(
        F.window("timestamp", "1 minute").start.cast("string").alias("start"), "o.customer").agg(
        F.count("*").alias("n")).collect()}
    for r in results:
        assert r["orders"] == expected[(r["window_start"], r["customer"])]
    assert 0 < sum(r["orders"] for r in results) < 3000  # windows after the watermark are still open
