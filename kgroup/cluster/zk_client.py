"""KafkaZkClient over kazoo: the reads and writes of Kafka 3.9's kafka.zk.KafkaZkClient that a
kgroup broker and its controller make, on Kafka's znode layout (zk_data.py).

Blocking calls (kazoo's own thread does the I/O): the broker calls them from an executor thread
or a kazoo watch callback, never from its event loop; the controller from its event thread.
Controller writes are fenced as Kafka fences them: a multi-op whose first op checks the version of
/controller_epoch that this controller wrote, so a deposed controller's write fails as a whole."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError, RolledBackError,
                              RuntimeInconsistency)
from kazoo.retry import KazooRetry

from . import zk_data as zd

log = logging.getLogger("kgroup.cluster.zk")

# a conditional multi-op that did not apply: the op whose znode moved, and the others' results
_NOT_APPLIED = (BadVersionError, NoNodeError, RolledBackError, RuntimeInconsistency)


class ControllerMovedError(Exception):
    """A controller write refused: another broker holds a newer controller epoch."""


class KafkaZkClient:
    def __init__(self, connect: str, session_timeout_ms: int = 18000, connection_timeout_ms: int | None = None):
        # zookeeper.connect: host:port[,host:port...][/chroot], as Kafka takes it
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_s = (connection_timeout_ms or session_timeout_ms) / 1000.0
        self.zk = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000.0,
                              connection_retry=KazooRetry(max_tries=-1, max_delay=1.0),
                              command_retry=KazooRetry(max_tries=5, delay=0.05, max_delay=1.0))

    # -- session -----------------------------------------------------------------------------------
    def start(self) -> None:
        self.zk.start(timeout=self.connection_timeout_s)

    def close(self) -> None:
        try:
            self.zk.stop()
        finally:
            self.zk.close()

    @property
    def session_id(self) -> int | None:
        sid = self.zk.client_id
        return sid[0] if sid else None

    def create_top_level_paths(self) -> None:
        for path in zd.PERSISTENT_PATHS:
            self.zk.ensure_path(path)

    # -- cluster id (KafkaZkClient.getClusterId / createOrGetClusterId) ------------------------------
    def get_or_create_cluster_id(self, proposed: str) -> str:
        try:
            self.zk.create(zd.CLUSTER_ID, zd.encode_cluster_id(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            data, _ = self.zk.get(zd.CLUSTER_ID)
            return zd.decode_cluster_id(data)

    # -- brokers -----------------------------------------------------------------------------------
    def register_broker(self, broker_id: int, data: bytes, wait_s: float) -> int:
        """Create /brokers/ids/<id> (ephemeral); returns the broker epoch (the znode's czxid).
        A registration left by this id's previous, dead session is waited out (up to
        ``wait_s``: ZooKeeper removes it when that session expires); one of this session (a
        retried create) is ours."""
        path = zd.broker_path(broker_id)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self.zk.create(path, data, ephemeral=True, makepath=True)
            except NodeExistsError:
                try:
                    _, stat = self.zk.get(path)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self.session_id:
                    return stat.czxid
                if time.monotonic() >= deadline:
                    raise RuntimeError(f"broker id {broker_id} is registered in ZooKeeper by another live "
                                       f"session ({path}); is broker {broker_id} already running?") from None
                time.sleep(0.2)
                continue
            _, stat = self.zk.get(path)
            return stat.czxid

    def get_broker(self, broker_id: int) -> zd.BrokerRegistration | None:
        try:
            data, stat = self.zk.get(zd.broker_path(broker_id))
        except NoNodeError:
            return None
        return zd.decode_broker(broker_id, data, stat.czxid)

    def get_broker_ids(self) -> list[int]:
        try:
            return sorted(int(c) for c in self.zk.get_children(zd.BROKER_IDS))
        except NoNodeError:
            return []

    def get_live_brokers(self) -> dict[int, zd.BrokerRegistration]:
        out = {}
        ids = self.get_broker_ids()
        asyncs = [(b, self.zk.get_async(zd.broker_path(b))) for b in ids]
        for b, a in asyncs:
            try:
                data, stat = a.get()
            except NoNodeError:
                continue
            out[b] = zd.decode_broker(b, data, stat.czxid)
        return out

    # -- controller (KafkaZkClient.registerControllerAndIncrementControllerEpoch) -------------------
    def get_controller_id(self) -> int | None:
        try:
            data, _ = self.zk.get(zd.CONTROLLER)
        except NoNodeError:
            return None
        return zd.decode_controller(data)

    def register_controller_and_increment_epoch(self, broker_id: int) -> tuple[int, int] | None:
        """Become the controller: create the ephemeral /controller and bump /controller_epoch in
        one multi-op. Returns (epoch, the epoch znode's version), or None when another broker
        is the controller."""
        while True:
            try:
                data, stat = self.zk.get(zd.CONTROLLER_EPOCH)
                epoch, version = zd.decode_controller_epoch(data), stat.version
            except NoNodeError:
                try:
                    self.zk.create(zd.CONTROLLER_EPOCH, zd.encode_controller_epoch(0))
                except NodeExistsError:
                    pass
                continue
            tx = self.zk.transaction()
            tx.create(zd.CONTROLLER, zd.encode_controller(broker_id), ephemeral=True)
            tx.set_data(zd.CONTROLLER_EPOCH, zd.encode_controller_epoch(epoch + 1), version=version)
            results = tx.commit()
            if not any(isinstance(r, Exception) for r in results):
                return epoch + 1, results[1].version
            if isinstance(results[0], NodeExistsError):
                return None
            # the epoch moved under us (a concurrent election): read it again

    # -- topics ------------------------------------------------------------------------------------
    def get_all_topics(self) -> list[str]:
        try:
            return sorted(self.zk.get_children(zd.TOPICS))
        except NoNodeError:
            return []

    def get_topic(self, topic: str) -> tuple[dict[int, tuple[int, ...]], bytes | None, int] | None:
        """(assignment, topic id, znode version) or None."""
        got = self.get_topic_full(topic)
        return None if got is None else (got[0], got[1], got[4])

    def get_topic_full(self, topic: str):
        """(assignment RS, topic id, adding, removing, znode version) or None."""
        return self.get_topics_full([topic]).get(topic)

    def get_topics_full(self, topics) -> dict:
        """{topic: (assignment RS, topic id, adding, removing, znode version)}: the topic znodes
        with the reassignments in progress (TopicZNode.decode's ReplicaAssignment)."""
        asyncs = [(t, self.zk.get_async(zd.topic_path(t))) for t in topics]
        out = {}
        for t, a in asyncs:
            try:
                data, stat = a.get()
            except NoNodeError:
                continue
            assignment, tid = zd.decode_topic(data)
            adding, removing = zd.decode_topic_reassignment(data)
            out[t] = (assignment, tid, adding, removing, stat.version)
        return out

    def set_topic_assignment_fenced(self, topic: str, assignment, topic_id: bytes | None, adding, removing,
                                    expected_version: int, epoch_zk_version: int) -> int | None:
        """The controller's write of a topic znode (setTopicAssignmentRaw), fenced by the controller
        epoch and conditional on the version read: the new version, or None when it moved."""
        results = self._fenced(epoch_zk_version, [lambda tx: tx.set_data(
            zd.topic_path(topic), zd.encode_topic(assignment, topic_id, adding, removing), version=expected_version)])
        r = results[0]
        if isinstance(r, BadVersionError | NoNodeError):
            return None
        if isinstance(r, Exception):
            raise r
        return r.version

    def complete_reassignment(self, topic: str, states: dict, controller_epoch: int, assignment,
                              topic_id: bytes | None, adding, removing, expected_version: int,
                              epoch_zk_version: int) -> tuple[dict, int] | None:
        """A reassignment's last step for ``states`` ({tp: LeaderAndIsr}, each conditional on
        its version) and its topic znode (RS = TRS, conditional on ``expected_version``), in one
        fenced multi-op. Kafka's controller tells the leader RS = TRS in the LeaderAndIsr that
        shrinks the ISR; here the leaders read both znodes, and a leader's ISR change checks the
        topic znode's version (conditional_update_partition_state), so with one multi-op no
        leader adds a removed replica back between the two writes. ({tp: new state}, new topic
        version), or None when a znode moved (read again)."""
        items = list(states.items())
        ops: list[Callable[[Any], Any]] = [
            lambda tx, tp=tp, st=st: tx.set_data(zd.partition_state_path(*tp),
                                                 zd.encode_partition_state(st, controller_epoch), version=st.zk_version)
            for tp, st in items]
        ops.append(lambda tx: tx.set_data(zd.topic_path(topic), zd.encode_topic(assignment, topic_id, adding, removing),
                                          version=expected_version))
        results = self._fenced(epoch_zk_version, ops)
        failed = [r for r in results if isinstance(r, Exception)]
        for r in failed:
            if not isinstance(r, _NOT_APPLIED):
                raise r
        if failed:
            return None
        done = {tp: zd.LeaderAndIsr(st.leader, st.leader_epoch, st.isr, controller_epoch, r.version)
                for (tp, st), r in zip(items, results)}
        return done, results[-1].version

    # -- /admin/reassign_partitions ----------------------------------------------------------------
    def get_partition_reassignment(self) -> tuple[dict, int] | None:
        """(the reassignments written to /admin/reassign_partitions, its version) or None."""
        try:
            data, stat = self.zk.get(zd.REASSIGN_PARTITIONS)
        except NoNodeError:
            return None
        try:
            return zd.decode_reassign_partitions(data), stat.version
        except (ValueError, KeyError, TypeError):
            log.warning("ignoring malformed %s: %r", zd.REASSIGN_PARTITIONS, data[:200])
            return {}, stat.version

    def set_or_delete_partition_reassignment(self, reassignments: dict, expected_version: int,
                                             epoch_zk_version: int) -> bool:
        """Rewrite /admin/reassign_partitions with what is left, or delete it when nothing is
        (KafkaController.maybeRemoveFromZkReassignment); False when it moved meanwhile."""
        if reassignments:
            op = lambda tx: tx.set_data(zd.REASSIGN_PARTITIONS, zd.encode_reassign_partitions(reassignments),  # noqa: E731
                                        version=expected_version)
        else:
            op = lambda tx: tx.delete(zd.REASSIGN_PARTITIONS, version=expected_version)  # noqa: E731
        r = self._fenced(epoch_zk_version, [op])[0]
        if isinstance(r, BadVersionError | NoNodeError):
            return False
        if isinstance(r, Exception):
            raise r
        return True

    def create_partition_reassignment(self, reassignments: dict) -> None:
        """Write /admin/reassign_partitions (what kafka-reassign-partitions.sh --zookeeper did);
        NodeExistsError while one is in progress."""
        self.zk.create(zd.REASSIGN_PARTITIONS, zd.encode_reassign_partitions(reassignments), makepath=True)

    def get_topic_config(self, topic: str) -> dict[str, str]:
        try:
            data, _ = self.zk.get(zd.topic_config_path(topic))
        except NoNodeError:
            return {}
        return zd.decode_topic_config(data)

    def get_topic_configs(self, topics) -> dict[str, dict[str, str]]:
        asyncs = [(t, self.zk.get_async(zd.topic_config_path(t))) for t in topics]
        out = {}
        for t, a in asyncs:
            try:
                data, _ = a.get()
            except NoNodeError:
                data = None
            out[t] = zd.decode_topic_config(data)
        return out

    def purge_config_changes(self, older_than_ms: int) -> None:
        """Config change notifications older than ``older_than_ms`` go, as Kafka purges them."""
        try:
            children = self.zk.get_children(zd.CONFIG_CHANGES)
        except NoNodeError:
            return
        now_ms = time.time() * 1000
        for c in children:
            path = f"{zd.CONFIG_CHANGES}/{c}"
            stat = self.zk.exists(path)
            if stat is not None and now_ms - stat.ctime > older_than_ms:
                try:
                    self.zk.delete(path)
                except NoNodeError:
                    pass

    def topics_marked_for_deletion(self) -> list[str]:
        try:
            return sorted(self.zk.get_children(zd.DELETE_TOPICS))
        except NoNodeError:
            return []

    def create_topic(self, topic: str, assignment: dict[int, list[int]], topic_id: bytes,
                     configs: dict[str, str]) -> None:
        """AdminZkClient.createTopicWithAssignment: the config znode, then the assignment znode
        (the one the controller watches). NodeExistsError when the topic exists."""
        if self.zk.exists(zd.topic_path(topic)) is not None:
            raise NodeExistsError()
        self.zk.ensure_path(zd.CONFIG_TOPICS)
        try:
            self.zk.create(zd.topic_config_path(topic), zd.encode_topic_config(configs))
        except NodeExistsError:
            self.zk.set(zd.topic_config_path(topic), zd.encode_topic_config(configs))
        self.zk.create(zd.topic_path(topic), zd.encode_topic(assignment, topic_id), makepath=True)

    def set_topic_assignment(self, topic: str, assignment: dict[int, list[int]], topic_id: bytes | None,
                             expected_version: int, adding=None, removing=None) -> None:
        """AdminZkClient.writeTopicPartitionAssignment (adding partitions; the reassignments in
        progress kept); BadVersionError when the topic changed meanwhile."""
        self.zk.set(zd.topic_path(topic), zd.encode_topic(assignment, topic_id, adding, removing),
                    version=expected_version)

    def set_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        """AdminZkClient.changeTopicConfig: the entity znode and a change notification."""
        try:
            self.zk.set(zd.topic_config_path(topic), zd.encode_topic_config(configs))
        except NoNodeError:
            self.zk.create(zd.topic_config_path(topic), zd.encode_topic_config(configs), makepath=True)
        self.zk.create(f"{zd.CONFIG_CHANGES}/config_change_", zd.encode_config_change(f"topics/{topic}"),
                       sequence=True, makepath=True)

    def mark_topic_for_deletion(self, topic: str) -> None:
        try:
            self.zk.create(zd.delete_topic_path(topic), b"", makepath=True)
        except NodeExistsError:
            pass

    # -- partition states --------------------------------------------------------------------------
    def get_partition_states(self, tps) -> dict[tuple[str, int], zd.LeaderAndIsr]:
        asyncs = [(tp, self.zk.get_async(zd.partition_state_path(*tp))) for tp in tps]
        out = {}
        for tp, a in asyncs:
            try:
                data, stat = a.get()
            except NoNodeError:
                continue
            out[tp] = zd.decode_partition_state(data, stat.version)
        return out

    def _fenced(self, epoch_zk_version: int, ops) -> list:
        tx = self.zk.transaction()
        tx.check(zd.CONTROLLER_EPOCH, epoch_zk_version)
        for op in ops:
            op(tx)
        results = tx.commit()
        if isinstance(results[0], BadVersionError | NoNodeError):
            raise ControllerMovedError("the controller epoch moved: another broker is the controller")
        return results[1:]

    def create_partition_states(self, states: dict, controller_epoch: int, epoch_zk_version: int) -> dict:
        """The controller's first state of new partitions (createTopicPartitionStatesRaw); the
        partitions whose state znode could not be created (it exists) are left out."""
        out = {}
        for tp, st in states.items():
            self.zk.ensure_path(zd.partition_path(*tp))
            results = self._fenced(epoch_zk_version, [lambda tx, tp=tp, st=st: tx.create(
                zd.partition_state_path(*tp), zd.encode_partition_state(st, controller_epoch))])
            if isinstance(results[0], NodeExistsError):
                continue
            if isinstance(results[0], Exception):
                raise results[0]
            out[tp] = zd.LeaderAndIsr(st.leader, st.leader_epoch, st.isr, controller_epoch, 0)
        return out

    def update_leader_and_isr(self, states: dict, controller_epoch: int, epoch_zk_version: int) -> tuple[dict, list]:
        """updateLeaderAndIsr: conditional writes (each against the version read), fenced by the
        controller epoch. Returns ({tp: new state with its new version}, [tps whose version moved])."""
        done, stale = {}, []
        for tp, st in states.items():
            results = self._fenced(epoch_zk_version, [lambda tx, tp=tp, st=st: tx.set_data(
                zd.partition_state_path(*tp), zd.encode_partition_state(st, controller_epoch), version=st.zk_version)])
            r = results[0]
            if isinstance(r, BadVersionError | NoNodeError):
                stale.append(tp)
            elif isinstance(r, Exception):
                raise r
            else:
                done[tp] = zd.LeaderAndIsr(st.leader, st.leader_epoch, st.isr, controller_epoch, r.version)
        return done, stale

    def conditional_update_partition_state(self, topic: str, partition: int, state: zd.LeaderAndIsr,
                                           expected_version: int) -> int | None:
        """A leader's ISR change (Kafka's ZooKeeper-mode Partition.updateIsr before AlterPartition):
        the new version, or None when the znode moved since ``expected_version``, or when the
        new ISR has a replica outside the partition's replicas (a reassignment removed it: the
        leader has not read the topic znode yet). Conditional on the topic znode's version too,
        so that it cannot land between a reassignment's ISR shrink and its RS = TRS
        (complete_reassignment)."""
        got = self.get_topic_full(topic)
        if got is None:
            return None
        replicas, topic_version = got[0].get(partition, ()), got[4]
        if not set(state.isr) <= set(replicas):
            log.info("ISR change of %s-%d to %s refused: the replicas are now %s", topic, partition,
                     list(state.isr), list(replicas))
            return None
        tx = self.zk.transaction()
        tx.check(zd.topic_path(topic), topic_version)
        tx.set_data(zd.partition_state_path(topic, partition), zd.encode_partition_state(state, state.controller_epoch),
                    version=expected_version)
        results = tx.commit()
        for r in results:
            if isinstance(r, _NOT_APPLIED):
                return None
            if isinstance(r, Exception):
                raise r
        stat = results[1]
        try:
            self.zk.create(f"{zd.ISR_CHANGE_NOTIFICATION}/isr_change_", zd.encode_isr_change([(topic, partition)]),
                           sequence=True, makepath=True)
        except Exception:   # noqa: BLE001 - the notification only speeds up the controller's view
            log.debug("isr change notification not written", exc_info=True)
        return stat.version

    def delete_topic_znodes(self, topic: str, epoch_zk_version: int) -> None:
        """The end of a topic deletion (TopicDeletionManager.completeDeleteTopic): the topic's
        znodes, its config, then the deletion marker."""
        try:
            for child in self.zk.get_children(zd.partitions_path(topic)):
                self._delete_recursive(f"{zd.partitions_path(topic)}/{child}", epoch_zk_version)
        except NoNodeError:
            pass
        for path in (zd.partitions_path(topic), zd.topic_path(topic), zd.topic_config_path(topic),
                     zd.delete_topic_path(topic)):
            self._delete_recursive(path, epoch_zk_version)

    def _delete_recursive(self, path: str, epoch_zk_version: int) -> None:
        try:
            children = self.zk.get_children(path)
        except NoNodeError:
            return
        for c in children:
            self._delete_recursive(f"{path}/{c}", epoch_zk_version)
        results = self._fenced(epoch_zk_version, [lambda tx: tx.delete(path)])
        if isinstance(results[0], Exception) and not isinstance(results[0], NoNodeError | NotEmptyError):
            raise results[0]

    def delete_isr_change_notifications(self) -> None:
        try:
            for c in self.zk.get_children(zd.ISR_CHANGE_NOTIFICATION):
                try:
                    self.zk.delete(f"{zd.ISR_CHANGE_NOTIFICATION}/{c}")
                except NoNodeError:
                    pass
        except NoNodeError:
            pass

    # -- controlled shutdown -----------------------------------------------------------------------
    def controlled_shutdown_requests(self) -> dict[int, dict]:
        out = {}
        try:
            children = self.zk.get_children(zd.CONTROLLED_SHUTDOWN)
        except NoNodeError:
            return out
        for c in children:
            try:
                data, _ = self.zk.get(f"{zd.CONTROLLED_SHUTDOWN}/{c}")
            except NoNodeError:
                continue
            out[int(c)] = zd.decode_controlled_shutdown(data)
        return out
