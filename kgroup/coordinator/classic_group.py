"""The classic group: members, generation, protocol vote and the rebalance state machine.

Theory of operation
-------------------
A classic group (JoinGroup/SyncGroup/Heartbeat/LeaveGroup, KIP-62/345/394) moves through
generations. A rebalance has two phases. In the *join* phase (PreparingRebalance) the
coordinator parks every member's JoinGroup until all known members have rejoined or the
rebalance timeout (the largest member rebalance timeout) passes; members that did not rejoin
are dropped (dynamic ones only). Completing the phase bumps the generation, elects the
protocol by vote (each member votes for its first protocol that every member supports; most
votes wins) and answers all parked JoinGroups; only the leader's answer lists the members and
their metadata. In the *sync* phase (CompletingRebalance) the leader sends the assignment in
its SyncGroup; the coordinator writes the group (GroupMetadata record) and only after the
write answers every parked SyncGroup with that member's assignment, and the group is Stable.
Heartbeats keep sessions alive and tell members when to rejoin.

What is durable: the last GroupMetadata record of a group (generation, protocol type and name,
leader, members with subscription and assignment). Everything a rebalance does between two such
records lives in memory only, as in Kafka: a coordinator that fails over mid-rebalance reloads
the last Stable/Empty generation, and clients rejoin. ``ClassicGroup.record`` holds the durable
image; it changes only when a record is replayed.

States and legal transitions (target state <- states it may be entered from)
-------------------------------------------------------------------------------
=====================  ===============================================  ==========================
state                  entered from                                      typical trigger
=====================  ===============================================  ==========================
Empty                  PreparingRebalance                                join completes, 0 members
PreparingRebalance     Empty, Stable, CompletingRebalance                join/leave/expiry/leader
CompletingRebalance    PreparingRebalance                                join completes, >0 members
Stable                 CompletingRebalance                               leader's assignment written
Dead                   any                                               unload (groups are removed
                                                                         from the shard on delete)
=====================  ===============================================  ==========================

Per-state answers (Kafka's ClassicGroupState): Empty - JoinGroup from new members starts a
rebalance, SyncGroup/Heartbeat -> UNKNOWN_MEMBER_ID; PreparingRebalance - Heartbeat and SyncGroup
-> REBALANCE_IN_PROGRESS, JoinGroups are parked, commits from the current generation allowed;
CompletingRebalance - Heartbeat -> NONE, SyncGroups parked until the leader's assignment is
written, commits -> REBALANCE_IN_PROGRESS; Stable - normal heartbeats, SyncGroup returns the
current assignment, a follower's JoinGroup with unchanged metadata returns the current generation.

Iteration order: Kafka keeps members in a HashMap; "the first member" (new leader when the leader
leaves) is whatever the hash order yields. We use join order (insertion order), which is one of the
orders Kafka can produce. The protocol vote's tie-break does follow Java's HashMap iteration order
over protocol names (``java_compat.string_map_order``), so ties resolve as Kafka resolves them.
"""
from __future__ import annotations

import enum
import sys

from ..java_compat import string_map_order
from ..protocol.consumer_protocol import decode_subscription
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.offsets_records import GroupMetadataValue
from ..protocol.primitives import DecodeError
from . import coordinator_records as rec
from .group import Group, GroupType
from .empty import NO_ENTRIES
from .timer import heartbeat_key, initial_delay_key, join_key, pending_key, sync_key

CONSUMER_PROTOCOL_TYPE = "consumer"


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


S = ClassicGroupState
VALID_PREVIOUS_STATES = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset(S),
}


def _intern(s):
    """One string object for equal client ids, hosts and protocol names: every member's request
    decodes its own copy of the same few names."""
    return s if s is None else sys.intern(s)


_SHARED_BYTES: dict[bytes, bytes] = {}
_SHARED_BYTES_MAX_LEN = 512
_SHARED_BYTES_MAX_ENTRIES = 4096


def shared_bytes(b):
    """One object for equal small subscriptions and assignments (members of a group usually send
    the same subscription). A bounded cache, emptied when full, so hostile input cannot grow it."""
    if b is None or len(b) > _SHARED_BYTES_MAX_LEN:
        return b
    b = bytes(b)
    shared = _SHARED_BYTES.get(b)
    if shared is not None:
        return shared
    if len(_SHARED_BYTES) >= _SHARED_BYTES_MAX_ENTRIES:
        _SHARED_BYTES.clear()
    _SHARED_BYTES[b] = b
    return b


