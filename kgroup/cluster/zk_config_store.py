"""The cluster-wide settings in ZooKeeper: ACLs, SCRAM credentials, dynamic broker configs, group
configs, client-metrics subscriptions and the finalized features, kept where Kafka 3.9's ZooKeeper
mode kept them (zk_config_data.py has the znodes) and applied by every broker.

Each store (acl_store.AclStore, scram_credentials.ScramCredentialStore, config_entities.
ConfigEntities, features.Features) has one interface and two backends; ``ClusterSettings.attach``
gives a cluster broker's stores the ZooKeeper backends below, loaded from ZooKeeper (Kafka's
DynamicConfigManager.startup and AclAuthorizer.loadCache). Handlers never see the difference.

A write (AlterConfigs, CreateAcls, AlterUserScramCredentials, UpdateFeatures, ...) goes to
ZooKeeper on the broker's ZooKeeper thread: an ACL resource znode by a conditional update on its
version, retried on a conflict (AclAuthorizer.updateResourceAcls), a config entity znode
(AdminZkClient.changeConfigs), then a change notification (a sequential znode under
/kafka-acl-changes, /kafka-acl-extended-changes or /config/changes). Then the writer installs the
znode's new content itself and answers the request; the other brokers install it when the
notification reaches them: each watches the three sequences and, as Kafka's
ZkNodeChangeNotificationListener, processes every notification above the last it processed
(all of them at start-up) by reading the entity it names again, then purges the notifications
older than 15 minutes. /feature is watched directly, its version the features' epoch (Kafka's
FinalizedFeatureCache). An install carries the zxid of what it read, and one older than what a
path last installed is ignored, so a late install never undoes a newer one."""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time

from kazoo.exceptions import (BadVersionError, ConnectionLoss, NodeExistsError, NoNodeError, OperationTimeoutError,
                               SessionExpiredError)

from ..security.acl import AclBinding
from ..security.scram import MECHANISMS
from . import zk_config_data as zc

log = logging.getLogger("kgroup.cluster")

CHANGE_EXPIRATION_MS = 15 * 60 * 1000       # ZkNodeChangeNotificationListener.changeExpirationMs
ENTITY_TYPES = (zc.BROKERS, zc.GROUPS, zc.CLIENT_METRICS)
# How long a write waits out a lost connection to ZooKeeper (Kafka's ZooKeeperClient retries a
# request across connection losses until its session expires) unless zookeeper.connection.timeout.ms
# says; every write is safe to repeat. A write that still fails is answered as Kafka answers a
# ZooKeeper exception (ZkBroker.after_writes).
WRITE_RETRY_S = 30.0


