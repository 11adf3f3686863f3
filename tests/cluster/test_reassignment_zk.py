"""The controller's partition reassignment against a real ZooKeeper, without brokers (the leader's
ISR changes written as a leader writes them): the topic znode's RS / AR / RR at each phase, the
leader epoch bumps, the completion with a leader from the target replicas, cancellation, a new
controller resuming from the topic znode, and /admin/reassign_partitions."""
import json

import pytest

from kgroup.cluster import zk_data as zd
from kgroup.protocol.errors import ErrorCode
from tests.cluster import test_controller_zk as czk
from tests.cluster.test_controller_zk import controller, state, wait

# the controller tests' fixtures: a ZooKeeper for the module, a chroot per test, broker registrations
zookeeper, chroot, zk, brokers = czk.zookeeper, czk.chroot, czk.zk, czk.brokers

pytestmark = pytest.mark.interop


def topic_doc(zk, topic):
    return json.loads(zk.zk.get(zd.topic_path(topic))[0])


def started(zk, brokers, assignment, topic_id: bytes):
    """Brokers 1-3 registered, controller 1 active, topic "t" created with ``assignment`` and its
    partitions' first states written; the controller."""
    brokers.up(1, 2, 3)
    c = controller(zk, 1)
    wait(lambda: c.active)
    zk.create_topic("t", assignment, topic_id, {})
    wait(lambda: state(zk, "t", 0) is not None)
    return c


def join_isr(zk, topic, p, isr):
    """The leader's ISR expansion (alter_isr): a conditional write plus the change notification."""
    st = state(zk, topic, p)
    assert zk.conditional_update_partition_state(
        topic, p, zd.LeaderAndIsr(st.leader, st.leader_epoch, tuple(isr), st.controller_epoch), st.zk_version)


def test_phases_completion_and_leader_moved_off_a_removed_replica(zk, brokers):
    c = started(zk, brokers, {0: [1, 2]}, b"\x11" * 16)
    assert c.alter_partition_reassignments({("t", 0): (3, 2)}, True).result(10) == {("t", 0): (ErrorCode.NONE, None)}
    doc = topic_doc(zk, "t")        # U: RS = TRS ++ ORS, AR, RR
    assert (doc["partitions"], doc["adding_replicas"], doc["removing_replicas"]) == (
        {"0": [3, 2, 1]}, {"0": [3]}, {"0": [1]})
    st = state(zk, "t", 0)          # A1: the leader epoch bumped, the leader kept
    assert (st.leader, st.leader_epoch, st.isr) == (1, 1, (1, 2))
    listed = c.list_partition_reassignments(None).result(10)
    assert {tp: (ra.replicas, ra.adding, ra.removing) for tp, ra in listed.items()} == {("t", 0): ((3, 2, 1), (3,), (1,))}
    join_isr(zk, "t", 0, (1, 2, 3))     # 3 caught up
    wait(lambda: topic_doc(zk, "t")["partitions"] == {"0": [3, 2]})
    doc = topic_doc(zk, "t")
    assert doc["adding_replicas"] == {} and doc["removing_replicas"] == {}
    st = state(zk, "t", 0)          # B: a target replica leads, the removed one left the ISR, one bump
    assert (st.leader, st.leader_epoch, st.isr) == (3, 2, (2, 3))
    assert c.list_partition_reassignments(None).result(10) == {}
    c.close()


def test_a_removed_replica_is_not_added_back_to_the_isr(zk, brokers):
    """The new leader may read the completed state before the topic znode (RS = TRS), and the
    removed replica, not yet told, goes on fetching: the ISR change that adds it back is refused,
    both when the topic znode already says RS = TRS and when it changes under the write."""
    c = started(zk, brokers, {0: [1, 2]}, b"\x13" * 16)
    assert c.alter_partition_reassignments({("t", 0): (3, 2)}, True).result(10) == {("t", 0): (ErrorCode.NONE, None)}
    join_isr(zk, "t", 0, (1, 2, 3))
    wait(lambda: topic_doc(zk, "t")["partitions"] == {"0": [3, 2]})
    st = state(zk, "t", 0)
    assert st.isr == (2, 3)
    back = zd.LeaderAndIsr(st.leader, st.leader_epoch, (1, 2, 3), st.controller_epoch)
    assert zk.conditional_update_partition_state("t", 0, back, st.zk_version) is None
    assert state(zk, "t", 0) == st
    # the topic znode moves between the leader's read of it and its write: refused, read again
    real_get = zk.get_topic_full

    def get_then_move(topic):
        got = real_get(topic)
        zk.zk.set(zd.topic_path(topic), zk.zk.get(zd.topic_path(topic))[0])
        return got
    zk.get_topic_full = get_then_move
    try:
        grown = zd.LeaderAndIsr(st.leader, st.leader_epoch, (2, 3), st.controller_epoch)
        assert zk.conditional_update_partition_state("t", 0, grown, st.zk_version) is None
    finally:
        zk.get_topic_full = real_get
    assert zk.conditional_update_partition_state("t", 0, grown, st.zk_version) == st.zk_version + 1
    c.close()


