"""The controller: Kafka 3.9's KafkaController in ZooKeeper mode, run by one broker at a time.

Election: every broker tries to create the ephemeral /controller; the winner bumps
/controller_epoch in the same multi-op and fences every later write of its own with a check of
that epoch znode's version, so a deposed controller (paused past its session, say) cannot write.
The others watch /controller and try again when it goes away.

Like Kafka's ControllerEventManager, one thread processes the controller's events in order. The
events (broker, topic, deletion, ISR change, controlled shutdown, the controller znode, the
auto-rebalance timer) all come from ZooKeeper watches, and each is answered by bringing the
partition states in line with ZooKeeper's current view, with Kafka's rules (leader_election.py):

* a new topic or partition: the live replicas are the ISR, the first of them the leader
  (PartitionStateMachine NewPartition -> OnlinePartition);
* a partition whose leader is not live: the first live ISR replica leads, the ISR keeps its live
  members; none, and the partition stays offline, unless unclean.leader.election.enable (the
  topic's, else the broker's) lets the first live replica lead alone (OfflinePartition election);
* a dead replica leaves the ISR, unless it is the ISR's last member (ReplicaStateMachine
  OfflineReplica);
* a broker asking for a controlled shutdown: its leaderships move to the first live ISR replica
  not shutting down, and it leaves the ISRs (ControlledShutdownLeaderElection), before it stops;
* a topic marked in /admin/delete_topics: its znodes are deleted (the brokers, watching, delete
  their replicas' logs);
* every leader.imbalance.check.interval.seconds, with auto.leader.rebalance.enable: brokers
  leading less than (100 - leader.imbalance.per.broker.percentage)% of the partitions they are
  preferred for get their leaderships back (PreferredReplicaLeaderElection).

Every write is conditional on the state znode's version read (a leader's concurrent ISR change
makes it stale: the state is read again and the rule applied again) and fenced by the epoch.
The brokers learn the new states by watching the state znodes (docs/cluster.md: why not
LeaderAndIsr requests)."""
from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading

from kazoo.protocol.states import KazooState

from ..protocol.errors import ErrorCode
from . import leader_election as le
from . import zk_data as zd
from .zk_client import ControllerMovedError, KafkaZkClient

log = logging.getLogger("kgroup.cluster.controller")

MAX_RETRIES = 10
CONFIG_CHANGE_EXPIRATION_MS = 15 * 60 * 1000   # ZkNodeChangeNotificationListener's changeExpirationMs


class ControllerConfig:
    """The broker keys the controller reads (Kafka's names)."""

    def __init__(self, broker_id: int, unclean_leader_election: bool = False, auto_leader_rebalance: bool = True,
                 imbalance_check_interval_s: float = 300.0, imbalance_percentage: int = 10,
                 topic_unclean=None):
        self.broker_id = broker_id
        self.unclean_leader_election = unclean_leader_election
        self.auto_leader_rebalance = auto_leader_rebalance
        self.imbalance_check_interval_s = imbalance_check_interval_s
        self.imbalance_percentage = imbalance_percentage
        # topic -> its unclean.leader.election.enable override (str) or None
        self.topic_unclean = topic_unclean or (lambda configs: configs.get("unclean.leader.election.enable"))


class ControllerContext:
    """What the controller knows (Kafka's ControllerContext): live brokers, topics and their
    assignments and ids, partition states, brokers shutting down."""

    def __init__(self):
        self.live: dict[int, zd.BrokerRegistration] = {}
        self.topics: dict[str, tuple[dict[int, tuple[int, ...]], bytes | None]] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.states: dict[tuple[str, int], zd.LeaderAndIsr] = {}
        self.shutting_down: dict[int, dict] = {}

    def replicas(self, tp) -> tuple[int, ...]:
        t = self.topics.get(tp[0])
        return t[0].get(tp[1], ()) if t else ()

    def all_partitions(self):
        for topic, (assignment, _) in self.topics.items():
            for p in assignment:
                yield (topic, p)


