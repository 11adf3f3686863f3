"""Batch-read throughput of the ``kgroup`` Spark data source, next to one confluent-kafka
(librdkafka) consumer and one kgroup consumer draining the same topic from the same broker.

Workload: --records records (default 1M; 16-byte keys, 100-byte values, no compression) on a
6-partition topic of a kgroup broker started for the run (or --bootstrap-server), then

- spark: ``spark.read.format("kgroup")`` of the whole topic on local[2] (one task per partition,
  two at a time; executors fetch with the kgroup consumer's ``poll_batch``, which decodes whole
  record batches into Arrow columns, and hand them to the JVM), forced with ``count(*),
  sum(length(key)), sum(length(value))`` so every record crosses into Spark; after one warm-up
  read (Python workers started), best of --repeat;
- confluent-kafka: one ``confluent_kafka.Consumer`` in this process (assign all partitions at the
  beginning, ``consume(10000)`` until the end offsets, summing key and value lengths), best of
  --repeat;
- kgroup consumer: one ``kgroup.client.sync.KafkaConsumer`` in this process, ``poll_batch`` (bulk
  decoding, lengths summed from the Arrow columns), best of --repeat.

MB/s counts key+value bytes. All numbers come from the same run on the same (shared 2-core)
machine; the load average is printed before and after, and next to each reader's best time the
CPU seconds of that run (Linux ``/proc``): for Spark the JVM plus its Python workers (and the
planning workers), for the consumers this process; the broker's CPU separately. CPU seconds
depend less on other work on the machine than wall time does.
Usage: .venv/bin/python benchmarks/spark_read_bench.py [--records 1000000] [--repeat 2]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from kgroup.client.admin import NewTopic  # noqa: E402
from kgroup.client.assignors import TopicPartition  # noqa: E402
from kgroup.client.producer import Producer  # noqa: E402
from kgroup.client.sync import KafkaAdmin, KafkaConsumer  # noqa: E402
from kgroup.spark.fetch import DEFAULT_MAX_POLL_RECORDS  # noqa: E402

TOPIC = "spark-bench"
PARTITIONS = 6
KEY, VALUE = 16, 100
MB = 1e6


async def produce(bootstrap: str, n: int) -> None:
    """The topic's records, written in bulk (Producer.send_columns: 512 KB batches per partition)."""
    import pyarrow as pa
    async with Producer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=512 * 1024, acks="1",
                        enable_idempotence=False) as producer:
        step = 100_000
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            keys = pa.array([b"%016d" % i for i in range(lo, hi)], pa.binary())
            futures = await producer.send_columns(TOPIC, pa.array([b"v" * VALUE] * (hi - lo), pa.binary()), keys)
            await asyncio.gather(*futures)


def spark_read(spark, bootstrap: str) -> tuple[int, int]:
    df = spark.read.format("kgroup").option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC).load()
    row = df.selectExpr("count(*) AS n", "sum(length(key)) + sum(length(value)) AS bytes").collect()[0]
    return row["n"], row["bytes"]


def consumer_read(bootstrap: str, ends: dict) -> tuple[int, int]:
    import pyarrow.compute as pc
    n = size = 0
    with KafkaConsumer(bootstrap_servers=bootstrap, max_poll_records=DEFAULT_MAX_POLL_RECORDS,
                       auto_offset_reset="earliest") as consumer:
        tps = list(ends)
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        remaining = {tp for tp, end in ends.items() if end > 0}
        while remaining:
            for cols in consumer.poll_batch(1000).values():
                n += len(cols)
                size += pc.sum(pc.binary_length(cols.keys())).as_py() + pc.sum(pc.binary_length(cols.values())).as_py()
            remaining = {tp for tp in remaining if consumer.position(tp) < ends[tp]}
    return n, size


def confluent_read(bootstrap: str, ends: dict) -> tuple[int, int]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as CTP
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-read-bench", "enable.auto.commit": False,
                         "enable.partition.eof": False})
    try:
        consumer.assign([CTP(tp.topic, tp.partition, OFFSET_BEGINNING) for tp in ends])
        total = sum(ends.values())
        n = size = 0
        while n < total:
            for m in consumer.consume(10000, 1.0):
                if m.error():
                    raise RuntimeError(m.error())
                n += 1
                size += len(m.key()) + len(m.value())
    finally:
        consumer.close()
    return n, size


def _proc_cpu(pid: int, children: bool = True) -> float:
    """CPU seconds of ``pid`` (and, with ``children``, of its reaped children) from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = sum(int(x) for x in fields[11:15 if children else 13])
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and every live descendant (Spark's JVM, its Python daemons and workers)."""
    return _proc_cpu(root, False) + python_cpu(root)


