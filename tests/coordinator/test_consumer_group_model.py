"""The consumer-protocol group model (kgroup/coordinator/consumer_group/group.py) and the replay of
its records. A pure driver plays the coordinator's part (records for joins, heartbeats with
reconciliation, leaves, topic changes, deletion); after every step the live groups must equal the
groups rebuilt from the bytes written so far, the repository's live == replayed rule."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgroup.coordinator.assignor import SubscriptionType
from kgroup.java_compat import string_map_order
from kgroup.coordinator.consumer_group import consumer_group_records as rec
from kgroup.coordinator.consumer_group.current_assignment import reconcile
from kgroup.coordinator.consumer_group.group import (ConsumerGroup, ConsumerGroupState, IllegalReplayState,
                                                     ResolvedRegex, TopicMetadata, group_deletion_records,
                                                     member_removal_records, replay)
from kgroup.coordinator.consumer_group.member import ConsumerGroupMember, MemberState, freeze
from kgroup.coordinator.consumer_group.target_assignment import build_target_assignment
from kgroup.coordinator.consumer_group.validation import check_regex
from kgroup.coordinator.coordinator_records import RecordDecodeError, UnknownRecordType

G = "group"


def topic(name: str, n: int) -> TopicMetadata:
    return TopicMetadata(name.encode().ljust(16, b"\x00")[:16], name, n, tuple((p, ()) for p in range(n)))


class Coordinator:
    """A stand-in for the handlers to come: builds the records Kafka writes, applies them through
    replay() only, keeps the bytes, and checks live == replayed after every step."""

    def __init__(self, topics: dict[str, TopicMetadata], assignor: str = "uniform"):
        self.topics = dict(topics)
        self.assignor = assignor
        self.groups: dict[str, ConsumerGroup] = {}
        self.log: list[tuple[bytes, bytes | None]] = []
        self.owned: dict[str, list] = {}

    # plumbing
    def write(self, records) -> None:
        for r in records:
            replay(self.groups, r)                       # live: the structs, as the shard will
            self.log.append((r.key, r.value))
        self.check()

    def check(self) -> None:
        rebuilt: dict[str, ConsumerGroup] = {}
        for key, value in self.log:
            replay(rebuilt, rec.decode_record(key, value))   # load: the bytes
        assert {g: x.durable_view() for g, x in rebuilt.items()} == \
               {g: x.durable_view() for g, x in self.groups.items()}

    @property
    def group(self) -> ConsumerGroup:
        return self.groups[G]

    # what the handlers will do
    def _retarget(self, records: list) -> None:
        """Bump the group epoch and compute a new target (Kafka: members, regex resolutions,
        metadata, epoch, then the target's changed members and its epoch)."""
        self.write(records)                         # the member changes first
        group = self.group
        regexes = sorted({m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex})
        self.write([rec.regular_expression_record(G, r, ResolvedRegex(
            frozenset(t for t in self.topics if check_regex(r).fullmatch(t)), len(self.log), 0)) for r in regexes])
        epoch = group.group_epoch + 1
        subscribed = {t for m in group.members.values()
                      for t in ConsumerGroup.resolve_subscription(m, group.resolved_regexes)}
        self.write([rec.subscription_metadata_record(G, {t: self.topics[t] for t in subscribed if t in self.topics}),
                    rec.group_epoch_record(G, epoch)])
        records, _ = build_target_assignment(self.group, epoch, self.assignor, self.topics)
        self.write(records)

    def join(self, member_id: str, topics=(), regex=None, instance_id=None, assignor=None) -> None:
        m = ConsumerGroupMember(member_id, instance_id=instance_id, client_id="c", client_host="/127.0.0.1",
                                subscribed_topic_names=frozenset(topics), subscribed_topic_regex=regex,
                                rebalance_timeout_ms=300000, server_assignor_name=assignor)
        self.owned[member_id] = []
        self._retarget([rec.member_subscription_record(G, m)])

    def heartbeat(self, member_id: str, revoke: bool = True) -> ConsumerGroupMember:
        """A ConsumerGroupHeartbeat reporting what the client owns. ``revoke``: the client has
        given up what it was told to revoke before sending, and takes its assignment from the
        response; otherwise it is slow and keeps what it had."""
        group = self.group
        m = group.members[member_id]
        if revoke:
            self.owned[member_id] = [(t, [p for p in ps if p in m.assigned_partitions.get(t, ())])
                                     for t, ps in self.owned[member_id]]
        new = reconcile(m, group.assignment_epoch, group.target_assignment.get(member_id, {}),
                        group.current_partition_epoch, self.owned[member_id])
        if new != m:
            self.write([rec.current_assignment_record(G, new)])
        if revoke:
            self.owned[member_id] = [(t, sorted(p)) for t, p in new.assigned_partitions.items()]
        return self.group.members[member_id]

    def leave(self, member_id: str) -> None:
        self.owned.pop(member_id)
        self.write(member_removal_records(G, member_id))
        self._retarget([])

    def topics_changed(self, topics: dict[str, TopicMetadata]) -> None:
        self.topics = dict(topics)
        self._retarget([])

    def delete(self) -> None:
        self.write(group_deletion_records(self.group))


def test_a_group_life_replays_to_the_same_state():
    c = Coordinator({"orders": topic("orders", 6), "users": topic("users", 3)})
    c.join("m1", topics=["orders", "users"])
    assert c.group.state is ConsumerGroupState.RECONCILING      # target set, m1 at epoch 0
    assert c.heartbeat("m1").member_epoch == 1
    assert c.group.state is ConsumerGroupState.STABLE
    assert sum(map(len, c.group.members["m1"].assigned_partitions.values())) == 9
    c.join("m2", topics=["orders", "users"], instance_id="i2")
    assert c.group.state is ConsumerGroupState.RECONCILING and c.group.group_epoch == 2
    assert c.group.static_member_id("i2") == "m2"
    # m2 gets nothing m1 still holds: m1 must revoke first
    m2 = c.heartbeat("m2")
    assert m2.state is MemberState.UNRELEASED_PARTITIONS and m2.member_epoch == 2
    m1 = c.heartbeat("m1", revoke=False)
    assert m1.state is MemberState.UNREVOKED_PARTITIONS and m1.member_epoch == 1
    assert c.heartbeat("m1", revoke=False) is c.group.members["m1"]     # still owns them: no move
    assert c.heartbeat("m1").state is MemberState.STABLE
    assert c.heartbeat("m2").state is MemberState.STABLE
    assert c.group.state is ConsumerGroupState.STABLE
    sizes = sorted(sum(map(len, m.assigned_partitions.values())) for m in c.group.members.values())
    assert sizes == [4, 5]
    # a topic grows: new epoch, new target
    c.topics_changed({"orders": topic("orders", 8), "users": topic("users", 3)})
    assert c.group.subscription_metadata["orders"].num_partitions == 8
    for _ in range(3):
        for mid in ("m1", "m2"):
            c.heartbeat(mid)
    assert c.group.state is ConsumerGroupState.STABLE and c.group.assignment_epoch == 3
    # m2 leaves; m1 takes everything
    c.leave("m2")
    assert "m2" not in c.group.members and c.group.static_member_id("i2") is None
    c.heartbeat("m1")
    assert sum(map(len, c.group.members["m1"].assigned_partitions.values())) == 11
    c.leave("m1")
    assert c.group.state is ConsumerGroupState.EMPTY and not c.group.partition_epochs
    c.delete()
    assert G not in c.groups


def test_regex_subscription_is_resolved_against_topics_and_again_when_they_change():
    c = Coordinator({"orders-eu": topic("orders-eu", 2), "users": topic("users", 2)})
    c.join("m1", regex="orders-.*")
    c.heartbeat("m1")
    assert set(c.group.subscription_metadata) == {"orders-eu"}
    assert c.group.subscribed_regexes == {"orders-.*": 1}
    c.topics_changed({"orders-eu": topic("orders-eu", 2), "orders-us": topic("orders-us", 1),
                      "users": topic("users", 2), "xorders-eu": topic("xorders-eu", 1)})
    c.heartbeat("m1")
    assert set(c.group.subscription_metadata) == {"orders-eu", "orders-us"}     # whole-name matches only
    assert c.group.resolved_regexes["orders-.*"].topics == {"orders-eu", "orders-us"}     # record 16
    assert {t for t in c.group.members["m1"].assigned_partitions} == {topic("orders-eu", 0).topic_id,
                                                                      topic("orders-us", 0).topic_id}


def test_subscription_type_assignors_and_classic_count():
    c = Coordinator({"a": topic("a", 2), "b": topic("b", 2)}, assignor="range")
    c.join("m1", topics=["a", "b"], assignor="range")
    assert c.group.subscription_type() is SubscriptionType.HOMOGENEOUS
    c.join("m2", topics=["a"], assignor="uniform")
    assert c.group.subscription_type() is SubscriptionType.HETEROGENEOUS
    c.join("m3", topics=["a"], assignor="uniform")
    assert c.group.preferred_server_assignor("uniform") == "uniform"
    assert ConsumerGroup("x").preferred_server_assignor("range") == "range"
    classic = ConsumerGroupMember("m4", subscribed_topic_names=frozenset({"a"}),
                                  classic_member_metadata=(45000, (("range", b"\x00\x01"),)))
    c.write([rec.member_subscription_record(G, classic)])
    assert c.group.classic_members == 1
    assert c.group.members["m4"].classic_member_metadata == (45000, (("range", b"\x00\x01"),))


def test_target_assignment_records_in_kafkas_member_order_and_only_for_changes():
    c = Coordinator({"a": topic("a", 4)})
    for mid in ("zeta", "alpha", "m-17"):
        c.join(mid, topics=["a"])
    g = c.group
    newcomer = ConsumerGroupMember("B", subscribed_topic_names=frozenset({"a"}))
    records, target = build_target_assignment(g, g.group_epoch + 1, "uniform", c.topics, {"B": newcomer})
    order = string_map_order(list(g.members) + ["B"])
    assert list(target) == order
    changed = [r.key_struct.member_id for r in records[:-1]]
    assert changed == [m for m in order if g.target_assignment.get(m) != target[m]]
    assert "B" in changed and len(changed) < 4                # members keeping their target get no record
    assert records[-1].value_struct.assignment_epoch == g.group_epoch + 1
    assert sorted(sum(map(len, a.values())) for a in target.values()) == [1, 1, 1, 1]


def test_static_member_rejoining_under_a_new_id_starts_from_the_old_target():
    c = Coordinator({"a": topic("a", 6)})
    c.join("m1", topics=["a"], instance_id="i1")
    c.join("m2", topics=["a"], instance_id="i2")
    for _ in range(3):
        c.heartbeat("m1"), c.heartbeat("m2")
    g = c.group
    before = g.target_assignment["m1"]
    # i1 rejoins as m1b while m1 is still in the group (its records go in the same write)
    replacement = ConsumerGroupMember("m1b", instance_id="i1", subscribed_topic_names=frozenset({"a"}))
    _, target = build_target_assignment(g, g.group_epoch + 1, "uniform", c.topics,
                                        {"m1": None, "m1b": replacement})
    assert target["m1b"] == before and "m1" not in target


def test_subscription_type_counts_names_not_topic_ids():
    """{a, missing} and {a}: heterogeneous for Kafka (names differ) though both resolve to topic a;
    the target still covers every partition of a once."""
    c = Coordinator({"a": topic("a", 3)}, assignor="range")
    c.join("m1", topics=["a", "missing"])
    c.join("m2", topics=["a"])
    assert c.group.subscription_type() is SubscriptionType.HETEROGENEOUS
    _, target = build_target_assignment(c.group, c.group.group_epoch + 1, "range", c.topics)
    assert sorted(p for a in target.values() for ps in a.values() for p in ps) == [0, 1, 2]


# -- replay rules --------------------------------------------------------------------------------

def test_replay_refuses_contradictions_and_ignores_stray_tombstones():
    groups: dict = {}
    for r in member_removal_records("nobody", "m") + [rec.group_epoch_tombstone("nobody"),
                                                      rec.target_assignment_epoch_tombstone("nobody")]:
        replay(groups, r)
    assert groups == {}
    t = b"\x07" * 16
    m1 = ConsumerGroupMember("m1", member_epoch=3, assigned_partitions=freeze({t: [0, 1]}))
    m2 = ConsumerGroupMember("m2", member_epoch=3, assigned_partitions=freeze({t: [1]}))
    replay(groups, rec.group_epoch_record(G, 3))
    replay(groups, rec.current_assignment_record(G, m1))
    with pytest.raises(IllegalReplayState, match="still owned at epoch 3"):
        replay(groups, rec.current_assignment_record(G, m2))
    groups = {}
    replay(groups, rec.member_subscription_record(G, m1))
    replay(groups, rec.current_assignment_record(G, m1))
    with pytest.raises(IllegalReplayState, match="CurrentMemberAssignmentValue tombstone"):
        replay(groups, rec.member_subscription_tombstone(G, "m1"))
    with pytest.raises(IllegalReplayState, match="still has 1 members"):
        replay(groups, rec.group_epoch_tombstone(G))
    replay(groups, rec.target_assignment_record(G, "m1", freeze({t: [0]})))
    with pytest.raises(IllegalReplayState, match="assignment still has 1 members"):
        replay(groups, rec.target_assignment_epoch_tombstone(G))
    # a leave: the epoch goes to -1 and the partitions are released before the member goes
    replay(groups, rec.current_assignment_tombstone(G, "m1"))
    assert groups[G].members["m1"].member_epoch == -1 and not groups[G].partition_epochs
    replay(groups, rec.target_assignment_tombstone(G, "m1"))
    replay(groups, rec.member_subscription_tombstone(G, "m1"))
    assert groups[G].members == {}


def test_state_values():
    g = ConsumerGroup(G)
    assert g.state is ConsumerGroupState.EMPTY and g.assignment_epoch == 0
    assert [s.value for s in ConsumerGroupState] == ["Empty", "Assigning", "Reconciling", "Stable", "Dead"]


def test_decoder_errors():
    r = rec.group_epoch_record(G, 5)
    assert rec.decode_record(r.key, r.value).value_struct.epoch == 5
    with pytest.raises(UnknownRecordType):
        rec.decode_record((2).to_bytes(2, "big") + b"\x00\x01g", None)
    with pytest.raises(RecordDecodeError):
        rec.decode_record(r.key[:3], r.value)
    with pytest.raises(RecordDecodeError):
        rec.decode_record(r.key, b"\x00\x07" + r.value[2:])          # no value version 7
    with pytest.raises(RecordDecodeError):
        rec.decode_record(r.key, r.value[:3])


# -- random lives -------------------------------------------------------------------------------

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_group_lives_replay_to_the_same_state(data):
    names = ["a", "b", "c"]
    c = Coordinator({n: topic(n, data.draw(st.integers(1, 6))) for n in names},
                    assignor=data.draw(st.sampled_from(["uniform", "range"])))
    ids = iter(f"m{i}" for i in range(1000))
    c.join(next(ids), topics=data.draw(st.lists(st.sampled_from(names), unique=True, min_size=1)))
    for _ in range(data.draw(st.integers(1, 20))):
        action = data.draw(st.sampled_from(["join", "leave", "beat", "beat", "beat", "topics"]))
        members = sorted(c.group.members)
        if action == "join":
            c.join(next(ids), topics=data.draw(st.lists(st.sampled_from(names), unique=True)),
                   instance_id=data.draw(st.none() | st.just(f"i{len(members)}")))
        elif action == "leave" and len(members) > 1:
            c.leave(data.draw(st.sampled_from(members)))
        elif action == "topics":      # partitions are only ever added; a topic may go away
            grown = {n: topic(n, t.num_partitions + data.draw(st.integers(0, 3))) for n, t in c.topics.items()}
            if len(grown) > 1 and data.draw(st.booleans()):
                del grown[data.draw(st.sampled_from(sorted(grown)))]
            c.topics_changed(grown)
        else:
            c.heartbeat(data.draw(st.sampled_from(members)), revoke=data.draw(st.booleans()))
    for _ in range(5):
        for mid in sorted(c.group.members):
            c.heartbeat(mid)
    assert c.group.state is ConsumerGroupState.STABLE
    for mid in sorted(c.group.members):
        c.leave(mid) if len(c.group.members) > 1 else None
    c.write(member_removal_records(G, next(iter(c.group.members))))
    c.delete()
    assert c.groups == {}


def test_describe_reports_epochs_states_and_both_assignments():
    from kgroup.coordinator.consumer_group.describe import describe_group, group_not_found
    from kgroup.protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse
    c = Coordinator({"a": topic("a", 4)})
    c.join("m1", topics=["a"], instance_id="i1", assignor="range")
    c.heartbeat("m1")
    c.join("m2", topics=["a"])
    c.heartbeat("m1", revoke=False)             # m1 keeps what it must give up: reconciling
    d = describe_group(c.group, "uniform", {t.topic_id: n for n, t in c.topics.items()})
    assert (d.group_id, d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name) == (
        G, "Reconciling", 2, 2, "range")
    m1 = next(m for m in d.members if m.member_id == "m1")
    assert (m1.instance_id, m1.member_epoch, m1.subscribed_topic_names, m1.client_host) == ("i1", 1, ["a"], "/127.0.0.1")
    assert [(tp.topic_name, tp.partitions) for tp in m1.assignment.topic_partitions] == [
        ("a", sorted(c.group.members["m1"].assigned_partitions[topic("a", 0).topic_id]))]
    assert len(m1.target_assignment.topic_partitions[0].partitions) == 2
    assert [m.member_type for m in d.members] == [1, 1]     # consumer-protocol members (v1, KIP-1099)
    # it encodes as the v1 response (v0 has no member type)
    raw = ConsumerGroupDescribeResponse(groups=[d, group_not_found("x"), group_not_found("cls", True)]).to_bytes(1)
    back = ConsumerGroupDescribeResponse.from_bytes(raw, 1)
    assert back.groups[0] == d
    v0 = ConsumerGroupDescribeResponse.from_bytes(ConsumerGroupDescribeResponse(groups=[d]).to_bytes(0), 0)
    assert [m.member_type for m in v0.groups[0].members] == [-1, -1]
    assert [(g.error_code, g.error_message) for g in back.groups[1:]] == [
        (69, "Group x not found."), (69, "Group cls is not a consumer group.")]


def test_offset_commit_and_fetch_validation():
    from kgroup.protocol.errors import ErrorCode, KafkaError

    def code(fn, *args):
        try:
            fn(*args)
        except KafkaError as e:
            return e.code, str(e)
        return None

    g = ConsumerGroup(G)
    assert code(g.validate_offset_commit, "", None, -1, False, 9) is None     # empty group: simple commits
    assert code(g.validate_delete_group) is None
    c = Coordinator({"a": topic("a", 2)})
    c.join("m1", topics=["a"])
    c.heartbeat("m1")
    g = c.group
    assert g.members["m1"].member_epoch == 1
    assert code(g.validate_offset_commit, "m1", None, 1, False, 9) is None
    # an older epoch: checked per partition against the epoch it was assigned at (Kafka 4.3)
    validator = g.validate_offset_commit("m1", None, 0, False, 9)
    tid = topic("a", 2).topic_id
    assert code(validator, "a", tid, 0) == (
        ErrorCode.STALE_MEMBER_EPOCH, "Received member epoch 0 is older than assignment epoch 1 for partition a-0.")
    assert code(g.validate_offset_commit("m1", None, 1 - 1, False, 9), "b", b"\x09" * 16, 0) == (
        ErrorCode.STALE_MEMBER_EPOCH, "Partition b-0 is not assigned or pending revocation for member.")
    assert code(g.validate_offset_commit, "m1", None, 2, False, 9) == (
        ErrorCode.STALE_MEMBER_EPOCH, "Received member epoch 2 is newer than current member epoch 1.")
    assert code(g.validate_offset_commit, "m1", None, 1, False, 8)[0] == ErrorCode.UNSUPPORTED_VERSION
    assert code(g.validate_offset_commit, "m1", None, 1, True, 3) is None        # TxnOffsetCommit
    assert code(g.validate_offset_commit, "", None, -1, False, 9) == (
        ErrorCode.UNKNOWN_MEMBER_ID, "Member  is not a member of group group.")
    assert code(g.validate_offset_fetch, None, -1) is None
    assert code(g.validate_offset_fetch, "m1", 1) is None
    assert code(g.validate_offset_fetch, "nobody", 1)[0] == ErrorCode.UNKNOWN_MEMBER_ID
    assert code(g.validate_offset_fetch, "m1", 0)[0] == ErrorCode.STALE_MEMBER_EPOCH
    assert code(g.validate_delete_group)[0] == ErrorCode.NON_EMPTY_GROUP
    # a classic member inside a consumer group (online migration) commits with its generation
    classic = ConsumerGroupMember("c1", subscribed_topic_names=frozenset({"a"}), classic_member_metadata=(45000, ()))
    c.write([rec.member_subscription_record(G, classic)])
    assert code(c.group.validate_offset_commit, "c1", None, 0, False, 7) is None
    assert code(c.group.validate_offset_commit, "c1", None, 5, False, 7)[0] == ErrorCode.ILLEGAL_GENERATION
