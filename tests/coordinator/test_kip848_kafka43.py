"""ConsumerGroupHeartbeat as Kafka 4.3's GroupMetadataManager / GroupCoordinatorService decide it, on
the fake clock; every step is checked by the harness (live durable state == a shard replayed from
the log)."""
import pytest

from kgroup.coordinator.consumer_group import consumer_group_records as rec
from kgroup.coordinator.consumer_group.member import MemberState

from .support import E, CgCtx


def join(c, gid, mid, **kw):
    r = c.hb(gid, mid, 0, **kw)
    assert r.error_code == 0, r
    return r


def written(c, since):
    """(record type, member id or None, decoded value or None) of the records logged since ``since``."""
    out = []
    for key, value in c.log[since:]:
        r = rec.decode_record(key, value)
        out.append((r.record_type, getattr(r.key_struct, "member_id", None), r.value_struct))
    return out


# -- GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid ---------------------------

def test_join_with_an_empty_topic_list_or_an_empty_regex_is_accepted():
    """Kafka 4.0+ (KAFKA-18095): a member may join subscribed to nothing; only a join with neither
    field set is refused."""
    c = CgCtx({"a": 2})
    r = c.hb("g", "m1", 0, topics=[])
    assert r.error_code == 0 and r.member_epoch == 1 and c.names(r) == {}
    r = c.hb("g", "m2", 0, regex="")
    assert r.error_code == 0 and c.names(r) == {}
    assert set(c.cg("g").members) == {"m1", "m2"}
    # the one with a real subscription gets every partition; the empty ones none
    r = join(c, "g", "m3", topics=["a"])
    assert c.names(r) == {"a": [0, 1]}
    r = c.hb("g", "m4", 0)
    assert r.error_code == E.INVALID_REQUEST
    assert r.error_message == "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."


def test_member_subscribed_to_nothing_then_to_a_topic():
    c = CgCtx({"a": 2})
    r = c.hb("g", "m1", 0, topics=[])
    r = c.hb("g", "m1", r.member_epoch, topics=["a"], owned={})
    assert r.error_code == 0 and c.names(r) == {"a": [0, 1]} and r.member_epoch == 2


# -- getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember -----------------------------------------

def test_static_member_rejoining_with_its_own_member_id_gets_unreleased_instance_id():
    """throwIfInstanceIdIsUnreleased: a join (epoch 0) naming an instance id whose static member has
    not left (epoch != -2) is refused, whatever member id it brings."""
    c = CgCtx({"a": 2})
    join(c, "g", "m1", topics=["a"], instance_id="i1")
    r = c.hb("g", "m1", 0, topics=["a"], instance_id="i1")
    assert r.error_code == E.UNRELEASED_INSTANCE_ID
    assert r.error_message == ("Static member m1 with instance id i1 cannot join the group because the instance "
                               "id is owned by m1 member.")
    # after its temporary leave (-2) the same member id may come back
    assert c.hb("g", "m1", -2, instance_id="i1").error_code == 0
    r = join(c, "g", "m1", topics=["a"], instance_id="i1")
    assert c.names(r) == {"a": [0, 1]} and r.member_epoch == 1


def test_dynamic_member_rejoining_with_epoch_zero_is_not_fenced():
    """throwIfConsumerGroupMemberEpochIsInvalid returns at epoch 0 (KIP-848 fenced-member recovery):
    the member keeps its epoch and gets its assignment back (testMemberCanRejoinWithEpochZeroInStableState)."""
    c = CgCtx({"a": 3})
    join(c, "g", "m1", topics=["a"])
    r = c.hb("g", "m1", 0, topics=["a"])
    assert r.error_code == 0 and r.member_epoch == 1 and c.names(r) == {"a": [0, 1, 2]}
    assert c.cg("g").group_epoch == 1


# -- hasMemberSubscriptionChanged: only the topic names bump the group epoch -------------------------

def test_changing_only_the_server_assignor_does_not_bump_the_group_epoch():
    c = CgCtx({"a": 2})
    r = join(c, "g", "m1", topics=["a"])
    since = len(c.log)
    r = c.hb("g", "m1", 1, assignor="range", owned={"a": [0, 1]})
    assert r.error_code == 0 and r.member_epoch == 1
    g = c.cg("g")
    assert g.group_epoch == 1 and g.members["m1"].server_assignor_name == "range"
    assert [t for t, _, _ in written(c, since)] == [rec.MEMBER_METADATA]


