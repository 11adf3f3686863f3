"""Makes ``spark.read.format("kgroup")`` work with no ``register(spark)`` call.

PySpark 4 looks for installed top-level modules named ``pyspark_*`` that expose a
``DefaultSource`` (a DataSource subclass) the first time a session uses a Python data source,
and registers each under its ``name()``. This is that module for kgroup's source.
"""
from kgroup.spark.source import KgroupDataSource as DefaultSource

__all__ = ["DefaultSource"]
