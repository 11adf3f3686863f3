"""PySpark (4.x) data source for Kafka topics, read and written with kgroup's own client.

Usage (installing kgroup installs ``pyspark_kgroup``, which PySpark 4 finds and registers by
itself; ``register(spark)`` does the same explicitly)::

    df = (spark.read.format("kgroup")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "orders")
          .load())                        # key, value, topic, partition, offset, timestamp, timestampType

``spark.readStream.format("kgroup")`` streams with checkpointed offsets, committing each completed
micro-batch to the consumer group; ``groupMode=coordinated`` shares a topic between applications
through the group's assignment. ``df.write`` / ``df.writeStream.format("kgroup")`` is the sink
(:mod:`kgroup.spark.sink`), exactly-once with ``kafka.transactional.id.prefix``. Options, schema and semantics: ``docs/spark.md`` and
:mod:`kgroup.spark.source`. Needs ``pyspark[sql]>=4`` (pyarrow) -- the ``spark`` extra.

Imports are lazy, so :mod:`kgroup.spark.options` and :mod:`kgroup.spark.offsets` load without pyspark.
"""

_EXPORTS = {"KgroupDataSource": ".source", "kafka_schema": ".source", "OptionError": ".options",
            "parse_options": ".options"}

__all__ = sorted(_EXPORTS) + ["register", "session"]


def register(spark) -> None:
    """Register ``format("kgroup")`` with this SparkSession."""
    from .source import KgroupDataSource
    spark.dataSource.register(KgroupDataSource)


def session(app_name: str, master: str | None = None, **conf):
    """A SparkSession for the jobs: ``local[2]`` unless spark-submit (or ``master``) chose one,
    executors running this interpreter unless PYSPARK_PYTHON says otherwise, ``kgroup`` registered."""
    import os
    import sys
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not SparkConf().contains("spark.master"):
        builder = builder.master("local[2]")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(name)
    import importlib
    return getattr(importlib.import_module(module, __name__), name)
