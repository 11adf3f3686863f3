"""Streaming reads (``spark.readStream.format("kgroup")``): checkpointed offsets, exactly-once into a
file sink across restarts, and the processed offsets committed to the consumer group."""
from __future__ import annotations

import io
import time
from contextlib import redirect_stdout

from kgroup.client.assignors import TopicPartition
from kgroup.client.cli import main_groups
from kgroup.client.sync import KafkaAdmin

from .helpers import create_topic, produce


def wait_for(predicate, timeout: float, what: str, interval: float = 0.25):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def group_lag(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, tuple[int | None, int]]:
    """{partition: (committed offset or None, log end offset)}."""
    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        committed = admin.list_group_offsets(group, tps)
        ends = admin.list_offsets({tp: -1 for tp in tps})
    return {tp.partition: (committed[tp].offset if committed.get(tp) else None, ends[tp][0]) for tp in tps}


def describe(bootstrap: str, group: str) -> str:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main_groups(["--bootstrap-server", bootstrap, "--describe", "--group", group]) == 0
    return buf.getvalue()


def sink_records(spark, path) -> list:
    return [(r.partition, r.offset, r.k, r.v) for r in spark.read.json(str(path)).collect()]


def test_stream_with_checkpoint_reads_every_record_once_across_restarts(spark, spark_broker, tmp_path):
    bootstrap, topic, group = spark_broker.bootstrap, "stream-restart", "stream-restart-group"
    create_topic(bootstrap, topic, 4)
    produced = produce(bootstrap, topic, 0, 4000)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start(trigger: dict):
        return (spark.readStream.format("kgroup").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic).option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", "900").option("kafka.group.id", group).load()
                .selectExpr("partition", "offset", "CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v")
                .writeStream.format("json").option("path", str(out)).option("checkpointLocation", str(checkpoint))
                .trigger(**trigger).start())

    query = start({"processingTime": "200 milliseconds"})
    wait_for(lambda: query.lastProgress and query.lastProgress["batchId"] >= 1, 120, "two micro-batches")
    query.stop()  # stopped part-way: 4000 records need 5 batches of at most 900
    first_run = len(sink_records(spark, out))
    assert 0 < first_run < 4000

    produced.update(produce(bootstrap, topic, 4000, 2000))
    query = start({"processingTime": "200 milliseconds"})
    query.processAllAvailable()
    query.stop()

    produced.update(produce(bootstrap, topic, 6000, 500))
    query = start({"availableNow": True})  # a third run: catch up, then end by itself
    assert query.awaitTermination(120)
    assert query.exception() is None

    records = sink_records(spark, out)
    assert len(records) == 6500, "a record was lost or written twice"
    assert {(p, o): (k.encode(), v.encode()) for p, o, k, v in records} == produced

    # the group on the broker followed the checkpoint: no lag, and `kgroup groups --describe` says so
    lag = wait_for(lambda: (lambda g: g if all(c == e for c, e in g.values()) else None)(
        group_lag(bootstrap, group, topic, 4)), 30, "the group's offsets to reach the log end")
    assert sum(e for _, e in lag.values()) == 6500
    text = describe(bootstrap, group)
    rows = [line.split() for line in text.splitlines() if line.startswith(group)]
    assert sorted((int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows) == \
        sorted((p, c, e, 0) for p, (c, e) in lag.items())


def test_stream_count_job_shows_its_group(spark, spark_broker, capsys):
    from spark_jobs.stream_count import main
    bootstrap, topic, group = spark_broker.bootstrap, "stream-count", "stream-count-group"
    create_topic(bootstrap, topic, 3)
    produce(bootstrap, topic, 0, 300)
    assert main(["--bootstrap-server", bootstrap, "--topic", topic, "--group", group, "--available-now",
                 "--describe-every", "2"]) == 0
    out = capsys.readouterr().out
    assert f"as group {group} (standalone)" in out
    assert "LOG-END-OFFSET" in out and f"{group} {topic}" in " ".join(out.split())
    lag = wait_for(lambda: (lambda g: g if all(c == e for c, e in g.values()) else None)(
        group_lag(bootstrap, group, topic, 3)), 30, "the group's offsets to reach the log end")
    assert sum(c for c, _ in lag.values()) == 300