def test_the_last_step_waits_for_an_isr_change_that_raced_it(zk, brokers):
    """The completion's states and topic znode are one multi-op: when a leader's ISR change moved
    the state znode since the controller read it, neither is written, and the controller reads
    again and completes on the new state."""
    c = started(zk, brokers, {0: [1, 2]}, b"\x14" * 16)
    real = zk.complete_reassignment
    raced = []

    def isr_change_first(topic, states, *args):
        if not raced:       # the leader's ISR change lands first: the state znode moves
            raced.append(True)
            st = state(zk, "t", 0)
            zk.zk.set(zd.partition_state_path("t", 0), zd.encode_partition_state(st, st.controller_epoch),
                      version=st.zk_version)
            assert real(topic, states, *args) is None
            assert topic_doc(zk, "t")["partitions"] == {"0": [3, 2, 1]}
            return None
        return real(topic, states, *args)
    zk.complete_reassignment = isr_change_first
    try:
        assert c.alter_partition_reassignments({("t", 0): (3, 2)}, True).result(10) == {
            ("t", 0): (ErrorCode.NONE, None)}
        join_isr(zk, "t", 0, (1, 2, 3))
        wait(lambda: topic_doc(zk, "t")["partitions"] == {"0": [3, 2]})
    finally:
        zk.complete_reassignment = real
    assert raced
    st = state(zk, "t", 0)
    assert (st.leader, st.isr) == (3, (2, 3))
    c.close()


def test_cancel_reverts_and_the_answers(zk, brokers):
    c = started(zk, brokers, {0: [1, 2], 1: [1]}, b"\x12" * 16)
    got = c.alter_partition_reassignments({("t", 0): (1, 2, 3), ("t", 1): None, ("t", 7): (1,),
                                           ("u", 0): (1,)}, False).result(10)
    assert got[("t", 0)] == (ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 2 to 3")
    assert got[("t", 1)][0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert got[("t", 7)] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:7.")
    assert got[("u", 0)] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named u.")
    assert c.alter_partition_reassignments({("t", 0): (1, 2, 3)}, True).result(10) == {("t", 0): (ErrorCode.NONE, None)}
    assert topic_doc(zk, "t")["adding_replicas"] == {"0": [3]}
    assert c.alter_partition_reassignments({("t", 0): None}, True).result(10) == {("t", 0): (ErrorCode.NONE, None)}
    doc = topic_doc(zk, "t")
    assert (doc["partitions"]["0"], doc["adding_replicas"], doc["removing_replicas"]) == ([1, 2], {}, {})
    st = state(zk, "t", 0)
    assert st.leader == 1 and st.isr == (1, 2)
    c.close()


def test_a_new_controller_resumes_and_bumps_the_epoch_again(zk, brokers):
    c1 = started(zk, brokers, {0: [1, 2]}, b"\x13" * 16)
    c1.alter_partition_reassignments({("t", 0): (2, 3)}, True).result(10)
    assert state(zk, "t", 0).leader_epoch == 1
    c1.close()
    zk.zk.delete(zd.CONTROLLER)
    c2 = controller(zk, 2)
    wait(lambda: c2.active)
    wait(lambda: state(zk, "t", 0).leader_epoch == 2)       # A1 again, for the new controller
    join_isr(zk, "t", 0, (1, 2, 3))
    wait(lambda: topic_doc(zk, "t")["partitions"] == {"0": [2, 3]})
    st = state(zk, "t", 0)
    assert (st.leader, st.isr) == (2, (2, 3))
    c2.close()


def test_admin_reassign_partitions_znode(zk, brokers):
    c = started(zk, brokers, {0: [1, 2, 3]}, b"\x14" * 16)
    zk.create_partition_reassignment({("t", 0): [2, 1], ("gone", 0): [1]})
    # a decrease completes at once; the unknown partition is dropped from the znode, then the znode goes
    wait(lambda: topic_doc(zk, "t")["partitions"] == {"0": [2, 1]})
    wait(lambda: zk.get_partition_reassignment() is None)
    st = state(zk, "t", 0)
    assert st.leader == 1 and st.isr == (1, 2)
    c.close()


def test_a_topic_is_deleted_only_once_its_reassignments_end(zk, brokers):
    brokers.up(1, 2, 3)
    c = controller(zk, 1)
    wait(lambda: c.active)
    zk.create_topic("t", {0: [1, 2]}, b"\x15" * 16, {})
    zk.create_topic("other", {0: [1]}, b"\x16" * 16, {})
    wait(lambda: state(zk, "t", 0) is not None and state(zk, "other", 0) is not None)
    c.alter_partition_reassignments({("t", 0): (2, 3)}, True).result(10)
    zk.mark_topic_for_deletion("t")
    zk.mark_topic_for_deletion("other")
    wait(lambda: zk.get_topic("other") is None)         # deleted
    assert zk.get_topic("t") is not None                 # waits for its reassignment
    join_isr(zk, "t", 0, (1, 2, 3))
    wait(lambda: zk.get_topic("t") is None and zk.topics_marked_for_deletion() == [])
    c.close()
