"""A 3-broker kgroup cluster over a real ZooKeeper (Debian's zookeeper package) on 127.0.0.1:
registration, the controller and its failover, Metadata / DescribeCluster seen by confluent-kafka
and kafka-python, topics with replication factor 3 created, extended and deleted, leaders moving
off a SIGKILLed broker and back (preferred election), controlled shutdown on SIGTERM.

The brokers are ``kgroup serve`` processes (kgroup.testing.KafkaCluster). Replication itself
(followers fetching, ISR expansion) is the ReplicaManager's: where a test needs a returning
broker back in the ISR, it writes the leader's ISR change to the state znode as the leader's
ReplicaManager does (alter_isr: a conditional update on the znode's version)."""
import json
import os
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from kgroup.cluster import zk_data as zd
from kgroup.coordinator.partitioner import group_partition
from kgroup.protocol.messages.describe_configs import DescribeConfigsRequest
from kgroup.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from kgroup.protocol.messages.elect_leaders import ElectLeadersRequest
from kgroup.testing.cluster import KafkaCluster
from tests.harness import RawClient

pytestmark = pytest.mark.interop
SESSION_MS = 6000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with KafkaCluster(3, tmp_path_factory.mktemp("cluster"), {
            "zookeeper.session.timeout.ms": SESSION_MS, "leader.imbalance.check.interval.seconds": 1,
            "offsets.topic.num.partitions": 5}) as c:
        yield c


def admin(cluster):
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def all_running(cluster):
    for n, b in cluster.brokers.items():
        if not b.running:
            cluster.start_broker(n)
    cluster.wait_for(lambda: cluster.live_brokers() == [1, 2, 3], 60)


def md_partitions(cluster, topic, via=None):
    bootstrap = cluster.broker(via).bootstrap_servers if via else cluster.bootstrap_servers
    a = AdminClient({"bootstrap.servers": bootstrap})
    md = a.list_topics(topic, timeout=10)
    return {p.id: p for p in md.topics[topic].partitions.values()}, md


def test_registration_and_controller_in_zookeeper(cluster):
    zk = cluster.zk.zk
    assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
    for n in (1, 2, 3):
        data, stat = zk.get(f"/brokers/ids/{n}")
        doc = json.loads(data)
        assert stat.ephemeralOwner != 0
        assert doc["version"] == 5 and doc["endpoints"] == [f"PLAINTEXT://127.0.0.1:{cluster.broker(n).port}"]
        assert doc["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    data, stat = zk.get("/controller")
    assert stat.ephemeralOwner != 0 and json.loads(data)["brokerid"] in (1, 2, 3)
    assert int(zk.get("/controller_epoch")[0]) >= 1
    cluster_id = json.loads(zk.get("/cluster/id")[0])["id"]
    for n in (1, 2, 3):     # every broker's meta.properties carries ZooKeeper's cluster id
        with open(os.path.join(cluster.broker(n).data_dir, "meta.properties")) as f:
            assert f"cluster.id={cluster_id}" in f.read()


def test_metadata_lists_every_broker_and_the_controller(cluster):
    controller = cluster.controller()
    for n in (1, 2, 3):
        md = admin_via(cluster, n).list_topics(timeout=10)
        assert sorted(md.brokers) == [1, 2, 3]
        assert {b.id: b.port for b in md.brokers.values()} == {m: cluster.broker(m).port for m in (1, 2, 3)}
        assert md.controller_id == controller
    a = admin(cluster)
    desc = a.describe_cluster().result(10)
    assert sorted(b.id for b in desc.nodes) == [1, 2, 3] and desc.controller.id == controller
    from kafka import KafkaAdminClient, KafkaConsumer
    ka = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        described = ka.describe_cluster()       # DescribeCluster
        assert sorted(b["broker_id"] for b in described["brokers"]) == [1, 2, 3]
        assert described["controller_id"] == controller
    finally:
        ka.close()
    kc = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers)
    try:
        kc.topics()                             # Metadata
        assert sorted(b.node_id for b in kc._client.cluster.brokers()) == [1, 2, 3]
        assert kc._client.cluster.controller.node_id == controller
    finally:
        kc.close()


