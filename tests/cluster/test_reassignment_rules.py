"""The pure rules of partition reassignment (kgroup/cluster/reassignment.py): Kafka's
ReplicaAssignment arithmetic, the request checks with Kafka 4.3's answers, and the next step the
controller takes from a topic znode's RS / AR / RR and the partition's state."""
from hypothesis import given
from hypothesis import strategies as st

from kgroup.cluster.reassignment import ReplicaAssignment, build_reassignment, is_complete, next_step, validate_target
from kgroup.cluster.zk_data import LeaderAndIsr
from kgroup.protocol.errors import ErrorCode

LIVE = {1, 2, 3, 4, 5, 6}


def state(leader, isr, epoch=5, version=7):
    return LeaderAndIsr(leader, epoch, tuple(isr), 1, version)


def test_reassign_to_lists_the_target_first_then_the_original_replicas():
    # KafkaController's example: ORS {1,2,3} -> TRS {4,5,6}
    ra = ReplicaAssignment((1, 2, 3)).reassign_to((4, 5, 6))
    assert ra == ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    assert ra.origin == (1, 2, 3) and ra.target == (4, 5, 6) and ra.is_being_reassigned
    # overlapping: [1,2,3] -> [3,4,2] is encoded [3,4,2,1]
    assert ReplicaAssignment((1, 2, 3)).reassign_to((3, 4, 2)) == ReplicaAssignment((3, 4, 2, 1), (4,), (1,))


def test_cancel_goes_back_to_the_original_replicas_and_needs_a_reassignment():
    moving = ReplicaAssignment((2, 3, 1), (3,), (1,))
    # (Kafka cannot restore the original order when the target overlaps it: ORS is RS - AR)
    assert build_reassignment(moving, None) == ReplicaAssignment((2, 1))
    assert build_reassignment(ReplicaAssignment((1, 2)), None) is None          # NO_REASSIGNMENT_IN_PROGRESS
    # a new target replaces the one in progress, from the original replicas
    assert build_reassignment(moving, (4, 2)) == ReplicaAssignment((4, 2, 1), (4,), (1,))


