"""Replication inside a broker (Kafka 3.9's ReplicaManager and Partition, ZooKeeper mode).

The controller decides, per partition, a leader, a leader epoch, the ISR and the replicas
(``kgroup.cluster.partition_state.PartitionState``); ``apply_partition_states`` makes this broker
the partition's leader or a follower (Kafka's becomeLeaderOrFollower: a state with an older
leader epoch than the one known is ignored), ``stop_replicas`` stops hosting partitions.

As leader, a Partition tracks each follower from its Fetch requests (the replica id and the
fetch offset are its log end offset), moves the high watermark to the smallest log end offset of
the ISR (never backwards), shrinks the ISR when a follower has not caught up for
``replica.lag.time.max.ms`` and expands it when one catches up again, both through ``alter_isr``
(set by the cluster wiring: a conditional update of the partition's state, on the partition
epoch). An acks=all produce is answered once every ISR member has its records (a DelayedProduce
completed by the follower fetches that move the high watermark), REQUEST_TIMED_OUT after its
timeout; min.insync.replicas is checked before the append (NOT_ENOUGH_REPLICAS) and when the
records are replicated (NOT_ENOUGH_REPLICAS_AFTER_APPEND). Consumers read only below the high
watermark. As follower, the partition's log is fed by a replica fetcher
(``replica_fetcher.py``).

Without a cluster (the single-node broker) nothing here runs: no partition is ever made leader
or follower, every log keeps its high watermark at its log end, and the handlers' only cost is
one test of ``enabled``.

Errors as Kafka's Partition answers them: a partition not led here NOT_LEADER_OR_FOLLOWER; a
request's current leader epoch (KIP-320) older than the partition's FENCED_LEADER_EPOCH, newer
UNKNOWN_LEADER_EPOCH; with KIP-951's CurrentLeader and NodeEndpoints hints in Produce and Fetch
responses. KIP-392: with ``replica.selector.class`` set to Kafka's RackAwareReplicaSelector, a
consumer in another rack than the leader is sent to an in-sync replica in its own rack
(PreferredReadReplica), which serves it below its high watermark.

On leadership changes the coordinator partitions move with it (Kafka's onLeadershipChange):
becoming leader of a ``__consumer_offsets`` / ``__transaction_state`` / ``__share_group_state``
partition loads it at the leader epoch, resigning unloads it.
"""
from __future__ import annotations

import asyncio
import logging
import os
from typing import Callable

from ..cluster.partition_state import PartitionState
from ..protocol.errors import ErrorCode, KafkaError
from ..storage.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from ..storage.manager import read_checkpoint, write_checkpoint
from .pending import PendingResponse

log = logging.getLogger("kgroup.replica_manager")

NO_LEADER = -1
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
HW_CHECKPOINT = "replication-offset-checkpoint"
UNKNOWN_OFFSET = -1


class Replica:
    """A follower as its leader sees it (Kafka's Replica and ReplicaState)."""

    __slots__ = ("broker_id", "log_end_offset", "log_start_offset", "last_caught_up_ms",
                 "last_fetch_leader_log_end_offset", "last_fetch_ms")

    def __init__(self, broker_id: int, now_ms: int, in_sync: bool):
        self.broker_id = broker_id
        self.log_end_offset = UNKNOWN_OFFSET
        self.log_start_offset = UNKNOWN_OFFSET
        # an ISR member counts as caught up when the leadership starts (resetReplicaState)
        self.last_caught_up_ms = now_ms if in_sync else 0
        self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
        self.last_fetch_ms = 0

    def update_fetch_state(self, fetch_offset: int, start_offset: int, fetch_ms: int, leader_end_offset: int) -> None:
        """Replica.updateFetchStateOrThrow: caught up at this fetch if it reached the leader's
        end, else at the previous fetch if it reached the leader's end as of then."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, fetch_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_start_offset = start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_ms = fetch_ms

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        """ReplicaState.isCaughtUp."""
        return leader_end_offset == self.log_end_offset or now_ms - self.last_caught_up_ms <= max_lag_ms


def epoch_error(current_leader_epoch: int, leader_epoch: int) -> ErrorCode | None:
    """Partition.getLocalLog's epoch check (KIP-320): a request's current leader epoch must be
    the partition's (-1: not checked)."""
    if current_leader_epoch == UNDEFINED_EPOCH or current_leader_epoch == leader_epoch:
        return None
    if current_leader_epoch > leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.FENCED_LEADER_EPOCH


