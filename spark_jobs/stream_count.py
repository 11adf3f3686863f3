"""Streaming count of records per key from a Kafka topic (``kgroup`` source) to the console sink,
showing the query's consumer group on the broker as it goes.

    python spark_jobs/stream_count.py --bootstrap-server 127.0.0.1:9092 --topic orders --group counts
    spark-submit --master 'local[2]' spark_jobs/stream_count.py --bootstrap-server ... --topic ... --group ...

Each completed micro-batch's offsets are committed to ``--group``; every ``--describe-every``
seconds the job prints ``kgroup groups --describe --group <group>`` (position, log end, lag).
``--group-mode coordinated`` joins the group as a member, so several copies of this job share the
topic's partitions. Runs until Ctrl-C, for ``--run-seconds``, or (``--available-now``) until it
has counted what the topic held at start.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def describe(bootstrap: str, group: str) -> None:
    from kgroup.client.cli import main_groups
    print(f"--- group {group} on the broker ---", flush=True)
    main_groups(["--bootstrap-server", bootstrap, "--describe", "--group", group])
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", default="kgroup-stream-count")
    ap.add_argument("--group-mode", choices=("standalone", "coordinated"), default="standalone")
    ap.add_argument("--assignor", choices=("range", "roundrobin", "sticky"), default=None)
    ap.add_argument("--checkpoint", default=None, help="checkpoint directory (default: a new temporary one)")
    ap.add_argument("--starting-offsets", default="earliest")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=None)
    ap.add_argument("--trigger-seconds", type=float, default=1.0)
    ap.add_argument("--available-now", action="store_true", help="count what is there now, then stop")
    ap.add_argument("--run-seconds", type=float, default=0, help="stop after this long (0: run until Ctrl-C)")
    ap.add_argument("--describe-every", type=float, default=5.0)
    ap.add_argument("--master", default=None, help="Spark master when run with python (default local[2])")
    args = ap.parse_args(argv)

    from kgroup.spark import session
    spark = session("kgroup-stream-count", args.master, **{"spark.sql.shuffle.partitions": "2"})
    checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="kgroup-stream-count-")
    reader = (spark.readStream.format("kgroup").option("kafka.bootstrap.servers", args.bootstrap_server)
              .option("subscribe", args.topic).option("startingOffsets", args.starting_offsets)
              .option("kafka.group.id", args.group).option("groupMode", args.group_mode))
    if args.assignor:
        reader = reader.option("assignor", args.assignor)
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    counts = reader.load().selectExpr("CAST(key AS STRING) AS key").groupBy("key").count().orderBy("key")
    writer = (counts.writeStream.queryName("kgroup_stream_count").outputMode("complete").format("console")
              .option("truncate", "false").option("numRows", "50").option("checkpointLocation", checkpoint))
    writer = writer.trigger(availableNow=True) if args.available_now \
        else writer.trigger(processingTime=f"{int(args.trigger_seconds * 1000)} milliseconds")
    query = writer.start()
    print(f"counting keys of {args.topic} as group {args.group} ({args.group_mode}); checkpoint {checkpoint}",
          flush=True)
    deadline = time.monotonic() + args.run_seconds if args.run_seconds else None
    try:
        while query.isActive:
            wait = args.describe_every
            if deadline is not None:
                wait = min(wait, max(0.0, deadline - time.monotonic()))
            if query.awaitTermination(wait):
                break
            progress = query.lastProgress
            if progress:
                print(f"batch {progress['batchId']}: {progress['numInputRows']} records", flush=True)
            describe(args.bootstrap_server, args.group)
            if deadline is not None and time.monotonic() >= deadline:
                break
    except KeyboardInterrupt:
        pass
    finally:
        query.stop()
    if query.exception():
        print(f"query failed: {query.exception()}", file=sys.stderr)
        return 1
    describe(args.bootstrap_server, args.group)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sys.exit(main())
