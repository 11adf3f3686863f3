"""DescribeLogDirs (35) on one node: the log directory, each partition's size (what its segments
hold on disk), offset lag 0, no future logs, the volume's total and usable bytes from v4; asked
partitions only, or all with null; over the wire at v1 and v5 and through our Admin."""
import asyncio
import os

from confluent_kafka import Producer

from kgroup.client.admin import Admin
from kgroup.client.assignors import TopicPartition
from kgroup.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from tests.harness import RawClient

T = DescribeLogDirsRequest.DescribableLogDirTopic


def _produce(broker, topic, n):
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=b"v%05d" % i, partition=i % 2)
    assert p.flush(30) == 0


def test_wire_v1_and_v5(kafka_broker):
    kafka_broker.create_topic("dirs", partitions=2)
    kafka_broker.create_topic("other", partitions=1)
    _produce(kafka_broker, "dirs", 50)
    log_dir = os.path.abspath(kafka_broker.data_dir)
    c = RawClient(kafka_broker.port)
    try:
        v5 = c.request(DescribeLogDirsRequest(topics=[T(topic="dirs", partitions=[0, 1, 7]), T(topic="nope", partitions=[0])]), 5)
        assert v5.error_code == 0 and len(v5.results) == 1
        r = v5.results[0]
        assert (r.error_code, r.log_dir, r.is_cordoned) == (0, log_dir, False)
        st = os.statvfs(log_dir)
        assert r.total_bytes == st.f_blocks * st.f_frsize and 0 < r.usable_bytes <= r.total_bytes
        assert [t.name for t in r.topics] == ["dirs"]       # only what was asked and exists
        parts = {p.partition_index: p for p in r.topics[0].partitions}
        assert sorted(parts) == [0, 1]
        for i, p in parts.items():
            on_disk = sum(os.path.getsize(os.path.join(log_dir, f"dirs-{i}", f))
                          for f in os.listdir(os.path.join(log_dir, f"dirs-{i}")) if f.endswith(".log"))
            assert p.partition_size == on_disk > 0
            assert (p.offset_lag, p.is_future_key) == (0, False)
        v1 = c.request(DescribeLogDirsRequest(topics=None), 1)      # null: every partition
        assert len(v1.results) == 1 and v1.results[0].log_dir == log_dir
        assert v1.results[0].total_bytes == -1      # not in v1: the default
        got = {(t.name, p.partition_index) for t in v1.results[0].topics for p in t.partitions}
        assert {("dirs", 0), ("dirs", 1), ("other", 0)} <= got
        empty = c.request(DescribeLogDirsRequest(topics=[]), 3)      # none asked: the directory alone
        assert empty.results[0].topics == [] and empty.results[0].log_dir == log_dir
    finally:
        c.sock.close()


def test_admin_describe_log_dirs(kafka_broker):
    kafka_broker.create_topic("dirs-admin", partitions=2)
    _produce(kafka_broker, "dirs-admin", 20)

    async def run():
        async with Admin(bootstrap_servers=kafka_broker.bootstrap_servers) as a:
            return (await a.describe_log_dirs(),
                    await a.describe_log_dirs([1], [TopicPartition("dirs-admin", 1)]))
    every, one = asyncio.run(run())
    assert list(every) == [1] and list(one) == [1]
    (log_dir, d), = one[1].items()
    assert log_dir == os.path.abspath(kafka_broker.data_dir) and d.error is None
    assert list(d.replica_infos) == [TopicPartition("dirs-admin", 1)]
    info = d.replica_infos[TopicPartition("dirs-admin", 1)]
    assert info.size > 0 and info.offset_lag == 0 and info.is_future is False
    assert d.total_bytes >= d.usable_bytes > 0
    assert TopicPartition("dirs-admin", 0) in every[1][log_dir].replica_infos
