"""``kafka.isolation.level`` in the kgroup source, as in Spark's Kafka source: read_uncommitted by
default; with read_committed the driver plans up to the last stable offset (ListOffsets with
isolation_level=1, as Spark's KafkaOffsetReaderAdmin) and the executors' consumers drop aborted
transactions and markers. The partition holds an aborted, a committed and an open transaction
(see tests/client/test_read_committed_broker.py, which seeds it)."""
from __future__ import annotations

import pytest

from kgroup.client.admin import NewTopic
from kgroup.client.assignors import TopicPartition
from kgroup.client.sync import KafkaAdmin
from kgroup.spark.group import DriverClient
from kgroup.spark.options import parse_options
from tests.client.test_read_committed_broker import TOPIC, seed_transactions
from tests.harness import BrokerProcess

COMMITTED = [(0, b"plain-0"), (3, b"c-1"), (5, b"plain-1")]
EVERYTHING = [(0, b"plain-0"), (1, b"a-1"), (2, b"a-2"), (3, b"c-1"), (5, b"plain-1"), (7, b"open-1"),
              (8, b"plain-2")]


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("spark-txn-broker") / "data"
    broker = BrokerProcess(data).start()
    with KafkaAdmin(bootstrap_servers=broker.bootstrap) as admin:
        assert admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC] is None
    broker.stop()
    lso = seed_transactions(str(data / f"{TOPIC}-0"))
    broker = BrokerProcess(data).start()
    yield broker, lso
    broker.stop()


def read(spark, bootstrap, **extra):
    r = (spark.read.format("kgroup").option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC)
         .option("startingOffsets", "earliest"))
    for k, v in extra.items():
        r = r.option(k, v)
    rows = r.load().select("offset", "value").collect()
    return sorted((int(row["offset"]), bytes(row["value"])) for row in rows)


def test_driver_plans_up_to_the_lso_under_read_committed(txn_broker):
    broker, lso = txn_broker
    tp = TopicPartition(TOPIC, 0)
    for params, expected in (({}, 9), ({"kafka.isolation.level": "read_uncommitted"}, 9),
                             ({"kafka.isolation.level": "read_committed"}, lso)):
        driver = DriverClient(parse_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": TOPIC,
                                             **params}))
        try:
            assert driver.latest([tp]) == {tp: expected}, params
        finally:
            driver.close()


def test_batch_read_honours_kafka_isolation_level(spark, txn_broker):
    broker, _ = txn_broker
    assert read(spark, broker.bootstrap, **{"kafka.isolation.level": "read_committed"}) == COMMITTED
    # the default is the consumer's: read_uncommitted (aborted and open records, never a marker)
    assert read(spark, broker.bootstrap) == EVERYTHING
    assert read(spark, broker.bootstrap, **{"kafka.isolation.level": "read_uncommitted"}) == EVERYTHING


def test_invalid_isolation_level_is_an_option_error(txn_broker):
    from kgroup.spark.options import OptionError
    broker, _ = txn_broker
    with pytest.raises(OptionError, match="isolation.level"):
        parse_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": TOPIC,
                       "kafka.isolation.level": "serializable"})
