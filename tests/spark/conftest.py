"""Fixtures for the Spark data source tests: one kgroup broker and one SparkSession (local[2]) for
the whole session, so the JVM and the Python workers start once.

Needs pyspark[sql] 4.x (pyarrow, pandas), matplotlib and a Java 17+ runtime (``java`` on PATH or
JAVA_HOME): the suite fails loudly rather than skipping without them.
"""
from __future__ import annotations

import os
import sys
import uuid

import pytest

from tests.harness import BrokerProcess

# Spark's Python workers must run this interpreter (the venv with kgroup and pyarrow); the fault
# directory arms kgroup.spark.fetch's test hook (a range fails once when a marker file names it).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("spark-broker") / "data",
                      overrides=["group.initial.rebalance.delay.ms=0", "num.partitions=6"]).start()
    yield b
    b.stop()


@pytest.fixture(scope="session")
def fault_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("spark-faults")


@pytest.fixture(scope="session")
def spark(fault_dir):
    from kgroup.spark.fetch import FAULT_DIR_ENV
    os.environ[FAULT_DIR_ENV] = str(fault_dir)  # inherited by the JVM and its Python workers
    from pyspark.sql import SparkSession

    from kgroup.spark import register
    session = (SparkSession.builder.master("local[2,3]")  # 2 threads; a failed task is retried (3 attempts)
               .appName("kgroup-spark-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.sql.streaming.stopTimeout", "30s")
               .config("spark.driver.memory", "1g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
    os.environ.pop(FAULT_DIR_ENV, None)


@pytest.fixture
def topic_name():
    return f"t-{uuid.uuid4().hex[:10]}"
