"""Partition reassignment on 3 kgroup brokers over ZooKeeper (KIP-455, Kafka 3.9's controller):
kafka-python's admin (alter_partition_reassignments / list_partition_reassignments), our own
admin client and ``kgroup reassign-partitions``, with confluent-kafka producers and consumers
running through the moves."""
import json
import os
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition as CTP
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError, UnknownTopicOrPartitionError

from kgroup.client.admin import Admin
from kgroup.client.assignors import TopicPartition as KTP
from kgroup.client.reassign_cli import main_reassign_partitions
from kgroup.protocol.errors import ErrorCode
from kgroup.testing.cluster import KafkaCluster

pytestmark = pytest.mark.interop

SETTINGS = {"replica.lag.time.max.ms": 5000, "offsets.topic.num.partitions": 1, "zookeeper.session.timeout.ms": 6000}


def log_dirs(c, broker, prefix):
    return sorted(d for d in os.listdir(os.path.join(c.work_dir, f"broker-{broker}")) if d.startswith(prefix))


def create(admin, c, name, assignment, configs=None):
    admin.create_topics([NewTopic(name, -1, replica_assignments=assignment, topic_configs=configs or {})])
    c.wait_for(lambda: all(c.leader(name, p) is not None for p in assignment), what=f"{name}'s leaders")


def metadata_replicas(c, topic):
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": c.bootstrap_servers}).list_topics(topic, timeout=10)
    return {p: list(pm.replicas) for p, pm in md.topics[topic].partitions.items()}


def described_replicas(broker, topic):
    """DescribeTopicPartitions (75) to one broker: {partition: replica nodes}."""
    import asyncio

    from kgroup.client.connection import BrokerConnection
    from kgroup.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest

    async def ask():
        conn = BrokerConnection(broker.host, broker.port, node_id=0, client_id="reassign-test")
        await conn.connect()
        try:
            resp = await conn.send(DescribeTopicPartitionsRequest(
                topics=[DescribeTopicPartitionsRequest.TopicRequest(name=topic)]))
        finally:
            conn.close()
        return {p.partition_index: list(p.replica_nodes) for t in resp.topics for p in t.partitions}
    return asyncio.run(ask())


def cli(capsys, *args):
    code = main_reassign_partitions(list(args))
    return code, capsys.readouterr().out


