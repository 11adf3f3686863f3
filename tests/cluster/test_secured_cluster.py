"""A secured cluster: 3 brokers over ZooKeeper whose only listener is SASL_SSL (PLAIN), with
StandardAuthorizer on, the brokers logging in to each other as ``User:broker`` (a super user) and
a client ``User:alice`` allowed by ACLs. Replication, the coordinators' inter-broker requests and
the clients all go through that listener: an RF 3 topic with min.insync.replicas=2, an idempotent
acks=all producer and a committing consumer group of alice's through the partition leader's
SIGKILL (nothing acknowledged lost, the group goes on); transactions and a share group whose
inter-broker requests cross brokers; then a broker started with wrong
inter-broker credentials: its fetchers fail authentication, say so in its log, and it never
joins an ISR. And a cluster with a mutual-TLS listener only, whose brokers are authorized by
their certificate's name mapped with ssl.principal.mapping.rules."""
import asyncio
import re
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kgroup.client.connection import BrokerConnection
from kgroup.client.security import ClientSecurity
from kgroup.protocol.messages.create_acls import CreateAclsRequest
from kgroup.security import acl as A

from .checker import acknowledged_once_in_order, commits_never_go_back, every_group_consumed_everything

pytestmark = pytest.mark.interop

USERS = {"broker": "broker-secret", "alice": "alice-secret"}
TOPIC, GROUP = "orders", "billing"
SETTINGS = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:broker", "zookeeper.session.timeout.ms": 6000, "replica.lag.time.max.ms": 5000,
            "offsets.topic.num.partitions": 3, "offsets.topic.replication.factor": 3,
            "transaction.state.log.num.partitions": 3, "share.coordinator.state.topic.num.partitions": 3,
            "group.share.min.session.timeout.ms": 6000, "group.share.session.timeout.ms": 6000}
