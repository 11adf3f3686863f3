"""A whole pipeline on kgroup: read a topic, aggregate with a watermark, write the results back to
a topic exactly once, and report the consumer group's lag as it goes.

    python spark_jobs/pipeline.py --bootstrap-server 127.0.0.1:9092 --generate 20000 --available-now
    spark-submit --master 'local[2]' spark_jobs/pipeline.py --bootstrap-server 127.0.0.1:9092

Input (``--input``, default ``orders``): one record per order, key = customer id, value = JSON
``{"customer": "c3", "amount": 12.5}``, the record timestamp = the order's event time
(``--generate N`` first produces N such orders spread over the last ``--generate-minutes`` minutes).
The query computes, per customer and one-minute event-time window, the number of orders and their
total amount, with a ``--watermark`` (default 30 seconds) so each window is emitted once, when it
closes (append mode). Results go to ``--output`` (default ``order-totals``), key = customer, value =
JSON ``{"window_start", "window_end", "customer", "orders", "amount"}``, through the ``kgroup`` sink
with ``kafka.transactional.id.prefix``: read_committed readers see each window result exactly once,
even when the query is killed and restarted from its checkpoint (``--checkpoint``).

While it runs, every ``--report-every`` seconds it prints the last micro-batch's progress and the lag
of its consumer group (``--group``) on the input topic, as ``kgroup groups --describe`` computes it;
at the end it prints the results read back with read_committed.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time


def generate(bootstrap: str, topic: str, n: int, minutes: float, partitions: int) -> None:
    from kgroup.client.admin import NewTopic
    from kgroup.client.sync import KafkaAdmin, KafkaProducer
    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        if topic not in admin.list_topics():
            admin.create_topics([NewTopic(topic, partitions, 1)])
    now = int(time.time() * 1000)
    start = now - int(minutes * 60000)
    rng = random.Random(7)
    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20) as producer:
        for i in range(n):
            customer = f"c{rng.randrange(10)}"
            value = json.dumps({"customer": customer, "amount": round(rng.uniform(1, 100), 2)}).encode()
            producer.send(topic, value, customer.encode(), timestamp_ms=start + (now - start) * i // max(n, 1))
        producer.flush()
    print(f"produced {n} orders to {topic} (event times over the last {minutes} minutes)", flush=True)


def lag_report(bootstrap: str, group: str, topic: str) -> str:
    from kgroup.spark.lag import collect_lag
    rows = [r for r in collect_lag(bootstrap, [group]) if r.topic == topic]
    total = sum(r.lag or 0 for r in rows)
    parts = " ".join(f"p{r.partition}:{r.current_offset if r.current_offset is not None else '-'}"
                     f"/{r.log_end_offset}" for r in rows)
    return f"lag of group {group} on {topic}: {total} ({parts or 'no commits yet'})"


def read_results(bootstrap: str, topic: str) -> list[dict]:
    from kgroup.client.assignors import TopicPartition
    from kgroup.client.sync import KafkaAdmin, KafkaConsumer
    with KafkaAdmin(bootstrap_servers=bootstrap) as admin:
        if topic not in admin.list_topics():
            return []
        tps = [TopicPartition(topic, p) for p in admin.describe_topics([topic])[topic].partitions]
        ends = {tp: v[0] for tp, v in admin.list_offsets({tp: -1 for tp in tps},
                                                         isolation_level="read_committed").items()}
    out = []
    with KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed") as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            out.extend(json.loads(r.value) for r in consumer.poll(500))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--input", default="orders")
    ap.add_argument("--output", default="order-totals")
    ap.add_argument("--group", default="order-totals")
    ap.add_argument("--checkpoint", default=None, help="checkpoint directory (default: a new temporary one)")
    ap.add_argument("--watermark", default="30 seconds")
    ap.add_argument("--window", default="1 minute")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=5000)
    ap.add_argument("--generate", type=int, default=0, help="first produce this many orders to --input")
    ap.add_argument("--generate-minutes", type=float, default=5.0)
    ap.add_argument("--partitions", type=int, default=6, help="partitions of topics the job creates")
    ap.add_argument("--available-now", action="store_true", help="process what is there now, then stop")
    ap.add_argument("--at-least-once", action="store_true", help="write without transactions (Spark's default)")
    ap.add_argument("--run-seconds", type=float, default=0, help="stop after this long (0: until Ctrl-C)")
    ap.add_argument("--report-every", type=float, default=5.0)
    ap.add_argument("--master", default=None, help="Spark master when run with python (default local[2])")
    args = ap.parse_args(argv)

    if args.generate:
        generate(args.bootstrap_server, args.input, args.generate, args.generate_minutes, args.partitions)
    from kgroup.client.admin import NewTopic
    from kgroup.client.sync import KafkaAdmin
    with KafkaAdmin(bootstrap_servers=args.bootstrap_server) as admin:
        if args.output not in admin.list_topics():
            admin.create_topics([NewTopic(args.output, args.partitions, 1)])

    from pyspark.sql import functions as F

    from kgroup.spark import session
    spark = session("kgroup-pipeline", args.master, **{"spark.sql.shuffle.partitions": "2"})
    checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="kgroup-pipeline-")
    orders = (spark.readStream.format("kgroup").option("kafka.bootstrap.servers", args.bootstrap_server)
              .option("subscribe", args.input).option("startingOffsets", "earliest")
              .option("kafka.group.id", args.group)
              .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger)).load())
    parsed = orders.select(F.from_json(F.col("value").cast("string"), "customer string, amount double").alias("o"),
                           F.col("timestamp").alias("event_time")).select("o.*", "event_time")
    totals = (parsed.withWatermark("event_time", args.watermark)
              .groupBy(F.window("event_time", args.window), "customer")
              .agg(F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("amount")))
    out = totals.select(F.col("customer").alias("key"), F.to_json(F.struct(
        F.col("window.start").cast("string").alias("window_start"),
        F.col("window.end").cast("string").alias("window_end"), "customer", "orders", "amount")).alias("value"))
    writer = (out.writeStream.queryName("kgroup_pipeline").outputMode("append").format("kgroup")
              .option("kafka.bootstrap.servers", args.bootstrap_server).option("topic", args.output)
              .option("checkpointLocation", checkpoint))
    if not args.at_least_once:
        writer = writer.option("kafka.transactional.id.prefix", f"{args.group}-{args.output}")
    writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(processingTime="2 seconds")
    query = writer.start()
    print(f"{args.input} -> per-customer {args.window} totals (watermark {args.watermark}) -> {args.output}, "
          f"{'at least once' if args.at_least_once else 'exactly once'}; checkpoint {checkpoint}", flush=True)
    deadline = time.monotonic() + args.run_seconds if args.run_seconds else None
    try:
        while query.isActive:
            wait = args.report_every
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            if query.awaitTermination(wait):
                break
            p = query.lastProgress
            if p:
                print(f"batch {p['batchId']}: {p['numInputRows']} orders in, "
                      f"{p['sink'].get('numOutputRows', '?')} window results out", flush=True)
            print(lag_report(args.bootstrap_server, args.group, args.input), flush=True)
            if deadline is not None and time.monotonic() >= deadline:
                break
    except KeyboardInterrupt:
        pass
    finally:
        query.stop()
    if query.exception():
        print(f"query failed: {query.exception()}", file=sys.stderr)
        return 1
    print(lag_report(args.bootstrap_server, args.group, args.input), flush=True)
    results = read_results(args.bootstrap_server, args.output)
    windows = {(r["window_start"], r["customer"]) for r in results}
    print(f"{args.output} (read_committed): {len(results)} window results, {len(windows)} distinct "
          f"(window, customer), {sum(r['orders'] for r in results)} orders", flush=True)
    for r in sorted(results, key=lambda r: (r["window_start"], r["customer"]))[:12]:
        print(f"  {r['window_start']}  {r['customer']}  orders={r['orders']}  amount={r['amount']}")
    if len(windows) != len(results):
        print("duplicate window results found", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