def admin_via(cluster, n):
    return AdminClient({"bootstrap.servers": cluster.broker(n).bootstrap_servers})


def test_topic_with_replication_factor_3_created_extended_deleted(cluster):
    a = admin(cluster)
    a.create_topics([NewTopic("rf3", 6, 3)])["rf3"].result(30)
    assignment = cluster.assignment("rf3")
    assert sorted(assignment) == list(range(6)) and all(sorted(r) == [1, 2, 3] for r in assignment.values())
    leaders = [assignment[p][0] for p in range(6)]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]       # AdminUtils spreads the preferred leaders
    for n in (1, 2, 3):     # every broker answers the same Metadata
        parts, _ = md_partitions(cluster, "rf3", via=n)
        assert {p: (parts[p].leader, tuple(parts[p].replicas), tuple(parts[p].isrs)) for p in parts} == \
            {p: (r[0], r, r) for p, r in assignment.items()}
    for p in range(6):      # each replica's log exists on its broker
        for n in assignment[p]:
            assert os.path.isdir(os.path.join(cluster.broker(n).data_dir, f"rf3-{p}"))
    with pytest.raises(Exception, match="INVALID_REPLICATION_FACTOR|replication factor"):
        a.create_topics([NewTopic("rf4", 1, 4)])["rf4"].result(30)
    a.create_partitions([NewPartitions("rf3", 8)])["rf3"].result(30)
    assert sorted(cluster.assignment("rf3")) == list(range(8))
    cluster.wait_for(lambda: all(cluster.leader("rf3", p) is not None for p in range(8)))
    a.delete_topics(["rf3"], operation_timeout=30)["rf3"].result(30)
    zk = cluster.zk.zk
    assert zk.exists("/brokers/topics/rf3") is None and zk.exists("/config/topics/rf3") is None
    assert zk.get_children("/admin/delete_topics") == []
    cluster.wait_for(lambda: not any(os.path.isdir(os.path.join(cluster.broker(n).data_dir, f"rf3-{p}"))
                                     for n in (1, 2, 3) for p in range(8)), 10, what="the replicas' logs deleted")


def test_produce_consume_and_find_coordinator_on_the_partition_leader(cluster):
    a = admin(cluster)
    a.create_topics([NewTopic("orders", 3, 3)])["orders"].result(30)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True})
    for i in range(30):
        p.produce("orders", value=b"v%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "billing",
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["orders"])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 30 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        assert sorted(got) == sorted(b"v%d" % i for i in range(30))
        c.commit(asynchronous=False)
    finally:
        c.close()
    # the idempotent producer's id came from a block claimed in ZooKeeper
    block = json.loads(cluster.zk.zk.get("/latest_producer_id_block")[0])
    assert block["version"] == 1 and int(block["block_end"]) - int(block["block_start"]) == 999
    # __consumer_offsets: Kafka's default replication factor 3 (three live brokers)
    offsets = cluster.assignment("__consumer_offsets")
    assert len(offsets) == 5 and all(len(r) == 3 for r in offsets.values())
    desc = a.describe_consumer_groups(["billing"])["billing"].result(10)
    assert desc.coordinator.id == cluster.leader("__consumer_offsets", group_partition("billing", 5))


def test_topic_configs_reach_every_broker(cluster):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    a = admin(cluster)
    a.create_topics([NewTopic("configured", 1, 3)])["configured"].result(30)
    via1 = admin_via(cluster, 1)
    res = ConfigResource("topic", "configured", incremental_configs=[
        ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)])
    via1.incremental_alter_configs([res])[res].result(30)
    assert json.loads(cluster.zk.zk.get("/config/topics/configured")[0])["config"] == {"retention.ms": "123456"}

    def seen_by(n):         # DescribeConfigs sent to broker n itself
        c = RawClient(cluster.broker(n).port)
        try:
            dc = c.request(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=2, resource_name="configured", configuration_keys=["retention.ms"])]), 4)
        finally:
            c.close()
        (e,) = dc.results[0].configs
        return e.value
    cluster.wait_for(lambda: all(seen_by(n) == "123456" for n in (1, 2, 3)), 10)


