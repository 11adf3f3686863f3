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
  their replicas' logs), once no partition of it is being reassigned;
* every leader.imbalance.check.interval.seconds, with auto.leader.rebalance.enable: brokers
  leading less than (100 - leader.imbalance.per.broker.percentage)% of the partitions they are
  preferred for get their leaderships back (PreferredReplicaLeaderElection; not for partitions
  being reassigned);
* a partition reassignment (AlterPartitionReassignments, /admin/reassign_partitions, or one a
  previous controller left in a topic znode): reassignment.py's steps, resumed from the topic
  znode by a new controller.

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
from . import reassignment as ra_rules
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
        # the reassignments in progress (the topic znodes' adding_replicas / removing_replicas)
        self.adding: dict[tuple[str, int], tuple[int, ...]] = {}
        self.removing: dict[tuple[str, int], tuple[int, ...]] = {}
        self.topic_versions: dict[str, int] = {}

    def assignment(self, tp) -> ra_rules.ReplicaAssignment:
        return ra_rules.ReplicaAssignment(self.replicas(tp), self.adding.get(tp, ()), self.removing.get(tp, ()))

    def reassigning(self) -> list:
        return sorted(set(self.adding) | set(self.removing))

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
        # (a replica no longer assigned, added back by its leader as a reassignment completed,
        # leaves too: Kafka's controller refuses such an ISR)
        dead_in_isr = [r for r in cur.isr if r not in live or (r in shutting and r != cur.leader)
                       or (r not in replicas and r != cur.leader)]
        for r in dead_in_isr:
            if len(replicas) > 1 or r not in replicas:   # a single replica stays in its ISR (Kafka: RF > 1)
                nxt = le.remove_replica_from_isr(cur, r)
                if nxt is not None:
                    if new is not None:     # one change: one epoch bump
                        nxt = zd.LeaderAndIsr(nxt.leader, new.leader_epoch, nxt.isr, nxt.controller_epoch, st.zk_version)
                    cur = new = nxt
        if new is not None:
            changes[tp] = new
    if preferred:
        moving = set(ctx.adding) | set(ctx.removing)
        states = {tp: changes.get(tp, st) for tp, st in ctx.states.items() if tp not in moving}
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
        # partitions whose leader epoch this controller bumped for their reassignment (phase A1)
        self._reassignment_bumped: set[tuple[str, int]] = set()
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

    def alter_partition_reassignments(self, reassignments: dict, allow_rf_change: bool) -> concurrent.futures.Future:
        """AlterPartitionReassignments on the controller's thread: ``reassignments`` is {tp:
        target replicas, or None to cancel}; a future of {tp: (error code, message)}, or of None
        when this broker is not the controller."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._events.put(("alter_reassignments", (dict(reassignments), allow_rf_change, fut)))
        return fut

    def list_partition_reassignments(self, tps) -> concurrent.futures.Future:
        """ListPartitionReassignments: a future of {tp: ReplicaAssignment} of those of ``tps``
        (every partition for None) being reassigned, or of None when not the controller."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._events.put(("list_reassignments", (None if tps is None else list(tps), fut)))
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

    def _watch_zk_reassignment(self) -> None:
        def fn(data, stat):
            if self._closed or not self.active:
                return False
            if data is not None:
                self._events.put(("zk_reassignment", None))
            return None
        self.zk.zk.DataWatch(zd.REASSIGN_PARTITIONS, fn)

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
        alters = [e[1] for e in events if e[0] == "alter_reassignments"]
        lists = [e[1] for e in events if e[0] == "list_reassignments"]
        futures = [e[-1] for e in elections + alters + lists]
        if not self.active:
            for fut in futures:
                fut.set_result(None)
            return
        try:
            self._process_active(kinds, elections, alters, lists)
        finally:        # the controller moved or failed mid-way: those asked retry (NOT_CONTROLLER)
            for fut in futures:
                if not fut.done():
                    fut.set_result(None)

    @staticmethod
    def _answer(fut, work) -> None:
        """``fut`` gets ``work()``'s result; None (NOT_CONTROLLER) when the controller moved
        mid-way, which stops this round; any other failure fails only this request."""
        try:
            fut.set_result(work())
        except ControllerMovedError:
            fut.set_result(None)
            raise
        except Exception as e:      # noqa: BLE001 - the request fails, the controller goes on
            fut.set_exception(e)

    def _process_active(self, kinds, elections, alters, lists) -> None:
        for reassignments, allow_rf_change, fut in alters:
            self._answer(fut, lambda r=reassignments, a=allow_rf_change: self._alter_reassignments(r, a))
        if "zk_reassignment" in kinds:
            self._zk_reassignments()
        if "config_change" in kinds:
            self.zk.purge_config_changes(CONFIG_CHANGE_EXPIRATION_MS)
        self._reconcile(preferred="auto_rebalance" in kinds)
        for tps, fut in lists:
            every = self.ctx.reassigning() if tps is None else tps
            fut.set_result({tp: self.ctx.assignment(tp) for tp in every
                            if self.ctx.assignment(tp).is_being_reassigned})
        for tps, unclean, fut in elections:
            self._answer(fut, lambda t=tps, u=unclean: self._elect_leaders(t, u))

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
        self._reassignment_bumped.clear()
        self._watch_zk_reassignment()
        self._events.put(("zk_reassignment", None))
        self._schedule_rebalance()

    def _resign(self) -> None:
        """onControllerResignation: stop acting; the watches end at their next event."""
        if self.active:
            log.info("broker %d resigns as controller (epoch %d)", self.config.broker_id, self.epoch)
        self.active = False
        self._broker_epochs = {}
        self._watched_topics.clear()
        self._reassignment_bumped.clear()
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
        full = self.zk.get_topics_full(names)
        ctx.topics = {t: (f[0], f[1]) for t, f in full.items()}
        ctx.adding = {(t, p): r for t, f in full.items() for p, r in f[2].items() if p in f[0]}
        ctx.removing = {(t, p): r for t, f in full.items() for p, r in f[3].items() if p in f[0]}
        ctx.topic_versions = {t: f[4] for t, f in full.items()}
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
        marked = self.zk.topics_marked_for_deletion()
        full = self.zk.get_topics_full(marked)
        for topic in marked:
            if topic in full and (full[topic][2] or full[topic][3]):
                continue        # Kafka: ineligible for deletion until its reassignments end
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
            self._broker_epochs = {b: reg.czxid for b, reg in live.items()}     # their failure is taken
            changes = plan_changes(self.ctx, self._unclean, preferred=preferred,
                                   imbalance_percentage=self.config.imbalance_percentage)
            if not self._apply(changes) and not self._advance_reassignments():
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

    # -- partition reassignment (KafkaController.onPartitionReassignment) -----------------------------
    def _alter_reassignments(self, reassignments: dict, allow_rf_change: bool) -> dict:
        """processApiPartitionReassignment with Kafka 4.3's checks and answers: start (or cancel)
        each valid reassignment, then advance them; {tp: (error code, message)}."""
        results: dict = {}
        for _attempt in range(MAX_RETRIES):
            self._load()
            ctx = self.ctx
            marked = set(self.zk.topics_marked_for_deletion())
            starts: dict = {}
            for tp, target in reassignments.items():
                if tp[0] not in ctx.topics or tp[0] in marked:
                    results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {tp[0]}.")
                    continue
                if tp[1] not in ctx.topics[tp[0]][0]:
                    results[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                   f"Unable to find partition {tp[0]}:{tp[1]}.")
                    continue
                current = ctx.assignment(tp)
                if target is not None:
                    err = ra_rules.validate_target(current, target, ctx.live, allow_rf_change)
                    if err is not None:
                        results[tp] = err
                        continue
                new = ra_rules.build_reassignment(current, target)
                if new is None:
                    results[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS.message)
                    continue
                starts[tp] = new
                results[tp] = (ErrorCode.NONE, None)
            if self._start_reassignments(starts):
                self._remove_zk_reassignments(set(starts))
                self._reconcile()
                return results
        raise RuntimeError("topic assignments kept changing during the reassignment")

    def _start_reassignments(self, starts: dict) -> bool:
        """Phase U: each topic znode rewritten with the new RS / AR / RR (conditional on the
        version read); the replicas a replaced reassignment was adding and the new one drops
        leave the ISR now. False when a topic znode moved (read again and retry)."""
        ctx = self.ctx
        by_topic: dict[str, dict] = {}
        for tp, new in starts.items():
            by_topic.setdefault(tp[0], {})[tp[1]] = new
        for topic, news in by_topic.items():
            unneeded = {p: [r for r in ctx.replicas((topic, p)) if r not in new.replicas] for p, new in news.items()}
            if not self._write_topic(topic, news):
                return False
            for p, new in news.items():
                tp = (topic, p)
                self._reassignment_bumped.discard(tp)
                log.info("controller %d: reassigning %s-%d to %s (replicas %s, adding %s, removing %s)",
                         self.config.broker_id, topic, p, list(new.target), list(new.replicas), list(new.adding),
                         list(new.removing))
                if unneeded[p]:
                    step = ra_rules.next_step(new, ctx.states.get(tp), set(ctx.live), True, unneeded[p])
                    if step.state is not None and not step.complete:
                        done, _stale = self.zk.update_leader_and_isr({tp: step.state}, self.epoch,
                                                                     self.epoch_zk_version)
                        ctx.states.update(done)
        return True

    def _write_topic(self, topic: str, news: dict, states: dict | None = None) -> bool:
        """The topic znode with ``news`` ({partition: ReplicaAssignment}) in place, and with it
        in one multi-op ``states`` ({tp: LeaderAndIsr}: completed reassignments' last states);
        False when a znode moved since it was read."""
        ctx = self.ctx
        assignment, tid = ctx.topics[topic]
        if not states and all(a == ctx.assignment((topic, p)) for p, a in news.items()):
            return True
        full = {p: ctx.assignment((topic, p)) for p in assignment} | news
        written = ({p: list(a.replicas) for p, a in full.items()}, tid, {p: list(a.adding) for p, a in full.items()},
                   {p: list(a.removing) for p, a in full.items()}, ctx.topic_versions.get(topic, -1))
        if states:
            got = self.zk.complete_reassignment(topic, states, self.epoch, *written, self.epoch_zk_version)
            if got is None:
                return False
            ctx.states.update(got[0])
            version: int | None = got[1]
        else:
            version = self.zk.set_topic_assignment_fenced(topic, *written, self.epoch_zk_version)
        if version is None:
            return False
        ctx.topics[topic] = ({p: a.replicas for p, a in full.items()}, tid)
        ctx.topic_versions[topic] = version
        for p, a in news.items():
            for d, v in ((ctx.adding, a.adding), (ctx.removing, a.removing)):
                if v:
                    d[(topic, p)] = v
                else:
                    d.pop((topic, p), None)
        return True

    def _advance_reassignments(self) -> bool:
        """Phases A and B for every partition being reassigned, on the states just read; True
        when a write found a znode moved (the caller reads again)."""
        ctx = self.ctx
        live = set(ctx.live)
        completed: dict[str, dict] = {}
        for tp in ctx.reassigning():
            ra = ctx.assignment(tp)
            step = ra_rules.next_step(ra, ctx.states.get(tp), live, tp in self._reassignment_bumped)
            if step.state is None:
                continue
            if step.complete:       # written with the topic znode, below
                completed.setdefault(tp[0], {})[tp] = step
                continue
            done, stale = self.zk.update_leader_and_isr({tp: step.state}, self.epoch, self.epoch_zk_version)
            if stale:
                return True
            ctx.states.update(done)
            st = done[tp]
            log.info("controller %d: reassigning %s-%d: leader %d epoch %d for replicas %s",
                     self.config.broker_id, tp[0], tp[1], st.leader, st.leader_epoch, list(ra.replicas))
            self._reassignment_bumped.add(tp)
        for topic, steps in completed.items():
            if not self._write_topic(topic, {tp[1]: step.assignment for tp, step in steps.items()},
                                     {tp: step.state for tp, step in steps.items()}):
                return True
            for tp, step in steps.items():
                st = ctx.states[tp]
                log.info("controller %d: reassignment of %s-%d complete: replicas %s, leader %d epoch %d isr %s",
                         self.config.broker_id, tp[0], tp[1], list(step.assignment.replicas), st.leader,
                         st.leader_epoch, list(st.isr))
                self._reassignment_bumped.discard(tp)
        if completed:
            self._remove_zk_reassignments({tp for steps in completed.values() for tp in steps})
        return False

    def _zk_reassignments(self) -> None:
        """processZkPartitionReassignment: the reassignments written to /admin/reassign_partitions
        start (an API reassignment of the same partition replaces them); those that cannot
        (unknown partition, nothing to cancel) are taken out of the znode, as those done."""
        got = self.zk.get_partition_reassignment()
        if got is None:
            return
        wanted, _version = got
        failed: set = set()
        for _attempt in range(MAX_RETRIES):
            self._load()
            ctx = self.ctx
            starts, failed = {}, set()
            for tp, target in wanted.items():
                if tp[0] not in ctx.topics or tp[1] not in ctx.topics[tp[0]][0]:
                    failed.add(tp)
                    continue
                current = ctx.assignment(tp)
                if current.target == tuple(target):
                    continue        # under way, or done
                new = ra_rules.build_reassignment(current, target)
                if new is None:
                    failed.add(tp)
                else:
                    starts[tp] = new
            if self._start_reassignments(starts):
                break
        done = {tp for tp, target in wanted.items() if tp[0] in self.ctx.topics
                and not self.ctx.assignment(tp).is_being_reassigned and self.ctx.replicas(tp) == tuple(target)}
        if failed or done:
            self._remove_zk_reassignments(failed | done)

    def _remove_zk_reassignments(self, tps: set) -> None:
        """maybeRemoveFromZkReassignment: ``tps`` out of /admin/reassign_partitions (deleted
        once empty)."""
        for _attempt in range(MAX_RETRIES):
            got = self.zk.get_partition_reassignment()
            if got is None:
                return
            current, version = got
            if not set(current) & tps:
                return
            left = {tp: r for tp, r in current.items() if tp not in tps}
            if self.zk.set_or_delete_partition_reassignment(left, version, self.epoch_zk_version):
                return