# -- replaceMember -------------------------------------------------------------------------------------

def test_static_member_replacement_writes_kafkas_records_and_keeps_the_state():
    """replaceMember: the old member's three tombstones, then the new member's subscription, its target
    (the old member's) and its current assignment: a copy of the old member at epoch 0 (state kept),
    then whatever the heartbeat itself changes."""
    c = CgCtx({"a": 4})
    r1 = join(c, "g", "m1", topics=["a"], instance_id="i1")
    join(c, "g", "m2", topics=["a"])
    r1 = c.hb("g", "m1", r1.member_epoch, owned={"a": [0, 1, 2, 3]})     # revokes two for m2
    old = c.cg("g").members["m1"]
    assert old.state is MemberState.UNREVOKED_PARTITIONS
    assert c.hb("g", "m1", -2, instance_id="i1").error_code == 0
    left = c.cg("g").members["m1"]
    since = len(c.log)
    r = join(c, "g", "m1b", topics=["a"], instance_id="i1")
    out = written(c, since)
    kinds = [(t, m) for t, m, _ in out]
    assert kinds[:6] == [(rec.CURRENT_MEMBER_ASSIGNMENT, "m1"), (rec.TARGET_ASSIGNMENT_MEMBER, "m1"),
                         (rec.MEMBER_METADATA, "m1"), (rec.MEMBER_METADATA, "m1b"),
                         (rec.TARGET_ASSIGNMENT_MEMBER, "m1b"), (rec.CURRENT_MEMBER_ASSIGNMENT, "m1b")]
    copy = out[5][2]
    assert (copy.member_epoch, copy.previous_member_epoch, copy.state) == (0, 0, int(left.state))
    assert copy.state == int(MemberState.UNREVOKED_PARTITIONS)
    # the join itself changes nothing more in the subscription: no second subscription record
    assert [k for k in kinds[6:] if k[0] == rec.MEMBER_METADATA] == []
    assert r.error_code == 0 and c.cg("g").static_members["i1"] == "m1b"
    c.owned_check("g")


# -- throwIfConsumerGroupIsFull ---------------------------------------------------------------------

def test_full_group_refuses_any_unknown_member_id_before_looking_it_up():
    c = CgCtx({"a": 1}, **{"group.consumer.max.size": 2})
    join(c, "g", "m1", topics=["a"])
    join(c, "g", "m2", topics=["a"], instance_id="i2")
    # not a member: GROUP_MAX_SIZE_REACHED, not UNKNOWN_MEMBER_ID, at any epoch
    assert c.hb("g", "m9", 3, owned={}).error_code == E.GROUP_MAX_SIZE_REACHED
    assert c.hb("g", "m9", 0, topics=["a"]).error_code == E.GROUP_MAX_SIZE_REACHED
    # members are not refused, and an existing static member's instance id is not counted again
    assert c.hb("g", "m1", 1, owned={}).error_code == 0
    assert c.hb("g", "m9", 0, topics=["a"], instance_id="i2").error_code == E.UNRELEASED_INSTANCE_ID


# -- ConsumerGroup.subscriptionType: regexes count ----------------------------------------------------

def test_subscription_type_counts_regexes():
    from kgroup.coordinator.assignor import SubscriptionType as T
    c = CgCtx({"ta": 3, "tb": 2, "x": 1})
    join(c, "g", "m1", regex="t.*")
    join(c, "g", "m2", regex="t.*")
    assert c.cg("g").subscription_type() is T.HOMOGENEOUS        # one regex, every member
    join(c, "g", "m3", regex="ta|tb")                             # same topics, another regex
    assert c.cg("g").subscription_type() is T.HETEROGENEOUS
    c2 = CgCtx({"ta": 3, "tb": 2})
    join(c2, "g", "m1", topics=["ta", "tb"])
    join(c2, "g", "m2", regex="t.*")                              # same topics by name and by regex
    assert c2.cg("g").subscription_type() is T.HETEROGENEOUS
    c3 = CgCtx({"ta": 1})
    join(c3, "g", "m1", topics=["ta", "zz"])                      # names count whether they exist or not
    join(c3, "g", "m2", topics=["ta", "zz"])
    assert c3.cg("g").subscription_type() is T.HOMOGENEOUS


