"""Batch-read a Kafka topic through the ``kgroup`` data source, write it as Parquet, verify the count.

    python spark_jobs/consume_to_parquet.py --bootstrap-server 127.0.0.1:9092 --topic orders --output /tmp/orders
    spark-submit --master 'local[2]' spark_jobs/consume_to_parquet.py --bootstrap-server ... --topic ... --output ...

The offsets are pinned before reading (earliest and latest of every partition, as JSON
``startingOffsets`` / ``endingOffsets``), so the read is deterministic: the Parquet row count must
equal the number of offsets in those ranges. A topic with offset gaps (compaction, transaction
markers) is checked against a second read of the same ranges instead. Exit status 1 on mismatch.
"""
from __future__ import annotations

import argparse
import json
import sys


def pinned_offsets(bootstrap: str, topic: str) -> tuple[dict, dict]:
    from kgroup.client.admin import EARLIEST, LATEST
    from kgroup.client.sync import KafkaAdmin
    with KafkaAdmin(bootstrap_servers=bootstrap, client_id="consume-to-parquet") as admin:
        info = admin.describe_topics([topic]).get(topic)
        if info is None or isinstance(info, Exception):
            raise SystemExit(f"topic {topic!r} does not exist ({info})")
        tps = [(topic, p) for p in sorted(info.partitions)]
        first = admin.list_offsets({tp: EARLIEST for tp in tps})
        last = admin.list_offsets({tp: LATEST for tp in tps})
    return ({str(p): first[(t, p)][0] for t, p in tps}, {str(p): last[(t, p)][0] for t, p in tps})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--output", required=True, help="Parquet directory (overwritten)")
    ap.add_argument("--min-partitions", type=int, default=None, help="split large offset ranges (Spark option)")
    ap.add_argument("--include-headers", action="store_true")
    ap.add_argument("--master", default=None, help="Spark master when run with python (default local[2])")
    args = ap.parse_args(argv)

    from kgroup.spark import session
    spark = session("kgroup-consume-to-parquet", args.master)
    start, end = pinned_offsets(args.bootstrap_server, args.topic)
    expected = sum(end[p] - start[p] for p in start)

    def source():
        reader = (spark.read.format("kgroup").option("kafka.bootstrap.servers", args.bootstrap_server)
                  .option("subscribe", args.topic)
                  .option("startingOffsets", json.dumps({args.topic: start}))
                  .option("endingOffsets", json.dumps({args.topic: end}))
                  .option("includeHeaders", str(args.include_headers).lower()))
        if args.min_partitions:
            reader = reader.option("minPartitions", str(args.min_partitions))
        return reader.load()

    df = source()
    print(f"reading {args.topic}: {len(start)} partitions, offsets {start} -> {end}, "
          f"{df.rdd.getNumPartitions()} Spark partitions")
    df.write.mode("overwrite").parquet(args.output)
    written = spark.read.parquet(args.output).count()
    if written == expected:
        print(f"wrote {written} records of {args.topic} to {args.output}: count verified ({expected} offsets)")
        return 0
    recount = source().count()
    if written == recount:
        print(f"wrote {written} records of {args.topic} to {args.output}: count verified against a second read "
              f"(the ranges span {expected} offsets: the topic has gaps from compaction or transaction markers)")
        return 0
    print(f"MISMATCH: wrote {written} records, the topic's ranges hold {recount} ({expected} offsets)",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