def test_request_checks_answer_as_kafka_4_3():
    cur = ReplicaAssignment((1, 2))
    assert validate_target(cur, (), LIVE, True)[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    code, msg = validate_target(cur, (1, 9), LIVE, True)
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "broker 9, but no such broker is registered" in msg
    code, msg = validate_target(cur, (2, 2), LIVE, True)
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "the broker 2 more than once" in msg
    assert validate_target(cur, (1, 2, 3), LIVE, True) is None
    assert validate_target(cur, (1, 2, 3), LIVE, False) == (ErrorCode.INVALID_REPLICATION_FACTOR,
                                                            "The replication factor is changed from 2 to 3")
    assert validate_target(cur, (3, 4), LIVE, False) is None
    # during a reassignment the replication factor compared is the target's (KIP-860)
    assert validate_target(ReplicaAssignment((3, 4, 1, 2), (3, 4), (1, 2)), (5, 6), LIVE, False) is None


def test_phase_a_bumps_the_leader_epoch_once_then_waits_for_the_isr():
    ra = ReplicaAssignment((2, 3, 1), (3,), (1,))
    s = state(1, (1, 2))
    step = next_step(ra, s, LIVE, epoch_bumped=False)
    assert not step.complete and step.assignment is None
    assert step.state == LeaderAndIsr(1, 6, (1, 2), 1, 7)
    assert next_step(ra, s, LIVE, epoch_bumped=True).state is None            # waiting for 3 to join
    assert next_step(ra, state(-1, (1, 2)), LIVE, epoch_bumped=False).state is None   # offline: election first


def test_phase_b_keeps_a_target_leader_and_drops_the_removed_replicas():
    ra = ReplicaAssignment((2, 3, 1), (3,), (1,))
    step = next_step(ra, state(2, (1, 2, 3)), LIVE, epoch_bumped=True)
    assert step.complete and step.assignment == ReplicaAssignment((2, 3))
    assert step.state == LeaderAndIsr(2, 6, (2, 3), 1, 7)


def test_phase_b_moves_leadership_off_a_removed_leader_to_the_first_live_target_in_the_isr():
    ra = ReplicaAssignment((3, 2, 1), (3,), (1,))
    step = next_step(ra, state(1, (1, 2, 3)), LIVE, epoch_bumped=True)
    assert step.state.leader == 3 and step.state.isr == (2, 3)
    step = next_step(ra, state(1, (1, 2, 3)), LIVE - {3}, epoch_bumped=True)
    assert step.state.leader == 2
    # no live target replica to lead: wait
    assert next_step(ra, state(1, (1, 2, 3)), {1}, epoch_bumped=True).state is None


def test_a_decrease_completes_at_once():
    ra = ReplicaAssignment((1, 2, 3)).reassign_to((1, 2))
    assert ra == ReplicaAssignment((1, 2, 3), (), (3,))
    assert is_complete(ra, state(1, (1, 2, 3)))
    step = next_step(ra, state(3, (1, 2, 3)), LIVE, epoch_bumped=False)
    assert step.complete and step.state.leader == 1 and step.state.isr == (1, 2)


def test_replaced_reassignment_drops_the_unneeded_adding_replicas_from_the_isr():
    ra = ReplicaAssignment((4, 2, 1), (4,), (1,))       # replaced [2,3,1] (adding 3)
    step = next_step(ra, state(1, (1, 2, 3)), LIVE, epoch_bumped=True, unneeded=(3,))
    assert not step.complete and step.state.isr == (1, 2) and step.state.leader_epoch == 6


@given(st.lists(st.integers(1, 6), min_size=1, max_size=4, unique=True),
       st.lists(st.integers(1, 6), min_size=1, max_size=4, unique=True),
       st.lists(st.integers(1, 6), min_size=1, max_size=4, unique=True))
def test_any_reassignment_or_its_cancellation_ends_on_its_target(orig, first, second):
    """Starting from ORS, reassigning (and maybe reassigning again), once every target replica is
    in the ISR the next step completes on the target, with a leader and ISR inside it."""
    ra = build_reassignment(ReplicaAssignment(tuple(orig)), tuple(first))
    ra = build_reassignment(ra, tuple(second))
    assert set(ra.replicas) == set(ra.target) | set(ra.origin)
    assert ra.origin == tuple(r for r in ra.replicas if r in orig)
    s = state(orig[0], tuple(dict.fromkeys((*orig, *ra.target))))
    step = next_step(ra, s, LIVE, epoch_bumped=True)
    assert step.complete and step.assignment == ReplicaAssignment(tuple(second))
    assert step.state.leader in second and set(step.state.isr) == set(second)
    cancelled = build_reassignment(ra, None)
    if ra.is_being_reassigned:
        assert cancelled.replicas == tuple(r for r in ra.replicas if r in orig)
    else:
        assert cancelled is None


def _ctx(topics, states, adding=None, removing=None):
    from kgroup.cluster.controller import ControllerContext
    from kgroup.cluster.zk_data import BrokerRegistration
    c = ControllerContext()
    c.live = {b: BrokerRegistration(b, ()) for b in LIVE}
    c.topics = {t: (a, None) for t, a in topics.items()}
    c.states = states
    c.adding, c.removing = adding or {}, removing or {}
    return c


def test_the_controller_takes_a_replica_no_longer_assigned_out_of_the_isr():
    """A leader that added a removed replica back to its ISR as the reassignment completed (its
    fetch came before the leader learned the new replica set): the controller drops it, even for
    a single-replica partition."""
    from kgroup.cluster.controller import plan_changes
    c = _ctx({"t": {0: (2, 3), 1: (3,)}}, {("t", 0): state(2, (2, 3, 1)), ("t", 1): state(3, (3, 1))})
    changes = plan_changes(c, lambda t: False)
    assert changes[("t", 0)].isr == (2, 3) and changes[("t", 1)].isr == (3,)


def test_the_automatic_preferred_election_leaves_partitions_being_reassigned_alone():
    from kgroup.cluster.controller import plan_changes
    # t-0 is being moved to [3, 2] (its RS [3, 2, 1]): 3 is "preferred" but it is not rebalanced onto
    c = _ctx({"t": {0: (3, 2, 1), 1: (3, 1)}}, {("t", 0): state(1, (1, 2, 3)), ("t", 1): state(1, (1, 3))},
             adding={("t", 0): (3,)}, removing={("t", 0): (1,)})
    changes = plan_changes(c, lambda t: False, preferred=True, imbalance_percentage=10)
    assert ("t", 0) not in changes and changes[("t", 1)].leader == 3