def test_names_and_a_regex_for_the_same_topics_use_the_heterogeneous_builder():
    """m1 by name, m2 by a regex matching the same two topics: HETEROGENEOUS, so the uniform
    assignor's heterogeneous builder balances topic by topic (ta, 1.5 partitions per subscriber,
    first): m1 keeps ta-0 and tb, ta-1 and ta-2 move to m2. The homogeneous builder would have
    kept ta whole on m1 and moved tb."""
    c = CgCtx({"ta": 3, "tb": 2})
    r1 = join(c, "g", "m1", topics=["ta", "tb"])
    assert c.names(r1) == {"ta": [0, 1, 2], "tb": [0, 1]}
    join(c, "g", "m2", regex="t.*")
    g = c.cg("g")
    assert {m: c.names(a) for m, a in g.target_assignment.items()} == {
        "m1": {"ta": [0], "tb": [0, 1]}, "m2": {"ta": [1, 2]}}


# -- the uniform assignor in Kafka's iteration orders (UniformHomogeneousAssignmentBuilder, 4.1+) -----
#
# Each expected target below was obtained by running Kafka 4.3's algorithm by hand from its source
# (UniformHomogeneousAssignmentBuilder.maybeRevokePartitions / assignRemainingPartitions and the
# TargetAssignmentBuilder that feeds it), with the Java orders worked out as written in each case.
# Member order: the builder's memberSpecs is a HashMap<String, ...>; "m1".hashCode() = 109*31+49 =
# 3428 (bucket 3428 & 15 = 4), "m2" 3429 (bucket 5), "m3" 3430 (bucket 6): m1, m2, m3.

def _uuid(msb: int, lsb: int) -> bytes:
    return msb.to_bytes(8, "big") + lsb.to_bytes(8, "big")


def _ctx_with_ids(**topics):
    """A CgCtx whose topics have the given (id, partitions)."""
    from kgroup.coordinator.consumer_group.group import TopicMetadata
    c = CgCtx()
    for name, (tid, n) in topics.items():
        c.topics[name] = TopicMetadata(tid, name, n)
        c.topics_version += 1
    return c


def _targets(c):
    return {m: c.names(a) for m, a in sorted(c.cg("g").target_assignment.items())}


# (case, topics name -> (id, partitions), steps, expected targets after the last step)
# Uuid.hashCode = (int)(x >> 32) ^ (int)x with x = msb ^ lsb.
UNIFORM_CASES = [
    # ta = (0, 2): hashCode 2, bucket 2; tb = (1, 0): hashCode 1, bucket 1. m1 alone holds ta and tb
    # (3 + 3); m2 joins: 6 partitions, quota 3 each, no extra. m1 walks its Assignment map
    # (Assignment.fromRecord: a HashMap<Uuid>) tb first: keeps tb (3 <= 3), quota 0, revokes ta 0, 1, 2
    # (HashSet<Integer> order) to the unassigned list; m2 (quota 3) takes ta 0, 1, 2.
    # (Walking the topics in id byte order, ta first, would have moved tb instead.)
    ("topic order of a member's assignment",
     {"ta": (_uuid(0, 2), 3), "tb": (_uuid(1, 0), 3)},
     [("m1", ["ta", "tb"]), ("m2", ["ta", "tb"])],
     {"m1": {"tb": [0, 1, 2]}, "m2": {"ta": [0, 1, 2]}}),
    # t = (0, 7), 4 partitions: m1 alone gets 0-3; m2 joins: quota 2 each, m1 keeps 0, 1 (HashSet
    # order), revokes 2, 3 -> m2. Then t grows to 5: min 2, one extra. m1 (index 0): quota 3, holds 2,
    # quota 1 left with the extra, and 2 - 0 members > 1 extra left: gives the extra up (quota 0).
    # m2 (index 1): quota 3, holds 2, 2 - 1 > 1 is false: keeps the extra, unfilled 1, takes t-4.
    # (Handing the extra to the first member in order, as Kafka 4.0 did, gives t-4 to m1.)
    ("extra partition given up (KAFKA-18688)",
     {"t": (_uuid(0, 7), 4)},
     [("m1", ["t"]), ("m2", ["t"]), ("grow", ("t", 5))],
     {"m1": {"t": [0, 1]}, "m2": {"t": [2, 3, 4]}}),
    # ta = (0, 2) bucket 2, tb = (1, 0) bucket 1, 2 partitions each. m1 alone: 4. m2 joins: quota 2;
    # m1 walks tb first, keeps tb 0, 1, revokes ta 0, 1 -> m2. m3 joins: 4 partitions, 3 members: min
    # 1, one extra. Subscribed topics (new HashSet<>(ids)): tb (bucket 1), ta (bucket 2); no partition is
    # free. m1 (index 0): quota 2 with the extra, holds tb 0, 1 (2 <= 2): quota 0, the extra kept
    # (1 extra left -> 0). m2 (index 1): quota 1, holds ta 0, 1 (2 > 1): keeps ta-0, revokes ta-1.
    # m3: quota 1, takes ta-1.
    ("three members, two topics",
     {"ta": (_uuid(0, 2), 2), "tb": (_uuid(1, 0), 2)},
     [("m1", ["ta", "tb"]), ("m2", ["ta", "tb"]), ("m3", ["ta", "tb"])],
     {"m1": {"tb": [0, 1]}, "m2": {"ta": [0]}, "m3": {"ta": [1]}}),
]