class ClusterSettings:
    def __init__(self, zk_broker, broker, write_retry_s: float = WRITE_RETRY_S):
        self.zkb = zk_broker
        self.broker = broker
        self.write_retry_s = write_retry_s
        self.zk = zk_broker.zk.zk
        self._installed_zxid: dict[str, int] = {}
        self._last_change: dict[str, int] = {}      # sequence root -> last notification processed

    # -- start-up -------------------------------------------------------------------------------------
    def attach(self) -> None:
        """Give the broker's stores their ZooKeeper backends, loaded now (synchronously, before
        the broker serves)."""
        for path in (zc.LITERAL_ACLS, zc.EXTENDED_ACLS, zc.LITERAL_ACL_CHANGES, zc.EXTENDED_ACL_CHANGES,
                     zc.CONFIG_CHANGES, *(f"{zc.CONFIG}/{t}" for t in (zc.USERS, *ENTITY_TYPES))):
            self.zk.ensure_path(path)
        b = self.broker
        b.security.credentials.use_backend(ZkScramBackend(self))
        if b.security.acls is not None:
            b.security.acls.use_backend(ZkAclBackend(self))
        b.metadata.features.use_backend(ZkFeaturesBackend(self))
        b.config_entities.backend = ZkConfigBackend(self)
        for entity_type in ENTITY_TYPES:
            b.config_entities.replace_all(entity_type, {
                name: configs for name, (configs, _) in self.read_entities(entity_type).items()})

    def start(self) -> None:
        """Watch the change notifications and /feature (the event loop is running)."""
        self.zk.ChildrenWatch(zc.CONFIG_CHANGES, self._watcher(zc.CONFIG_CHANGES, zc.CONFIG_CHANGE_PREFIX,
                                                                self._on_config_change))
        if self.broker.security.acls is not None:
            for root in (zc.LITERAL_ACL_CHANGES, zc.EXTENDED_ACL_CHANGES):
                self.zk.ChildrenWatch(root, self._watcher(root, zc.ACL_CHANGE_PREFIX, self._on_acl_change))
        self.zk.DataWatch(zc.FEATURE, self._on_feature)

    # -- reading ------------------------------------------------------------------------------------------
    def read(self, path: str) -> tuple[bytes | None, int, int]:
        """(data or None, the zxid it reflects, the znode's version or -1). For a missing znode the
        zxid is its parent's last child change, which is at least its deletion's."""
        try:
            data, stat = self.zk.get(path)
            return data, stat.mzxid, stat.version
        except NoNodeError:
            parent = self.zk.exists(path.rsplit("/", 1)[0])
            return None, parent.pzxid if parent is not None else 0, -1

    def read_entities(self, entity_type: str) -> dict[str, tuple[dict[str, str], int]]:
        out = {}
        for child in self.zk.get_children(f"{zc.CONFIG}/{entity_type}"):
            data, zxid, _ = self.read(f"{zc.CONFIG}/{entity_type}/{child}")
            if data is not None:
                out[zc.name_from_entity(entity_type, child)] = (zc.decode_entity_config(data), zxid)
        return out

    def _fresh(self, path: str, zxid: int) -> bool:
        """Install what was read at ``zxid`` unless the path has installed something newer."""
        if zxid < self._installed_zxid.get(path, -1):
            return False
        self._installed_zxid[path] = zxid
        return True

    # -- writing -------------------------------------------------------------------------------------------
    def write(self, job, install) -> None:
        """``job()`` on the ZooKeeper thread, then ``install(its result)`` on the event loop; the
        request being handled is answered after both (ZkBroker.after_writes)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:            # not on the event loop (a tool, a test's set-up): in place
            install(job())
            return
        done: concurrent.futures.Future = concurrent.futures.Future()

        def finish(result):
            try:
                install(result)
            except Exception as e:      # noqa: BLE001 - the request's answer carries the failure
                log.exception("installing a cluster setting failed")
                done.set_exception(e)
                return
            done.set_result(None)

        def run():
            deadline = time.monotonic() + self.write_retry_s
            try:
                while True:
                    # kazoo queues a request made while it reconnects until it has reconnected:
                    # the window is enforced before the job starts
                    while not self.zk.connected:
                        if time.monotonic() > deadline or self.zkb._closed:
                            raise ConnectionLoss(f"no connection to ZooKeeper within {self.write_retry_s:g} s")
                        time.sleep(0.05)
                    try:
                        result = job()
                        break
                    except (ConnectionLoss, OperationTimeoutError, SessionExpiredError):
                        if time.monotonic() > deadline or self.zkb._closed:
                            raise
                        time.sleep(0.2)
            except Exception as e:      # noqa: BLE001
                log.exception("writing a cluster setting to ZooKeeper failed")
                done.set_exception(e)
                return
            if loop.is_closed():
                done.set_result(None)
            else:
                loop.call_soon_threadsafe(finish, result)
        self.zkb._io.submit(run)
        self.zkb.add_write(done)

    def notify_config_change(self, entity_type: str, name: str) -> None:
        self.zk.create(f"{zc.CONFIG_CHANGES}/{zc.CONFIG_CHANGE_PREFIX}", zc.encode_config_change(entity_type, name),
                       sequence=True, makepath=True)

    # -- notifications (kazoo's thread) ------------------------------------------------------------------
    def _watcher(self, root: str, prefix: str, handle):
        def on_children(children):
            if self.zkb._closed:
                return False
            try:
                self._process(root, prefix, children, handle)
            except Exception:           # noqa: BLE001 - the next notification tries again
                log.exception("processing the notifications under %s failed", root)
            return None
        return on_children

    def _process(self, root: str, prefix: str, children, handle) -> None:
        """ZkNodeChangeNotificationListener.processNotifications."""
        now_ms = time.time() * 1000
        last = self._last_change.get(root, -1)
        names = sorted(c for c in children if c.startswith(prefix))
        for child in names:
            seq = int(child[len(prefix):])
            if seq <= last:
                continue
            try:
                data, _ = self.zk.get(f"{root}/{child}")
                handle(root, data)
            except NoNodeError:
                pass
            except Exception:           # noqa: BLE001 - Kafka logs a bad notification and goes on
                log.exception("bad change notification %s/%s", root, child)
            last = seq
        self._last_change[root] = last
        for child in names:             # purgeObsoleteNotifications
            stat = self.zk.exists(f"{root}/{child}")
            if stat is not None and now_ms - stat.ctime > CHANGE_EXPIRATION_MS:
                try:
                    self.zk.delete(f"{root}/{child}")
                except NoNodeError:
                    pass

    def _on_config_change(self, root: str, data: bytes) -> None:
        entity = zc.decode_config_change(data)
        if entity is None:
            return
        entity_type, name = entity
        if entity_type == zc.USERS:
            self.zkb._post(*ZkScramBackend.reader(self, name))
        elif entity_type in ENTITY_TYPES:
            path = zc.entity_path(entity_type, name)
            raw, zxid, _ = self.read(path)
            self.zkb._post(self._install_entity, entity_type, name, path, zc.decode_entity_config(raw), zxid)
        # topics/<t>: each broker watches /config/topics/<t> itself (zk_broker.py)

    def _install_entity(self, entity_type, name, path, configs, zxid) -> None:
        if self._fresh(path, zxid):
            self.broker.config_entities.install(entity_type, name, configs)

    def _on_acl_change(self, root: str, data: bytes) -> None:
        resource = zc.decode_acl_change(root, data)
        path = zc.acl_resource_path(*resource)
        raw, zxid, _ = self.read(path)
        self.zkb._post(self._install_acls, resource, path, zc.decode_acls(raw), zxid)

    def _install_acls(self, resource, path, entries, zxid) -> None:
        if self._fresh(path, zxid):
            self.broker.security.acls.set_resource_acls(*resource, {AclBinding(*resource, *e) for e in entries})

    def _on_feature(self, data, stat):
        if self.zkb._closed:
            return False
        if data is not None:
            try:
                finalized = zc.decode_features(data)
            except ValueError:
                log.exception("unreadable %s", zc.FEATURE)
                return None
            self.zkb._post(self._install_features, finalized, stat.version)
        return None

    def _install_features(self, finalized, version) -> None:
        features = self.broker.metadata.features
        if version > features.epoch:
            features.set_finalized(finalized, version)


class ZkAclBackend:
    """AclAuthorizer's ZooKeeper store: one znode per resource pattern."""

    def __init__(self, settings: ClusterSettings):
        self.s = settings

    def load(self) -> set[AclBinding]:
        zk, out = self.s.zk, set()
        for root, pattern_type in zc.acl_type_roots():
            try:
                types = zk.get_children(root)
            except NoNodeError:
                continue
            for type_name in types:
                try:
                    rtype = zc.resource_type_from_path_name(type_name)
                except ValueError:
                    continue
                for name in zk.get_children(f"{root}/{type_name}"):
                    path = zc.acl_resource_path(rtype, name, pattern_type)
                    data, zxid, _ = self.s.read(path)
                    self.s._installed_zxid[path] = zxid
                    out |= {AclBinding(rtype, name, pattern_type, *e) for e in zc.decode_acls(data)}
        return out

    def write(self, store, added: set[AclBinding], removed: set[AclBinding]) -> None:
        changes: dict[tuple, tuple[set, set]] = {}
        for a in added:
            changes.setdefault(a[:3], (set(), set()))[0].add(a[3:])
        for a in removed:
            changes.setdefault(a[:3], (set(), set()))[1].add(a[3:])
        zk = self.s.zk
        attempted: set = set()          # resources written by an attempt cut short by a lost connection

        def notify(resource):
            zk.create(f"{zc.acl_change_path(resource[2])}/{zc.ACL_CHANGE_PREFIX}", zc.encode_acl_change(*resource),
                      sequence=True, makepath=True)

        def job():
            out = []
            for resource, (add, remove) in changes.items():
                path = zc.acl_resource_path(*resource)
                while True:             # updateResourceAcls: a conditional update, retried on a conflict
                    data, _, version = self.s.read(path)
                    current = zc.decode_acls(data)
                    new = (current | add) - remove
                    if new == current:
                        if resource in attempted:   # written, but its notification may not be
                            notify(resource)
                        break
                    attempted.add(resource)
                    try:
                        if version < 0:
                            zk.create(path, zc.encode_acls(new), makepath=True)
                        elif not new:
                            zk.delete(path, version=version)
                        else:
                            zk.set(path, zc.encode_acls(new), version=version)
                    except (BadVersionError, NodeExistsError, NoNodeError):
                        continue
                    notify(resource)
                    break
                data, zxid, _ = self.s.read(path)
                out.append((resource, path, zc.decode_acls(data), zxid))
            return out

        def install(out):
            for resource, path, entries, zxid in out:
                self.s._install_acls(resource, path, entries, zxid)
        self.s.write(job, install)


