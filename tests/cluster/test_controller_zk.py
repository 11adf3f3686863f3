"""The controller against a real ZooKeeper, without brokers: broker registrations and topics are
written as a broker would write them, and the state znodes the controller writes are checked.
Covers election and epoch fencing, new topics, a broker's death and return, unclean election,
topic deletion, controlled shutdown and the preferred election."""
import threading

import pytest

from kgroup.cluster import zk_data as zd
from kgroup.cluster.controller import ControllerConfig, KafkaController
from kgroup.cluster.zk_client import ControllerMovedError, KafkaZkClient
from kgroup.testing.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    with ZooKeeperServer(tmp_path_factory.mktemp("zk")) as zk:
        yield zk


@pytest.fixture
def chroot(zookeeper, request):
    """Each test in its own chroot: a fresh tree."""
    root = KafkaZkClient(zookeeper.connect, 6000)
    root.start()
    root.zk.ensure_path(f"/{request.node.name}")
    root.close()
    return f"{zookeeper.connect}/{request.node.name}"


@pytest.fixture
def zk(chroot):
    client = KafkaZkClient(chroot, 6000)
    client.start()
    client.create_top_level_paths()
    yield client
    client.close()


class Brokers:
    """Registrations, each on its own session as a broker's (ephemeral, gone with the session)."""

    def __init__(self, zk):
        self.zk = zk
        self.sessions = {}

    def up(self, *ids, rack=None):
        for b in ids:
            c = KafkaZkClient(self.zk.connect, 6000)
            c.start()
            c.register_broker(b, zd.encode_broker([zd.EndPoint("PLAINTEXT", "127.0.0.1", 9000 + b, "PLAINTEXT")], rack), 5)
            self.sessions[b] = c

    def down(self, *ids):
        for b in ids:
            self.sessions.pop(b).close()

    def close(self):
        for c in self.sessions.values():
            c.close()


@pytest.fixture
def brokers(zk):
    b = Brokers(zk)
    yield b
    b.close()


def controller(zk, broker_id, **kw):
    changed = threading.Event()
    c = KafkaController(zk, ControllerConfig(broker_id, **kw))
    c.on_change = changed.set
    c.start()
    return c


def wait(pred, timeout=10.0):
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("timed out")


def state(zk, topic, p):
    return zk.get_partition_states([(topic, p)]).get((topic, p))


def test_election_and_epoch_fencing(zk, brokers):
    brokers.up(1, 2)
    c1 = controller(zk, 1)
    wait(lambda: c1.active)
    assert zk.get_controller_id() == 1
    old_version = c1.epoch_zk_version
    # another broker wins a later election (the first's session lost): its epoch is higher ...
    c1.close()
    zk.zk.delete(zd.CONTROLLER)
    won = zk.register_controller_and_increment_epoch(2)
    assert won is not None and won[0] == c1.epoch + 1
    # ... and the first's writes, fenced by the epoch znode's version, fail as a whole
    zk.create_topic("t", {0: [1, 2]}, b"\x01" * 16, {})
    with pytest.raises(ControllerMovedError):
        zk.create_partition_states({("t", 0): zd.LeaderAndIsr(1, 0, (1, 2), c1.epoch)}, c1.epoch, old_version)
    assert state(zk, "t", 0) is None


def test_new_topic_broker_death_and_return(zk, brokers):
    brokers.up(1, 2, 3)
    c = controller(zk, 1)
    wait(lambda: c.active)
    zk.create_topic("t", {0: [2, 3, 1], 1: [3], 2: [1, 2, 3]}, b"\x02" * 16, {})
    wait(lambda: all(state(zk, "t", p) is not None for p in range(3)))
    s0 = state(zk, "t", 0)
    assert (s0.leader, s0.leader_epoch, s0.isr) == (2, 0, (2, 3, 1))
    brokers.down(2, 3)          # their sessions end
    wait(lambda: state(zk, "t", 0).leader == 1 and state(zk, "t", 1).leader == -1)
    s0 = state(zk, "t", 0)
    assert (s0.leader, s0.isr) == (1, (1,)) and s0.leader_epoch in (1, 2)   # one bump per death seen
    s1 = state(zk, "t", 1)      # its only replica gone: offline, ISR kept
    assert (s1.leader, s1.isr) == (-1, (3,))
    assert state(zk, "t", 2).isr == (1,)
    brokers.up(3)
    wait(lambda: state(zk, "t", 1).leader == 3)
    assert state(zk, "t", 1).isr == (3,)
    c.close()


def test_unclean_election_only_when_enabled(zk, brokers):
    brokers.up(1, 2)
    c = controller(zk, 1)
    wait(lambda: c.active)
    zk.create_topic("clean", {0: [2, 1]}, b"\x03" * 16, {})
    zk.create_topic("unclean", {0: [2, 1]}, b"\x04" * 16, {"unclean.leader.election.enable": "true"})
    wait(lambda: state(zk, "clean", 0) is not None and state(zk, "unclean", 0) is not None)
    for t in ("clean", "unclean"):      # 1 out of sync (as its leader would have recorded)
        st = state(zk, t, 0)
        assert zk.conditional_update_partition_state(t, 0, zd.LeaderAndIsr(2, st.leader_epoch, (2,), st.controller_epoch),
                                                     st.zk_version) == st.zk_version + 1
    brokers.down(2)
    wait(lambda: state(zk, "unclean", 0).leader == 1)
    assert state(zk, "unclean", 0).isr == (1,)
    st = state(zk, "clean", 0)
    assert (st.leader, st.isr) == (-1, (2,))
    c.close()