def test_paused_broker_loses_its_session_and_rejoins(cluster):
    """SIGSTOP past zookeeper.session.timeout.ms: its registration goes, its leaderships move;
    SIGCONT: a new session, registered again."""
    all_running(cluster)
    a = admin(cluster)
    a.create_topics([NewTopic("paused", 3, 3)])["paused"].result(30)
    victim = cluster.assignment("paused")[0][0]
    if cluster.controller() == victim:
        victim = cluster.assignment("paused")[1][0]
    cluster.pause(victim)
    try:
        cluster.wait_for(lambda: victim not in cluster.live_brokers(), 3 * SESSION_MS / 1000)
        cluster.wait_for(lambda: all(cluster.leader("paused", p) not in (None, victim) for p in range(3)), 10)
    finally:
        cluster.resume(victim)
    cluster.wait_for(lambda: victim in cluster.live_brokers(), 30, what="registered again")
    assert "ZooKeeper session expired" in cluster.broker(victim).log_text()


def test_paused_controller_is_replaced_and_resigns(cluster):
    """The controller's broker SIGSTOPped past its session: another broker becomes controller
    with a higher epoch; resumed, the old one resigns, rejoins as a broker, and the new
    controller stays."""
    all_running(cluster)
    old = cluster.controller()
    epoch = int(cluster.zk.zk.get("/controller_epoch")[0])
    mark = len(cluster.broker(old).log_text())
    cluster.pause(old)
    try:
        cluster.wait_for(lambda: cluster.controller() not in (None, old), 3 * SESSION_MS / 1000)
    finally:
        cluster.resume(old)
    new = cluster.controller()
    assert int(cluster.zk.zk.get("/controller_epoch")[0]) > epoch
    cluster.wait_for(lambda: old in cluster.live_brokers(), 30)
    cluster.wait_for(lambda: f"broker {old} resigns as controller" in cluster.broker(old).log_text(mark), 10)
    assert cluster.controller() == new
    a = admin(cluster)      # the cluster still creates topics (the new controller's work)
    a.create_topics([NewTopic("after-pause", 1, 3)])["after-pause"].result(60)


def test_zookeeper_restart_keeps_the_cluster(cluster):
    """ZooKeeper restarted (same data, same port) within the session timeout: the sessions
    survive, so do the registrations and the controller, and the cluster goes on."""
    all_running(cluster)
    controller, epoch = cluster.controller(), int(cluster.zk.zk.get("/controller_epoch")[0])
    marks = {n: len(cluster.broker(n).log_text()) for n in (1, 2, 3)}
    cluster.zookeeper.restart()
    cluster.wait_for(lambda: cluster.live_brokers() == [1, 2, 3], 30)
    a = admin(cluster)
    a.create_topics([NewTopic("after-zk-restart", 2, 3)])["after-zk-restart"].result(60)
    assert cluster.controller() == controller and int(cluster.zk.zk.get("/controller_epoch")[0]) == epoch
    assert all(cluster.leader("after-zk-restart", p) is not None for p in range(2))
    for n in (1, 2, 3):
        assert "ZooKeeper session expired" not in cluster.broker(n).log_text(marks[n])