def test_move_under_acks_all_load_and_the_coordinator_moves_with_its_leader(tmp_path):
    with KafkaCluster(3, tmp_path, SETTINGS) as c:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers)
        create(admin, c, "orders", {0: [1, 2], 1: [2, 1]}, {"min.insync.replicas": "2"})
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 60000})
        acked, errors, consumed = [], [], []

        def report(err, msg):
            (errors if err else acked).append(err or (msg.partition(), int(msg.value())))
        stop = threading.Event()

        def produce():
            i = 0
            while not stop.is_set():
                p.produce("orders", value=b"%d" % i, partition=i % 2, on_delivery=report)
                p.poll(0)
                i += 1
                time.sleep(0.002)
        consumer = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "billing",
                             "auto.offset.reset": "earliest", "enable.auto.commit": True,
                             "auto.commit.interval.ms": 200})
        consumer.subscribe(["orders"])
        done_consuming = threading.Event()

        def consume():
            while not done_consuming.is_set():
                m = consumer.poll(0.2)
                if m is not None and not m.error():
                    consumed.append((time.monotonic(), m.partition(), int(m.value()), m.offset()))
        threads = [threading.Thread(target=produce, daemon=True), threading.Thread(target=consume, daemon=True)]
        for t in threads:
            t.start()
        try:
            time.sleep(2)
            result = admin.alter_partition_reassignments({TopicPartition("orders", 0): [2, 3],
                                                          TopicPartition("orders", 1): [3, 2]})
            assert result == {TopicPartition("orders", 0): None, TopicPartition("orders", 1): None}
            c.wait_for(lambda: c.assignment("orders") == {0: (2, 3), 1: (3, 2)}, timeout=60, what="the move")
            c.wait_for(lambda: metadata_replicas(c, "orders") == {0: [2, 3], 1: [3, 2]}, what="Metadata's replicas")
            for part in (0, 1):
                st = c.partition_state("orders", part)
                assert st.leader in (2, 3) and set(st.isr) == {2, 3}
            c.wait_for(lambda: log_dirs(c, 1, "orders") == [], what="broker 1's replicas deleted")
            assert log_dirs(c, 3, "orders") == ["orders-0", "orders-1"]

            # the group's coordinator partition, away from its leader: the coordinator moves with it
            old = c.leader("__consumer_offsets", 0)
            target = [b for b in (1, 2, 3) if b != old]
            assert admin.alter_partition_reassignments({TopicPartition("__consumer_offsets", 0): target}) == {
                TopicPartition("__consumer_offsets", 0): None}
            c.wait_for(lambda: c.assignment("__consumer_offsets") == {0: tuple(target)}, timeout=60,
                       what="the offsets partition's move")
            assert c.leader("__consumer_offsets", 0) in target
            c.wait_for(lambda: log_dirs(c, old, "__consumer_offsets") == [], what="the old coordinator's log deleted")
            moved_at = time.monotonic()
            time.sleep(3)
            stop.set()
            threads[0].join()
            assert p.flush(60) == 0
            assert acked and not errors, errors[:3]
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len({(q, v) for _, q, v, _ in consumed}) < len(acked):
                time.sleep(0.2)
            done_consuming.set()
            threads[1].join()
            assert any(at > moved_at for at, _, _, _ in consumed), "the consumer went on after the moves"
            # the group's commits reach the new coordinator (auto-commit every 200 ms)
            ends = {q: max(o for _, qq, _, o in consumed if qq == q) + 1 for q in (0, 1)}
            c.wait_for(lambda: {t.partition: t.offset for t in consumer.committed(
                [CTP("orders", 0), CTP("orders", 1)], timeout=10)} == ends, timeout=30, what="the last commits")
            consumer.close()
            # every acknowledged record once, in order, per partition
            for part in (0, 1):
                reader = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "check",
                                   "auto.offset.reset": "earliest", "enable.auto.commit": False})
                reader.assign([CTP("orders", part, 0)])
                want = [v for q, v in acked if q == part]
                got, deadline = [], time.monotonic() + 60
                while time.monotonic() < deadline and len(got) < len(want):
                    m = reader.poll(0.5)
                    if m is not None and not m.error():
                        got.append(int(m.value()))
                reader.close()
                assert got == sorted(got) and len(set(got)) == len(got), "in order, once"
                assert set(want) <= set(got), sorted(set(want) - set(got))[:10]
            print(f"acknowledged {len(acked)}, consumed {len(consumed)}")
        finally:
            stop.set()
            done_consuming.set()