def test_stale_isr_update_refused(zk, brokers):
    brokers.up(1)
    c = controller(zk, 1)
    wait(lambda: c.active)
    zk.create_topic("t", {0: [1]}, b"\x05" * 16, {})
    wait(lambda: state(zk, "t", 0) is not None)
    st = state(zk, "t", 0)
    assert zk.conditional_update_partition_state("t", 0, st, st.zk_version + 7) is None
    c.close()


def test_deletion_controlled_shutdown_and_preferred_election(zk, brokers):
    brokers.up(1, 2)
    c = controller(zk, 1, auto_leader_rebalance=True, imbalance_check_interval_s=0.2)
    wait(lambda: c.active)
    zk.create_topic("t", {0: [2, 1], 1: [1, 2]}, b"\x06" * 16, {})
    wait(lambda: state(zk, "t", 0) is not None and state(zk, "t", 1) is not None)
    # broker 2 asks for a controlled shutdown: its leadership moves, it leaves the ISRs
    brokers.sessions[2].zk.create(zd.controlled_shutdown_path(2), zd.encode_controlled_shutdown(7),
                                  ephemeral=True, makepath=True)
    wait(lambda: zd.decode_controlled_shutdown(zk.zk.get(zd.controlled_shutdown_path(2))[0]).get("done"))
    assert (state(zk, "t", 0).leader, state(zk, "t", 0).isr) == (1, (1,))
    assert state(zk, "t", 1).isr == (1,)
    brokers.sessions[2].zk.delete(zd.controlled_shutdown_path(2))
    # back in the ISR (its leader's alter_isr): the auto-rebalance gives it its preferred partition back
    st = state(zk, "t", 0)
    zk.conditional_update_partition_state("t", 0, zd.LeaderAndIsr(1, st.leader_epoch, (1, 2), st.controller_epoch),
                                          st.zk_version)
    wait(lambda: state(zk, "t", 0).leader == 2)
    # deletion
    zk.mark_topic_for_deletion("t")
    wait(lambda: zk.topics_marked_for_deletion() == [])     # the marker goes last
    assert zk.get_topic("t") is None and zk.zk.exists("/config/topics/t") is None
    c.close()


def test_producer_id_blocks_are_unique_across_brokers(zk):
    """ZkProducerIdManager: blocks claimed in turn from /latest_producer_id_block, never twice."""
    import json
    from kgroup.cluster.producer_ids import ZkProducerIdManager
    other = KafkaZkClient(zk.connect, 6000)
    other.start()
    try:
        a, b = ZkProducerIdManager(zk, 1, block_size=3), ZkProducerIdManager(other, 2, block_size=3)
        ids = [m.allocate() for m in (a, b, a, a, a, b, b, b, a)]
        assert ids == [0, 3, 1, 2, 6, 4, 5, 9, 7]
        assert json.loads(zk.zk.get(zd.PRODUCER_ID_BLOCK)[0]) == {"version": 1, "broker": 2, "block_start": "9",
                                                                   "block_end": "11"}
        # a restarted broker claims a new block
        assert ZkProducerIdManager(zk, 1, block_size=3).allocate() == 12
    finally:
        other.close()


def test_unclean_enabled_on_the_topic_later_elects_at_once(zk, brokers):
    """A topic's unclean.leader.election.enable turned on while it is offline: the config change
    notification wakes the controller, which elects the live out-of-sync replica."""
    brokers.up(1, 2)
    c = controller(zk, 1)
    wait(lambda: c.active)
    zk.create_topic("late", {0: [2, 1]}, b"\x07" * 16, {})
    wait(lambda: state(zk, "late", 0) is not None)
    st = state(zk, "late", 0)
    zk.conditional_update_partition_state("late", 0, zd.LeaderAndIsr(2, st.leader_epoch, (2,), st.controller_epoch),
                                          st.zk_version)
    brokers.down(2)
    wait(lambda: state(zk, "late", 0).leader == -1)
    zk.set_topic_config("late", {"unclean.leader.election.enable": "true"})
    wait(lambda: state(zk, "late", 0).leader == 1)
    c.close()


def test_a_broker_registered_again_with_a_new_epoch_is_a_failure_and_a_start(zk, brokers):
    """Broker 2's registration replaced by one of another session in one step (a restart or a
    new session the controller did not see go): the controller treats it as failed then started
    (KafkaController's bounced brokers), so every partition it led gets a new leader epoch: one
    it shares moves to the other in-sync replica, one it alone holds is led by it again."""
    brokers.up(1, 2, 3)
    c = controller(zk, 1)
    try:
        wait(lambda: zk.get_controller_id() == 1)
        zk.create_topic("bounce", {0: [2, 3], 1: [2]}, b"\x01" * 16, {})
        wait(lambda: state(zk, "bounce", 0) is not None and state(zk, "bounce", 1) is not None)
        before = {p: state(zk, "bounce", p) for p in (0, 1)}
        assert before[0].leader == 2 and before[1].leader == 2
        old = brokers.sessions.pop(2)
        new = KafkaZkClient(zk.connect, 6000)
        new.start()
        brokers.sessions[2] = new
        path = zd.broker_path(2)
        data, _ = new.zk.get(path)
        tx = new.zk.transaction()
        tx.delete(path)
        tx.create(path, data, ephemeral=True)
        tx.commit()
        old.close()
        wait(lambda: state(zk, "bounce", 1).leader_epoch >= before[1].leader_epoch + 2
             and state(zk, "bounce", 0).leader_epoch > before[0].leader_epoch)
        p0, p1 = state(zk, "bounce", 0), state(zk, "bounce", 1)
        assert (p0.leader, p0.isr) == (3, (3,))
        assert (p1.leader, p1.isr) == (2, (2,))
    finally:
        c.close()
