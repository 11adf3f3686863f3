"""groupMode=coordinated with kafka.group.protocol=consumer (KIP-848), against librdkafka's mock
cluster (which implements ConsumerGroupHeartbeat) and against a kgroup broker: two streaming
queries share a topic through the broker's assignment, the second takes the
first's partitions over when it stops, and no record is lost or processed twice."""
from __future__ import annotations

import pytest

from kgroup.testing import rdkafka_mock

from tests.harness import BrokerProcess

from .helpers import create_topic, produce
from .test_streaming import group_lag, sink_records, wait_for

GROUP = "kip848-coordinated"
TOPIC = "kip848-coordinated"


@pytest.fixture(params=["rdkafka-mock", "kgroup"])
def cluster(request, tmp_path):
    """Bootstrap servers of a broker whose consumer groups heartbeat every 250 ms, with the topic."""
    if request.param == "kgroup":
        broker = BrokerProcess(tmp_path / "data", ["group.consumer.heartbeat.interval.ms=250",
                                                   "group.consumer.min.heartbeat.interval.ms=250"]).start()
        try:
            create_topic(broker.bootstrap, TOPIC, 4)
            yield broker.bootstrap
        finally:
            broker.stop()
        return
    with rdkafka_mock.MockCluster(topics={TOPIC: 4}) as mc:
        mc.set_group_consumer_heartbeat_interval_ms(250)
        yield mc.bootstrap_servers


def start(spark, bootstrap, tmp_path, name):
    return (spark.readStream.format("kgroup").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC).option("startingOffsets", "earliest")
            .option("kafka.group.id", GROUP).option("groupMode", "coordinated")
            .option("kafka.group.protocol", "consumer").option("assignor", "uniform")
            .option("kafka.client.id", f"spark-{name}")
            .load()
            .selectExpr("partition", "offset", "CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v")
            .writeStream.queryName(f"kip848_{name}").format("json").option("path", str(tmp_path / f"out-{name}"))
            .option("checkpointLocation", str(tmp_path / f"checkpoint-{name}"))
            .trigger(processingTime="250 milliseconds").start())


def records(spark, path) -> list:
    """The sink's records; none before the query wrote a non-empty file."""
    if not any(f.stat().st_size for f in path.glob("part-*.json")):
        return []
    return sink_records(spark, path)


def committed_total(bootstrap):
    return sum(c or 0 for c, _ in group_lag(bootstrap, GROUP, TOPIC, 4).values())


def test_coordinated_queries_share_and_hand_over_with_the_consumer_protocol(spark, cluster, tmp_path):
    produced = produce(cluster, TOPIC, 0, 200)
    try:
        qa = start(spark, cluster, tmp_path, "a")
        wait_for(lambda: committed_total(cluster) == 200, 90, "query a to process and commit the first 200")
        qb = start(spark, cluster, tmp_path, "b")

        def both_have_new_records():
            produced.update(produce(cluster, TOPIC, len(produced), 20))
            a, b = records(spark, tmp_path / "out-a"), records(spark, tmp_path / "out-b")
            return b and any(int(k[1:]) >= 220 for _, _, k, _ in a) and any(int(k[1:]) >= 220 for _, _, k, _ in b)
        # the broker splits the partitions: records produced after that reach both queries
        wait_for(both_have_new_records, 120, "both queries to own partitions", interval=1.0)
        wait_for(lambda: committed_total(cluster) == len(produced), 90, "both queries to commit everything")
        a_records, b_records = records(spark, tmp_path / "out-a"), records(spark, tmp_path / "out-b")
        late_a = {p for p, _, k, _ in a_records if int(k[1:]) >= 220}
        late_b = {p for p, _, k, _ in b_records if int(k[1:]) >= 220}
        assert late_a and late_b

        qa.stop()  # leaves with epoch -1: b takes every partition over from the committed offsets
        total = len(produced)
        produced.update(produce(cluster, TOPIC, total, 200))
        wait_for(lambda: all(c == e for c, e in group_lag(cluster, GROUP, TOPIC, 4).values()), 120,
                 "query b to catch up on all four partitions")
        qb.stop()
    finally:
        for q in spark.streams.active:
            q.stop()

    a_records, b_records = sink_records(spark, tmp_path / "out-a"), sink_records(spark, tmp_path / "out-b")
    both = a_records + b_records
    got = {(p, o): (k.encode(), v.encode()) for p, o, k, v in both}
    assert got == produced, "a record was lost"
    assert len(both) == len(got), "a record was processed by both queries"
    assert {p for p, _, k, _ in b_records if int(k[1:]) >= total} == {0, 1, 2, 3}
