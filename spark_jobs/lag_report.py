"""Lag report: every consumer group's committed offsets against the log end offsets, as a Spark
DataFrame (group, topic, partition, current_offset, log_end_offset, lag, consumer_id, state),
printed, optionally saved as CSV, and drawn as a PNG bar chart of the total lag per group.

    python spark_jobs/lag_report.py --bootstrap-server 127.0.0.1:9092 --png lag.png
    spark-submit --master 'local[2]' spark_jobs/lag_report.py --bootstrap-server ... --png lag.png

The numbers are those of ``kgroup groups --bootstrap-server ... --describe --all-groups``.
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap-server", required=True)
    ap.add_argument("--group", action="append", default=None, help="only these groups (repeatable)")
    ap.add_argument("--png", default="lag.png", help="bar chart of the lag per group (default lag.png)")
    ap.add_argument("--csv", default=None, help="also write the rows as CSV to this directory")
    ap.add_argument("--master", default=None, help="Spark master when run with python (default local[2])")
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F

    from kgroup.spark import session
    from kgroup.spark.lag import collect_lag, lag_dataframe, plot_lag

    spark = session("kgroup-lag-report", args.master)
    rows = collect_lag(args.bootstrap_server, args.group)
    df = lag_dataframe(spark, rows).cache()
    print(f"lag of {len({r.group for r in rows})} consumer groups ({len(rows)} partitions):")
    df.orderBy("group", "topic", "partition").show(n=max(20, len(rows)), truncate=False)
    (df.groupBy("group").agg(F.sum("lag").alias("total_lag"), F.count("*").alias("partitions"))
       .orderBy("group").show(truncate=False))
    if args.csv:
        df.coalesce(1).write.mode("overwrite").option("header", True).csv(args.csv)
        print(f"rows written to {args.csv}")
    totals = plot_lag(rows, args.png)
    print(f"bar chart of the lag per group written to {args.png}: {totals}")
    df.unpersist()
    return 0


if __name__ == "__main__":
    sys.exit(main())