def test_controller_failover_when_its_broker_is_killed(cluster):
    all_running(cluster)
    a = admin(cluster)
    a.create_topics([NewTopic("failover", 3, 3)])["failover"].result(30)
    old = cluster.controller()
    old_epoch = int(cluster.zk.zk.get("/controller_epoch")[0])
    led = [p for p in range(3) if cluster.leader("failover", p) == old]
    assert led
    t0 = time.monotonic()
    cluster.kill(old)
    cluster.wait_for(lambda: cluster.controller() not in (None, old), 3 * SESSION_MS / 1000, what="a new controller")
    took = time.monotonic() - t0
    assert int(cluster.zk.zk.get("/controller_epoch")[0]) > old_epoch
    cluster.wait_for(lambda: all(cluster.leader("failover", p) not in (None, old) for p in range(3)), 10)
    for p in range(3):
        st = cluster.partition_state("failover", p)
        assert old not in st.isr
    # Metadata from a live broker: the killed broker is gone, its replicas offline
    survivor = next(n for n in (1, 2, 3) if n != old)
    parts, md = md_partitions(cluster, "failover", via=survivor)
    assert sorted(md.brokers) == sorted({1, 2, 3} - {old}) and md.controller_id == cluster.controller()
    for p in range(3):
        assert parts[p].leader != old
    def described():        # DescribeTopicPartitions to the survivor, as KIP-966 clients ask
        c = RawClient(cluster.broker(survivor).port)
        try:
            R = DescribeTopicPartitionsRequest
            (t,) = c.request(R(topics=[R.TopicRequest(name="failover")], response_partition_limit=100, cursor=None),
                             0).topics
        finally:
            c.close()
        return {p.partition_index: (p.leader_id, p.leader_epoch, tuple(p.isr_nodes), tuple(p.offline_replicas),
                                    tuple(sorted(p.replica_nodes))) for p in t.partitions}

    def in_zookeeper():
        out = {}
        for p in range(3):
            st = cluster.partition_state("failover", p)
            out[p] = (st.leader, st.leader_epoch, st.isr, (old,), (1, 2, 3))
        return out
    cluster.wait_for(lambda: described() == in_zookeeper(), 10, what="DescribeTopicPartitions as ZooKeeper says")
    print(f"controller failover after SIGKILL: {took:.1f} s (zookeeper.session.timeout.ms={SESSION_MS})")
    # it comes back: registered again, a follower with an out-of-sync replica
    cluster.start_broker(old)
    cluster.wait_for(lambda: old in cluster.live_brokers(), 30)


def test_leaders_move_back_to_preferred_replicas(cluster):
    """With auto.leader.rebalance.enable (checked every second here), a broker back in the ISR
    gets the leaderships it is preferred for back."""
    all_running(cluster)
    a = admin(cluster)
    a.create_topics([NewTopic("preferred", 3, 3)])["preferred"].result(30)
    assignment = cluster.assignment("preferred")
    victim = assignment[0][0]
    cluster.kill(victim)
    cluster.wait_for(lambda: cluster.leader("preferred", 0) not in (None, victim), 3 * SESSION_MS / 1000)
    cluster.start_broker(victim)
    cluster.wait_for(lambda: victim in cluster.live_brokers(), 30)
    assert cluster.leader("preferred", 0) != victim      # out of the ISR: no preferred election yet
    # each leader's ReplicaManager expands the ISR once the restarted follower caught up (alter_isr)
    cluster.wait_for(lambda: all(victim in cluster.partition_state("preferred", p).isr for p in range(3)), 30,
                     what="the restarted broker back in every ISR")
    cluster.wait_for(lambda: all(cluster.leader("preferred", p) == assignment[p][0] for p in range(3)), 15,
                     what="preferred leaders back")


def elect(cluster, n, election_type, partitions):
    c = RawClient(cluster.broker(n).port)
    try:
        R = ElectLeadersRequest
        resp = c.request(R(election_type=election_type, timeout_ms=30000, topic_partitions=None if partitions is None else [
            R.TopicPartitions(topic=t, partitions=ps) for t, ps in partitions.items()]), 2)
    finally:
        c.close()
    return resp.error_code, {(t.topic, p.partition_id): p.error_code for t in resp.replica_election_results
                             for p in t.partition_result}


