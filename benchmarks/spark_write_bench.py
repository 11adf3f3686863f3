"""Write throughput of the ``kgroup`` Spark sink, next to one confluent-kafka (librdkafka) producer
writing the same records to the same broker.

Workload: --records records (default 1M; 16-byte keys, 100-byte values, no compression) to a
6-partition topic of a kgroup broker started for the run (or --bootstrap-server); both writers
use idempotence (acks=all), linger.ms 20 and batch.size 1 MB, and the topic is recreated before
each run:

- spark: ``df.write.format("kgroup")`` on local[2] of a DataFrame of the records, built and cached
  in Spark before the clock starts (two partitions, so two writer tasks; each produces its Arrow
  batches through ``Producer.send_columns``: bulk partitioning and batch encoding), best of
  --repeat;
- confluent-kafka: one ``confluent_kafka.Producer`` in this process, ``produce()`` per record (the
  keys and values built before the clock starts), then ``flush()``, best of --repeat.

Usage: .venv/bin/python benchmarks/spark_write_bench.py [--records 1000000] [--repeat 2]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from kgroup.client.admin import NewTopic  # noqa: E402
from kgroup.client.assignors import TopicPartition  # noqa: E402
from kgroup.client.sync import KafkaAdmin  # noqa: E402

TOPIC = "spark-write-bench"
PARTITIONS = 6
KEY, VALUE = 16, 100
MB = 1e6
BATCH_SIZE = 1024 * 1024
LINGER_MS = 20


def recreate(bootstrap: str) -> None:
    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        admin.delete_topics([TOPIC])
        deadline = time.monotonic() + 30
        while True:
            time.sleep(0.5)
            err = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC]
            if err is None:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"cannot recreate {TOPIC}: {err}")


def written(bootstrap: str) -> int:
    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        return sum(v[0] for v in admin.list_offsets({tp: -1 for tp in tps}).values())


def spark_write(df, bootstrap: str) -> None:
    (df.write.format("kgroup").mode("append").option("kafka.bootstrap.servers", bootstrap).option("topic", TOPIC)
     .option("kafka.linger.ms", str(LINGER_MS)).option("kafka.batch.size", str(BATCH_SIZE)).save())


def confluent_write(bootstrap: str, keys: list, value: bytes) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": LINGER_MS,
                  "batch.size": BATCH_SIZE, "queue.buffering.max.messages": 2_000_000})
    produce, poll = p.produce, p.poll
    for i, key in enumerate(keys):
        try:
            produce(TOPIC, value, key)
        except BufferError:
            p.flush()
            produce(TOPIC, value, key)
        if i % 10000 == 0:
            poll(0)
    p.flush()


def timed(bootstrap: str, label: str, fn, repeat: int, expected: int) -> float:
    times = []
    for _ in range(repeat):
        recreate(bootstrap)
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        n = written(bootstrap)
        assert n == expected, f"{label} wrote {n} records, expected {expected}"
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--bootstrap-server", default=None, help="use this broker instead of starting one")
    args = ap.parse_args()

    broker = None
    bootstrap = args.bootstrap_server
    if bootstrap is None:
        from tests.harness import BrokerProcess
        broker = BrokerProcess(os.path.join(tempfile.mkdtemp(prefix="spark-write-bench-"), "data")).start()
        bootstrap = broker.bootstrap
    try:
        from kgroup.spark import session
        spark = session("kgroup-spark-write-bench", "local[2]", **{"spark.ui.enabled": "false",
                                                                   "spark.ui.showConsoleProgress": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        df = spark.range(args.records, numPartitions=2).selectExpr(
            f"CAST(lpad(CAST(id AS STRING), {KEY}, '0') AS BINARY) AS key",
            f"CAST(repeat('v', {VALUE}) AS BINARY) AS value").cache()
        assert df.count() == args.records
        recreate(bootstrap)
        warm = spark.range(20000, numPartitions=2).selectExpr("CAST(CAST(id AS STRING) AS BINARY) AS key",
                                                              "CAST('v' AS BINARY) AS value")
        spark_write(warm, bootstrap)  # warm-up: both Python workers started, their imports done
        spark_s = timed(bootstrap, "spark", lambda: spark_write(df, bootstrap), args.repeat, args.records)
        spark.stop()
        keys = [b"%016d" % i for i in range(args.records)]
        confluent_s = timed(bootstrap, "confluent", lambda: confluent_write(bootstrap, keys, b"v" * VALUE),
                            args.repeat, args.records)
        size = args.records * (KEY + VALUE)
        print(f"\n{'writer':<52} {'seconds':>8} {'records/s':>12} {'MB/s':>8}")
        for label, secs in (("df.write.format('kgroup'), local[2], 2 tasks", spark_s),
                            ("one confluent-kafka Producer (librdkafka), one process", confluent_s)):
            print(f"{label:<52} {secs:8.2f} {args.records / secs:12,.0f} {size / secs / MB:8.1f}")
        print(f"\nspark / confluent-kafka: {confluent_s / spark_s:.2f}x ({args.records:,} records, "
              f"{size / MB:.0f} MB of keys+values, best of {args.repeat})")
    finally:
        if broker is not None:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