class ZkScramBackend:
    """SCRAM credentials in /config/users/<user> (AdminZkClient.changeUserOrUserClientIdConfig);
    a user's other configs (quotas) in the same znode are kept."""

    def __init__(self, settings: ClusterSettings):
        self.s = settings

    @staticmethod
    def credentials_of(configs: dict[str, str]) -> dict:
        return {mech: zc.credential_from_string(v) for mech, v in configs.items() if mech in MECHANISMS}

    @staticmethod
    def reader(settings: ClusterSettings, user: str):
        """(install function, args) for ``user``'s znode read now."""
        path = zc.entity_path(zc.USERS, user)
        data, zxid, _ = settings.read(path)
        return ZkScramBackend._install, settings, user, path, zc.decode_entity_config(data), zxid

    @staticmethod
    def _install(settings, user, path, configs, zxid) -> None:
        if settings._fresh(path, zxid):
            settings.broker.security.credentials.set_user(user, ZkScramBackend.credentials_of(configs))

    def load(self) -> dict:
        out: dict[str, dict] = {}
        for user, (configs, zxid) in self.s.read_entities(zc.USERS).items():
            self.s._installed_zxid[zc.entity_path(zc.USERS, user)] = zxid
            for mech, cred in self.credentials_of(configs).items():
                out.setdefault(mech, {})[user] = cred
        return out

    def write(self, store, changes: dict) -> None:
        zk = self.s.zk

        def job():
            out = []
            for user, by_mech in changes.items():
                alter_user_credentials(zk, user, by_mech)
                out.append(ZkScramBackend.reader(self.s, user))
            return out

        def install(out):
            for fn, *args in out:
                fn(*args)
        self.s.write(job, install)


