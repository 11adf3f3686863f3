"""The controller's leader election rules (Kafka's PartitionLeaderElectionAlgorithms and the
replica state machine's ISR removal), and the controller's plan for a cluster view."""
from kgroup.cluster import leader_election as le
from kgroup.cluster.controller import ControllerContext, plan_changes, plan_initial_states, remaining_leaderships
from kgroup.cluster.zk_data import NO_LEADER, BrokerRegistration, LeaderAndIsr


def st(leader, isr, epoch=5, version=7):
    return LeaderAndIsr(leader, epoch, tuple(isr), 1, version)


def test_offline_election_first_live_isr_replica_in_assignment_order():
    new = le.elect_offline((1, 2, 3), st(1, [3, 2, 1]), live={2, 3}, unclean=False)
    assert (new.leader, new.isr, new.leader_epoch) == (2, (3, 2), 6)


def test_offline_election_without_live_isr_replica_is_refused_unless_unclean():
    assert le.elect_offline((1, 2, 3), st(1, [1]), live={2, 3}, unclean=False) is None
    new = le.elect_offline((1, 2, 3), st(1, [1]), live={3, 2}, unclean=True)
    assert (new.leader, new.isr) == (2, (2,))


def test_preferred_election_needs_the_preferred_replica_live_and_in_sync():
    assert le.elect_preferred((1, 2, 3), st(2, [2, 3]), live={1, 2, 3}) is None      # 1 not in the ISR
    assert le.elect_preferred((1, 2, 3), st(2, [2, 3, 1]), live={2, 3}) is None      # 1 not live
    assert le.elect_preferred((1, 2, 3), st(1, [1, 2]), live={1, 2}) is None         # already leads
    new = le.elect_preferred((1, 2, 3), st(2, [2, 3, 1]), live={1, 2, 3})
    assert (new.leader, new.isr, new.leader_epoch) == (1, (2, 3, 1), 6)


def test_controlled_shutdown_election_skips_brokers_shutting_down():
    new = le.elect_controlled_shutdown((1, 2, 3), st(1, [1, 2, 3]), live={1, 2, 3}, shutting_down={1, 2})
    assert (new.leader, new.isr) == (3, (3,))
    assert le.elect_controlled_shutdown((1, 2), st(1, [1]), live={1, 2}, shutting_down={1}) is None


def test_removing_a_replica_keeps_the_last_isr_member():
    assert le.remove_replica_from_isr(st(1, [1, 2]), 2).isr == (1,)
    last = le.remove_replica_from_isr(st(1, [1]), 1)
    assert (last.leader, last.isr) == (NO_LEADER, (1,))
    assert le.remove_replica_from_isr(st(1, [1, 2]), 3) is None


def test_imbalance_threshold():
    assignments = {("t", p): (1, 2) for p in range(10)}
    states = {tp: st(1, [1, 2]) for tp in assignments}
    states[("t", 0)] = st(2, [2, 1])
    assert le.imbalanced(assignments, states, {1, 2}, 10) == []          # 10%: not over
    states[("t", 1)] = st(2, [2])
    assert le.imbalanced(assignments, states, {1, 2}, 10) == [("t", 0)]  # 20%; t-1's preferred is out of sync


def ctx(live, topics, states, shutting=()):
    c = ControllerContext()
    c.live = {b: BrokerRegistration(b, ()) for b in live}
    c.topics = {t: (a, None) for t, a in topics.items()}
    c.states = states
    c.shutting_down = {b: {} for b in shutting}
    return c


def test_plan_after_a_broker_death():
    c = ctx({2, 3}, {"t": {0: (1, 2, 3), 1: (2, 3, 1), 2: (1,)}},
            {("t", 0): st(1, [1, 2, 3]), ("t", 1): st(2, [2, 3, 1]), ("t", 2): st(1, [1])})
    changes = plan_changes(c, lambda t: False)
    assert (changes[("t", 0)].leader, changes[("t", 0)].isr, changes[("t", 0)].leader_epoch) == (2, (2, 3), 6)
    assert (changes[("t", 1)].leader, changes[("t", 1)].isr, changes[("t", 1)].leader_epoch) == (2, (2, 3), 6)
    # a single replica's partition goes offline, its ISR kept for a clean election later
    assert (changes[("t", 2)].leader, changes[("t", 2)].isr) == (NO_LEADER, (1,))
    # and when the broker returns, it leads again
    c2 = ctx({1, 2, 3}, {"t": {2: (1,)}}, {("t", 2): changes[("t", 2)]})
    assert plan_changes(c2, lambda t: False)[("t", 2)].leader == 1


