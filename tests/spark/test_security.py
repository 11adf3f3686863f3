"""The source and the sink over an authenticated, encrypted listener: Spark's ``kafka.``-prefixed
security settings (``kafka.security.protocol``, ``kafka.sasl.*``, ``kafka.ssl.*``) reach the
driver's admin client, the executors' consumers and the writers' producers."""
from __future__ import annotations

import pytest


def _with(builder, options: dict):
    for k, v in options.items():
        builder = builder.option(k, v)
    return builder


@pytest.mark.parametrize("listener,user,mechanism", [("SASL_SSL", "alice", "SCRAM-SHA-256"), ("SSL", None, None)])
def test_write_and_read_back_over_a_secure_listener(spark, kafka_broker_secure, topic_name, listener, user,
                                                    mechanism):
    broker = kafka_broker_secure
    broker.create_topic(topic_name, partitions=2)
    if mechanism:
        cfg = broker.security_config(listener, user, mechanism)
    else:
        cfg = broker.security_config(listener)
    options = {"kafka." + k: v for k, v in cfg.items()}
    rows = [(f"k{i}", f"v{i}") for i in range(40)]
    df = spark.createDataFrame(rows, "key string, value string")
    _with(df.write.format("kgroup").mode("append").option("topic", topic_name), options).save()
    read = _with(spark.read.format("kgroup").option("subscribe", topic_name), options).load()
    got = read.selectExpr("CAST(key AS STRING) AS k", "CAST(value AS STRING) AS v").collect()
    assert sorted((r.k, r.v) for r in got) == sorted(rows)
    # the same listener without its settings is refused: the settings above are what made it work
    plain = {"kafka.bootstrap.servers": cfg["bootstrap.servers"], "kafka.request.timeout.ms": "3000",
             "kafka.default.api.timeout.ms": "3000"}
    with pytest.raises(Exception, match=r"Kafka(Connection|Timeout)Error|no broker available|timed out"):
        _with(spark.read.format("kgroup").option("subscribe", topic_name), plain).load().count()