def plan_changes(ctx: ControllerContext, unclean_of, preferred: bool = False, imbalance_percentage: int = 10) -> dict:
    """The partition state changes the controller makes for ``ctx`` (pure: unit-tested).
    ``unclean_of(topic) -> bool``. Partitions without a state are left to initialization."""
    live = set(ctx.live)
    changes = {}
    shutting = set(ctx.shutting_down)
    for tp in ctx.all_partitions():
        st = ctx.states.get(tp)
        if st is None:
            continue
        replicas = ctx.replicas(tp)
        new = None
        if st.leader not in live:
            new = le.elect_offline(replicas, st, live - shutting, unclean_of(tp[0]))
            if new is None:
                new = le.elect_offline(replicas, st, live, unclean_of(tp[0]))
            if new is None and st.leader != zd.NO_LEADER:
                new = le.remove_replica_from_isr(st, st.leader)
        elif st.leader in shutting:
            new = le.elect_controlled_shutdown(replicas, st, live, shutting)
        cur = new or st
        dead_in_isr = [r for r in cur.isr if r not in live or (r in shutting and r != cur.leader)]
        for r in dead_in_isr:
            if len(replicas) > 1:     # a single replica stays in its ISR (Kafka: replicationFactor > 1)
                nxt = le.remove_replica_from_isr(cur, r)
                if nxt is not None:
                    if new is not None:     # one change: one epoch bump
                        nxt = zd.LeaderAndIsr(nxt.leader, new.leader_epoch, nxt.isr, nxt.controller_epoch, st.zk_version)
                    cur = new = nxt
        if new is not None:
            changes[tp] = new
    if preferred:
        states = {tp: changes.get(tp, st) for tp, st in ctx.states.items()}
        assignments = {tp: ctx.replicas(tp) for tp in states}
        for tp in le.imbalanced(assignments, states, live - shutting, imbalance_percentage):
            new = le.elect_preferred(assignments[tp], states[tp], live - shutting)
            if new is not None:
                if tp in changes:
                    new = zd.LeaderAndIsr(new.leader, changes[tp].leader_epoch, new.isr, new.controller_epoch,
                                          st.zk_version)
                changes[tp] = new
    return changes


def plan_elect_leaders(ctx: ControllerContext, tps, unclean: bool) -> tuple[dict, dict]:
    """ElectLeaders (ReplicationControlManager.electLeader's answers): (state changes,
    {tp: (error code, message)}). Preferred: NONE when the first replica takes over,
    ELECTION_NOT_NEEDED when it leads, PREFERRED_LEADER_NOT_AVAILABLE when it is not live and in
    sync; unclean: ELECTION_NOT_NEEDED while a live leader exists, else the offline election
    with unclean allowed, ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is live."""
    live = set(ctx.live)
    changes, results = {}, {}
    for tp in tps:
        replicas = ctx.replicas(tp)
        st = ctx.states.get(tp)
        if tp[0] not in ctx.topics:
            results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {tp[0]}")
            continue
        if not replicas or st is None:
            results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {tp[0]}-{tp[1]}")
            continue
        if st.leader in live and (unclean or st.leader == replicas[0]):
            results[tp] = (ErrorCode.ELECTION_NOT_NEEDED, ErrorCode.ELECTION_NOT_NEEDED.message)
            continue
        new = le.elect_offline(replicas, st, live, True) if unclean else le.elect_preferred(replicas, st, live)
        if new is None:
            code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE if unclean else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            results[tp] = (code, code.message)
            continue
        changes[tp] = new
        results[tp] = (ErrorCode.NONE, None)
    return changes, results


def plan_initial_states(ctx: ControllerContext, controller_epoch: int) -> dict:
    live = set(ctx.live) - set(ctx.shutting_down)
    out = {}
    for tp in ctx.all_partitions():
        if tp not in ctx.states:
            st = le.initial_leader_and_isr(ctx.replicas(tp), live, controller_epoch)
            if st is not None:
                out[tp] = st
    return out


def remaining_leaderships(ctx: ControllerContext, broker_id: int) -> int:
    """Partitions a broker shutting down still leads although another live replica could take
    over (what Kafka's ControlledShutdownResponse lists as remaining)."""
    live = set(ctx.live)
    n = 0
    for tp, st in ctx.states.items():
        if st.leader == broker_id and any(r != broker_id and r in live for r in ctx.replicas(tp)):
            n += 1
    return n