def test_elect_leaders_unclean_and_preferred(cluster):
    """ElectLeaders (43) on the controller: unclean for an offline partition whose only in-sync
    replica died, preferred where already preferred; NOT_CONTROLLER from another broker."""
    all_running(cluster)
    a = admin(cluster)
    a.create_topics([NewTopic("elect", 1, 2)])["elect"].result(30)
    replicas = cluster.assignment("elect")[0]
    leader, follower = replicas
    st = cluster.partition_state("elect", 0)        # the leader drops the follower (alter_isr)
    assert cluster.zk.conditional_update_partition_state(
        "elect", 0, zd.LeaderAndIsr(leader, st.leader_epoch, (leader,), st.controller_epoch), st.zk_version)
    cluster.kill(leader)
    cluster.wait_for(lambda: cluster.partition_state("elect", 0).leader == -1, 3 * SESSION_MS / 1000)
    controller = cluster.controller()
    other = next(n for n in (1, 2, 3) if n not in (controller, leader))
    assert elect(cluster, other, 1, {"elect": [0]}) == (0, {("elect", 0): 41})          # NOT_CONTROLLER
    assert elect(cluster, controller, 0, {"elect": [0]}) == (0, {("elect", 0): 80})     # preferred not live
    assert elect(cluster, controller, 1, {"elect": [0], "nope": [0]}) == (0, {("elect", 0): 0, ("nope", 0): 3})
    st = cluster.partition_state("elect", 0)
    assert (st.leader, st.isr) == (follower, (follower,))
    assert elect(cluster, controller, 1, {"elect": [0]}) == (0, {("elect", 0): 84})     # ELECTION_NOT_NEEDED
    err, results = elect(cluster, controller, 0, None)      # every partition: those already preferred left out
    assert err == 0 and results[("elect", 0)] == 80 and 84 not in results.values()
    cluster.start_broker(leader)
    cluster.wait_for(lambda: leader in cluster.live_brokers(), 30)


def test_controlled_shutdown_moves_leadership_before_the_broker_leaves(cluster):
    all_running(cluster)
    a = admin(cluster)
    a.create_topics([NewTopic("graceful", 3, 3)])["graceful"].result(30)
    assignment = cluster.assignment("graceful")
    victim = assignment[1][0]
    cluster.wait_for(lambda: cluster.leader("graceful", 1) == victim)
    events = []
    zk = cluster.zk.zk
    lock = threading.Lock()

    def on_state(data, stat):
        if data:
            with lock:
                events.append(("leader", json.loads(data)["leader"]))

    def on_ids(children):
        with lock:
            events.append(("live", sorted(int(c) for c in children)))
    zk.DataWatch("/brokers/topics/graceful/partitions/1/state", on_state)
    zk.ChildrenWatch("/brokers/ids", on_ids)
    t0 = time.monotonic()
    cluster.stop(victim)          # SIGTERM
    took = time.monotonic() - t0
    cluster.wait_for(lambda: any(e == "live" and victim not in v for e, v in events), 10)
    with lock:
        moved = next(i for i, (e, v) in enumerate(events) if e == "leader" and v != victim)
        gone = next(i for i, (e, v) in enumerate(events) if e == "live" and victim not in v)
    assert moved < gone, events
    assert cluster.leader("graceful", 1) not in (None, victim)
    assert "controlled shutdown completed" in cluster.broker(victim).log_text()
    print(f"controlled shutdown (SIGTERM to exit): {took:.2f} s")
    assert took < 10      # not the controlled shutdown timeout (30 s)
    cluster.start_broker(victim)