def truncation_offset(leader_epoch: int, leader_end_offset: int, follower_cache, follower_end_offset: int,
                      follower_high_watermark: int) -> tuple[int, bool]:
    """AbstractFetcherThread.getOffsetTruncationState: where a follower truncates, given the
    leader's answer (epoch, end offset) for the follower's latest epoch; (offset, done), not done
    when the follower must ask again for an older epoch."""
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return min(follower_high_watermark, follower_end_offset), True
    if leader_epoch == UNDEFINED_EPOCH:
        return min(leader_end_offset, follower_end_offset), True
    epoch, end = follower_cache.end_offset_for(leader_epoch, follower_end_offset)
    if end == UNDEFINED_EPOCH_OFFSET:
        # the follower was not tracking epochs then: the leader's offset is safe
        return min(leader_end_offset, follower_end_offset), True
    if epoch != leader_epoch:
        # the follower does not know the leader's epoch: cut to the end of the largest epoch
        # below it, and ask again
        return min(end, follower_end_offset), False
    return min(end, leader_end_offset, follower_end_offset), True


class Partition:
    """One partition's replication state on this broker (Kafka's Partition)."""

    def __init__(self, manager: "ReplicaManager", state: PartitionState, plog):
        self.manager = manager
        self.topic = state.topic
        self.partition = state.partition
        self.tp = (state.topic, state.partition)
        self.log = plog
        self.topic_id = state.topic_id
        self.leader = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.isr: tuple[int, ...] = ()
        self.replicas: tuple[int, ...] = ()
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        self.remote: dict[int, Replica] = {}
        # an ISR change sent to the controller and not answered yet (Kafka's PendingExpandIsr /
        # PendingShrinkIsr): no other change is proposed meanwhile
        self.pending_isr: tuple[int, ...] | None = None

    def __repr__(self) -> str:
        return (f"Partition({self.topic}-{self.partition}, leader={self.leader}, epoch={self.leader_epoch}, "
                f"isr={list(self.isr)}, replicas={list(self.replicas)})")

    @property
    def local_id(self) -> int:
        return self.manager.broker_id

    @property
    def is_leader(self) -> bool:
        return self.leader == self.manager.broker_id

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark waits for: during a pending expansion the new member too
        (Kafka's maximalIsr); a pending shrink counts only once committed."""
        pending = self.pending_isr
        if pending is not None and len(pending) > len(self.isr):
            return pending
        return self.isr

    # -- the controller's decisions -----------------------------------------------------------
    def make_leader(self, state: PartitionState, now_ms: int) -> bool:
        """Partition.makeLeader; returns whether this broker became the leader (it was not)."""
        was_leader = self.is_leader
        new_epoch = state.leader_epoch != self.leader_epoch
        self._update_assignment_and_isr(state)
        plog = self.log
        plog.leader_epoch = state.leader_epoch      # stamped on every batch this leader appends
        if not plog.replicated:
            plog.set_high_watermark(plog.log_start_offset)
        if new_epoch or not was_leader:
            self.leader_epoch_start_offset = plog.log_end_offset
            plog.leader_epoch_cache.assign(state.leader_epoch, plog.log_end_offset)
            self.remote = {r: Replica(r, now_ms, r in self.isr) for r in self.replicas if r != self.local_id}
        else:       # the same leadership with a new ISR or assignment: keep what followers told
            self.remote = {r: self.remote.get(r) or Replica(r, now_ms, r in self.isr)
                           for r in self.replicas if r != self.local_id}
        self.pending_isr = None
        self.maybe_increment_high_watermark(now_ms)
        return not was_leader

    def make_follower(self, state: PartitionState) -> bool:
        """Partition.makeFollower; returns whether the leader or the epoch changed (the fetcher
        must start over: truncate, then fetch from the new leader)."""
        changed = state.leader != self.leader or state.leader_epoch != self.leader_epoch
        self._update_assignment_and_isr(state)
        self.remote = {}
        self.pending_isr = None
        self.leader_epoch_start_offset = UNKNOWN_OFFSET
        plog = self.log
        if not plog.replicated:
            plog.set_high_watermark(plog.log_start_offset)
        return changed

    def _update_assignment_and_isr(self, state: PartitionState) -> None:
        self.leader = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.isr = tuple(state.isr)
        self.replicas = tuple(state.replicas)
        if state.topic_id and any(state.topic_id):
            self.topic_id = state.topic_id

    # -- the leader's rules -------------------------------------------------------------------
    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, start_offset: int,
                                    now_ms: int) -> bool:
        """A follower fetched from ``fetch_offset``: its log end offset. Returns whether the high
        watermark moved (Partition.updateFollowerFetchState)."""
        replica = self.remote.get(replica_id)
        if replica is None:
            return False
        replica.update_fetch_state(fetch_offset, start_offset, now_ms, self.log.log_end_offset)
        return self.maybe_increment_high_watermark(now_ms)

    def maybe_increment_high_watermark(self, now_ms: int) -> bool:
        """Partition.maybeIncrementLeaderHW: the smallest log end offset among the leader and
        the (maximal) ISR, plus a caught-up replica about to join it; never backwards."""
        plog = self.log
        new_hw = plog.log_end_offset
        isr = self.maximal_isr
        lag_ms = self.manager.replica_lag_time_max_ms
        for replica in self.remote.values():
            leo = replica.log_end_offset
            if leo < new_hw and (replica.broker_id in isr or (
                    replica.is_caught_up(new_hw, now_ms, lag_ms) and self._is_isr_eligible(replica.broker_id))):
                new_hw = leo
        old = plog.high_watermark
        if new_hw > old:
            plog.set_high_watermark(new_hw)
            return True
        return False

    def _is_isr_eligible(self, replica_id: int) -> bool:
        return self.manager.is_alive(replica_id)

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """Partition.getOutOfSyncReplicas: ISR followers not caught up within the lag time."""
        leader_end = self.log.log_end_offset
        return [r for r in self.isr if r != self.local_id and r in self.remote
                and not self.remote[r].is_caught_up(leader_end, now_ms, max_lag_ms)]

    def follower_in_sync(self, replica_id: int) -> bool:
        """Partition.isFollowerInSync: a follower outside the ISR may join it once it has
        reached the high watermark and this leader's first offset."""
        replica = self.remote.get(replica_id)
        if replica is None or replica.log_end_offset < 0:
            return False
        leo = replica.log_end_offset
        return leo >= self.log.high_watermark and leo >= self.leader_epoch_start_offset

    def check_enough_replicas(self, required_offset: int, min_isr: int) -> tuple[bool, ErrorCode]:
        """Partition.checkEnoughReplicasReachOffset: (done, error) for an acks=all append whose
        records end at ``required_offset``."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark >= required_offset:
            if len(self.isr) >= min_isr:
                return True, ErrorCode.NONE
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, ErrorCode.NONE


class _Status:
    """Where a coordinator write's replication wait puts its error."""
    __slots__ = ("error_code",)

    def __init__(self):
        self.error_code = 0