_SHARED_PROTOCOLS: dict[tuple, tuple] = {}


def _protocols(protocols) -> tuple:
    """The member's ((name, metadata), ...), one object for the members that sent equal lists
    (bounded like ``shared_bytes``)."""
    protocols = tuple((_intern(name), shared_bytes(meta)) for name, meta in protocols)
    shared = _SHARED_PROTOCOLS.get(protocols)
    if shared is not None:
        return shared
    if sum(len(meta) for _, meta in protocols) <= _SHARED_BYTES_MAX_LEN:
        if len(_SHARED_PROTOCOLS) >= _SHARED_BYTES_MAX_ENTRIES:
            _SHARED_PROTOCOLS.clear()
        _SHARED_PROTOCOLS[protocols] = protocols
    return protocols


class ClassicGroupMember:
    """One member. ``protocols`` is the JoinGroup list of (name, metadata) in preference order.
    ``awaiting_join`` / ``awaiting_sync`` hold ``(token, request_version)`` of a parked request."""

    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "session_timeout_ms", "protocol_type", "_protocols", "_assignment", "awaiting_join",
                 "awaiting_sync", "is_new", "heartbeat_key")

    def __init__(self, member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                 session_timeout_ms, protocol_type, protocols, assignment=b""):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = _intern(client_id)
        self.client_host = _intern(client_host)
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = _intern(protocol_type)
        self.protocols = protocols
        self.assignment = assignment
        self.awaiting_join = None
        self.awaiting_sync = None
        self.is_new = False
        self.heartbeat_key = None       # the session timer's key, made once: a heartbeat reuses it

    @property
    def protocols(self) -> list:
        return list(self._protocols)

    @protocols.setter
    def protocols(self, protocols) -> None:
        self._protocols = _protocols(protocols)

    @property
    def assignment(self) -> bytes:
        return self._assignment

    @assignment.setter
    def assignment(self, assignment) -> None:
        self._assignment = shared_bytes(assignment)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self._protocols}

    def metadata(self, protocol_name):
        for name, meta in self._protocols:
            if name == protocol_name:
                return meta
        raise ValueError(f"Member does not support protocol {protocol_name}")

    def matches(self, protocols) -> bool:
        return tuple(protocols) == self._protocols

    def vote(self, candidates) -> str:
        for name, _ in self._protocols:
            if name in candidates:
                return name
        raise ValueError("Member does not support any of the candidate protocols")

    def has_satisfied_heartbeat(self) -> bool:
        """New members can expire even while parked; others are kept alive by a parked request."""
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None