@pytest.mark.parametrize("case,topics,steps,expected", UNIFORM_CASES, ids=[c[0] for c in UNIFORM_CASES])
def test_uniform_homogeneous_moves_kafkas_partitions(case, topics, steps, expected):
    from kgroup.coordinator.consumer_group.group import TopicMetadata
    c = _ctx_with_ids(**topics)
    epochs = {}
    for who, what in steps:
        if who == "grow":
            name, n = what
            old = c.topics[name]
            c.topics[name] = TopicMetadata(old.topic_id, name, n)
            c.topics_changed()
            # the next heartbeat computes the new target
            mid = sorted(epochs)[0]
            r = c.hb("g", mid, epochs[mid], owned=c.names(c.cg("g").members[mid].assigned_partitions))
            assert r.error_code == 0, r
            continue
        r = join(c, "g", who, topics=what)
        epochs[who] = r.member_epoch
    assert _targets(c) == expected


def test_an_empty_regex_sent_where_none_was_is_no_subscription_change():
    """librdkafka sends the unused subscription field empty; an empty regex is no regex
    (maybeUpdateRegularExpressions: neither side is a regex), so the epoch stays."""
    c = CgCtx({"a": 2})
    r = join(c, "g", "m1", topics=["a"])
    r = c.hb("g", "m1", 1, topics=["a"], regex="", owned={"a": [0, 1]})
    assert r.error_code == 0 and c.cg("g").group_epoch == 1 and c.cg("g").members["m1"].subscribed_topic_regex == ""


# -- ConsumerGroup.validateOffsetCommit: per-partition assignment epochs (Kafka 4.3, KIP-1251) --------

def test_an_older_member_epoch_commits_the_partitions_it_already_had():
    c = CgCtx({"a": 2, "b": 2})
    r = join(c, "g", "m1", topics=["a"])                                  # a-0, a-1 at epoch 1
    r = c.hb("g", "m1", 1, topics=["a", "b"], owned={"a": [0, 1]})        # b-0, b-1 at epoch 2
    assert r.member_epoch == 2 and c.names(r) == {"a": [0, 1], "b": [0, 1]}
    m = c.cg("g").members["m1"]
    assert m.assignment_epoch(c.topics["a"].topic_id, 0) == 1 and m.assignment_epoch(c.topics["b"].topic_id, 1) == 2
    # the record carries them (ConsumerGroupCurrentMemberAssignmentValue.AssignmentEpochs)
    last = [v for t, _, v in written(c, 0) if t == rec.CURRENT_MEMBER_ASSIGNMENT][-1]
    assert sorted((tp.partitions, tp.assignment_epochs) for tp in last.assigned_partitions) == [
        ([0, 1], [1, 1]), ([0, 1], [2, 2])]
    # a commit at epoch 1 (sent before the epoch-2 heartbeat answer arrived) for a partition held since
    # epoch 1 is accepted ...
    assert c.commit("g", {("a", 0): 5}, member_id="m1", generation=1) == {("a", 0): 0}
    assert c.shard.offset_metadata_manager.offset("g", "a", 0).committed_offset == 5
    # ... one for a partition assigned at epoch 2 fails the whole request, nothing written
    assert c.commit("g", {("a", 1): 6, ("b", 0): 7}, member_id="m1", generation=1) == {
        ("a", 1): E.STALE_MEMBER_EPOCH, ("b", 0): E.STALE_MEMBER_EPOCH}
    assert c.shard.offset_metadata_manager.offset("g", "a", 1) is None
    # a partition it does not hold, and a newer epoch, are refused; the current epoch commits anything
    assert c.commit("g", {("x", 0): 1}, member_id="m1", generation=1) == {("x", 0): E.STALE_MEMBER_EPOCH}
    assert c.commit("g", {("a", 0): 8}, member_id="m1", generation=3) == {("a", 0): E.STALE_MEMBER_EPOCH}
    assert c.commit("g", {("b", 0): 9}, member_id="m1", generation=2) == {("b", 0): 0}


