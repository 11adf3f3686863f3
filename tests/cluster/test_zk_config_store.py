"""The ZooKeeper backends of the cluster-wide settings (zk_config_store.py) against a real ZooKeeper,
two "brokers" (each its own session and stores, no Kafka protocol): what one writes the other
installs from the change notifications, as Kafka's ZkNodeChangeNotificationListener (every
notification above the last processed, all of them at start-up, the old ones purged), and the
znodes are Kafka's."""
import concurrent.futures
import json
import time
from types import SimpleNamespace

import pytest

from kgroup.broker.acl_store import AclStore
from kgroup.broker.features import Features
from kgroup.broker.scram_credentials import ScramCredentialStore
from kgroup.cluster import zk_config_store
from kgroup.cluster.zk_client import KafkaZkClient
from kgroup.security import acl as A
from kgroup.security.scram import SCRAM_SHA_512, salted_password
from tests.cluster import test_controller_zk as czk

pytestmark = pytest.mark.interop


# a ZooKeeper for the module and a chroot per test, as the controller tests have them
zookeeper, chroot = czk.zookeeper, czk.chroot


class Entities:
    """config_entities.ConfigEntities' interface, recording what is installed."""

    def __init__(self):
        self.backend = None
        self.installed: dict = {}

    def write(self, entity_type, name, configs):
        self.backend.write(self, entity_type, name, configs)

    def install(self, entity_type, name, configs):
        self.installed[(entity_type, name)] = dict(configs)

    def replace_all(self, entity_type, by_name):
        for name, configs in by_name.items():
            self.install(entity_type, name, configs)


class Node:
    """A broker's side of the settings: a session, its stores, ClusterSettings attached and started."""

    def __init__(self, connect, data_dir, watch=True):
        self.zk = KafkaZkClient(connect, 6000)
        self.zk.start()
        self.zk.create_top_level_paths()
        self._closed = False
        self._io = concurrent.futures.ThreadPoolExecutor(1)
        self._unanswered_writes = []
        authorizer = A.StandardAuthorizer()
        self.broker = SimpleNamespace(
            security=SimpleNamespace(acls=AclStore(str(data_dir), authorizer),
                                     credentials=ScramCredentialStore(str(data_dir))),
            metadata=SimpleNamespace(features=Features(str(data_dir), 1)), config_entities=Entities())
        self.authorizer = authorizer
        self.settings = zk_config_store.ClusterSettings(self, self.broker)
        self.settings.attach()
        if watch:
            self.settings.start()

    def _post(self, fn, *args):         # ZkBroker hands over to its event loop; here, in place
        fn(*args)

    def close(self):
        self._closed = True
        self.zk.close()
        self._io.shutdown()


def wait_until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_what_one_broker_writes_the_other_installs(chroot, tmp_path):
    a, b = Node(chroot, tmp_path / "a"), Node(chroot, tmp_path / "b")
    try:
        allow = A.AclBinding(A.RT_TOPIC, "orders", A.LITERAL, "User:alice", "*", A.READ, A.ALLOW)
        prefixed = A.AclBinding(A.RT_GROUP, "g-", A.PREFIXED, "User:alice", "*", A.READ, A.ALLOW)
        assert a.broker.security.acls.create([allow, prefixed]) == [None, None]
        assert allow in a.authorizer.acls            # the writer installed it after the write
        wait_until(lambda: b.authorizer.acls == {allow, prefixed})
        # a concurrent change of the same resource through the other broker merges (versioned update)
        deny = A.AclBinding(A.RT_TOPIC, "orders", A.LITERAL, "User:bob", "*", A.ALL, A.DENY)
        b.broker.security.acls.create([deny])
        wait_until(lambda: a.authorizer.acls == {allow, prefixed, deny})
        assert len(json.loads(a.zk.zk.get("/kafka-acl/Topic/orders")[0])["acls"]) == 2
        a.broker.security.acls.delete([A.AclBindingFilter(A.RT_ANY, None, A.PT_ANY, None, None, A.ANY, A.PERM_ANY)])
        wait_until(lambda: b.authorizer.acls == set())
        assert a.zk.zk.get_children("/kafka-acl/Topic") == []

        salt = b"s" * 16
        a.broker.security.credentials.alter([], [("carol", SCRAM_SHA_512.type_code, 4096, salt,
                                                  salted_password(SCRAM_SHA_512, "pw", salt, 4096))])
        wait_until(lambda: b.broker.security.credentials.lookup("SCRAM-SHA-512", "carol") is not None)
        assert b.broker.security.credentials.lookup("SCRAM-SHA-512", "carol") == \
            a.broker.security.credentials.lookup("SCRAM-SHA-512", "carol")

        b.broker.config_entities.write("groups", "billing", {"consumer.session.timeout.ms": "50000"})
        wait_until(lambda: a.broker.config_entities.installed.get(("groups", "billing")) ==
                   {"consumer.session.timeout.ms": "50000"})

        fa, fb = a.broker.metadata.features, b.broker.metadata.features
        assert fa.epoch == fb.epoch == 0 and fa.finalized == fb.finalized
        fa.update({"group.version": (0, 2)})          # a safe downgrade
        assert fa.epoch == 1 and fa.level("group.version") == 0
        wait_until(lambda: fb.epoch == 1 and fb.level("group.version") == 0)

        # a broker started later installs everything at start-up
        c = Node(chroot, tmp_path / "c")
        try:
            assert c.authorizer.acls == set()
            assert c.broker.security.credentials.lookup("SCRAM-SHA-512", "carol") is not None
            assert c.broker.config_entities.installed[("groups", "billing")] == {"consumer.session.timeout.ms": "50000"}
            assert c.broker.metadata.features.epoch == 1
        finally:
            c.close()
    finally:
        a.close()
        b.close()


def test_notifications_processed_once_in_order_and_old_ones_purged(chroot, tmp_path, monkeypatch):
    a = Node(chroot, tmp_path / "a", watch=False)     # _process driven by the test alone
    try:
        seen = []
        s = a.settings
        zk = a.zk.zk
        for g in ("g1", "g2"):
            zk.create("/config/changes/config_change_", json.dumps({"version": 2, "entity_path": f"groups/{g}"}).encode(),
                      sequence=True)
        children = zk.get_children("/config/changes")
        s._process("/config/changes", "config_change_", children, lambda root, data: seen.append(data))
        assert [json.loads(d)["entity_path"] for d in seen] == ["groups/g1", "groups/g2"]
        count = len(seen)
        s._process("/config/changes", "config_change_", children, lambda root, data: seen.append(data))
        assert len(seen) == count                     # nothing above the last processed
        monkeypatch.setattr(zk_config_store, "CHANGE_EXPIRATION_MS", -1)
        s._process("/config/changes", "config_change_", zk.get_children("/config/changes"),
                   lambda root, data: seen.append(data))
        assert zk.get_children("/config/changes") == []   # purgeObsoleteNotifications
    finally:
        a.close()
