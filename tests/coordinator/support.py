"""Test harness for the coordinator core: a fake clock, an in-memory log, tokens, and the
replay check that runs after every operation (live durable state == a fresh shard loaded from
every record written so far; settled groups in memory == their durable image)."""
from __future__ import annotations

import itertools
import uuid

from kgroup.coordinator import GroupCoordinatorConfig, GroupCoordinatorShard, TimerQueue
from kgroup.coordinator.result import gate
from kgroup.protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.delete_groups import DeleteGroupsRequest
from kgroup.protocol.messages.describe_groups import DescribeGroupsRequest
from kgroup.protocol.messages.heartbeat import HeartbeatRequest
from kgroup.protocol.messages.join_group import JoinGroupRequest
from kgroup.protocol.messages.leave_group import LeaveGroupRequest
from kgroup.protocol.messages.list_groups import ListGroupsRequest
from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
from kgroup.protocol.messages.offset_delete import OffsetDeleteRequest
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from kgroup.protocol.messages.sync_group import SyncGroupRequest

E = ErrorCode
S = GroupCoordinatorShard


def subscription(*topics, version=0) -> bytes:
    return version.to_bytes(2, "big") + ConsumerProtocolSubscription(topics=list(topics)).to_bytes(version)


def assignment(**partitions) -> bytes:
    A = ConsumerProtocolAssignment
    return (0).to_bytes(2, "big") + A(assigned_partitions=[
        A.TopicPartition(topic=t, partitions=list(p)) for t, p in partitions.items()]).to_bytes(0)


def protocols(*names, topics=("t",)):
    P = JoinGroupRequest.JoinGroupRequestProtocol
    return [P(name=n, metadata=subscription(*topics)) for n in names]


def fresh_shard(shard: GroupCoordinatorShard, log, now_ms: int) -> GroupCoordinatorShard:
    other = GroupCoordinatorShard(shard.partition, shard.config, TimerQueue(), lambda: "x",
                                  shard.consumer_group_manager.topics,
                                  group_configs=shard.consumer_group_manager.group_configs)
    for offset, entry in enumerate(log):
        if len(entry) == 2:
            other.replay(entry[0], entry[1], offset)
        elif entry[0] == "txn":             # ("txn", producer id, key, value): a transactional batch's record
            other.replay_transactional(entry[1], entry[2], entry[3], offset)
        else:                               # ("marker", producer id, committed): a COMMIT/ABORT control record
            other.replay_end_transaction_marker(entry[1], entry[2])
    other.on_loaded(now_ms)
    return other


def assert_replay_consistent(shard: GroupCoordinatorShard, log, now_ms: int) -> None:
    other = fresh_shard(shard, log, now_ms)
    durable = shard.durable_state()
    assert other.durable_state() == durable, "replaying the log does not rebuild the live durable state"
    for group_id, view in shard.settled_group_views().items():
        assert view == durable["groups"][group_id], f"settled group {group_id} differs from its record"


