"""Share group administration with a real share consumer: confluent-kafka 2.16.1's ShareConsumer
(librdkafka 2.16) consumes, our Admin describes, alters and deletes the group's offsets, and the
consumer that comes next sees the result; confluent-kafka's AdminClient (which has no share group
methods in 2.16.1) deletes share groups with DeleteGroups and sees one as Kafka shows it to
DescribeGroups. Also ``kgroup share-groups`` and the metrics/console views of the same group.

Checked: the start offset and lag (v1) after consumption and after more records; an alter refused
while a member is in the group (NON_EMPTY_GROUP); an alter to offset 3 makes the next consumer get
offsets 3.. with delivery count 1; deleting the offsets makes the next one start again from
share.auto.offset.reset; a non-empty share group is not deleted, an empty one is. None may skip.
"""
from __future__ import annotations

import asyncio
import json
import re
import urllib.request

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka import Producer

from kgroup.client.admin import Admin, SharePartitionOffsetInfo
from kgroup.client.assignors import TopicPartition as TP
from kgroup.protocol.errors import ErrorCode
from tests.broker.test_cli import kgroup
from tests.harness import BrokerProcess, free_port
from tests.interop.test_share_groups import OVERRIDES, consumer, poll_until, setup

pytestmark = pytest.mark.interop


@pytest.fixture
def broker(tmp_path):
    port = free_port()
    b = BrokerProcess(tmp_path / "d", OVERRIDES + [f"metrics.listener=http://127.0.0.1:{port}"]).start()
    b.http = f"http://127.0.0.1:{port}"
    yield b
    b.kill()


def admin(broker):
    return Admin(bootstrap_servers=broker.bootstrap)


def run(coro_fn, broker):
    async def go():
        async with admin(broker) as a:
            return await coro_fn(a)
    return asyncio.run(go())


def wait_offsets(broker, want, timeout=20.0):
    """The group's offsets once they are ``want`` (acknowledgements are written asynchronously)."""
    import time
    deadline = time.monotonic() + timeout
    while True:
        got = run(lambda a: a.list_share_group_offsets("sg"), broker)
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def produce(bootstrap, topic, values):
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, value=v, partition=0)
    p.flush()


def test_describe_alter_and_delete_offsets_of_a_share_group(broker):
    ca = setup(broker.bootstrap, "t", n=10)
    c = consumer(broker.bootstrap, "t")
    try:
        assert sorted(o for _, o, _ in poll_until(c, 10)) == list(range(10))
        c.poll(1.0)                         # the implicit acknowledgement goes with the next poll
        assert wait_offsets(broker, {TP("t", 0): SharePartitionOffsetInfo(10, 0, 0)}) == {
            TP("t", 0): SharePartitionOffsetInfo(10, 0, 0)}
        # a member is in the group: its offsets may not change, nor may it be deleted
        got = run(lambda a: a.alter_share_group_offsets("sg", {TP("t", 0): 0}), broker)
        assert got[TP("t", 0)].code == ErrorCode.NON_EMPTY_GROUP
        with pytest.raises(Exception, match="not empty"):
            ca.delete_consumer_groups(["sg"])["sg"].result()
        d = run(lambda a: a.describe_share_groups(["sg"]), broker)["sg"]
        assert d.state == "Stable" and [m.assignment for m in d.members] == [[TP("t", 0)]]
        # confluent-kafka's describe_consumer_groups falls back to DescribeGroups: Dead, as Kafka
        # answers it for a group that is not a classic group
        assert ca.describe_consumer_groups(["sg"])["sg"].result().state == ConsumerGroupState.DEAD
        assert "sg" not in {g.group_id for g in ca.list_consumer_groups().result().valid}
        # its deprecated list_groups (ListGroups, then DescribeGroups of each) finds it, Dead
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            assert [(g.id, g.state) for g in ca.list_groups(timeout=10) if g.id == "sg"] == [("sg", "Dead")]
    finally:
        c.close()
    produce(broker.bootstrap, "t", [b"late%d" % i for i in range(5)])
    assert wait_offsets(broker, {TP("t", 0): SharePartitionOffsetInfo(10, 0, 5)})[TP("t", 0)].lag == 5
    # the tool shows what the Admin reads
    r = kgroup("share-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", "sg")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1:] == ["GROUP           TOPIC           PARTITION  START-OFFSET  LAG",
                                         "sg              t               0          10            5"]
    # /metrics and the console read the share-partition this broker holds since the consumer fetched it
    text = urllib.request.urlopen(broker.http + "/metrics").read().decode()
    assert 'kgroup_share_partition_lag{group="sg",topic="t",partition="0"} 5' in text
    assert 'kgroup_share_partition_start_offset{group="sg",topic="t",partition="0"} 10' in text
    assert 'kafka_server_group_coordinator_metrics_share_group_count{state="Empty"} 1' in text
    assert 'kgroup_share_group_members{group="sg",state="Empty"} 0' in text
    shown = json.loads(urllib.request.urlopen(broker.http + "/api/share-groups/sg").read())
    assert (shown["state"], shown["lag"], [(p["topic"], p["start_offset"]) for p in shown["partitions"]]) == (
        "Empty", 5, [("t", 10)])
    assert shown["partitions"][0]["loaded"] and shown["partitions"][0]["records"]["Acknowledged"] == 0
    # reset to offset 3: the next consumer gets 3..14, each delivered for the first time
    r = kgroup("share-groups", "--bootstrap-server", broker.bootstrap, "--reset-offsets", "--group", "sg",
               "--topic", "t", "--to-offset", "3", "--execute")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1:] == ["GROUP           TOPIC           PARTITION  NEW-OFFSET",
                                         "sg              t               0          3"]
    assert run(lambda a: a.list_share_group_offsets("sg"), broker) == {
        TP("t", 0): SharePartitionOffsetInfo(3, None, 12)}
    c = consumer(broker.bootstrap, "t")
    try:
        got = poll_until(c, 12)
        assert sorted(o for _, o, _ in got) == list(range(3, 15)) and {n for _, _, n in got} == {1}
        c.poll(1.0)
        assert wait_offsets(broker, {TP("t", 0): SharePartitionOffsetInfo(15, 0, 0)})[TP("t", 0)].start_offset == 15
    finally:
        c.close()
    # delete the offsets: the next consumer starts again from share.auto.offset.reset (earliest)
    assert run(lambda a: a.delete_share_group_offsets("sg", ["t"]), broker) == {"t": None}
    assert run(lambda a: a.list_share_group_offsets("sg"), broker) == {}
    c = consumer(broker.bootstrap, "t")
    try:
        assert sorted(o for _, o, _ in poll_until(c, 15)) == list(range(15))
    finally:
        c.close()
    # an empty share group is deleted by confluent-kafka's AdminClient (DeleteGroups)
    assert ca.delete_consumer_groups(["sg"])["sg"].result() is None
    assert run(lambda a: a.list_share_groups(), broker) == []
    r = kgroup("share-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", "sg")
    assert re.search(r"Error: Executing share group command failed due to "
                     r"org\.apache\.kafka\.common\.errors\.GroupIdNotFoundException: Group sg not found\.", r.stdout)
