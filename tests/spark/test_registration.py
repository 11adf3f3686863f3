"""The source registers itself: a new Spark application reads ``format("kgroup")`` without calling
``kgroup.spark.register`` (PySpark 4 looks up installed top-level ``pyspark_*`` modules exposing a
``DefaultSource``; ours is ``pyspark_kgroup``). Run in a process of its own: the shared session
of the other Spark tests registered the source explicitly, and the lookup runs once per JVM."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from .helpers import create_topic, produce

APPLICATION = r"""
import json, os, sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").appName("kgroup-no-register")
         .config("spark.ui.enabled", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
rows = (spark.read.format("kgroup")
        .option("kafka.bootstrap.servers", sys.argv[1]).option("subscribe", sys.argv[2])
        .load().select("partition", "offset", "key", "value").collect())
print("ROWS " + json.dumps(sorted([r.partition, r.offset, bytes(r.key).decode(), bytes(r.value).decode()]
                                   for r in rows)))
spark.stop()
"""


def test_a_new_application_reads_format_kgroup_without_registering_it(spark_broker, topic_name):
    create_topic(spark_broker.bootstrap, topic_name, 2)
    produced = produce(spark_broker.bootstrap, topic_name, 0, 20)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    out = subprocess.run([sys.executable, "-c", APPLICATION, spark_broker.bootstrap, topic_name],
                         capture_output=True, text=True, timeout=300, env=env)
    lines = [line for line in out.stdout.splitlines() if line.startswith("ROWS ")]
    assert out.returncode == 0 and lines, out.stderr[-3000:]
    read = {(p, o): (k.encode(), v.encode()) for p, o, k, v in json.loads(lines[0][5:])}
    assert read == produced