class _DelayedProduce:
    """An acks=all Produce waiting for its partitions' ISR (Kafka's DelayedProduce)."""

    __slots__ = ("waits", "pending", "timer")

    def __init__(self, waits):
        self.waits = waits          # [(Partition, required offset, min isr, partition response, done)]
        self.pending = PendingResponse()
        self.timer = None


class ReplicaManager:
    def __init__(self, broker):
        self.broker = broker
        config = broker.config
        self.broker_id = config.node_id
        # cluster mode: partitions are led or followed as the controller's states say (from the
        # start with zookeeper.connect, else from the first apply_partition_states)
        self.enabled = bool(config.values.get("zookeeper.connect"))
        self.partitions: dict[tuple[str, int], Partition] = {}
        # set by the cluster wiring (kgroup.cluster):
        # async (topic, partition, leader_epoch, new_isr, partition_epoch) -> new partition epoch | None
        self.alter_isr: Callable | None = None
        # (broker_id) -> (host, port) or (host, port, rack), None when not alive
        self.broker_endpoint: Callable | None = None
        # (topic, partition) -> (leader id, leader epoch) | None: the cluster's view, for the
        # KIP-951 hints of partitions this broker does not host
        self.metadata_leader: Callable | None = None
        self.replica_lag_time_max_ms = config["replica.lag.time.max.ms"]
        self.rack = config.values.get("broker.rack")
        selector = config["replica.selector.class"]
        if selector not in (None, "", RACK_AWARE_SELECTOR):
            raise ValueError(f"replica.selector.class {selector} is not supported "
                             f"(only {RACK_AWARE_SELECTOR})")
        self.rack_aware = selector == RACK_AWARE_SELECTOR
        self._delayed: dict[tuple[str, int], list[_DelayedProduce]] = {}
        self._isr_task: asyncio.Task | None = None
        self._hw_task: asyncio.Task | None = None
        # the high watermarks written at the previous checkpoint (Kafka's
        # replication-offset-checkpoint), read when the first partition is made replicated
        self.hw_checkpoint_path = os.path.join(broker.data_dir, HW_CHECKPOINT)
        self._checkpointed: dict[tuple[str, int], int] | None = None
        self._wake_scheduled: set[tuple[str, int]] = set()
        # in a controlled shutdown: this broker follows no partition any more
        self.shutting_down = False
        from .replica_fetcher import ReplicaFetcherManager
        self.fetchers = ReplicaFetcherManager(self)
        self._channel = None        # InterBrokerChannel, opened on first use
        self._add_partitions_manager = None

    def now_ms(self) -> int:
        return self.broker.clock.now_ms()

    def is_alive(self, broker_id: int) -> bool:
        return self.broker_endpoint is None or self.broker_endpoint(broker_id) is not None

    # -- the controller's decisions -----------------------------------------------------------
    def apply_partition_states(self, states: list[PartitionState]) -> None:
        """Kafka's becomeLeaderOrFollower: each state this broker is a replica in makes it the
        leader or a follower; a state older than the one known (leader epoch, then partition
        epoch) is ignored. Called on the broker's event loop (from a ZooKeeper client's thread:
        ``loop.call_soon_threadsafe``), as every method here."""
        self.enabled = True
        now = self.now_ms()
        leaders, followers = [], []
        for state in states:
            if self.broker_id not in state.replicas:
                log.warning("ignoring the state of %s-%d: broker %d is not among its replicas %s",
                            state.topic, state.partition, self.broker_id, list(state.replicas))
                continue
            tp = (state.topic, state.partition)
            partition = self.partitions.get(tp)
            if partition is not None:
                if state.leader_epoch < partition.leader_epoch or (
                        state.leader_epoch == partition.leader_epoch
                        and state.partition_epoch <= partition.partition_epoch):
                    log.debug("ignoring the state of %s-%d at leader epoch %d (partition epoch %d): "
                             "it has leader epoch %d (partition epoch %d)", state.topic, state.partition,
                             state.leader_epoch, state.partition_epoch, partition.leader_epoch,
                             partition.partition_epoch)
                    continue
            else:
                topic = self.broker.metadata.get(state.topic)
                plog = self.broker.data_path.logs.get_or_create(state.topic, state.partition,
                                                                topic.configs if topic is not None else None)
                partition = self.partitions[tp] = Partition(self, state, plog)
                if not plog.replicated:     # where the high watermark was at the last checkpoint
                    if self._checkpointed is None:
                        self._checkpointed = read_checkpoint(self.hw_checkpoint_path)
                    plog.set_high_watermark(self._checkpointed.get(tp, plog.log_start_offset))
            if state.leader == self.broker_id:
                leaders.append((partition, state))
            else:
                followers.append((partition, state))
        for partition, state in leaders:
            was_follower = not partition.is_leader
            partition.make_leader(state, now)
            if was_follower:
                self.fetchers.remove_partition(partition.tp)
            log.info("leader of %s-%d at epoch %d, ISR %s", partition.topic, partition.partition,
                     partition.leader_epoch, list(partition.isr))
            self._on_leadership_change(partition, leader=True)
            self._try_complete(partition.tp)
        for partition, state in followers:
            was_leader = partition.is_leader
            if partition.make_follower(state) or was_leader:
                self.fetchers.remove_partition(partition.tp)
                if state.leader != NO_LEADER and not self.shutting_down:
                    self.fetchers.add_partition(partition)
                # (a coordinator partition hosted here is unloaded even when this broker did
                # not know it led it: it loaded it as the single node it was)
                self._on_leadership_change(partition, leader=False)
            log.info("follower of %s-%d (leader %d, epoch %d)", partition.topic, partition.partition,
                     partition.leader, partition.leader_epoch)
            self._try_complete(partition.tp)        # its acks=all produces: NOT_LEADER_OR_FOLLOWER
            self._wake_fetches(partition.tp)
        self._ensure_isr_task()

    def begin_controlled_shutdown(self) -> None:
        """The StopReplica (deletePartitions=false) that KafkaController.doControlledShutdown
        sends the broker shutting down for the partitions it follows: its fetchers stop, and no
        later state starts them again. Were it to go on fetching, its leaders would add it back to
        the ISRs the controller takes it out of (Kafka's controller refuses that expansion as
        INELIGIBLE_REPLICA, KIP-841), each round a new leader epoch."""
        self.shutting_down = True
        for partition in self.partitions.values():
            if not partition.is_leader:
                self.fetchers.remove_partition(partition.tp)

    def resign_leaderships(self) -> None:
        """This broker's ZooKeeper session expired (it was stopped, or cut off, past the session
        timeout): to the controller it died, and each partition it led gets a new leader epoch
        (another replica, or this broker again once it is back). Until those states arrive it
        leads nothing, so a deposed leader does not answer from what it had (a coordinator's
        offsets and groups, reads below an old high watermark) while the new leaders go on; its
        acks=all waits answer NOT_LEADER_OR_FOLLOWER."""
        for partition in self.partitions.values():
            if partition.is_leader:
                partition.leader = NO_LEADER
                partition.pending_isr = None
                log.info("no longer leader of %s-%d (epoch %d): the ZooKeeper session expired", partition.topic,
                         partition.partition, partition.leader_epoch)
                self._on_leadership_change(partition, leader=False)
                self._try_complete(partition.tp)
                self._wake_fetches(partition.tp)

    def update_replicas(self, tp: tuple[str, int], replicas) -> None:
        """A partition's replica set changed without a new state (a reassignment's last step,
        RS = TRS, as Kafka's controller sends it in LeaderAndIsr): the leader forgets the removed
        followers, so it neither waits for them nor adds them back to the ISR."""
        partition = self.partitions.get(tp)
        replicas = tuple(replicas)
        if partition is None or self.broker_id not in replicas or partition.replicas == replicas:
            return
        partition.replicas = replicas
        if partition.is_leader:
            now = self.now_ms()
            partition.remote = {r: partition.remote.get(r) or Replica(r, now, r in partition.isr)
                                for r in replicas if r != self.broker_id}
            partition.maybe_increment_high_watermark(now)
            self._try_complete(tp)

    def stop_replicas(self, tps: list[tuple[str, int]], delete: bool) -> None:
        """Kafka's stopReplicas: stop following or leading; the logs are deleted with ``delete``."""
        for tp in tps:
            partition = self.partitions.pop(tp, None)
            self.fetchers.remove_partition(tp)
            if partition is not None:
                was_leader = partition.is_leader
                partition.leader = NO_LEADER
                if was_leader:
                    self._on_leadership_change(partition, leader=False)
                self._try_complete(tp)
            if delete:
                self.broker.data_path.logs.delete_partition(*tp)
            self._wake_fetches(tp)

    def _on_leadership_change(self, partition: Partition, leader: bool) -> None:
        """Kafka's onLeadershipChange: a coordinator partition is loaded at its leader epoch by
        its new leader and unloaded by the old one; share-partitions of the partition are
        dropped (built again by its leader)."""
        broker = self.broker
        broker.share_partitions.on_leadership_change(partition.topic, partition.partition)
        for runtime in (broker.group_coordinator, broker.transaction_coordinator, broker.share_coordinator):
            if runtime.topic != partition.topic:
                continue
            if leader:
                runtime.load_partition(partition.partition, partition.leader_epoch)
            else:
                runtime.unload_partition(partition.partition, partition.leader_epoch)

    # -- lookups for the handlers ------------------------------------------------------------
    def leader_partition(self, topic: str, partition: int,
                         current_leader_epoch: int = UNDEFINED_EPOCH) -> tuple[Partition | None, ErrorCode | None]:
        """The partition if this broker leads it at ``current_leader_epoch`` (-1: any), else the
        error Kafka's getPartitionOrError / getLocalLog answers."""
        p = self.partitions.get((topic, partition))
        if p is None:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        error = epoch_error(current_leader_epoch, p.leader_epoch)
        if error is not None:
            return None, error
        if not p.is_leader:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return p, None

    def replica_partition(self, topic: str, partition: int,
                          current_leader_epoch: int = UNDEFINED_EPOCH) -> tuple[Partition | None, ErrorCode | None]:
        """The partition if hosted here (leader or follower: fetch from follower, KIP-392)."""
        p = self.partitions.get((topic, partition))
        if p is None or (p.leader == NO_LEADER and not p.is_leader):
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        error = epoch_error(current_leader_epoch, p.leader_epoch)
        if error is not None:
            return None, error
        return p, None

    def leader_hint(self, topic: str, partition: int) -> tuple[int, int]:
        """KIP-951: (leader id, leader epoch) as this broker knows them, (-1, -1) if not."""
        p = self.partitions.get((topic, partition))
        if p is not None and p.leader != NO_LEADER:
            return p.leader, p.leader_epoch
        if self.metadata_leader is not None:
            found = self.metadata_leader(topic, partition)
            if found is not None:
                return found
        return -1, -1

    def partition_leader(self, topic: str, partition: int) -> int | None:
        """The broker leading ``topic``-``partition`` as this broker knows it (None: no leader
        known), for requests sent to a partition's leader (transaction markers, a transactional
        id's coordinator). The cluster's view (``metadata_leader``, the metadata cache) first, as
        Kafka's TransactionMarkerChannelManager and AddPartitionsToTxnManager ask theirs; else the
        state of a partition this broker replicates."""
        if self.metadata_leader is not None:
            found = self.metadata_leader(topic, partition)
            if found is not None and found[0] != NO_LEADER:
                return found[0]
        p = self.partitions.get((topic, partition))
        if p is not None and p.leader != NO_LEADER:
            return p.leader
        return None

    def is_local_leader(self, topic: str, partition: int) -> bool:
        """This broker leads ``topic``-``partition``: always a single node (no cluster)."""
        return not self.enabled or self.partition_leader(topic, partition) == self.broker_id

    @property
    def channel(self):
        """The connections to the other brokers (inter_broker.py)."""
        if self._channel is None:
            from .inter_broker import REQUEST_TIMEOUT_MS, InterBrokerChannel
            self._channel = InterBrokerChannel(self, f"broker-{self.broker_id}", REQUEST_TIMEOUT_MS)
        return self._channel

    @property
    def add_partitions_to_txn_manager(self):
        """Questions to transaction coordinators on other brokers (add_partitions_to_txn_manager.py)."""
        if self._add_partitions_manager is None:
            from .add_partitions_to_txn_manager import AddPartitionsToTxnManager
            self._add_partitions_manager = AddPartitionsToTxnManager(self)
        return self._add_partitions_manager

    def endpoint(self, broker_id: int) -> tuple[str, int, str | None] | None:
        """(host, port, rack) of a live broker, None when unknown."""
        if broker_id == self.broker_id:
            host, port = self.broker.advertised_listener()
            return host, port, self.rack
        if self.broker_endpoint is None:
            return None
        found = self.broker_endpoint(broker_id)
        if found is None:
            return None
        if len(found) == 2:
            return found[0], found[1], None
        return found[0], found[1], found[2]

    # -- the leader: appends, follower fetches, acks=all --------------------------------------
    def on_follower_fetch(self, partition: Partition, replica_id: int, fetch_offset: int, start_offset: int) -> None:
        """A follower's Fetch reached ``fetch_offset``: its state, the high watermark (waking
        what waits for it), and the ISR expansion when it has caught up."""
        now = self.now_ms()
        if partition.update_follower_fetch_state(replica_id, fetch_offset, start_offset, now):
            self.high_watermark_moved(partition.tp)
        if (replica_id not in partition.isr and partition.pending_isr is None
                and replica_id in partition.replicas and partition.follower_in_sync(replica_id)):
            self._propose_isr(partition, tuple(sorted(set(partition.isr) | {replica_id})))

    def leader_appended(self, partition: Partition) -> None:
        """Records were appended on the leader: an ISR of one moves the high watermark at once."""
        if partition.maybe_increment_high_watermark(self.now_ms()):
            self.high_watermark_moved(partition.tp)

    def high_watermark_moved(self, tp: tuple[str, int]) -> None:
        """Complete the acks=all produces and the fetches waiting for it (soon: never from
        inside the fetch being evaluated)."""
        if tp in self._wake_scheduled:
            return
        self._wake_scheduled.add(tp)
        asyncio.get_running_loop().call_soon(self._wake, tp)

    def _wake(self, tp) -> None:
        self._wake_scheduled.discard(tp)
        group_coordinator = self.broker.group_coordinator
        if tp[0] == group_coordinator.topic:    # its coordinator reads at the new committed offset
            group_coordinator.high_watermark_moved(tp[1])
        self._try_complete(tp)
        self._wake_fetches(tp)

    def _wake_fetches(self, tp) -> None:
        self.broker.data_path.appended(*tp)

    def delayed_produce(self, waits, timeout_ms: int) -> PendingResponse:
        """An acks=all Produce's appended partitions ``[(Partition, required offset, min isr,
        partition response)]``: a PendingResponse answered (None) once each has its ISR's
        acknowledgement, error codes set on the responses that failed or timed out."""
        delayed = _DelayedProduce([[p, required, min_isr, pr, False] for p, required, min_isr, pr in waits])
        if self._check(delayed):
            delayed.pending.answer(None)
            return delayed.pending
        for w in delayed.waits:
            self._delayed.setdefault(w[0].tp, []).append(delayed)
        delayed.timer = asyncio.get_running_loop().call_later(
            max(timeout_ms, 0) / 1000.0, self._expire, delayed)
        return delayed.pending

    def after_replicated(self, tp, plog, flushed: PendingResponse, timeout_ms: int) -> PendingResponse:
        """A coordinator write's wait: ``flushed`` once the partition's ISR also has everything
        appended so far (Kafka's coordinators append with acks=all); failed when it did not get
        there (not the leader any more, or timed out)."""
        partition = self.partitions.get(tp)
        if partition is None or not partition.is_leader or plog.high_watermark >= plog.log_end_offset:
            return flushed
        status = _Status()
        replicated = self.delayed_produce([(partition, plog.log_end_offset, 1, status)], timeout_ms)

        def combine(_):
            if status.error_code:
                raise KafkaError(ErrorCode(status.error_code), f"{tp[0]}-{tp[1]}: not replicated to its ISR")
            return None
        try:
            out = PendingResponse.gather([flushed, replicated], combine)
        except KafkaError as e:
            failed = PendingResponse()
            failed.fail(e)
            return failed
        if type(out) is PendingResponse:
            return out
        done = PendingResponse(flush_only=True)
        done.answer(out)
        return done

    @staticmethod
    def _check(delayed: _DelayedProduce) -> bool:
        complete = True
        for w in delayed.waits:
            if w[4]:
                continue
            done, error = w[0].check_enough_replicas(w[1], w[2])
            if done:
                w[4] = True
                if error:
                    w[3].error_code = error
            else:
                complete = False
        return complete

    def _try_complete(self, tp) -> None:
        waiting = self._delayed.get(tp)
        if not waiting:
            return
        for delayed in list(waiting):
            if delayed.pending.answered or self._check(delayed):
                self._finish(delayed)

    def _finish(self, delayed: _DelayedProduce) -> None:
        if delayed.timer is not None:
            delayed.timer.cancel()
        for w in delayed.waits:
            waiting = self._delayed.get(w[0].tp)
            if waiting is not None and delayed in waiting:
                waiting.remove(delayed)
                if not waiting:
                    del self._delayed[w[0].tp]
        delayed.pending.answer(None)

    def _expire(self, delayed: _DelayedProduce) -> None:
        """DelayedProduce.onExpiration: the partitions still waiting answer REQUEST_TIMED_OUT."""
        delayed.timer = None
        self._check(delayed)
        for w in delayed.waits:
            if not w[4]:
                w[4] = True
                w[3].error_code = ErrorCode.REQUEST_TIMED_OUT
        self._finish(delayed)

    # -- ISR changes --------------------------------------------------------------------------
    def _ensure_isr_task(self) -> None:
        loop = asyncio.get_running_loop()
        if self._isr_task is None or self._isr_task.done():
            self._isr_task = loop.create_task(self._isr_expiration())
        if self._hw_task is None or self._hw_task.done():
            self._hw_task = loop.create_task(self._checkpoint_high_watermarks())

    def high_watermarks(self) -> dict[tuple[str, int], int]:
        return {tp: p.log.high_watermark for tp, p in self.partitions.items() if not p.log.closed}

    async def _checkpoint_high_watermarks(self) -> None:
        """Kafka's highwatermark-checkpoint task: every replica.high.watermark.checkpoint.interval.ms
        the replicated partitions' high watermarks go to replication-offset-checkpoint (on a
        thread), read back when a restarted broker makes them replicated again."""
        interval = self.broker.config["replica.high.watermark.checkpoint.interval.ms"] / 1000.0
        loop = asyncio.get_running_loop()
        written: dict = {}
        while True:
            await asyncio.sleep(interval)
            offsets = self.high_watermarks()
            if offsets == written:
                continue
            try:
                await loop.run_in_executor(None, write_checkpoint, self.hw_checkpoint_path, offsets)
                written = offsets
            except Exception:
                log.exception("cannot write %s", self.hw_checkpoint_path)

    async def _isr_expiration(self) -> None:
        """Kafka's isr-expiration task: every half replica.lag.time.max.ms, each led partition
        drops the followers that have not caught up within it."""
        while True:
            await asyncio.sleep(self.replica_lag_time_max_ms / 2000.0)
            try:
                self.maybe_shrink_isr()
            except Exception:
                log.exception("ISR expiration failed")

    def maybe_shrink_isr(self) -> None:
        now = self.now_ms()
        for partition in list(self.partitions.values()):
            if not partition.is_leader or partition.pending_isr is not None:
                continue
            out = partition.out_of_sync_replicas(now, self.replica_lag_time_max_ms)
            if out:
                log.info("shrinking the ISR of %s-%d from %s: %s not caught up within %d ms", partition.topic,
                         partition.partition, list(partition.isr), out, self.replica_lag_time_max_ms)
                self._propose_isr(partition, tuple(r for r in partition.isr if r not in out))

    def _propose_isr(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        """Send an ISR change to the controller (AlterPartition / the state znode, conditional on
        the partition epoch); applied once accepted."""
        if self.alter_isr is None:
            log.debug("no alter_isr: the ISR of %s-%d stays %s", partition.topic, partition.partition,
                      list(partition.isr))
            return
        partition.pending_isr = new_isr
        asyncio.get_running_loop().create_task(self._alter_isr(partition, new_isr))

    async def _alter_isr(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        epoch, partition_epoch = partition.leader_epoch, partition.partition_epoch
        try:
            result = await self.alter_isr(partition.topic, partition.partition, epoch, list(new_isr), partition_epoch)
        except Exception:
            log.exception("ISR change of %s-%d to %s failed", partition.topic, partition.partition, list(new_isr))
            result = None
        if partition.pending_isr != new_isr:
            return      # a newer state arrived meanwhile
        partition.pending_isr = None
        if result is None or partition.leader_epoch != epoch or self.partitions.get(partition.tp) is not partition:
            log.info("ISR change of %s-%d to %s not applied (stale partition epoch %d)", partition.topic,
                     partition.partition, list(new_isr), partition_epoch)
            return
        partition.isr = new_isr
        partition.partition_epoch = result
        log.info("ISR of %s-%d is now %s (partition epoch %d)", partition.topic, partition.partition,
                 list(new_isr), result)
        if partition.maybe_increment_high_watermark(self.now_ms()):
            self.high_watermark_moved(partition.tp)
        else:
            self._try_complete(partition.tp)

    # -- KIP-392: fetch from follower ----------------------------------------------------------
    def preferred_read_replica(self, partition: Partition, fetch_offset: int, client_rack: str) -> int:
        """ReplicaManager.findPreferredReadReplica with RackAwareReplicaSelector: -1 (read from
        the leader) unless an in-sync replica in the client's rack has the offset."""
        if not self.rack_aware or not client_rack or not partition.is_leader or self.rack == client_rack:
            return -1
        now = self.now_ms()
        best = None
        for replica in partition.remote.values():
            if replica.broker_id not in partition.isr:
                continue
            if not (replica.log_end_offset >= fetch_offset and replica.log_start_offset <= fetch_offset):
                continue
            endpoint = self.endpoint(replica.broker_id)
            if endpoint is None or endpoint[2] != client_rack:
                continue
            key = (replica.log_end_offset, -(now - replica.last_caught_up_ms))
            if best is None or key > best[0]:
                best = (key, replica.broker_id)
        return best[1] if best is not None else -1

    # -- lifecycle ----------------------------------------------------------------------------
    async def close(self) -> None:
        if self._isr_task is not None:
            self._isr_task.cancel()
        if self._hw_task is not None:
            self._hw_task.cancel()
            if self.partitions and not self.broker.log_dir_failure.offline:
                try:
                    write_checkpoint(self.hw_checkpoint_path, self.high_watermarks())
                except OSError:
                    log.exception("cannot write %s", self.hw_checkpoint_path)
        for delayed in {d for ds in self._delayed.values() for d in ds}:
            for w in delayed.waits:
                if not w[4]:
                    w[3].error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            self._finish(delayed)
        await self.fetchers.close()
        if self._channel is not None:
            self._channel.close()