# alice's ACLs: produce idempotently to and consume the topic, in her group
ALICE = [(A.RT_TOPIC, TOPIC, A.WRITE), (A.RT_TOPIC, TOPIC, A.READ), (A.RT_TOPIC, TOPIC, A.DESCRIBE),
         (A.RT_GROUP, GROUP, A.READ), (A.RT_CLUSTER, A.CLUSTER_NAME, A.IDEMPOTENT_WRITE)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from kgroup.testing.cluster import KafkaCluster
    with KafkaCluster(3, tmp_path_factory.mktemp("secured"), SETTINGS, listeners=("SASL_SSL",), users=USERS,
                      inter_broker_user="broker") as c:
        for n in c.brokers:
            asyncio.run(_create_acls(c, n, ALICE))
        yield c


def _java_config(c, user):
    return {"security.protocol": "SASL_SSL", "ssl.truststore.location": c.certs.ca_cert,
            "ssl.endpoint.identification.algorithm": "https", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                f'username="{user}" password="{USERS[user]}";'}


async def _send(c, n, req, version=None):
    """``req`` to broker ``n`` over SASL_SSL as the super user ``broker``."""
    b = c.broker(n)
    conn = BrokerConnection(b.host, b.port, node_id=n, client_id="test",
                            security=ClientSecurity(_java_config(c, "broker")))
    await conn.connect()
    try:
        return await conn.send(req, version=version)
    finally:
        conn.close()


async def _create_acls(c, n, entries):
    """CreateAcls on broker ``n`` itself, as the super user (ACLs are kept by each broker)."""
    b = c.broker(n)
    conn = BrokerConnection(b.host, b.port, node_id=n, client_id="acl-setup",
                            security=ClientSecurity(_java_config(c, "broker")))
    await conn.connect()
    try:
        C = CreateAclsRequest.AclCreation
        resp = await conn.send(CreateAclsRequest(creations=[
            C(resource_type=rt, resource_name=name, resource_pattern_type=A.LITERAL, principal="User:alice",
              host="*", operation=op, permission_type=A.ALLOW) for rt, name, op in entries]))
        assert [r.error_code for r in resp.results] == [0] * len(entries), resp
    finally:
        conn.close()


def _isr(c, topic, p):
    st = c.partition_state(topic, p)
    return set(st.isr) if st is not None else set()


def test_acks_all_and_a_group_through_a_leader_kill(cluster):
    c = cluster
    c.create_topic(TOPIC, 1, 3, {"min.insync.replicas": "2"})
    c.wait_for(lambda: _isr(c, TOPIC, 0) == {1, 2, 3}, what="the topic's ISR of 3")

    # authorization is on: alice may not write elsewhere
    denied = []
    p0 = Producer({**c.client_config("alice"), "message.timeout.ms": 10000})
    p0.produce("elsewhere", b"x", on_delivery=lambda err, msg: denied.append(err))
    p0.flush(20)
    assert denied and denied[0] is not None and denied[0].name() == "TOPIC_AUTHORIZATION_FAILED", denied

    producer = Producer({**c.client_config("alice"), "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 60000})
    acked, errors = [], []

    def report(err, msg):
        (errors if err else acked).append(err or msg.value())
    stop_producing, stop_consuming = threading.Event(), threading.Event()

    def produce():
        i = 0
        while not stop_producing.is_set():
            producer.produce(TOPIC, value=b"%d" % i, partition=0, on_delivery=report)
            producer.poll(0)
            i += 1
            time.sleep(0.003)

    seen, commits, consumer_errors = set(), [], []

    def consume():
        consumer = Consumer({**c.client_config("alice"), "group.id": GROUP, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False, "session.timeout.ms": 10000})
        consumer.subscribe([TOPIC])
        try:
            while not stop_consuming.is_set():
                m = consumer.poll(0.2)
                if m is None:
                    continue
                if m.error():
                    consumer_errors.append(m.error())
                    continue
                seen.add((0, m.value()))
                if len(seen) % 200 == 0:
                    try:
                        for tp in consumer.commit(asynchronous=False):
                            commits.append(("consumer", GROUP, tp.partition, tp.offset))
                    except Exception as e:     # noqa: BLE001 - retried at the next commit
                        consumer_errors.append(e)
            for tp in consumer.commit(asynchronous=False):
                commits.append(("consumer", GROUP, tp.partition, tp.offset))
        finally:
            consumer.close()
    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    time.sleep(3)
    victim = c.leader(TOPIC, 0)
    c.kill(victim)
    c.wait_for(lambda: c.leader(TOPIC, 0) not in (None, victim), what="a new leader")
    time.sleep(3)
    stop_producing.set()
    threads[0].join()
    assert producer.flush(60) == 0
    assert acked and not errors, errors[:3]
    c.wait_for(lambda: {(0, v) for v in acked} <= seen, 60, what="the group to consume every acknowledged record")
    stop_consuming.set()
    threads[1].join()

    # the killed broker comes back and catches up over the secured listener
    c.start_broker(victim)
    c.wait_for(lambda: _isr(c, TOPIC, 0) == {1, 2, 3}, 60, what=f"broker {victim} back in the ISR")

    reader = Consumer({**c.client_config("broker"), "group.id": "check", "enable.auto.commit": False})
    reader.assign([TopicPartition(TOPIC, 0, 0)])
    log, deadline = [], time.monotonic() + 60
    while time.monotonic() < deadline and len(log) < len(acked):
        m = reader.poll(0.5)
        if m is not None and not m.error():
            log.append(m.value())
    committed = reader.committed([TopicPartition(TOPIC, 0)], 30)
    reader.close()
    final = Consumer({**c.client_config("alice"), "group.id": GROUP})
    after = final.committed([TopicPartition(TOPIC, 0)], 30)[0].offset
    final.close()
    assert committed[0].offset < 0              # the reader's own group committed nothing
    assert acknowledged_once_in_order({0: acked}, {0: log}) == []
    assert every_group_consumed_everything({0: acked}, {GROUP: seen}) == []
    commits.append(("offset-fetch", GROUP, 0, after))
    assert commits_never_go_back(commits) == []
    assert after >= len(acked), (after, len(acked))
    print(f"acknowledged {len(acked)}, consumed {len(seen)}, committed {after}")


def test_transactions_over_the_secured_listener(cluster):
    """A transactional producer whose partitions have several leaders: the coordinator's
    WriteTxnMarkers and the leaders' AddPartitionsToTxn verification go between the brokers over
    SASL_SSL, authorized by CLUSTER_ACTION (the broker's super user)."""
    c = cluster
    c.create_topic("payments", 3, 3, {"min.insync.replicas": "2"})
    c.wait_for(lambda: all(c.leader("payments", q) is not None for q in range(3)), what="leaders")
    assert len({c.leader("payments", q) for q in range(3)}) > 1      # the partitions' leaders differ
    p = Producer({**c.client_config("broker"), "transactional.id": "tx-secured", "transaction.timeout.ms": 30000})
    p.init_transactions(30)
    expected = []
    for n in range(3):
        p.begin_transaction()
        values = [b"%d-%d" % (n, i) for i in range(6)]
        for i, v in enumerate(values):
            p.produce("payments", value=v, partition=i % 3)
        if n != 1:
            p.commit_transaction(60)
            expected += values
        else:
            p.abort_transaction(60)
    r = Consumer({**c.client_config("broker"), "group.id": "payments-reader", "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    r.assign([TopicPartition("payments", q, 0) for q in range(3)])
    got, idle = [], time.monotonic()
    while time.monotonic() - idle < 5:
        m = r.poll(0.3)
        if m is not None and not m.error():
            got.append(m.value())
            idle = time.monotonic()
    r.close()
    assert sorted(got) == sorted(expected)


def test_share_group_state_across_brokers(cluster):
    """A share group whose share-partition's leader (the data partition's) is not its state
    partition's leader: acknowledgements are written to the share coordinator on the other
    broker over SASL_SSL (share_persister.py); after the data leader's SIGKILL the new leader
    reads them back, so nothing acknowledged is delivered again."""
    from confluent_kafka import AcknowledgeType, ShareConsumer

    from kgroup.cluster import zk_data as zd
    from kgroup.protocol.messages.find_coordinator import FindCoordinatorRequest
    from kgroup.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
    from kgroup.share_coordinator.shard import share_state_partition
    c = cluster
    c.create_topic("work", 1, 3, {"min.insync.replicas": "2"})
    topic_id = c.zk.get_topic("work")[1]
    data_leader = c.leader("work", 0)
    probe = f"probe:{zd.uuid_to_str(topic_id)}:0"      # FindCoordinator (share) creates __share_group_state

    def state_topic_led():
        resp = asyncio.run(_send(c, 1, FindCoordinatorRequest(key_type=2, coordinator_keys=[probe]), 6))
        return resp.coordinators[0].error_code == 0
    c.wait_for(state_topic_led, 60, interval=0.3, what="__share_group_state's leaders")
    group = next(g for g in (f"sg{i}" for i in range(100)) if c.leader(
        "__share_group_state", share_state_partition(g, topic_id, 0, 3)) not in (None, data_leader))
    state_p = share_state_partition(group, topic_id, 0, 3)
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    for n in c.brokers:     # group configs are kept by each broker
        resp = asyncio.run(_send(c, n, IncrementalAlterConfigsRequest(validate_only=False, resources=[R(
            resource_type=32, resource_name=group, configs=[R.AlterableConfig(
                name="share.auto.offset.reset", config_operation=0, value="earliest")])]), 1))
        assert [r.error_code for r in resp.responses] == [0]
    p = Producer({**c.client_config("broker"), "acks": "all"})
    for i in range(6):
        p.produce("work", b"v%d" % i, partition=0)
    assert p.flush(30) == 0

    def poll(consumer, want, timeout, ack=False):
        got, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline and len(got) < want:
            for m in list(consumer.poll(0.5)):
                assert m.error() is None, m.error()
                got.append(m.offset())
                if ack:
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        return sorted(got)
    first = ShareConsumer({**c.client_config("broker"), "group.id": group, "share.acknowledgement.mode": "explicit"})
    first.subscribe(["work"])
    try:
        assert poll(first, 6, 60, ack=True) == list(range(6))
        first.commit_sync()         # answered once the state is durable at the state partition's leader
    finally:
        first.close()
    assert c.leader("__share_group_state", state_p) != data_leader
    c.kill(data_leader)
    try:
        c.wait_for(lambda: c.leader("work", 0) not in (None, data_leader), 30, what="a new leader of work-0")
        for i in range(6, 9):
            p.produce("work", b"v%d" % i, partition=0)
        assert p.flush(60) == 0
        second = ShareConsumer({**c.client_config("broker"), "group.id": group})
        second.subscribe(["work"])
        try:
            assert poll(second, 3, 90) == [6, 7, 8]
            assert poll(second, 1, 4) == []
        finally:
            second.close()
    finally:
        c.start_broker(data_leader)


def test_wrong_inter_broker_credentials(cluster):
    """A broker whose inter-broker login is refused: Kafka's authentication error in its log, and
    it never joins the ISR (the others keep the partition available)."""
    c = cluster
    c.create_topic("ledger", 1, 3, {"min.insync.replicas": "2"})
    c.wait_for(lambda: _isr(c, "ledger", 0) == {1, 2, 3}, what="the ISR of 3")
    n = next(b for b in (3, 2, 1) if b != c.controller())
    b = c.broker(n)
    key = "listener.name.sasl_ssl.plain.sasl.jaas.config"
    good = b.overrides[key]
    c.stop(n)           # controlled shutdown: it leaves every ISR
    c.wait_for(lambda: n not in _isr(c, "ledger", 0), what=f"broker {n} out of the ISR")
    b.overrides[key] = good.replace('password="broker-secret"', 'password="wrong"', 1)
    try:
        since = len(b.log_text())
        b.start()
        p = Producer({**c.client_config("broker"), "acks": "all"})
        for i in range(50):
            p.produce("ledger", b"%d" % i, partition=0)
        assert p.flush(30) == 0

        def refused():
            return len(re.findall(r"\[broker-%d-fetcher-0\] Connection to node \d+ \(127\.0\.0\.1:\d+\) failed "
                                  r"authentication due to: Authentication failed: Invalid username or password" % n,
                                  b.log_text(since)))
        c.wait_for(lambda: refused() >= 3, 30, what="the fetcher's authentication failures in the log")
        assert n not in _isr(c, "ledger", 0)
    finally:
        c.stop(n)
        b.overrides[key] = good
        c.start_broker(n)
    c.wait_for(lambda: n in _isr(c, "ledger", 0), 60, what=f"broker {n} back in the ISR with its right login")


def test_mutual_tls_cluster_authorized_by_certificate_name(tmp_path):
    """SSL listeners requiring client certificates only: each broker presents its keystore's
    certificate (subject CN=localhost,O=kgroup) to the others, verifies theirs against the CA and
    their host name (Kafka's default ssl.endpoint.identification.algorithm=https), and is
    User:localhost through ssl.principal.mapping.rules, the only super user."""
    from kgroup.testing.cluster import KafkaCluster
    with KafkaCluster(3, tmp_path, {**SETTINGS, "super.users": "User:localhost",
                                    "ssl.principal.mapping.rules": "RULE:^.*CN=([^,]+).*$/$1/,DEFAULT"},
                      listeners=("SSL",)) as c:
        c.create_topic("audit", 1, 3, {"min.insync.replicas": "2"})
        c.wait_for(lambda: _isr(c, "audit", 0) == {1, 2, 3}, what="the ISR of 3 over mutual TLS")
        p = Producer({**c.client_config(), "acks": "all", "enable.idempotence": True})
        acked = []
        for i in range(200):
            p.produce("audit", b"%d" % i, partition=0, on_delivery=lambda err, msg: acked.append(err or msg.value()))
        assert p.flush(30) == 0 and acked == [b"%d" % i for i in range(200)]
        # a follower's log end: every broker holds the records (the ISR's minimum is the high watermark)
        leader = c.leader("audit", 0)
        c.kill(leader)
        c.wait_for(lambda: c.leader("audit", 0) not in (None, leader), what="a new leader")
        reader = Consumer({**c.client_config(), "group.id": "audit-check", "enable.auto.commit": False})
        reader.assign([TopicPartition("audit", 0, 0)])
        log, deadline = [], time.monotonic() + 60
        while time.monotonic() < deadline and len(log) < len(acked):
            m = reader.poll(0.5)
            if m is not None and not m.error():
                log.append(m.value())
        reader.close()
        assert acknowledged_once_in_order({0: acked}, {0: log}) == []
        # a client certificate mapped to User:client is no super user: it may not write
        denied = []
        p2 = Producer({**c.client_config("client"), "message.timeout.ms": 10000})
        p2.produce("audit", b"x", partition=0, on_delivery=lambda err, msg: denied.append(err))
        p2.flush(20)
        assert denied and denied[0] is not None and denied[0].name() == "TOPIC_AUTHORIZATION_FAILED", denied