def test_controlled_shutdown_under_replication_settles(cluster):
    """SIGTERM while acks=all produce keeps the followers fetching: the broker shutting down
    stops following (KafkaController.doControlledShutdown's StopReplica), so the leaders do not
    add it back to the ISRs the controller takes it out of, and it exits."""
    all_running(cluster)
    a = admin(cluster)
    a.create_topics([NewTopic("graceful-busy", 3, 3)])["graceful-busy"].result(30)
    cluster.wait_for(lambda: all(len(cluster.partition_state("graceful-busy", p).isr) == 3 for p in range(3)), 30)
    stop = threading.Event()

    def produce():
        p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 1})
        n = 0
        while not stop.is_set():
            p.produce("graceful-busy", value=b"%d" % n, partition=n % 3)
            n += 1
            p.poll(0.002)
        p.flush(30)
    t = threading.Thread(target=produce, daemon=True)
    t.start()
    try:
        time.sleep(1.0)
        victim = cluster.leader("graceful-busy", 0)
        before = {p: cluster.partition_state("graceful-busy", p).leader_epoch for p in range(3)}
        t0 = time.monotonic()
        cluster.stop(victim)          # SIGTERM
        took = time.monotonic() - t0
        time.sleep(2.0)               # a flapping ISR would keep raising the leader epochs meanwhile
        after = {p: cluster.partition_state("graceful-busy", p).leader_epoch for p in range(3)}
    finally:
        stop.set()
        t.join(60)
    print(f"controlled shutdown under produce (SIGTERM to exit): {took:.2f} s, leader epochs {before} -> {after}")
    assert took < 10
    assert all(after[p] - before[p] <= 2 for p in range(3)), (before, after)
    assert all(victim not in cluster.partition_state("graceful-busy", p).isr for p in range(3))
    cluster.start_broker(victim)


def test_single_node_broker_needs_no_zookeeper(tmp_path):
    """Without zookeeper.connect nothing of the cluster mode (nor kazoo) is loaded."""
    import subprocess
    import sys
    code = ("import sys, asyncio\n"
            "from kgroup.broker.broker import Broker\nfrom kgroup.broker.config import BrokerConfig\n"
            f"b = Broker(BrokerConfig({{'log.dirs': {str(tmp_path)!r}, 'listeners': 'PLAINTEXT://127.0.0.1:0'}}))\n"
            "async def main():\n    await b.start()\n    await b.stop()\n"
            "asyncio.run(main())\n"
            "print(b.cluster, 'kazoo' in sys.modules, 'kgroup.cluster.zk_broker' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "None False False", out.stderr


def test_describe_log_dirs_on_every_broker(cluster):
    """DescribeLogDirs (35) at each broker: every replica of an RF 3 topic has its log there,
    the same size on the three once replicated, offset lag 0 on leader and followers alike
    (Kafka's HW - LEO), no future logs; our Admin asks every broker of the cluster."""
    import asyncio

    from kgroup.client.admin import Admin
    from kgroup.client.assignors import TopicPartition
    all_running(cluster)
    cluster.create_topic("logdirs", 2, 3)
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(40):
        p.produce("logdirs", value=b"x" * 100, partition=i % 2)
    assert p.flush(30) == 0
    tps = [TopicPartition("logdirs", 0), TopicPartition("logdirs", 1)]

    async def describe():
        async with Admin(bootstrap_servers=cluster.bootstrap_servers) as a:
            return await a.describe_log_dirs(partitions=tps)
    got = {}

    def replicated():
        got.update(asyncio.run(describe()))
        sizes = {(n, tp): info.size for n, dirs in got.items() for d in dirs.values()
                 for tp, info in d.replica_infos.items()}
        return len(sizes) == 6 and all(sizes[(n, tp)] == sizes[(1, tp)] > 0 for n in (1, 2, 3) for tp in tps)
    cluster.wait_for(replicated, 30, 0.5)
    assert sorted(got) == [1, 2, 3]
    for n, dirs in got.items():
        (log_dir, d), = dirs.items()
        assert log_dir == os.path.abspath(cluster.broker(n).data_dir) and d.error is None
        assert d.total_bytes >= d.usable_bytes > 0
        assert all(info.offset_lag == 0 and info.is_future is False for info in d.replica_infos.values())
    leader = cluster.leader("logdirs", 0)
    follower = next(n for n in (1, 2, 3) if n != leader)
    c = RawClient(cluster.broker(follower).port)      # a follower answers for its own replicas (wire v4)
    try:
        from kgroup.protocol.messages.describe_log_dirs import DescribeLogDirsRequest as R
        resp = c.request(R(topics=[R.DescribableLogDirTopic(topic="logdirs", partitions=[0])]), 4)
    finally:
        c.close()
    assert resp.error_code == 0
    assert [(t.name, [q.partition_index for q in t.partitions]) for t in resp.results[0].topics] == [("logdirs", [0])]