class ClassicGroup(Group):
    """Kafka's ClassicGroup, minus the futures: parked requests are tokens on the members.
    ``pending_join_members`` / ``pending_sync_members`` are dicts used as ordered sets (member
    id -> None). They and ``static_members`` are ``NO_ENTRIES`` while empty, as most groups hold
    them: change them through the group's methods."""

    __slots__ = ("group_id", "state", "previous_state", "current_state_timestamp", "protocol_type",
                 "protocol_name", "generation_id", "leader_id", "members", "static_members",
                 "pending_join_members", "num_awaiting_join", "supported_protocols", "pending_sync_members",
                 "subscribed_topics", "new_member_added", "record")

    type = GroupType.CLASSIC

    def __init__(self, group_id: str, now_ms: int, state: ClassicGroupState = S.EMPTY,
                 generation_id: int = 0, protocol_type=None, protocol_name=None, leader_id=None,
                 current_state_timestamp=None):
        self.group_id = group_id
        self.state = state
        self.previous_state = S.DEAD
        self.current_state_timestamp = now_ms if current_state_timestamp is None else current_state_timestamp
        self.protocol_type = _intern(protocol_type)
        self.protocol_name = _intern(protocol_name)
        self.generation_id = generation_id
        self.leader_id = leader_id
        self.members: dict[str, ClassicGroupMember] = {}
        self.static_members: dict[str, str] = NO_ENTRIES             # instance id -> member id
        self.pending_join_members: dict[str, None] = NO_ENTRIES
        self.num_awaiting_join = 0
        self.supported_protocols: dict[str, int] = {}
        self.pending_sync_members: dict[str, None] = NO_ENTRIES
        self.subscribed_topics: set[str] | None = None
        self.new_member_added = False
        self.record: GroupMetadataValue | None = None   # durable image: last replayed record

    # -- basic queries ------------------------------------------------------------------------
    def is_leader(self, member_id) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def is_pending_member(self, member_id) -> bool:
        return member_id in self.pending_join_members

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def rebalance_timeout_ms(self) -> int:
        timeout = 0
        for m in self.members.values():
            if m.rebalance_timeout_ms > timeout:
                timeout = m.rebalance_timeout_ms
        return timeout

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[S.PREPARING_REBALANCE]

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def static_member_id(self, instance_id):
        return self.static_members.get(instance_id)

    def transition_to(self, state: ClassicGroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise RuntimeError(f"Group {self.group_id} should be in one of "
                               f"{sorted(str(s) for s in VALID_PREVIOUS_STATES[state])} states before "
                               f"moving to {state} state. Instead it is in {self.state} state.")
        self.previous_state = self.state
        self.state = state
        self.current_state_timestamp = now_ms

    # -- membership ---------------------------------------------------------------------------
    def add(self, member: ClassicGroupMember, awaiting=None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"Static member {member.group_instance_id} already in group")
            self._set_static_member(member.group_instance_id, member.member_id)
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise RuntimeError("The group and member's protocol type must be the same.")
        if not self.supports_protocols(member.protocol_type, member.protocol_names()):
            raise RuntimeError("None of the member's protocols can be supported.")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, +1)
        member.awaiting_join = awaiting
        if awaiting is not None:
            self.num_awaiting_join += 1
        self._remove_pending_join_member(member.member_id)

    def remove(self, member_id) -> None:
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self._count_protocols(removed, -1)
            if removed.awaiting_join is not None:
                self.num_awaiting_join -= 1
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
                if not self.static_members:
                    self.static_members = NO_ENTRIES
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self._remove_pending_join_member(member_id)
        self.remove_pending_sync_member(member_id)

    def _set_static_member(self, instance_id, member_id) -> None:
        if self.static_members is NO_ENTRIES:
            self.static_members = {}
        self.static_members[instance_id] = member_id

    def add_pending_member(self, member_id) -> bool:
        if member_id in self.members:
            raise RuntimeError(f"Attempt to add pending member {member_id} which is already a member")
        if member_id in self.pending_join_members:
            return False
        if self.pending_join_members is NO_ENTRIES:
            self.pending_join_members = {}
        self.pending_join_members[member_id] = None
        return True

    def _remove_pending_join_member(self, member_id) -> None:
        if self.pending_join_members.pop(member_id, 0) is None and not self.pending_join_members:
            self.pending_join_members = NO_ENTRIES

    def add_pending_sync_member(self, member_id) -> None:
        if self.pending_sync_members is NO_ENTRIES:
            self.pending_sync_members = {}
        self.pending_sync_members[member_id] = None

    def remove_pending_sync_member(self, member_id) -> None:
        if self.pending_sync_members.pop(member_id, 0) is None and not self.pending_sync_members:
            self.pending_sync_members = NO_ENTRIES

    def clear_pending_sync_members(self) -> None:
        self.pending_sync_members = NO_ENTRIES

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a rejoined member; False if nobody rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    def not_yet_rejoined_members(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def update_member(self, member, protocols, rebalance_timeout_ms, session_timeout_ms, awaiting):
        self._count_protocols(member, -1)
        member.protocols = protocols
        self._count_protocols(member, +1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if awaiting is not None and member.awaiting_join is None:
            self.num_awaiting_join += 1
        elif awaiting is None and member.awaiting_join is not None:
            self.num_awaiting_join -= 1
        member.awaiting_join = awaiting

    def replace_static_member(self, instance_id, old_member_id, new_member_id):
        """Give a static member a new member id, keeping everything else. Returns the new member
        and the parked requests of the old id, which must be answered FENCED_INSTANCE_ID:
        a list of ("join" | "sync", (token, version))."""
        removed = self.members.pop(old_member_id, None)
        if removed is None:
            raise RuntimeError(f"Cannot replace non-existing member id {old_member_id}")
        fenced = []
        if removed.awaiting_join is not None:
            fenced.append(("join", removed.awaiting_join))
            removed.awaiting_join = None
            self.num_awaiting_join -= 1
        if removed.awaiting_sync is not None:
            fenced.append(("sync", removed.awaiting_sync))
            removed.awaiting_sync = None
        new = ClassicGroupMember(new_member_id, removed.group_instance_id, removed.client_id,
                                 removed.client_host, removed.rebalance_timeout_ms,
                                 removed.session_timeout_ms, removed.protocol_type, removed._protocols,
                                 removed.assignment)
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self._set_static_member(instance_id, new_member_id)
        return new, fenced

    def validate_member(self, member_id, instance_id) -> None:
        """UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID checks shared by every member request."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
            if existing != member_id:
                raise KafkaError(ErrorCode.FENCED_INSTANCE_ID)
        if member_id not in self.members:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)

    # -- the Group interface ------------------------------------------------------------------
    def state_string(self) -> str:
        return self.state.value

    def is_empty(self) -> bool:
        return self.state is S.EMPTY

    def protocol_type_name(self) -> str:
        return self.protocol_type or ""

    def validate_offset_commit(self, member_id, instance_id, generation_id, is_transactional=False,
                               api_version=-1) -> None:
        """Transactional commits (TxnOffsetCommit, KIP-447 fencing from v3) skip the two
        checks older TxnOffsetCommit versions could not pass: no member id and generation
        means no membership check, and a rebalance in progress does not refuse them."""
        if self.state is S.DEAD:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and self.state is S.EMPTY:
            return  # admin client or a consumer without group management
        if generation_id >= 0 or member_id != "" or instance_id is not None:
            self.validate_member(member_id, instance_id)
            if generation_id != self.generation_id:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
        elif self.state is not S.EMPTY and not is_transactional:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
        if self.state is S.COMPLETING_REBALANCE and not is_transactional:
            raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS)

    def validate_offset_fetch(self, member_id, member_epoch) -> None:
        if self.state is S.DEAD:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is in dead state.")

    def validate_offset_delete(self) -> None:
        if self.state is S.DEAD:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is in dead state.")
        if self.state is not S.EMPTY and not self.uses_consumer_protocol():
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP)

    def validate_delete_group(self) -> None:
        if self.state is S.DEAD:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is in dead state.")
        if self.state is not S.EMPTY:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP)

    def create_group_tombstone_records(self, records: list) -> None:
        records.append(rec.group_metadata_tombstone(self.group_id))

    def cancel_timers(self, timer) -> None:
        gid = self.group_id
        for key in (join_key(gid), initial_delay_key(gid), sync_key(gid)):
            timer.cancel(key)
        for mid in self.members:
            timer.cancel(heartbeat_key(gid, mid))
        for mid in self.pending_join_members:
            timer.cancel(pending_key(gid, mid))

    # -- protocols ------------------------------------------------------------------------------
    def _count_protocols(self, member, delta) -> None:
        sp = self.supported_protocols
        for name, _ in member._protocols:
            sp[name] = sp.get(name, 0) + delta

    def supports_protocols(self, protocol_type, protocol_names) -> bool:
        if self.state is S.EMPTY:
            return bool(protocol_type) and bool(protocol_names)
        n = len(self.members)
        return (self.protocol_type is not None and self.protocol_type == protocol_type
                and any(self.supported_protocols.get(p, 0) == n for p in protocol_names))

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, c in self.supported_protocols.items() if c == n}

    def select_protocol(self) -> str:
        """The vote (seed 000): candidates are the protocols every member supports; each member
        votes for its first candidate; most votes wins, ties as Java's HashMap + Stream.max."""
        if not self.members:
            raise RuntimeError("Cannot select protocol for empty group")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            name = member.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        order = string_map_order(votes)     # not empty: every member votes
        best = order[0]
        for name in order[1:]:
            if votes[name] > votes[best]:
                best = name
        return best

    # -- generations and subscriptions -----------------------------------------------------------
    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(S.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(S.EMPTY, now_ms)
        self.clear_pending_sync_members()

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics of every member's ConsumerProtocolSubscription (read as its v0 prefix), or None
        when unknown (not the consumer protocol, no protocol yet, or unparsable metadata)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(decode_subscription(member.metadata(self.protocol_name), version=0).topics)
        except (DecodeError, ValueError):
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.uses_consumer_protocol()

    def offset_expiration_condition(self):
        """KIP-211: a function offset -> the timestamp retention counts from, or None (offsets
        never expire while the group is in this state)."""
        if self.protocol_type is not None:
            if self.state is S.EMPTY:
                ts = self.current_state_timestamp
                return lambda o: ts if ts is not None else o.commit_timestamp_ms
            if self.uses_consumer_protocol() and self.subscribed_topics is not None and self.state is S.STABLE:
                return lambda o: o.commit_timestamp_ms
            return None
        return lambda o: o.commit_timestamp_ms

    # -- views ------------------------------------------------------------------------------------
    def group_assignment(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}

    def to_record(self, assignment: dict[str, bytes]) -> GroupMetadataValue:
        """The GroupMetadataValue Kafka writes for this group (newGroupMetadataRecord)."""
        if self.members and self.protocol_name is None:
            raise RuntimeError("Attempted to write non-empty group metadata with no defined protocol.")
        members = list(tuple(GroupMetadataValue.MemberMetadata(       # a list of exactly its length
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.session_timeout_ms, subscription=m.metadata(self.protocol_name),
            assignment=assignment[m.member_id]) for m in self.members.values()))
        return GroupMetadataValue(protocol_type=self.protocol_type or "", generation=self.generation_id,
                                  protocol=self.protocol_name, leader=self.leader_id,
                                  current_state_timestamp=self.current_state_timestamp, members=members)

    def empty_record(self) -> GroupMetadataValue:
        """newEmptyGroupMetadataRecord: written when a JoinGroup creates the group."""
        return GroupMetadataValue(protocol_type="", generation=0, protocol=None, leader=None,
                                  current_state_timestamp=self.current_state_timestamp, members=[])

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> "ClassicGroup":
        """Kafka's replay of GroupMetadataValue: Stable with the members, or Empty."""
        ts = value.current_state_timestamp
        group = cls(group_id, 0, S.STABLE if value.members else S.EMPTY, value.generation,
                    value.protocol_type or None, value.protocol, value.leader,
                    None if ts == -1 else ts)
        if ts == -1:
            group.current_state_timestamp = None
        for mm in value.members:
            rebalance = mm.session_timeout if mm.rebalance_timeout == -1 else mm.rebalance_timeout
            member = ClassicGroupMember(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host,
                                        rebalance, mm.session_timeout, value.protocol_type,
                                        [(value.protocol, mm.subscription)], mm.assignment)
            group.add(member)
        group.subscribed_topics = group.compute_subscribed_topics()
        group.record = value
        return group


def record_view(value: GroupMetadataValue | None):
    """A comparable normal form of a GroupMetadataValue (member order ignored; the state
    timestamp only matters, and is only checked, for an Empty group)."""
    if value is None:
        return None
    members = {m.member_id: (m.group_instance_id, m.client_id, m.client_host,
                             m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout,
                             m.session_timeout, bytes(m.subscription), bytes(m.assignment))
               for m in value.members}
    return {"protocol_type": value.protocol_type or None, "generation": value.generation,
            "protocol": value.protocol, "leader": value.leader, "members": members,
            "timestamp": value.current_state_timestamp if not value.members else None}


def live_view(group: ClassicGroup):
    """The same normal form computed from the in-memory group, for settled groups (Stable or
    Empty); None while a rebalance is in flight (memory is ahead of the log by design)."""
    if group.state is S.EMPTY:
        return record_view(GroupMetadataValue(
            protocol_type=group.protocol_type or "", generation=group.generation_id,
            protocol=group.protocol_name, leader=group.leader_id,
            current_state_timestamp=-1 if group.current_state_timestamp is None else group.current_state_timestamp,
            members=[]))
    if group.state is S.STABLE:
        return record_view(group.to_record(group.group_assignment()))
    return None
