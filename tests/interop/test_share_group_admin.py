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
from tests.testing.test_console import dump_dom

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


def test_describe_alter_and_delete_offsets_of_a_share_group(broker, tmp_path):
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
        # the console's share group page in a real browser: the member, its assignment, the
        # share-partition with its start offset, everything acknowledged, no lag
        dom = dump_dom(broker.http + "/share-groups/sg", tmp_path)
        assert "<h1>Share group sg</h1>" in dom and d.members[0].member_id in dom and "<td>t [0]</td>" in dom
        row = dom.split("class=\"share-partition\">", 1)[1].split("</tr>", 1)[0]
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", row)
        assert cells[:3] == ["t", "0", "10"] and cells[-1] == "0", cells
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


def test_metrics_show_acquired_records_and_delivery_counts(broker):
    """A share consumer in explicit mode holds three records without acknowledging them: /metrics
    and the console show them acquired, delivered once, in flight and still lagging; once one is
    rejected and two accepted, they are terminal and the start offset moves past them."""
    from confluent_kafka import AcknowledgeType
    setup(broker.bootstrap, "t", n=3)
    c = consumer(broker.bootstrap, "t", explicit=True)
    try:
        held = []
        poll_until(c, 3, on_message=held.append)
        assert sorted(m.offset() for m in held) == [0, 1, 2]

        def series(name, **labels):
            text = urllib.request.urlopen(broker.http + "/metrics").read().decode()
            want = ",".join(f'{k}="{v}"' for k, v in dict(group="sg", topic="t", partition="0", **labels).items())
            found = re.search(rf"^{name}\{{{want}\}} (\S+)$", text, re.M)
            return None if found is None else float(found.group(1))
        assert series("kgroup_share_partition_records", state="Acquired") == 3
        assert series("kgroup_share_partition_delivery_count_records", delivery_count="1") == 3
        assert series("kafka_server_share_partition_metrics_in_flight_message_count") == 3
        assert series("kgroup_share_partition_lag") == 3
        shown = json.loads(urllib.request.urlopen(broker.http + "/api/share-groups/sg").read())
        assert shown["partitions"][0]["records"]["Acquired"] == 3 and shown["partitions"][0]["loaded"]
        for m in held:
            c.acknowledge(m, AcknowledgeType.REJECT if m.offset() == 1 else AcknowledgeType.ACCEPT)
        c.commit_sync()
        import time
        deadline = time.monotonic() + 20
        while series("kgroup_share_partition_start_offset") != 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert series("kgroup_share_partition_start_offset") == 3
        assert series("kgroup_share_partition_lag") == 0
        assert series("kgroup_share_partition_records", state="Acquired") == 0
    finally:
        c.close()