def test_plan_unclean_per_topic():
    c = ctx({2}, {"a": {0: (1, 2)}, "b": {0: (1, 2)}}, {("a", 0): st(1, [1]), ("b", 0): st(1, [1])})
    changes = plan_changes(c, lambda t: t == "b")
    assert (changes[("a", 0)].leader, changes[("a", 0)].isr) == (NO_LEADER, (1,))
    assert (changes[("b", 0)].leader, changes[("b", 0)].isr) == (2, (2,))


def test_plan_controlled_shutdown_and_remaining():
    c = ctx({1, 2, 3}, {"t": {0: (1, 2, 3), 1: (2, 1), 2: (1,)}},
            {("t", 0): st(1, [1, 2, 3]), ("t", 1): st(2, [2, 1]), ("t", 2): st(1, [1])}, shutting={1})
    changes = plan_changes(c, lambda t: False)
    assert (changes[("t", 0)].leader, changes[("t", 0)].isr) == (2, (2, 3))
    assert (changes[("t", 1)].leader, changes[("t", 1)].isr) == (2, (2,))
    assert ("t", 2) not in changes          # no other replica: it keeps leading until it stops
    c.states.update(changes)
    assert remaining_leaderships(c, 1) == 0


def test_plan_preferred_election():
    c = ctx({1, 2}, {"t": {0: (1, 2), 1: (1, 2)}}, {("t", 0): st(2, [2, 1]), ("t", 1): st(1, [1, 2])})
    assert plan_changes(c, lambda t: False) == {}
    changes = plan_changes(c, lambda t: False, preferred=True)
    assert (changes[("t", 0)].leader, changes[("t", 0)].isr) == (1, (2, 1))


def test_initial_states_from_live_replicas():
    c = ctx({2, 3}, {"t": {0: (1, 2, 3), 1: (1,)}}, {})
    init = plan_initial_states(c, 4)
    assert init == {("t", 0): LeaderAndIsr(2, 0, (2, 3), 4)}


def test_plan_elect_leaders():
    from kgroup.cluster.controller import plan_elect_leaders
    from kgroup.protocol.errors import ErrorCode as E
    c = ctx({1, 2}, {"t": {0: (1, 2), 1: (1, 2), 2: (2, 1), 3: (3, 1)}},
            {("t", 0): st(2, [2, 1]), ("t", 1): st(1, [1, 2]), ("t", 2): st(1, [1]), ("t", 3): st(3, [3])})
    changes, results = plan_elect_leaders(c, [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("t", 9), ("u", 0)], False)
    assert {tp: r[0] for tp, r in results.items()} == {
        ("t", 0): E.NONE, ("t", 1): E.ELECTION_NOT_NEEDED, ("t", 2): E.PREFERRED_LEADER_NOT_AVAILABLE,
        ("t", 3): E.PREFERRED_LEADER_NOT_AVAILABLE, ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("u", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert results[("u", 0)][1] == "No such topic as u" and results[("t", 9)][1] == "No such partition as t-9"
    assert list(changes) == [("t", 0)] and changes[("t", 0)].leader == 1
    changes, results = plan_elect_leaders(c, [("t", 0), ("t", 3)], True)
    assert results[("t", 0)][0] == E.ELECTION_NOT_NEEDED           # a live leader
    assert results[("t", 3)][0] == E.NONE and (changes[("t", 3)].leader, changes[("t", 3)].isr) == (1, (1,))
    c.live = {}
    assert plan_elect_leaders(c, [("t", 3)], True)[1][("t", 3)][0] == E.ELIGIBLE_LEADERS_NOT_AVAILABLE