def test_static_member_temporary_leave_resets_its_assignment_epochs_to_zero():
    c = CgCtx({"a": 2})
    join(c, "g", "m1", topics=["a"], instance_id="i1")
    assert c.hb("g", "m1", -2, instance_id="i1").error_code == 0
    tid = c.topics["a"].topic_id
    assert c.cg("g").members["m1"].assignment_epoch(tid, 0) == 0
    r = join(c, "g", "m1b", topics=["a"], instance_id="i1")
    assert c.names(r) == {"a": [0, 1]}
    assert c.cg("g").members["m1b"].assignment_epoch(tid, 1) == 0
    # the new member id may commit from any epoch for them; the old id is gone
    assert c.commit("g", {("a", 1): 3}, member_id="m1b", generation=0) == {("a", 1): 0}
    assert c.commit("g", {("a", 1): 3}, member_id="m1", generation=1) == {("a", 1): E.UNKNOWN_MEMBER_ID}


def test_txn_offset_commit_with_an_older_epoch_is_checked_per_partition():
    """validateTransactionalOffsetCommit + the validator: a partition assigned after the epoch, or
    a topic the metadata image does not have, is ILLEGAL_GENERATION (TxnOffsetCommit has no
    STALE_MEMBER_EPOCH)."""
    from tests.coordinator.test_one_group_map import Ctx as TxnCtx
    c = TxnCtx({"a": 2, "b": 2})
    join(c, "g", "m1", topics=["a"])
    assert c.hb("g", "m1", 1, topics=["a", "b"], owned={"a": [0, 1]}).member_epoch == 2
    assert c.txn_commit("g", {("a", 0): 4}, member_id="m1", generation=1) == {("a", 0): E.NONE}
    assert c.txn_commit("g", {("b", 0): 4}, member_id="m1", generation=1) == {("b", 0): E.ILLEGAL_GENERATION}
    assert c.txn_commit("g", {("zz", 0): 4}, member_id="m1", generation=1) == {("zz", 0): E.ILLEGAL_GENERATION}
    assert c.txn_commit("g", {("b", 0): 4}, member_id="m1", generation=2) == {("b", 0): E.NONE}


def test_member_revoking_partitions_rejoins_with_epoch_zero():
    """testMemberCanRejoinWithEpochZeroInUnrevokedPartitionsState: a rejoin owns nothing, so the
    revocation is done; the member moves to the target epoch with what it keeps."""
    c = CgCtx({"a": 4})
    join(c, "g", "m1", topics=["a"])
    join(c, "g", "m2", topics=["a"])
    r = c.hb("g", "m1", 1, owned={"a": [0, 1, 2, 3]})
    m = c.cg("g").members["m1"]
    assert m.state is MemberState.UNREVOKED_PARTITIONS and r.member_epoch == 1
    kept = c.names(m.assigned_partitions)
    r = c.hb("g", "m1", 0, topics=["a"])
    assert r.error_code == 0 and r.member_epoch == 2 and c.names(r) == kept
    assert c.cg("g").members["m1"].state is MemberState.STABLE
    c.owned_check("g")