def test_replication_factor_changes_errors_cancel_and_list(tmp_path, capsys):
    with KafkaCluster(3, tmp_path, SETTINGS) as c:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers)
        create(admin, c, "grow", {0: [1]})
        # RF 1 -> 3 (kafka-python), then 3 -> 2 (the CLI)
        assert admin.alter_partition_reassignments({TopicPartition("grow", 0): [1, 2, 3]}) == {
            TopicPartition("grow", 0): None}
        c.wait_for(lambda: c.assignment("grow") == {0: (1, 2, 3)}, timeout=60)
        c.wait_for(lambda: set(c.partition_state("grow", 0).isr) == {1, 2, 3})
        plan = tmp_path / "shrink.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "grow", "partition": 0,
                                                                  "replicas": [3, 2]}]}))
        code, out = cli(capsys, "--bootstrap-server", c.bootstrap_servers, "--execute",
                        "--reassignment-json-file", str(plan))
        assert code == 0, out
        assert out.startswith("Current partition replica assignment\n\n"
                              '{"version":1,"partitions":[{"topic":"grow","partition":0,"replicas":[1,2,3],'
                              '"log_dirs":["any","any","any"]}]}\n\n'
                              "Save this to use as the --reassignment-json-file option during rollback\n")
        assert out.endswith("Successfully started partition reassignment for grow-0\n")
        c.wait_for(lambda: c.assignment("grow") == {0: (3, 2)}, timeout=60)
        assert c.partition_state("grow", 0).leader == 3          # the removed leader (1) gave way
        code, out = cli(capsys, "--bootstrap-server", c.bootstrap_servers, "--verify",
                        "--reassignment-json-file", str(plan))
        assert (code, out) == (0, "Status of partition reassignment:\nReassignment of partition grow-0 is completed.\n")
        c.wait_for(lambda: log_dirs(c, 1, "grow") == [])

        # Kafka's per-partition errors
        res = admin.alter_partition_reassignments({TopicPartition("grow", 0): [1, 9],
                                                   TopicPartition("grow", 5): [1],
                                                   TopicPartition("nope", 0): [1]})
        assert res == {TopicPartition("grow", 0): InvalidReplicationAssignmentError,
                       TopicPartition("grow", 5): UnknownTopicOrPartitionError,
                       TopicPartition("nope", 0): UnknownTopicOrPartitionError}
        res = admin.alter_partition_reassignments({TopicPartition("grow", 0): None})
        assert res == {TopicPartition("grow", 0): NoReassignmentInProgressError}

        async def kip_860():
            async with Admin({"bootstrap.servers": c.bootstrap_servers}) as a:
                refused = await a.alter_partition_reassignments({KTP("grow", 0): [1, 2, 3]},
                                                                allow_replication_factor_change=False)
                dup = await a.alter_partition_reassignments({KTP("grow", 0): [2, 2]})
                return refused[KTP("grow", 0)], dup[KTP("grow", 0)]
        import asyncio
        refused, dup = asyncio.run(kip_860())
        assert refused.code == ErrorCode.INVALID_REPLICATION_FACTOR
        assert "The replication factor is changed from 2 to 3" in str(refused)
        assert dup.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        code, out = cli(capsys, "--bootstrap-server", c.bootstrap_servers, "--execute", "--reassignment-json-file",
                        str(plan), "--disallow-replication-factor-change")   # same RF: allowed (no-op move)
        assert code == 0, out

        # --generate: the topics' partitions placed over the brokers listed, the replication factor kept
        topics = tmp_path / "topics.json"
        topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "grow"}]}))
        code, out = cli(capsys, "--bootstrap-server", c.bootstrap_servers, "--generate",
                        "--topics-to-move-json-file", str(topics), "--broker-list", "1,2")
        current, _, proposed = out.partition("\n\nProposed partition reassignment configuration\n")
        assert code == 0 and current == ('Current partition replica assignment\n{"version":1,"partitions":[{"topic":'
                                         '"grow","partition":0,"replicas":[3,2],"log_dirs":["any","any"]}]}'), out
        plan3 = json.loads(proposed)
        assert [(e["topic"], e["partition"], sorted(e["replicas"])) for e in plan3["partitions"]] == [("grow", 0, [1, 2])]

        # a reassignment written to /admin/reassign_partitions (the ZooKeeper-era tool's way)
        c.zk.create_partition_reassignment({("grow", 0): [2, 1]})
        c.wait_for(lambda: c.assignment("grow") == {0: (2, 1)}, timeout=60, what="the znode's reassignment")
        c.wait_for(lambda: c.zk.get_partition_reassignment() is None, what="/admin/reassign_partitions removed")

        # cancel one in progress: its new replica's broker is paused, so it cannot catch up
        ctrl = c.controller()
        paused = next(b for b in (1, 2, 3) if b != ctrl)
        keep = [b for b in (1, 2, 3) if b != paused]
        create(admin, c, "slow", {0: keep})
        live = ",".join(c.brokers[b].bootstrap_servers for b in keep)    # not the paused one
        c.pause(paused)
        try:
            assert admin.alter_partition_reassignments({TopicPartition("slow", 0): [*keep, paused]}) == {
                TopicPartition("slow", 0): None}
            listed = admin.list_partition_reassignments()
            assert listed == {TopicPartition("slow", 0): {"replicas": [*keep, paused], "adding_replicas": [paused],
                                                          "removing_replicas": []}}
            c.wait_for(lambda: metadata_replicas(c, "slow") == {0: [*keep, paused]},   # RS, as Kafka shows it
                       what="Metadata's replicas")
            for b in keep:
                c.wait_for(lambda b=b: described_replicas(c.brokers[b], "slow") == {0: [*keep, paused]},
                           what="DescribeTopicPartitions' replicas")
            code, out = cli(capsys, "--bootstrap-server", live, "--list")
            assert (code, out) == (0, "Current partition reassignments:\n"
                                      f"slow-0: replicas: {keep[0]},{keep[1]},{paused}. adding: {paused}.\n")
            plan2 = tmp_path / "slow.json"
            plan2.write_text(json.dumps({"version": 1, "partitions": [{"topic": "slow", "partition": 0,
                                                                       "replicas": [*keep, paused]}]}))
            code, out = cli(capsys, "--bootstrap-server", live, "--verify",
                            "--reassignment-json-file", str(plan2))
            assert out == "Status of partition reassignment:\nReassignment of partition slow-0 is still in progress.\n"
            code, out = cli(capsys, "--bootstrap-server", live, "--cancel",
                            "--reassignment-json-file", str(plan2))
            assert (code, out) == (0, "Successfully cancelled partition reassignment for: slow-0\n"
                                      "None of the specified partition moves are active.\n")
            assert c.assignment("slow") == {0: tuple(keep)}
            assert admin.list_partition_reassignments() == {}
            code, out = cli(capsys, "--bootstrap-server", live, "--list")
            assert out == "No partition reassignments found.\n"
        finally:
            c.resume(paused)
        assert set(c.partition_state("slow", 0).isr) == set(keep)
        time.sleep(2)
        assert log_dirs(c, paused, "slow") == []


