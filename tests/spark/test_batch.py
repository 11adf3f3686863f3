"""Batch reads through ``spark.read.format("kgroup")`` against a real kgroup broker."""
from __future__ import annotations

import json
import time

import pytest

from kgroup.spark.source import kafka_schema

from .helpers import create_topic, produce

N_BIG = 100_000


def reader(spark, bootstrap, **options):
    r = spark.read.format("kgroup").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def as_dict(df) -> dict:
    pdf = df.select("partition", "offset", "key", "value").toPandas()
    return {(int(p), int(o)): (bytes(k), bytes(v)) for p, o, k, v in
            zip(pdf["partition"], pdf["offset"], pdf["key"], pdf["value"])}


@pytest.fixture(scope="module")
def big_topic(spark_broker):
    name = "big-100k"
    create_topic(spark_broker.bootstrap, name, 6)
    produced = produce(spark_broker.bootstrap, name, 0, N_BIG)
    assert len(produced) == N_BIG
    return name, produced


def test_batch_read_of_100k_records_across_6_partitions_equals_what_was_produced(spark, spark_broker, big_topic):
    name, produced = big_topic
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    df = reader(spark, spark_broker.bootstrap, subscribe=name)
    assert df.schema == kafka_schema(False)
    assert df.rdd.getNumPartitions() == 6  # one input partition per topic-partition
    t0 = time.monotonic()
    got = as_dict(df)
    print(f"read {len(got)} records in {time.monotonic() - t0:.1f}s")
    assert len(got) == N_BIG
    assert got == produced
    assert {p for p, _ in produced} == set(range(6))
    stats = df.groupBy("partition").count().collect()
    assert sum(r["count"] for r in stats) == N_BIG and len(stats) == 6


def test_min_partitions_splits_ranges_and_offsets_pin_the_read(spark, spark_broker, big_topic):
    name, produced = big_topic
    df = reader(spark, spark_broker.bootstrap, subscribe=name, minPartitions="18")
    assert df.rdd.getNumPartitions() == 18
    assert df.count() == N_BIG
    per_partition = {p: 1 + max(o for q, o in produced if q == p) for p in range(6)}
    start = {"0": 10, "1": -2, "2": 0, "3": 5, "4": 0, "5": 0}
    end = {"0": 20, "1": 7, "2": -1, "3": 5, "4": 1, "5": 0}
    df = reader(spark, spark_broker.bootstrap, subscribe=name, startingOffsets=json.dumps({name: start}),
                endingOffsets=json.dumps({name: end}))
    got = as_dict(df)
    expected = {(p, o): kv for (p, o), kv in produced.items()
                if (start[str(p)] if start[str(p)] >= 0 else 0) <= o
                < (end[str(p)] if end[str(p)] >= 0 else per_partition[p])}
    assert got == expected and len(got) == 10 + 7 + per_partition[2] + 1
    assigned = reader(spark, spark_broker.bootstrap, assign=json.dumps({name: [1, 4]}))
    assert assigned.count() == per_partition[1] + per_partition[4]


def test_headers_timestamps_and_pattern(spark, spark_broker):
    create_topic(spark_broker.bootstrap, "hdr-a", 2)
    create_topic(spark_broker.bootstrap, "hdr-b", 1)
    before = time.time()
    produced = produce(spark_broker.bootstrap, "hdr-a", 0, 50, headers=True)
    produce(spark_broker.bootstrap, "hdr-b", 50, 10, headers=True)
    df = reader(spark, spark_broker.bootstrap, subscribePattern="hdr-.*", includeHeaders="true")
    assert df.schema == kafka_schema(True)
    rows = df.collect()
    assert len(rows) == 60 and {r.topic for r in rows} == {"hdr-a", "hdr-b"}
    for r in rows:
        i = int(r.key[1:])
        assert [(h.key, h.value) for h in r.headers] == [("i", str(i).encode()), ("n", None)]
        assert r.timestampType == 0
        assert before - 5 <= r.timestamp.timestamp() <= time.time() + 5
        if r.topic == "hdr-a":
            assert produced[(r.partition, r.offset)] == (bytes(r.key), bytes(r.value))
    # the pattern is matched in full, like Java's Pattern.matches
    assert reader(spark, spark_broker.bootstrap, subscribePattern="hdr-").count() == 0


def test_a_retried_task_reads_the_same_records(spark, spark_broker, fault_dir):
    name = "retried"
    create_topic(spark_broker.bootstrap, name, 3)
    produced = produce(spark_broker.bootstrap, name, 0, 30_000)
    markers = [fault_dir / f"fail-{name}-{p}-0" for p in (0, 2)]
    for m in markers:
        m.touch()  # the first attempt of these ranges yields one batch, then fails
    df = reader(spark, spark_broker.bootstrap, subscribe=name, **{"kafka.max.poll.records": "1000"})
    got = as_dict(df)
    assert not any(m.exists() for m in markers), "the injected faults did not fire"
    assert got == produced


def test_unknown_option_is_an_error_naming_it(spark, spark_broker):
    from pyspark.errors import AnalysisException
    with pytest.raises(AnalysisException, match="Unknown option 'subscribepatern'"):
        reader(spark, spark_broker.bootstrap, subscribePatern="x", subscribe="y")
    with pytest.raises(Exception, match="starting offset can't be latest for batch"):
        reader(spark, spark_broker.bootstrap, subscribe="y", startingOffsets="latest").count()
    with pytest.raises(Exception, match="Topic 'no-such-topic' does not exist"):
        reader(spark, spark_broker.bootstrap, subscribe="no-such-topic").count()


def test_consume_to_parquet_job(spark, spark_broker, tmp_path, capsys):
    from spark_jobs.consume_to_parquet import main
    create_topic(spark_broker.bootstrap, "to-parquet", 4)
    produced = produce(spark_broker.bootstrap, "to-parquet", 0, 5000)
    out = tmp_path / "parquet"
    assert main(["--bootstrap-server", spark_broker.bootstrap, "--topic", "to-parquet", "--output", str(out),
                 "--min-partitions", "8"]) == 0
    assert "count verified (5000 offsets)" in capsys.readouterr().out
    back = spark.read.parquet(str(out))
    assert back.count() == 5000
    assert as_dict(back) == produced


def test_offsets_beyond_the_log_are_data_loss(spark, spark_broker):
    name = "data-loss"
    create_topic(spark_broker.bootstrap, name, 1)
    produce(spark_broker.bootstrap, name, 0, 100)
    pinned = {"startingOffsets": json.dumps({name: {"0": 500}}), "endingOffsets": json.dumps({name: {"0": 600}})}
    with pytest.raises(Exception, match='Cannot fetch offset 500 .*"failOnDataLoss" to "false"'):
        reader(spark, spark_broker.bootstrap, subscribe=name, **pinned).count()
    assert reader(spark, spark_broker.bootstrap, subscribe=name, failOnDataLoss="false", **pinned).count() == 0
