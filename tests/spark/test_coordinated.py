"""groupMode=coordinated: streaming queries with one group id share a topic's partitions through
the group's assignment; when one stops (LeaveGroup) the other takes its partitions over from the
committed offsets, losing no record."""
from __future__ import annotations

import time

from kgroup.client.sync import KafkaAdmin

from .helpers import create_topic, produce
from .test_streaming import group_lag, sink_records, wait_for

GROUP = "coordinated-group"
TOPIC = "coordinated"


def start(spark, bootstrap, tmp_path, name):
    return (spark.readStream.format("kgroup").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC).option("startingOffsets", "earliest")
            .option("kafka.group.id", GROUP).option("groupMode", "coordinated").option("assignor", "roundrobin")
            .option("kafka.client.id", f"spark-{name}")
            # a long session timeout: the take-over below must come from LeaveGroup, not from expiry
            .option("kafka.session.timeout.ms", "60000").option("kafka.heartbeat.interval.ms", "500")
            .load()
            .selectExpr("partition", "offset", "CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v")
            .writeStream.queryName(f"coordinated_{name}").format("json").option("path", str(tmp_path / f"out-{name}"))
            .option("checkpointLocation", str(tmp_path / f"checkpoint-{name}"))
            .trigger(processingTime="250 milliseconds").start())


def members(admin) -> tuple[str, dict[str, set[int]]]:
    g = admin.describe_groups([GROUP])[GROUP]
    return g.state, {m.client_id: {tp.partition for tp in m.assignment} for m in g.members}


def test_two_coordinated_queries_split_the_partitions_and_one_takes_over(spark, spark_broker, tmp_path):
    bootstrap = spark_broker.bootstrap
    create_topic(bootstrap, TOPIC, 6)
    produced = produce(bootstrap, TOPIC, 0, 600)
    admin = KafkaAdmin(bootstrap_servers=bootstrap)
    try:
        qa = start(spark, bootstrap, tmp_path, "a")
        qb = start(spark, bootstrap, tmp_path, "b")

        def split():
            state, ms = members(admin)
            return ms if state == "Stable" and len(ms) == 2 and all(len(p) == 3 for p in ms.values()) else None
        assignment = wait_for(split, 150, "both queries to own 3 partitions each")
        assert assignment["spark-a"] | assignment["spark-b"] == set(range(6))

        produced.update(produce(bootstrap, TOPIC, 600, 1200))
        wait_for(lambda: sum(c or 0 for c, _ in group_lag(bootstrap, GROUP, TOPIC, 6).values()) == 1800, 90,
                 "both queries to process and commit everything")
        assert members(admin)[1] == assignment, "the group rebalanced while both were running"
        a_records, b_records = sink_records(spark, tmp_path / "out-a"), sink_records(spark, tmp_path / "out-b")
        # records produced after the split went only to the query owning their partition
        for records, owned in ((a_records, assignment["spark-a"]), (b_records, assignment["spark-b"])):
            late = [r for r in records if int(r[2][1:]) >= 600]
            assert late and {p for p, *_ in late} <= owned

        stopped_at = time.monotonic()
        qa.stop()
        wait_for(lambda: (lambda s, ms: ms if s == "Stable" and ms == {"spark-b": set(range(6))} else None)(
            *members(admin)), 40, "query b to own all partitions")
        assert time.monotonic() - stopped_at < 40  # LeaveGroup, well before the 60 s session timeout

        produced.update(produce(bootstrap, TOPIC, 1800, 600))
        wait_for(lambda: all(c == e for c, e in group_lag(bootstrap, GROUP, TOPIC, 6).values()), 90,
                 "query b to catch up on all six partitions")
        qb.stop()
    finally:
        for q in spark.streams.active:
            q.stop()
        admin.close()

    a_records, b_records = sink_records(spark, tmp_path / "out-a"), sink_records(spark, tmp_path / "out-b")
    both = a_records + b_records
    got = {(p, o): (k.encode(), v.encode()) for p, o, k, v in both}
    assert got == produced, "a record was lost"
    assert len(both) == len(got) == 2400, "a record was processed by both queries"
    assert {p for p, o, k, v in b_records if int(k[1:]) >= 1800} == set(range(6))