def test_a_new_controller_resumes_a_reassignment_from_the_topic_znode(tmp_path):
    with KafkaCluster(3, tmp_path, SETTINGS) as c:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap_servers)
        ctrl = c.controller()
        x, y = [b for b in (1, 2, 3) if b != ctrl]
        create(admin, c, "moving", {0: [y, ctrl]})
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "acks": "all"})
        for i in range(100):
            p.produce("moving", value=b"%d" % i)
        assert p.flush(30) == 0
        c.pause(x)          # the new replica cannot catch up yet
        try:
            assert admin.alter_partition_reassignments({TopicPartition("moving", 0): [y, x]}) == {
                TopicPartition("moving", 0): None}
            c.kill(ctrl)
            c.wait_for(lambda: c.controller() not in (None, ctrl), timeout=60, what="a new controller")
            admin.close()
            admin = KafkaAdminClient(bootstrap_servers=",".join(
                b.bootstrap_servers for n, b in c.brokers.items() if n == y))
            assert admin.list_partition_reassignments() == {TopicPartition("moving", 0): {
                "replicas": [y, x, ctrl], "adding_replicas": [x], "removing_replicas": [ctrl]}}
        finally:
            c.resume(x)
        c.wait_for(lambda: c.assignment("moving") == {0: (y, x)}, timeout=90, what="the move completed")
        st = c.partition_state("moving", 0)
        assert st.leader == y and set(st.isr) == {x, y}
        c.start_broker(ctrl)        # it was removed while dead: it deletes its replica when back
        c.wait_for(lambda: log_dirs(c, ctrl, "moving") == [], timeout=60, what="the stray replica deleted")
        reader = Consumer({"bootstrap.servers": c.bootstrap_servers, "group.id": "r", "auto.offset.reset": "earliest"})
        reader.assign([CTP("moving", 0, 0)])
        got, deadline = [], time.monotonic() + 30
        while time.monotonic() < deadline and len(got) < 100:
            m = reader.poll(0.5)
            if m is not None and not m.error():
                got.append(int(m.value()))
        reader.close()
        assert got == list(range(100))


def test_single_node_answers_as_a_one_broker_kafka(kafka_broker):
    kafka_broker.create_topic("solo", partitions=1)
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap_servers)
    b = admin.describe_cluster()["brokers"][0]
    node = b.get("node_id", b.get("broker_id"))
    res = admin.alter_partition_reassignments({TopicPartition("solo", 0): [node],
                                               TopicPartition("solo", 1): [node]})
    assert res == {TopicPartition("solo", 0): None, TopicPartition("solo", 1): UnknownTopicOrPartitionError}
    assert admin.alter_partition_reassignments({TopicPartition("solo", 0): [node + 1]}) == {
        TopicPartition("solo", 0): InvalidReplicationAssignmentError}
    assert admin.alter_partition_reassignments({TopicPartition("solo", 0): None}) == {
        TopicPartition("solo", 0): NoReassignmentInProgressError}
    assert admin.list_partition_reassignments() == {}
    admin.close()

    async def rf():
        async with Admin({"bootstrap.servers": kafka_broker.bootstrap_servers}) as a:
            return (await a.alter_partition_reassignments({KTP("solo", 0): [node, node]},
                                                          allow_replication_factor_change=False))[KTP("solo", 0)]
    import asyncio
    assert asyncio.run(rf()).code == ErrorCode.INVALID_REPLICA_ASSIGNMENT     # (duplicates are checked first)
