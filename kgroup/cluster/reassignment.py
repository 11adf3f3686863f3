"""Partition reassignment's rules (KIP-455), as Kafka 3.9's ZooKeeper-mode KafkaController runs
them (onPartitionReassignment, its phases U, A and B), with Kafka 4.3's answers to
AlterPartitionReassignments (ReplicationControlManager). Pure functions: the controller
(controller.py) reads ZooKeeper, asks these what to write, and writes it.

A partition's assignment, as its topic znode holds it, is RS (``replicas``: the target replicas
first, then the original ones not in the target), AR (``adding``) and RR (``removing``); the
original set ORS is RS - AR, the target TRS is RS - RR. The topic znode is the only durable
record of ORS, so it is written last when a reassignment completes and a new controller resumes
from it.

The steps, for one partition:

* start (U): the topic znode gets RS = TRS ++ ORS, AR = TRS - ORS, RR = ORS - TRS; replicas a
  replaced reassignment was adding and the new one does not keep leave the ISR and are deleted;
* while some target replica is not in the ISR (A): the leader epoch is bumped once (per
  controller) so every replica, the new ones too, takes the new replica set; the new replicas
  fetch from the leader, and the leader adds them to the ISR as they catch up;
* once TRS is in the ISR (B): the leader stays if it is a live target replica, else the first
  live target replica in the ISR leads (ReassignPartitionLeaderElectionStrategy); RR leave the
  ISR; one state write with the next leader epoch (Kafka writes B3 and B4 separately: two
  epochs; one here, so a follower truncates once); then the topic znode gets RS = TRS, and each
  removed broker, seeing itself gone from the assignment, deletes its replica's log.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..protocol.errors import ErrorCode
from .zk_data import LeaderAndIsr


@dataclass(frozen=True)
class ReplicaAssignment:
    """Kafka's ReplicaAssignment: RS, AR, RR."""
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target) -> "ReplicaAssignment":
        """ReplicaAssignment.reassignTo: RS = (TRS ++ ORS).distinct."""
        origin = self.origin
        full = tuple(dict.fromkeys((*target, *origin)))
        return ReplicaAssignment(full, tuple(r for r in full if r not in origin),
                                 tuple(r for r in full if r not in target))


def validate_target(current: ReplicaAssignment, target, registered, allow_rf_change: bool
                    ) -> tuple[ErrorCode, str] | None:
    """The checks of ReplicationControlManager.changePartitionReassignment
    (validateManualPartitionAssignment, and KIP-860's validatePartitionReplicationFactorUnchanged
    when AllowReplicationFactorChange is false): an error (code, message) or None."""
    if not target:
        return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes an empty replica list.")
    prev = None
    for b in sorted(target):
        if b not in registered:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes broker {b}, "
                    "but no such broker is registered.")
        if b == prev:
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes the broker "
                    f"{b} more than once.")
        prev = b
    if not allow_rf_change:
        size = len(current.target) if current.is_being_reassigned else len(current.replicas)
        if size != len(target):
            return ErrorCode.INVALID_REPLICATION_FACTOR, f"The replication factor is changed from {size} to {len(target)}"
    return None


def build_reassignment(current: ReplicaAssignment, target) -> ReplicaAssignment | None:
    """KafkaController.maybeBuildReassignment: ``target`` None cancels (back to ORS); None when
    there is nothing to cancel (NO_REASSIGNMENT_IN_PROGRESS)."""
    if target is None:
        return current.reassign_to(current.origin) if current.is_being_reassigned else None
    return current.reassign_to(tuple(target))


def is_complete(ra: ReplicaAssignment, state: LeaderAndIsr | None) -> bool:
    """isReassignmentComplete: TRS within the ISR."""
    if not ra.is_being_reassigned:
        return True
    return state is not None and set(ra.target) <= set(state.isr)


def _leader_in(replicas, state: LeaderAndIsr, isr, live) -> int | None:
    """The current leader if it is a live member of ``replicas``, else
    reassignPartitionLeaderElection: the first of ``replicas`` live and in the ISR."""
    if state.leader in replicas and state.leader in live:
        return state.leader
    return next((r for r in replicas if r in live and r in isr), None)


@dataclass(frozen=True)
class Step:
    """What the controller writes next for one partition: the state znode (``state``), then the
    topic znode's entry (``assignment``); either may be None (nothing to write)."""
    state: LeaderAndIsr | None
    assignment: ReplicaAssignment | None
    complete: bool = False


def next_step(ra: ReplicaAssignment, state: LeaderAndIsr | None, live, epoch_bumped: bool,
              unneeded=()) -> Step:
    """The next step of ``ra`` (as the topic znode now holds it) given the partition's state.

    ``epoch_bumped``: this controller already bumped the leader epoch for ``ra`` (phase A1);
    ``unneeded``: replicas of a replaced reassignment that ``ra`` no longer has (U3), which leave
    the ISR now. A partition with no state (not created yet) or with no live target replica in
    its ISR to lead waits (Step(None, None))."""
    if state is None:
        return Step(None, None)
    if is_complete(ra, state):
        target = ra.target
        isr = tuple(r for r in state.isr if r in target)
        leader = _leader_in(target, state, isr, live)
        if leader is None or not isr:
            return Step(None, None)
        return Step(state.new_leader_and_isr(leader, isr), ReplicaAssignment(target), True)
    isr = tuple(r for r in state.isr if r not in unneeded) or state.isr
    if (epoch_bumped and isr == state.isr) or (state.leader not in live and state.leader not in unneeded):
        return Step(None, None)     # (an offline partition is the leader election's first)
    leader = state.leader
    if leader in unneeded:
        leader = _leader_in(ra.replicas, state, isr, live)
        if leader is None:
            return Step(None, None)
    return Step(state.new_leader_and_isr(leader, isr), None)


def ongoing(assignments: dict) -> dict:
    """ListPartitionReassignments: {tp: ReplicaAssignment} of the partitions being reassigned."""
    return {tp: ra for tp, ra in assignments.items() if ra.is_being_reassigned}
