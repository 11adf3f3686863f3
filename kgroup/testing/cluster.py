"""A kgroup cluster for tests: a ZooKeeper (kgroup.testing.zookeeper) and N ``kgroup serve``
processes joined to it (node ids 1..N, each on its own data directory and ephemeral port on
127.0.0.1), with what a failover test needs: ``kill(n)`` (SIGKILL), ``stop(n)`` (SIGTERM: a
controlled shutdown), ``pause(n)`` / ``resume(n)`` (SIGSTOP / SIGCONT), ``start(n)`` again on the
same data and port, and a ZooKeeper client on the cluster's metadata.

    with KafkaCluster(3, tmp_path) as cluster:
        cluster.create_topic("orders", partitions=3, replication_factor=3)
        leader = cluster.leader("orders", 0)
        cluster.kill(leader)
        cluster.wait_for(lambda: cluster.leader("orders", 0) not in (None, leader))

The ``kafka_cluster`` pytest fixture is one of these with 3 brokers."""
from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time
from typing import Mapping

from .broker import KafkaBroker
from .zookeeper import ZooKeeperServer

CLUSTER_TEST_DEFAULTS = {"zookeeper.session.timeout.ms": "6000", "leader.imbalance.check.interval.seconds": "300"}


class KafkaCluster:
    def __init__(self, brokers: int = 3, work_dir: str | os.PathLike | None = None,
                 overrides: Mapping[str, object] | None = None, *, racks: Mapping[int, str] | None = None,
                 broker_overrides: Mapping[int, Mapping[str, object]] | None = None, start_timeout: float = 60.0,
                 security: bool = False, users: Mapping[str, str] | None = None):
        self._own_dir = work_dir is None
        self.work_dir = str(work_dir) if work_dir is not None else tempfile.mkdtemp(prefix="kgroup-cluster-")
        self.size = brokers
        self.overrides = {**CLUSTER_TEST_DEFAULTS, **{k: str(v) for k, v in (overrides or {}).items()}}
        self.racks = dict(racks or {})
        self.broker_overrides = {n: {k: str(v) for k, v in o.items()} for n, o in (broker_overrides or {}).items()}
        self.start_timeout = start_timeout
        # security: each broker with KafkaBroker(security=True)'s four listeners (PLAINTEXT first,
        # the inter-broker one), ``users`` its SASL PLAIN users (SCRAM users are the cluster's, in
        # ZooKeeper: add them with AlterUserScramCredentials)
        self.security, self.users = security, dict(users or {})
        self.zookeeper = ZooKeeperServer(os.path.join(self.work_dir, "zookeeper"))
        self.brokers: dict[int, KafkaBroker] = {}
        self._zk = None

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> "KafkaCluster":
        os.makedirs(self.zookeeper.work_dir, exist_ok=True)
        self.zookeeper.start()
        for n in range(1, self.size + 1):
            overrides = {**self.overrides, "node.id": str(n), "zookeeper.connect": self.zookeeper.connect,
                         **self.broker_overrides.get(n, {})}
            if n in self.racks:
                overrides["broker.rack"] = self.racks[n]
            self.brokers[n] = KafkaBroker(os.path.join(self.work_dir, f"broker-{n}"), overrides, process=True,
                                          start_timeout=self.start_timeout, security=self.security, users=self.users)
        for b in self.brokers.values():
            b.start()
        self.wait_for(lambda: len(self.zk.get_broker_ids()) == self.size and self.controller() is not None)
        self.wait_until_brokers_see_each_other()
        return self

    def wait_until_brokers_see_each_other(self, timeout: float = 30.0) -> None:
        """Every running broker's metadata cache has exactly the running brokers (each logs its
        live brokers when they change), so any of them can place replicas on all."""
        running = sorted(n for n, b in self.brokers.items() if b.running)

        def sees_all(n):
            seen = re.findall(rf"broker {n}: live brokers (\[[0-9, ]*\])", self.brokers[n].log_text())
            return bool(seen) and seen[-1] == str(running)
        self.wait_for(lambda: all(sees_all(n) for n in running), timeout,
                      what=f"every broker to see brokers {running}")

    def close(self) -> None:
        try:
            for b in self.brokers.values():
                if b.running:
                    if b.proc is not None:
                        b.proc.send_signal(signal.SIGCONT)
                    b.proc.kill()
                    b.proc.wait()
                b.close()
            if self._zk is not None:
                self._zk.close()
                self._zk = None
            self.zookeeper.stop()
        finally:
            if self._own_dir:
                shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- brokers --------------------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers.values() if b.port)

    def broker(self, n: int) -> KafkaBroker:
        return self.brokers[n]

    def kill(self, n: int) -> None:
        """SIGKILL broker ``n``: its registration stays until its ZooKeeper session expires."""
        b = self.brokers[n]
        b.proc.send_signal(signal.SIGCONT)
        b.kill()

    def stop(self, n: int) -> None:
        """SIGTERM broker ``n``: a controlled shutdown, then a clean stop."""
        self.brokers[n].stop()

    def pause(self, n: int) -> None:
        self.brokers[n].proc.send_signal(signal.SIGSTOP)

    def resume(self, n: int) -> None:
        self.brokers[n].proc.send_signal(signal.SIGCONT)

    def start_broker(self, n: int) -> KafkaBroker:
        """Start broker ``n`` again on its data and port (after a SIGKILL it waits out the old
        session's registration)."""
        b = self.brokers[n].start()
        self.wait_until_brokers_see_each_other()
        return b

    # -- ZooKeeper -----------------------------------------------------------------------------------------
    def stop_zookeeper(self) -> None:
        """Stop ZooKeeper (SIGTERM, then SIGKILL): the brokers lose their sessions' server and keep
        serving from what they know until it is back."""
        self.zookeeper.stop()

    def start_zookeeper(self) -> None:
        """Start ZooKeeper again on its port and data directory (its snapshot and transaction log
        keep the tree and the open sessions)."""
        self.zookeeper.start()

    def restart_zookeeper(self, down: float = 0.0) -> None:
        """Stop ZooKeeper, wait ``down`` seconds, start it again on the same port and data."""
        self.stop_zookeeper()
        time.sleep(down)
        self.start_zookeeper()

    def controller_epoch(self) -> int | None:
        """``/controller_epoch``: it grows by one with every controller election."""
        got = self.zk.zk.exists("/controller_epoch")
        return None if got is None else int(self.zk.zk.get("/controller_epoch")[0])

    # -- ZooKeeper's view -------------------------------------------------------------------------------
    @property
    def zk(self):
        """A KafkaZkClient on the cluster's ZooKeeper (kazoo), for reading its metadata."""
        if self._zk is None:
            from ..cluster.zk_client import KafkaZkClient
            self._zk = KafkaZkClient(self.zookeeper.connect, 10000)
            self._zk.start()
        return self._zk

    def controller(self) -> int | None:
        return self.zk.get_controller_id()

    def live_brokers(self) -> list[int]:
        return self.zk.get_broker_ids()

    def partition_state(self, topic: str, partition: int):
        """The partition's state znode: LeaderAndIsr (leader, leader_epoch, isr, controller_epoch,
        zk_version) or None."""
        return self.zk.get_partition_states([(topic, partition)]).get((topic, partition))

    def leader(self, topic: str, partition: int) -> int | None:
        st = self.partition_state(topic, partition)
        return None if st is None or st.leader < 0 else st.leader

    def assignment(self, topic: str) -> dict[int, tuple[int, ...]]:
        got = self.zk.get_topic(topic)
        return got[0] if got else {}

    def wait_for(self, predicate, timeout: float = 30.0, interval: float = 0.05, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                if predicate():
                    return
            except Exception as e:      # noqa: BLE001 - reported if it never holds
                last = e
            time.sleep(interval)
        raise AssertionError(f"timed out waiting for {what or predicate}" + (f" (last error: {last!r})" if last else ""))

    # -- admin -------------------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3,
                     configs: Mapping[str, str] | None = None) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        fut = admin.create_topics([NewTopic(name, partitions, replication_factor, config=dict(configs or {}))],
                                  operation_timeout=30)[name]
        fut.result(60)