class Ctx:
    """One shard under test. ``fail_writes`` makes the next appends fail with that error."""

    def __init__(self, check: bool = True, **props):
        self.config = GroupCoordinatorConfig.from_props(props) if props else GroupCoordinatorConfig()
        self.now = 0
        self.scheduler = TimerQueue()
        self._uuids = itertools.count(1)
        self.topics: dict = {}          # the metadata image consumer groups see: name -> TopicMetadata
        self.topics_version = -1        # the image version that last brought new topics
        self.group_configs: dict = {}   # group id -> its GROUP config overrides (name -> int)
        self.shard = GroupCoordinatorShard(7, self.config, self.scheduler,
                                           lambda: str(uuid.UUID(int=next(self._uuids))), lambda: self.topics,
                                           lambda: self.topics_version, self.group_configs)
        self.log: list = []
        self.sent: list = []           # (token, response) in send order
        self.fail_writes = None
        self.check = check
        self._tokens = itertools.count(1)
        self.run(self.shard.on_loaded(self.now))

    # -- plumbing ------------------------------------------------------------------------------
    def token(self) -> str:
        return f"t{next(self._tokens)}"

    def run(self, result):
        if result.records and self.fail_writes is not None:
            out = self.shard.abort(result, self.fail_writes)
        else:
            self.log.extend((r.key, r.value) for r in result.records)
            out = self.shard.commit(result)
        self.sent.extend(out)
        if self.check:
            assert_replay_consistent(self.shard, self.log, self.now)
        return out

    def handle(self, handler, req, version, token, *extra):
        """What the runtime does with a request: its gate (the request checks, then the
        partition's state), then the shard's handler, written and replayed."""
        refused = gate(handler, req, version, self.config,
                       None if self.shard.is_loaded else E.COORDINATOR_LOAD_IN_PROGRESS)
        if refused is not None:
            self.sent.append((token, refused))
            return [(token, refused)]
        return self.run(handler(self.shard, req, version, self.now, token, *extra))

    def answers(self, token):
        return [r for t, r in self.sent if t == token]

    def answer(self, token):
        """The one response sent for ``token`` (None while parked)."""
        found = self.answers(token)
        assert len(found) <= 1, f"{token} answered {len(found)} times"
        return found[0] if found else None

    def advance(self, ms: int):
        self.now += ms
        out = []
        for result in self.shard.poll_timers(self.now):     # each timer written and replayed in turn
            out.extend(self.run(result))
        return out

    def group(self, group_id):
        return self.shard.group_metadata_manager.classic_group(group_id)

    def state(self, group_id) -> str:
        g = self.group(group_id)
        return "Dead" if g is None else str(g.state)

    # -- requests -------------------------------------------------------------------------------
    def join(self, group_id, member_id="", *, version=9, protos=None, session=10000, rebalance=30000,
             instance_id=None, client_id="client", protocol_type="consumer", reason=None):
        token = self.token()
        req = JoinGroupRequest(group_id=group_id, session_timeout_ms=session, rebalance_timeout_ms=rebalance,
                               member_id=member_id, group_instance_id=instance_id, protocol_type=protocol_type,
                               protocols=protocols("range") if protos is None else protos, reason=reason)
        self.handle(S.handle_join_group, req, version, token, client_id, "/127.0.0.1")
        return token

    def join_dynamic(self, group_id, *, version=9, **kw):
        """KIP-394 two-step join: MEMBER_ID_REQUIRED then rejoin with the id. Returns (member_id, token)."""
        first = self.answer(self.join(group_id, version=version, **kw))
        assert first.error_code == E.MEMBER_ID_REQUIRED, first
        return first.member_id, self.join(group_id, first.member_id, version=version, **kw)

    def sync(self, group_id, member_id, generation, assignments=None, *, version=5, instance_id=None,
             protocol_type="consumer", protocol_name="range"):
        token = self.token()
        A = SyncGroupRequest.SyncGroupRequestAssignment
        req = SyncGroupRequest(group_id=group_id, generation_id=generation, member_id=member_id,
                               group_instance_id=instance_id, protocol_type=protocol_type,
                               protocol_name=protocol_name,
                               assignments=[A(member_id=m, assignment=a) for m, a in (assignments or {}).items()])
        self.handle(S.handle_sync_group, req, version, token)
        return token

    def heartbeat(self, group_id, member_id, generation, *, version=4, instance_id=None):
        token = self.token()
        req = HeartbeatRequest(group_id=group_id, generation_id=generation, member_id=member_id,
                               group_instance_id=instance_id)
        self.handle(S.handle_heartbeat, req, version, token)
        return self.answer(token).error_code

    def leave(self, group_id, *members, version=5):
        """members: member ids or (member_id, instance_id) pairs."""
        token = self.token()
        M = LeaveGroupRequest.MemberIdentity
        ms = [m if isinstance(m, tuple) else (m, None) for m in members]
        if version <= 2:
            req = LeaveGroupRequest(group_id=group_id, member_id=ms[0][0])
        else:
            req = LeaveGroupRequest(group_id=group_id, members=[
                M(member_id=m, group_instance_id=i, reason="bye") for m, i in ms])
        self.handle(S.handle_leave_group, req, version, token)
        return self.answer(token)

    def commit(self, group_id, offsets, *, member_id="", generation=-1, version=9, instance_id=None,
               retention=-1, metadata="", leader_epoch=-1):
        """offsets: {(topic, partition): offset}."""
        token = self.token()
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        P = T.OffsetCommitRequestPartition
        by_topic: dict = {}
        for (t, p), o in offsets.items():
            by_topic.setdefault(t, []).append(P(partition_index=p, committed_offset=o,
                                                committed_leader_epoch=leader_epoch,
                                                committed_metadata=metadata))
        req = OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=generation,
                                  member_id=member_id, group_instance_id=instance_id,
                                  retention_time_ms=retention,
                                  topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])
        self.handle(S.handle_offset_commit, req, version, token)
        resp = self.answer(token)
        return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    def fetch(self, group_id, topics=None, *, version=7, require_stable=False):
        """topics: {topic: [partitions]} or None for all. Returns the raw response."""
        token = self.token()
        if version >= 8:
            G = OffsetFetchRequest.OffsetFetchRequestGroup
            req = OffsetFetchRequest(require_stable=require_stable, groups=[G(
                group_id=group_id, topics=None if topics is None else [
                    G.OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in topics.items()])])
        else:
            T = OffsetFetchRequest.OffsetFetchRequestTopic
            req = OffsetFetchRequest(group_id=group_id, require_stable=require_stable, topics=None if topics is None
                                     else [T(name=t, partition_indexes=ps) for t, ps in topics.items()])
        self.handle(S.handle_offset_fetch, req, version, token)
        return self.answer(token)

    def fetched(self, group_id, topics=None, **kw):
        """{(topic, partition): (offset, error)} for a v7 fetch."""
        resp = self.fetch(group_id, topics, **kw)
        return {(t.name, p.partition_index): (p.committed_offset, p.error_code)
                for t in resp.topics for p in t.partitions}

    def describe(self, *group_ids, version=5):
        token = self.token()
        self.handle(S.handle_describe_groups, DescribeGroupsRequest(groups=list(group_ids)), version, token)
        return self.answer(token).groups

    def list_groups(self, states=(), types=(), version=5):
        token = self.token()
        req = ListGroupsRequest(states_filter=list(states), types_filter=list(types))
        self.handle(S.handle_list_groups, req, version, token)
        return self.answer(token)

    def delete_groups(self, *group_ids, version=2):
        token = self.token()
        self.handle(S.handle_delete_groups, DeleteGroupsRequest(groups_names=list(group_ids)), version, token)
        return {r.group_id: r.error_code for r in self.answer(token).results}

    def delete_offsets(self, group_id, topics):
        token = self.token()
        T = OffsetDeleteRequest.OffsetDeleteRequestTopic
        req = OffsetDeleteRequest(group_id=group_id, topics=[
            T(name=t, partitions=[T.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
            for t, ps in topics.items()])
        self.handle(S.handle_offset_delete, req, 0, token)
        return self.answer(token)

    # -- composite: bring a group to Stable ----------------------------------------------------
    def stable_group(self, group_id, n=2, *, version=9, **kw):
        """n dynamic members joined and synced. Returns (generation, [member ids], leader id)."""
        tokens = []
        for _ in range(n):
            tokens.append(self.join_dynamic(group_id, version=version, **kw))
        while any(self.answer(t) is None for _, t in tokens):
            self.advance(self.config.initial_rebalance_delay_ms)
        resps = {m: self.answer(t) for m, t in tokens}
        gen = next(iter(resps.values())).generation_id
        leader = next(iter(resps.values())).leader
        members = [m for m, _ in tokens]
        ptype = kw.get("protocol_type", "consumer")
        syncs = [self.sync(group_id, m, gen, {x: assignment(t=[i]) for i, x in enumerate(members)}
                           if m == leader else None, protocol_type=ptype) for m in members]
        for s in syncs:
            assert self.answer(s).error_code == 0
        assert self.state(group_id) == "Stable"
        return gen, members, leader


# -- the consumer group protocol (KIP-848) --------------------------------------------------------

def topic_id(name: str) -> bytes:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name).bytes


class CgCtx(Ctx):
    """A shard with topics, driven by ConsumerGroupHeartbeat."""

    def __init__(self, topics=None, check: bool = True, **props):
        super().__init__(check, **props)
        for name, n in (topics or {}).items():
            self.add_topic(name, n)

    def add_topic(self, name, partitions):
        from kgroup.coordinator.topic_metadata import TopicMetadata
        if name not in self.topics:
            self.topics_version += 1
        self.topics[name] = TopicMetadata(topic_id(name), name, partitions)

    def topics_changed(self):
        return self.run(self.shard.handle_topics_changed(self.now))

    def cg(self, group_id):
        return self.shard.consumer_group_manager.consumer_group(group_id)

    def hb(self, group_id, member_id, epoch, *, topics=None, regex=None, owned=None, instance_id=None,
           rebalance=30000, assignor=None, version=1, rack=None, full=False):
        """One ConsumerGroupHeartbeat; ``owned``: {topic name: [partitions]} (None: not sent).
        A join (epoch 0) sends an empty owned list and rebalance timeout by default; ``full``: the
        rebalance timeout too (a client resends everything after an error)."""
        from kgroup.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest as R
        if epoch == 0 and owned is None:
            owned = {}
        token = self.token()
        req = R(group_id=group_id, member_id=member_id, member_epoch=epoch, instance_id=instance_id,
                rack_id=rack, rebalance_timeout_ms=rebalance if epoch == 0 or full else -1,
                subscribed_topic_names=None if topics is None else list(topics),
                subscribed_topic_regex=regex, server_assignor=assignor,
                topic_partitions=None if owned is None else [
                    R.TopicPartitions(topic_id=topic_id(t), partitions=list(p)) for t, p in owned.items()])
        self.handle(S.handle_consumer_group_heartbeat, req, version, token, "client", "/127.0.0.1")
        return self.answer(token)

    def names(self, resp_or_assignment):
        """{topic name: sorted partitions} of a heartbeat response's assignment (or a member's)."""
        by_id = {t.topic_id: t.name for t in self.topics.values()}
        a = getattr(resp_or_assignment, "assignment", resp_or_assignment)
        if a is None:
            return None
        if hasattr(a, "topic_partitions"):
            return {by_id[tp.topic_id]: sorted(tp.partitions) for tp in a.topic_partitions if tp.partitions}
        return {by_id[t]: sorted(p) for t, p in a.items()}

    def owned_check(self, group_id):
        """No partition is owned by two members (assigned or pending revocation)."""
        g = self.cg(group_id)
        seen = {}
        for m in g.members.values():
            for a in (m.assigned_partitions, m.partitions_pending_revocation):
                for t, ps in a.items():
                    for p in ps:
                        assert (t, p) not in seen, f"{t.hex()}-{p} owned by {seen[(t, p)]} and {m.member_id}"
                        seen[(t, p)] = m.member_id