class KafkaController:
    """Runs on every broker; active on the one holding /controller."""

    def __init__(self, zk: KafkaZkClient, config: ControllerConfig):
        self.zk = zk
        self.config = config
        self.epoch = -1
        self.epoch_zk_version = -1
        self.active = False
        self.ctx = ControllerContext()
        self._events: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._timer: threading.Timer | None = None
        self._watched_topics: set[str] = set()
        # the live brokers' epochs (registration czxids) at the last reconciliation: one seen again
        # with another epoch restarted or got a new session in between
        self._broker_epochs: dict[int, int] = {}
        self.on_change = None       # fn() after each processed event (tests wait on it)

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"kgroup-controller-{self.config.broker_id}",
                                        daemon=True)
        self._thread.start()
        self.zk.zk.DataWatch(zd.CONTROLLER, self._on_controller_znode)
        self.zk.zk.add_listener(self._on_session_state)

    def close(self) -> None:
        self._closed = True
        self._events.put(None)
        if self._timer is not None:
            self._timer.cancel()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    def elect_leaders(self, tps, unclean: bool) -> concurrent.futures.Future:
        """ElectLeaders on the controller's thread: a future of (the partitions asked, or every
        partition for None; {tp: (error code, message)}), or of None when this broker is not
        the controller (NOT_CONTROLLER)."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._events.put(("elect_leaders", (None if tps is None else list(tps), unclean, fut)))
        return fut

    # -- watches (kazoo's thread): only enqueue --------------------------------------------------------
    def _on_controller_znode(self, data, stat):
        if self._closed:
            return False
        self._events.put(("controller_change", zd.decode_controller(data) if data else None))
        return None

    def _on_session_state(self, state):
        if state == KazooState.LOST:
            self._events.put(("session_lost", None))
        return False

    def _children_watch(self, path, event):
        def fn(children):
            if self._closed or not self.active:
                return False
            self._events.put((event, None))
            return None
        self.zk.zk.ensure_path(path)
        self.zk.zk.ChildrenWatch(path, fn, send_event=False)

    def _watch_topic(self, topic: str) -> None:
        if topic in self._watched_topics:
            return
        self._watched_topics.add(topic)

        def fn(data, stat):
            if self._closed or not self.active or data is None:
                self._watched_topics.discard(topic)
                return False
            self._events.put(("partition_modifications", topic))
            return None
        self.zk.zk.DataWatch(zd.topic_path(topic), fn)

    # -- the event thread ---------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            ev = self._events.get()
            events = [ev]
            while True:         # one pass answers everything queued meanwhile
                try:
                    events.append(self._events.get_nowait())
                except queue.Empty:
                    break
            if None in events or self._closed:
                return
            try:
                self._process(events)
            except ControllerMovedError:
                log.info("controller %d: the controller epoch moved; resigning", self.config.broker_id)
                self._resign()
                self._events.put(("elect", None))
            except Exception:
                if self._closed:
                    return
                log.exception("controller event failed; retrying")
                if self.active:
                    threading.Timer(0.5, lambda: self._events.put(("reconcile", None))).start()
            if self.on_change is not None:
                self.on_change()

    def _process(self, events) -> None:
        kinds = {e[0] for e in events}
        if "session_lost" in kinds and self.active:
            self._resign()
        if kinds & {"controller_change", "elect", "session_lost"}:
            current = self.zk.get_controller_id()
            if self.active and current != self.config.broker_id:
                self._resign()
            if current is None and not self.active:
                self._elect()
        elections = [e[1] for e in events if e[0] == "elect_leaders"]
        if not self.active:
            for _tps, _unclean, fut in elections:
                fut.set_result(None)
            return
        if "config_change" in kinds:
            self.zk.purge_config_changes(CONFIG_CHANGE_EXPIRATION_MS)
        self._reconcile(preferred="auto_rebalance" in kinds)
        for tps, unclean, fut in elections:
            try:
                fut.set_result(self._elect_leaders(tps, unclean))
            except ControllerMovedError:
                fut.set_result(None)
                raise
            except Exception as e:      # noqa: BLE001 - the request fails, the controller goes on
                fut.set_exception(e)

    def _elect_leaders(self, tps, unclean: bool):
        for _attempt in range(MAX_RETRIES):
            self._load()
            asked = list(self.ctx.all_partitions()) if tps is None else tps
            changes, results = plan_elect_leaders(self.ctx, asked, unclean)
            done, stale = self.zk.update_leader_and_isr(changes, self.epoch, self.epoch_zk_version)
            for tp, st in done.items():
                log.info("controller %d: %s election of %s-%d: leader %d epoch %d", self.config.broker_id,
                         "unclean" if unclean else "preferred", tp[0], tp[1], st.leader, st.leader_epoch)
            if not stale:
                return asked, results
        raise RuntimeError("partition states kept changing during the election")

    def _elect(self) -> None:
        won = self.zk.register_controller_and_increment_epoch(self.config.broker_id)
        if won is None:
            return
        self.epoch, self.epoch_zk_version = won
        self.active = True
        log.info("broker %d is the controller (epoch %d)", self.config.broker_id, self.epoch)
        # onControllerFailover: the watches the active controller needs
        self._children_watch(zd.BROKER_IDS, "broker_change")
        self._children_watch(zd.TOPICS, "topic_change")
        self._children_watch(zd.DELETE_TOPICS, "topic_deletion")
        self._children_watch(zd.ISR_CHANGE_NOTIFICATION, "isr_change")
        self._children_watch(zd.CONTROLLED_SHUTDOWN, "controlled_shutdown")
        self._children_watch(zd.CONFIG_CHANGES, "config_change")    # a topic's unclean.leader.election.enable
        self._schedule_rebalance()

    def _resign(self) -> None:
        """onControllerResignation: stop acting; the watches end at their next event."""
        if self.active:
            log.info("broker %d resigns as controller (epoch %d)", self.config.broker_id, self.epoch)
        self.active = False
        self._broker_epochs = {}
        self._watched_topics.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _schedule_rebalance(self) -> None:
        if not self.config.auto_leader_rebalance or self._closed:
            return

        def fire():
            if self.active and not self._closed:
                self._events.put(("auto_rebalance", None))
                self._schedule_rebalance()
        self._timer = threading.Timer(self.config.imbalance_check_interval_s, fire)
        self._timer.daemon = True
        self._timer.start()

    # -- bringing ZooKeeper's partition states in line -------------------------------------------------
    def _load(self) -> None:
        ctx = self.ctx
        ctx.live = self.zk.get_live_brokers()
        names = self.zk.get_all_topics()
        ctx.topics = self.zk.get_topics(names)
        ctx.topic_configs = self.zk.get_topic_configs(list(ctx.topics))   # a topic's unclean setting may change
        for t in ctx.topics:
            self._watch_topic(t)
        ctx.states = self.zk.get_partition_states(list(ctx.all_partitions()))
        ctx.shutting_down = {b: req for b, req in self.zk.controlled_shutdown_requests().items() if b in ctx.live}

    def _unclean(self, topic: str) -> bool:
        v = self.config.topic_unclean(self.ctx.topic_configs.get(topic, {}))
        return self.config.unclean_leader_election if v is None else str(v).lower() == "true"

    def _reconcile(self, preferred: bool = False) -> None:
        self.zk.delete_isr_change_notifications()
        for topic in self.zk.topics_marked_for_deletion():
            log.info("controller %d: deleting topic %s", self.config.broker_id, topic)
            self.zk.delete_topic_znodes(topic, self.epoch_zk_version)
            self._watched_topics.discard(topic)
        for _attempt in range(MAX_RETRIES):
            self._load()
            created = self.zk.create_partition_states(plan_initial_states(self.ctx, self.epoch), self.epoch,
                                                      self.epoch_zk_version)
            self.ctx.states.update(created)
            live = self.ctx.live
            bounced = {b for b, reg in live.items() if self._broker_epochs.get(b, reg.czxid) != reg.czxid}
            if bounced:
                # KafkaController.processBrokerChange's bounced brokers: registered again with a new
                # epoch since the last look (a restart, or a new session after the old expired,
                # faster than this controller saw it go). They failed, then started: their
                # leaderships and ISR places are first taken as a dead broker's, so that every
                # partition they led gets a new leader epoch, even when they lead it again.
                log.info("controller %d: broker(s) %s registered again with a new epoch", self.config.broker_id,
                         sorted(bounced))
                self.ctx.live = {b: reg for b, reg in live.items() if b not in bounced}
                if self._apply(plan_changes(self.ctx, self._unclean)):
                    self.ctx.live = live
                    continue
                self.ctx.live = live
            changes = plan_changes(self.ctx, self._unclean, preferred=preferred,
                                   imbalance_percentage=self.config.imbalance_percentage)
            if not self._apply(changes):
                self._broker_epochs = {b: reg.czxid for b, reg in live.items()}
                break
        self._answer_controlled_shutdowns()

    def _apply(self, changes) -> bool:
        """Write ``changes`` (fenced, conditional); True when some state had moved meanwhile."""
        done, stale = self.zk.update_leader_and_isr(changes, self.epoch, self.epoch_zk_version)
        self.ctx.states.update(done)
        for tp, st in done.items():
            log.info("controller %d: %s-%d leader %d epoch %d isr %s", self.config.broker_id, tp[0], tp[1],
                     st.leader, st.leader_epoch, list(st.isr))
        return bool(stale)

    def _answer_controlled_shutdowns(self) -> None:
        for b, req in self.ctx.shutting_down.items():
            if req.get("done"):
                continue
            remaining = remaining_leaderships(self.ctx, b)
            try:
                self.zk.zk.set(zd.controlled_shutdown_path(b),
                               zd.encode_controlled_shutdown(req.get("broker_epoch", -1), True, remaining))
            except Exception:   # noqa: BLE001 - the broker gave up waiting and left
                pass
