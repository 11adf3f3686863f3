"""The Kafka source options resolved by timestamp (startingTimestamp, startingOffsetsByTimestamp,
endingTimestamp, endingOffsetsByTimestamp, startingOffsetsByTimestampStrategy), maxRecordsPerPartition
and minOffsetsPerTrigger / maxTriggerDelay, against Spark's documented behaviour."""
from __future__ import annotations

import pytest

from kgroup.client.sync import KafkaProducer
from kgroup.spark.options import parse_options

from .helpers import create_topic

N = 100  # record i: partition i % 2, timestamp 1000 * i


@pytest.fixture(scope="module")
def ts_topic(spark_broker):
    name = "ts-options"
    create_topic(spark_broker.bootstrap, name, 2)
    with KafkaProducer(bootstrap_servers=spark_broker.bootstrap) as p:
        for i in range(N):
            p.send(name, b"%d" % i, partition=i % 2, timestamp_ms=1000 * i)
        p.flush()
    return name


def read(spark, bootstrap, topic, **options):
    r = spark.read.format("kgroup").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def values(df) -> list[int]:
    return sorted(int(bytes(r["value"])) for r in df.select("value").collect())


def test_starting_and_ending_timestamp(spark, spark_broker, ts_topic):
    b = spark_broker.bootstrap
    # the first offset whose timestamp is >= the given one; the ending offset is exclusive
    assert values(read(spark, b, ts_topic, startingTimestamp="50000")) == list(range(50, N))
    assert values(read(spark, b, ts_topic, endingTimestamp="20000")) == list(range(20))
    assert values(read(spark, b, ts_topic, startingTimestamp="10500", endingTimestamp="13000")) == [11, 12]
    # nothing at or after the ending timestamp: up to the latest offset
    assert values(read(spark, b, ts_topic, startingTimestamp="95000", endingTimestamp="999999")) == \
        list(range(95, N))
    # startingTimestamp wins over startingOffsets (Spark's order of preference)
    assert values(read(spark, b, ts_topic, startingOffsets="earliest", startingTimestamp="98000")) == [98, 99]


def test_offsets_by_timestamp_per_partition(spark, spark_broker, ts_topic):
    b = spark_broker.bootstrap
    df = read(spark, b, ts_topic, startingOffsetsByTimestamp=f'{{"{ts_topic}": {{"0": 90000, "1": 0}}}}',
              endingOffsetsByTimestamp=f'{{"{ts_topic}": {{"0": 94000, "1": 6000}}}}')
    assert values(df) == [1, 3, 5, 90, 92]
    with pytest.raises(Exception, match="Partitions specified for Kafka timestamp based start offsets don't match"):
        read(spark, b, ts_topic, startingOffsetsByTimestamp=f'{{"{ts_topic}": {{"0": 1}}}}').collect()


def test_no_offset_for_starting_timestamp_strategy(spark, spark_broker, ts_topic):
    b = spark_broker.bootstrap
    with pytest.raises(Exception, match="No offset matched from request of topic-partition"):
        read(spark, b, ts_topic, startingTimestamp="10000000").collect()
    df = read(spark, b, ts_topic, startingTimestamp="10000000", startingOffsetsByTimestampStrategy="latest")
    assert values(df) == []


def test_max_records_per_partition(spark, spark_broker, ts_topic):
    df = read(spark, spark_broker.bootstrap, ts_topic, maxRecordsPerPartition="10")
    assert df.rdd.getNumPartitions() == 10  # 50 records per Kafka partition, 5 pieces each
    assert values(df) == list(range(N))
    df = read(spark, spark_broker.bootstrap, ts_topic, maxRecordsPerPartition="30", minPartitions="8")
    assert df.rdd.getNumPartitions() >= 8 and values(df) == list(range(N))


def test_min_offsets_per_trigger_waits_for_records_or_max_delay(monkeypatch):
    """Spark's delayBatch: the first trigger fires; later ones wait until minOffsetsPerTrigger records
    are new, or maxTriggerDelay passed since the last batch."""
    from kgroup.spark import source
    opts = parse_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "minOffsetsPerTrigger": "100",
                          "maxTriggerDelay": "10s"})
    reader = source.KgroupStreamReader(opts, source.kafka_schema())
    now = [1_000_000.0]
    monkeypatch.setattr(source.time, "time", lambda: now[0])
    assert not reader._delay_batch(5, 100)  # first trigger: the delay since "never" has passed
    now[0] += 1
    assert reader._delay_batch(99, 100)
    assert not reader._delay_batch(100, 100)
    now[0] += 9.9
    assert reader._delay_batch(1, 100)
    now[0] += 0.2  # 10.1 s after the last batch
    assert not reader._delay_batch(1, 100)
