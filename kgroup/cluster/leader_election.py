"""The controller's rules for partition leadership, as Kafka 3.9's PartitionLeaderElectionAlgorithms
and the election strategies of its PartitionStateMachine / ReplicaStateMachine. Pure functions on
a partition's replicas (the assignment, in order), its state and the live brokers; each returns the
new LeaderAndIsr or None when nothing can (or need) change."""
from __future__ import annotations

from .zk_data import NO_LEADER, LeaderAndIsr


def offline_leader(replicas, isr, live, unclean: bool) -> tuple[int | None, bool]:
    """offlinePartitionLeaderElection: the first replica (assignment order) that is live and in
    the ISR; failing that, only with unclean.leader.election.enable, the first live replica.
    Returns (leader or None, elected uncleanly)."""
    for r in replicas:
        if r in live and r in isr:
            return r, False
    if unclean:
        for r in replicas:
            if r in live:
                return r, True
    return None, False


def elect_offline(replicas, state: LeaderAndIsr, live, unclean: bool) -> LeaderAndIsr | None:
    """OfflinePartitionLeaderElectionStrategy (leaderForOffline): a leader from the ISR keeps the
    ISR's live members; an unclean leader starts a new ISR of itself."""
    leader, was_unclean = offline_leader(replicas, state.isr, live, unclean)
    if leader is None:
        return None
    isr = (leader,) if was_unclean or leader not in state.isr else tuple(r for r in state.isr if r in live)
    return state.new_leader_and_isr(leader, isr)


def elect_preferred(replicas, state: LeaderAndIsr, live) -> LeaderAndIsr | None:
    """preferredReplicaPartitionLeaderElection: the first assigned replica, if live and in the
    ISR (and not already leader); the ISR is unchanged."""
    if not replicas:
        return None
    preferred = replicas[0]
    if preferred == state.leader or preferred not in live or preferred not in state.isr:
        return None
    return state.new_leader_and_isr(preferred, state.isr)


def elect_controlled_shutdown(replicas, state: LeaderAndIsr, live, shutting_down) -> LeaderAndIsr | None:
    """controlledShutdownPartitionLeaderElection: the first live ISR replica that is not shutting
    down; the ISR loses the brokers shutting down."""
    for r in replicas:
        if r in live and r in state.isr and r not in shutting_down:
            return state.new_leader_and_isr(r, tuple(i for i in state.isr if i not in shutting_down))
    return None


def remove_replica_from_isr(state: LeaderAndIsr, replica: int) -> LeaderAndIsr | None:
    """ReplicaStateMachine.doRemoveReplicasFromIsr (a replica going offline): out of the ISR
    unless it is the ISR's last member (kept so that it can be elected cleanly when it returns);
    a leader going offline leaves the partition without one."""
    if replica not in state.isr and replica != state.leader:
        return None
    isr = state.isr if len(state.isr) == 1 else tuple(r for r in state.isr if r != replica)
    leader = NO_LEADER if replica == state.leader else state.leader
    if isr == state.isr and leader == state.leader:
        return None
    return state.new_leader_and_isr(leader, isr)


def initial_leader_and_isr(replicas, live, controller_epoch: int) -> LeaderAndIsr | None:
    """initializeLeaderAndIsrForPartitions: the live replicas are the ISR, the first of them leads;
    None while no replica is live (the partition stays new)."""
    live_replicas = tuple(r for r in replicas if r in live)
    if not live_replicas:
        return None
    return LeaderAndIsr(live_replicas[0], 0, live_replicas, controller_epoch)


def imbalanced(assignments: dict, states: dict, live, percentage: int) -> list:
    """checkAndTriggerAutoLeaderRebalance: per preferred broker (live), the share of its preferred
    partitions it does not lead; over ``percentage``, those partitions (whose preferred replica is
    in the ISR) are returned for a preferred election."""
    by_preferred: dict[int, list] = {}
    for tp, replicas in assignments.items():
        if replicas and tp in states:
            by_preferred.setdefault(replicas[0], []).append(tp)
    out = []
    for broker, tps in sorted(by_preferred.items()):
        if broker not in live:
            continue
        not_led = [tp for tp in tps if states[tp].leader != broker]
        if not_led and len(not_led) * 100 / len(tps) > percentage:
            out.extend(tp for tp in not_led if broker in states[tp].isr)
    return out
