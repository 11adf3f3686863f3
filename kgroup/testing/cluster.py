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

The ``kafka_cluster`` pytest fixture is one of these with 3 brokers.

A secured cluster: ``listeners=("SASL_SSL",)`` (any of SSL, SASL_PLAINTEXT, SASL_SSL; the first is
the inter-broker listener) with ``users`` (name -> password, able to log in with PLAIN and SCRAM)
and ``inter_broker_user``, the user the brokers log in to each other as with
``inter_broker_mechanism`` (their SCRAM credentials written to ZooKeeper before the brokers start,
as ``kgroup configs --zookeeper`` does); one CA and server certificate (``certs``) for every broker, generated
with ``openssl``. ``client_config(user)`` gives librdkafka's keys for a client of the secured
listener; the helpers (``create_topic``) use the inter-broker user. Authorization is the
caller's: ``overrides`` such as ``authorizer.class.name`` and ``super.users``."""
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
                 listeners: tuple[str, ...] | None = None, users: Mapping[str, str] | None = None,
                 inter_broker_user: str | None = None, inter_broker_mechanism: str = "PLAIN"):
        self._own_dir = work_dir is None
        self.work_dir = str(work_dir) if work_dir is not None else tempfile.mkdtemp(prefix="kgroup-cluster-")
        self.size = brokers
        self.overrides = {**CLUSTER_TEST_DEFAULTS, **{k: str(v) for k, v in (overrides or {}).items()}}
        self.racks = dict(racks or {})
        self.broker_overrides = {n: {k: str(v) for k, v in o.items()} for n, o in (broker_overrides or {}).items()}
        self.start_timeout = start_timeout
        self.listeners = tuple(n.upper() for n in (listeners or ("PLAINTEXT",)))
        self.secured = self.listeners != ("PLAINTEXT",)
        self.users = dict(users or {})
        self.inter_broker_user = inter_broker_user
        self.inter_broker_mechanism = inter_broker_mechanism.upper()
        self.certs = None
        if self.secured:
            self.overrides = {**self._security_overrides(), **self.overrides}
        self.zookeeper = ZooKeeperServer(os.path.join(self.work_dir, "zookeeper"))
        self.brokers: dict[int, KafkaBroker] = {}
        self._zk = None

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> "KafkaCluster":
        os.makedirs(self.zookeeper.work_dir, exist_ok=True)
        self.zookeeper.start()
        if self.secured and self.users:
            self._write_scram_users()
        for n in range(1, self.size + 1):
            overrides = {**self.overrides, "node.id": str(n), "zookeeper.connect": self.zookeeper.connect,
                         **self.broker_overrides.get(n, {})}
            if n in self.racks:
                overrides["broker.rack"] = self.racks[n]
            secure = {"security": True, "listeners": self.listeners, "users": self.users,
                      "certs": self._certificates()} if self.secured else {}
            self.brokers[n] = KafkaBroker(os.path.join(self.work_dir, f"broker-{n}"), overrides, process=True,
                                          start_timeout=self.start_timeout, **secure)
        for b in self.brokers.values():
            b.start()
        self.wait_for(lambda: len(self.zk.get_broker_ids()) == self.size and self.controller() is not None)
        self.wait_until_brokers_see_each_other()
        return self

    def _write_scram_users(self) -> None:
        """Every user's SCRAM-SHA-256 and -512 credentials in ZooKeeper before the brokers start, as
        ``kgroup configs --zookeeper`` (kafka-configs.sh --zookeeper) writes them: a cluster's SCRAM
        users are the cluster's (/config/users), the inter-broker one among them."""
        from ..cluster.zk_config_data import decode_entity_config, entity_path
        from ..cluster.zk_config_store import alter_user_credentials
        from ..security import scram
        for user, password in self.users.items():
            path = entity_path("users", user)
            have = decode_entity_config(self.zk.zk.get(path)[0] if self.zk.zk.exists(path) else None)
            missing = {m.mechanism_name: scram.generate_credential(m, password, 4096)
                       for m in (scram.SCRAM_SHA_256, scram.SCRAM_SHA_512) if m.mechanism_name not in have}
            if missing:
                alter_user_credentials(self.zk.zk, user, missing)

    def _certificates(self):
        if self.certs is None:
            from .certs import TestCertificates
            self.certs = TestCertificates.generate(os.path.join(self.work_dir, "certs"))
        return self.certs

    def _security_overrides(self) -> dict[str, str]:
        """The inter-broker listener and, on SASL, the JAAS configs holding the inter-broker
        user's login next to every user a PLAIN listener accepts."""
        listener = self.listeners[0]
        out = {"inter.broker.listener.name": listener}
        if not listener.startswith("SASL_"):
            return out
        user = self.inter_broker_user
        if user is None or user not in self.users:
            raise ValueError("a SASL inter-broker listener needs inter_broker_user, one of users")
        login = f'username="{user}" password="{self.users[user]}"'
        out["sasl.mechanism.inter.broker.protocol"] = self.inter_broker_mechanism
        for name in self.listeners:
            if not name.startswith("SASL_"):
                continue
            prefix = f"listener.name.{name.lower()}"
            out[f"{prefix}.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {login} "
                + " ".join(f'user_{u}="{p}"' for u, p in self.users.items()) + ";")
            for mech in ("scram-sha-256", "scram-sha-512"):
                out[f"{prefix}.{mech}.sasl.jaas.config"] = (
                    f"org.apache.kafka.common.security.scram.ScramLoginModule required {login};")
        return out

    def client_config(self, user: str | None = None, mechanism: str = "PLAIN", password: str | None = None) -> dict:
        """librdkafka's (confluent-kafka's) keys for a client of the cluster's first listener,
        logging in as ``user`` (default: the inter-broker user) when it is a SASL one; on SSL with
        ``user``'s client certificate (one of ``certs.clients``), by default the brokers' own."""
        listener = self.listeners[0]
        cfg = {"bootstrap.servers": self.bootstrap_servers}
        if not self.secured:
            return cfg
        cfg["security.protocol"] = listener
        if listener in ("SSL", "SASL_SSL"):
            cfg["ssl.ca.location"] = self.certs.ca_cert
        if listener == "SSL":       # a client certificate: ``user``'s, else the brokers' own
            cert, key = self.certs.client_cert(user) if user else (self.certs.server_cert, self.certs.server_key)
            cfg.update({"ssl.certificate.location": cert, "ssl.key.location": key})
        if listener.startswith("SASL_"):
            user = user or self.inter_broker_user
            cfg.update({"sasl.mechanisms": mechanism, "sasl.username": user,
                        "sasl.password": password if password is not None else self.users[user]})
        return cfg

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
        admin = AdminClient(self.client_config())
        fut = admin.create_topics([NewTopic(name, partitions, replication_factor, config=dict(configs or {}))],
                                  operation_timeout=30)[name]
        fut.result(60)
