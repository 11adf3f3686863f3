"""The executor's reader (``kgroup.spark.fetch.read_range``) on its own, without Spark: exactly
the records of a range, read on the calling thread (no client thread), decoding no batch past the
range's end, and the Python worker's long-lived heap frozen (PySpark's daemon collects garbage
after every task)."""
from __future__ import annotations

import gc
import threading

from kgroup.spark import fetch
from kgroup.spark.fetch import FetchSettings, read_range
from kgroup.spark.offsets import OffsetRange

from .helpers import create_topic, produce


def _schema():
    from pyspark.sql.pandas.types import to_arrow_schema

    from kgroup.spark.source import kafka_schema
    return to_arrow_schema(kafka_schema(False), timezone="UTC")


def test_range_read_on_the_calling_thread(spark_broker, topic_name, monkeypatch):
    bootstrap = spark_broker.bootstrap
    create_topic(bootstrap, topic_name, 1)
    sent = {}
    for start in range(0, 3000, 1000):  # three producer batches at least
        sent.update(produce(bootstrap, topic_name, start, 1000))
    decoded = []
    real_decode = fetch.Consumer.poll_batch

    async def counting_poll_batch(self, timeout_ms=0, max_records=None, headers=False):
        polled = await real_decode(self, timeout_ms, max_records, headers)
        decoded.extend(len(cols) for cols in polled.values())
        return polled
    monkeypatch.setattr(fetch.Consumer, "poll_batch", counting_poll_batch)
    monkeypatch.setattr(fetch, "_heap_frozen", False)
    threads = threading.active_count()
    rows = []
    for batch in read_range(OffsetRange(topic_name, 0, 100, 140), FetchSettings(bootstrap), _schema()):
        assert threading.active_count() == threads  # no event-loop thread beside the task's
        rows += zip(batch.column("offset").to_pylist(), batch.column("key").to_pylist(),
                    batch.column("value").to_pylist())
    assert rows == [(o, *sent[(0, o)]) for o in range(100, 140)]
    # of the fetched batches only those holding the range are decoded, not the 2000 records after
    assert sum(decoded) <= 1000 - 100
    assert fetch._heap_frozen and gc.get_freeze_count() > 0
    gc.unfreeze()