def alter_user_credentials(zk, user: str, by_mech: dict) -> None:
    """``user``'s SCRAM credential per mechanism name set (None: deleted) in /config/users/<user>,
    its other keys kept (a conditional update, retried on a conflict), then a change notification:
    AdminZkClient.changeConfigs, which kafka-configs.sh --zookeeper also uses to create the
    inter-broker SCRAM user before any broker runs. ``zk`` is a kazoo client."""
    path = zc.entity_path(zc.USERS, user)
    while True:
        try:
            data, stat = zk.get(path)
            version = stat.version
        except NoNodeError:
            data, version = None, -1
        configs = zc.decode_entity_config(data)
        for mech, cred in by_mech.items():
            if cred is None:
                configs.pop(mech, None)
            else:
                configs[mech] = zc.credential_to_string(cred)
        try:
            if version < 0:
                zk.create(path, zc.encode_entity_config(configs), makepath=True)
            else:
                zk.set(path, zc.encode_entity_config(configs), version=version)
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue
        break
    zk.create(f"{zc.CONFIG_CHANGES}/{zc.CONFIG_CHANGE_PREFIX}", zc.encode_config_change(zc.USERS, user),
              sequence=True, makepath=True)


class ZkConfigBackend:
    """Dynamic broker configs, group configs, client-metrics subscriptions: /config/<type>/<name>
    (AdminZkClient.changeConfigs: the entity znode, then a change notification)."""

    def __init__(self, settings: ClusterSettings):
        self.s = settings

    def write(self, entities, entity_type: str, name: str, configs: dict[str, str]) -> None:
        zk = self.s.zk
        path = zc.entity_path(entity_type, name)

        def job():
            try:
                zk.set(path, zc.encode_entity_config(configs))
            except NoNodeError:
                zk.create(path, zc.encode_entity_config(configs), makepath=True)
            self.s.notify_config_change(entity_type, name)
            data, zxid, _ = self.s.read(path)
            return zc.decode_entity_config(data), zxid

        def install(result):
            self.s._install_entity(entity_type, name, path, *result)
        self.s.write(job, install)


class ZkFeaturesBackend:
    """/feature (FeatureZNode): the finalized levels, its version the epoch. The first broker of a
    new cluster creates it with the levels a new cluster is formatted with."""

    def __init__(self, settings: ClusterSettings):
        self.s = settings

    def load(self) -> tuple[dict[str, int], int]:
        from ..broker.features import DEFAULT_FINALIZED
        try:
            self.s.zk.create(zc.FEATURE, zc.encode_features(DEFAULT_FINALIZED))
        except NodeExistsError:
            pass
        data, stat = self.s.zk.get(zc.FEATURE)
        return zc.decode_features(data), stat.version

    def write(self, features, finalized: dict[str, int]) -> None:
        zk = self.s.zk
        changed = {k: v for k, v in finalized.items() if features.finalized.get(k, 0) != v}
        changed.update({k: 0 for k in features.finalized if k not in finalized})

        def job():
            version = features.epoch
            new = finalized
            while True:
                try:
                    stat = zk.set(zc.FEATURE, zc.encode_features(new), version=version)
                    return {k: v for k, v in new.items() if v >= 1}, stat.version
                except BadVersionError:     # another broker updated meanwhile: these levels over its
                    data, st = zk.get(zc.FEATURE)
                    new = {k: v for k, v in {**zc.decode_features(data), **changed}.items() if v >= 1}
                    version = st.version

        def install(result):
            self.s._install_features(*result)
        self.s.write(job, install)