def python_cpu(root: int) -> float:
    """CPU seconds of the live descendants of ``root`` (Spark's Python daemons and workers)."""
    parents: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            parents.setdefault(ppid, []).append(int(d))
    total, todo = 0.0, list(parents.get(root, []))
    while todo:
        pid = todo.pop()
        total += _proc_cpu(pid)
        todo += parents.get(pid, [])
    return total


def best(label: str, fn, repeat: int, expected: int, cpu=None, broker_pid: int | None = None):
    """Best wall time of ``repeat`` runs, the bytes read, and that run's CPU seconds (``cpu()``
    before and after) and the broker's."""
    runs = []
    size = 0
    for _ in range(repeat):
        c0 = cpu() if cpu else 0.0
        b0 = _proc_cpu(broker_pid, False) if broker_pid else 0.0
        t0 = time.perf_counter()
        n, size = fn()
        runs.append((time.perf_counter() - t0, (cpu() - c0) if cpu else 0.0,
                     (_proc_cpu(broker_pid, False) - b0) if broker_pid else 0.0))
        assert n == expected, f"{label} read {n} records, expected {expected}"
    secs, used, broker_used = min(runs)
    return secs, size, used, broker_used


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1, help="Spark reads before the measured ones")
    ap.add_argument("--bootstrap-server", default=None, help="use this broker instead of starting one")
    args = ap.parse_args()

    load_before = os.getloadavg()
    broker = None
    bootstrap = args.bootstrap_server
    if bootstrap is None:
        from tests.harness import BrokerProcess
        broker = BrokerProcess(os.path.join(tempfile.mkdtemp(prefix="spark-bench-"), "data")).start()
        bootstrap = broker.bootstrap
    try:
        with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
            admin.delete_topics([TOPIC])
            time.sleep(0.5)
            err = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC]
            assert err is None, err
            t0 = time.perf_counter()
            asyncio.run(produce(bootstrap, args.records))
            print(f"produced {args.records:,} records to {PARTITIONS} partitions in {time.perf_counter() - t0:.1f}s")
            tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
            ends = {tp: v[0] for tp, v in admin.list_offsets({tp: -1 for tp in tps}).items()}
        assert sum(ends.values()) == args.records

        from kgroup.spark import session
        spark = session("kgroup-spark-read-bench", "local[2]", **{"spark.ui.enabled": "false",
                                                                  "spark.ui.showConsoleProgress": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        for _ in range(args.warmup):  # warm-up: JVM code paths and Python workers
            spark_read(spark, bootstrap)
        jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        broker_pid = broker.proc.pid if broker is not None else None
        own = time.process_time
        spark_s, spark_bytes, spark_cpu, spark_broker = best(
            "spark", lambda: spark_read(spark, bootstrap), args.repeat, args.records, lambda: tree_cpu(jvm), broker_pid)
        _, _, spark_python_cpu, _ = best("spark", lambda: spark_read(spark, bootstrap), 1, args.records,
                                         lambda: python_cpu(jvm))
        spark.stop()
        confluent_s, confluent_bytes, confluent_cpu, confluent_broker = best(
            "confluent", lambda: confluent_read(bootstrap, ends), args.repeat, args.records, own, broker_pid)
        consumer_s, consumer_bytes, consumer_cpu, consumer_broker = best(
            "consumer", lambda: consumer_read(bootstrap, ends), args.repeat, args.records, own, broker_pid)

        print(f"\n{'reader':<52} {'seconds':>8} {'records/s':>12} {'MB/s':>8} {'CPU s':>6} {'broker':>6}")
        for label, secs, size, used, broker_used in (
                (f"spark.read.format('kgroup'), local[2], {PARTITIONS} tasks", spark_s, spark_bytes, spark_cpu,
                 spark_broker),
                ("one confluent-kafka Consumer (librdkafka), one process", confluent_s, confluent_bytes,
                 confluent_cpu, confluent_broker),
                ("one kgroup KafkaConsumer.poll_batch, one process", consumer_s, consumer_bytes, consumer_cpu,
                 consumer_broker)):
            print(f"{label:<52} {secs:8.2f} {args.records / secs:12,.0f} {size / secs / MB:8.1f} {used:6.2f} "
                  f"{broker_used:6.2f}")
        print(f"\nspark's Python workers (one more read): {spark_python_cpu:.2f} CPU s of the {spark_cpu:.2f}")
        print(f"spark / confluent-kafka: {confluent_s / spark_s:.2f}x, kgroup consumer / confluent-kafka: "
              f"{confluent_s / consumer_s:.2f}x ({args.records:,} records, {spark_bytes / MB:.0f} MB of keys+values, "
              f"best of {args.repeat})")
        print("load average before {:.2f} {:.2f} {:.2f}, after {:.2f} {:.2f} {:.2f}".format(*load_before,
                                                                                         *os.getloadavg()))
    finally:
        if broker is not None:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
