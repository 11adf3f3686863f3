"""The consumer-protocol group (Kafka's ConsumerGroup) and the replay of its records.

State changes only by replaying records (types 3-8 and 16), at load and live alike:
``replay(groups, record)`` is Kafka's GroupMetadataManager.replay for these records. A group holds:

- its group epoch (bumped by the handlers on membership, subscription or topic-metadata change)
  and the subscribed topics' metadata it was computed against;
- the target assignment and its epoch (the assignment epoch); the group is ASSIGNING while the
  group epoch is ahead of it;
- its members with their epochs, reconciliation state and current assignment, and per partition
  the epoch of its current owner: adding an owner to a partition that has one is refused, so
  replay itself enforces that no partition is owned by two members;
- static members by instance id, and counts of subscribed topic names, regexes and server
  assignors (the subscription type and the assignor choice come from these);
- per subscribed regex its resolution (record 16): the topics it matched, the version of the
  topic metadata it was matched against and when; a member subscribed by regex subscribes to
  those topics.

Pure: no I/O, no clock.
"""
from __future__ import annotations

import enum
from collections import Counter
from typing import Any, Mapping, NamedTuple

from ...java_compat import string_map_order, timeline_hash_grown_slots, timeline_hash_order
from ...protocol.errors import ErrorCode, KafkaError
from ..assignor import SubscriptionType
from ..coordinator_records import CoordinatorRecord
from ..group import Group, GroupType
from ..timer import cancel_member_timers
from ..topic_metadata import TopicMetadata
from . import consumer_group_records as rec
from ..empty import NO_COUNTS, NO_ENTRIES
from .member import NO_EPOCHS, ConsumerGroupMember, MemberState, freeze, shared_frozenset, shared_mapping, shared_name

LEAVE_GROUP_MEMBER_EPOCH = -1


class IllegalReplayState(Exception):
    """Kafka's IllegalStateException during replay: the records contradict each other."""


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class ResolvedRegex(NamedTuple):
    """Kafka's ResolvedRegularExpression: the topics a regex matched, the topic metadata version it
    was matched against, and the time it was resolved."""

    topics: frozenset
    version: int
    timestamp: int


EMPTY_RESOLVED_REGEX = ResolvedRegex(frozenset(), -1, -1)


class ConsumerGroup(Group):
    type = GroupType.CONSUMER
    __slots__ = ("group_id", "group_epoch", "members", "static_members", "subscription_metadata",
                 "assignment_epoch", "target_assignment", "partition_epochs", "subscribed_topic_names",
                 "subscribed_regexes", "server_assignors", "classic_members", "resolved_regexes",
                 "member_slots")

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        # static_members, subscribed_regexes, server_assignors and resolved_regexes are the shared
        # read-only NO_ENTRIES / NO_COUNTS while empty (most groups): changed only below
        self.static_members: dict[str, str] = NO_ENTRIES     # instance id -> member id
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self.assignment_epoch = 0
        self.target_assignment: dict[str, dict[bytes, frozenset]] = {}
        # (topic id, partition) -> the epoch of its current owner (one flat map: most groups' members
        # hold few partitions, and a map per topic would cost more than its entries)
        self.partition_epochs: dict[tuple[bytes, int], int] = {}
        self.subscribed_topic_names: Counter = Counter()
        self.subscribed_regexes: Counter = NO_COUNTS
        self.server_assignors: Counter = NO_COUNTS
        self.classic_members = 0
        self.resolved_regexes: dict[str, ResolvedRegex] = NO_ENTRIES
        # the slot count of Kafka's TimelineHashMap of members, whose iteration order the
        # assignors see (``member_order``): it grows with the most members the group has held
        self.member_slots = 2

    # -- reads -------------------------------------------------------------------------------------
    @property
    def member_order(self) -> list[str]:
        """The members in the order Kafka's TimelineHashMap iterates them."""
        return timeline_hash_order(self.members, self.member_slots)

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if not m.is_reconciled_to(self.assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def current_partition_epoch(self, topic_id: bytes, partition: int) -> int:
        """The epoch of the partition's current owner, or -1 when nobody holds it."""
        return self.partition_epochs.get((topic_id, partition), -1)

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def subscription_type(self) -> SubscriptionType:
        """The group's subscription type (Kafka's ConsumerGroup.subscriptionType) as replayed."""
        return compute_subscription_type(self.members.values(), self.resolved_regexes)

    def preferred_server_assignor(self, default: str) -> str:
        """The assignor most members ask for, else the default; a tie goes to the first in Kafka's
        HashMap order (Stream.max keeps the first of equal maxima)."""
        if not self.server_assignors:
            return default
        order = _string_map_order(self.server_assignors)
        best = order[0]
        for name in order[1:]:
            if self.server_assignors[name] > self.server_assignors[best]:
                best = name
        return best

    @staticmethod
    def resolve_subscription(member: ConsumerGroupMember, resolved_regexes: Mapping[str, ResolvedRegex]) -> frozenset:
        """The member's topics: its names plus the topics its regex resolved to (none while the
        regex is not resolved yet), as Kafka's subscribed topic names of a group count them."""
        regex = member.subscribed_topic_regex
        if not regex:
            return member.subscribed_topic_names
        return member.subscribed_topic_names | resolved_regexes.get(regex, EMPTY_RESOLVED_REGEX).topics

    # -- offsets of a consumer-protocol group (Kafka's ConsumerGroup.validateOffset*) ---------------
    def _member_or_unknown(self, member_id: str | None) -> ConsumerGroupMember:
        m = self.members.get(member_id) if member_id is not None else None
        if m is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                                          f"{self.group_id}.")
        return m

    @staticmethod
    def _check_epoch(received: int, expected: int, classic: bool) -> None:
        if received != expected:
            if classic:     # a classic member inside a consumer group commits with its generation
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION, f"The received generation id {received} does not "
                                                               f"match the expected member epoch {expected}.")
            raise KafkaError(ErrorCode.STALE_MEMBER_EPOCH, f"The received member epoch {received} does not "
                                                           f"match the expected member epoch {expected}.")

    # -- the Group interface ----------------------------------------------------------------------
    def state_string(self) -> str:
        return self.state.value

    def is_empty(self) -> bool:
        return not self.members

    def validate_offset_commit(self, member_id: str, instance_id: str | None, member_epoch: int,
                               is_transactional: bool, api_version: int):
        """OffsetCommit (and TxnOffsetCommit, ``is_transactional``) against this group (Kafka 4.3's
        ConsumerGroup.validateOffsetCommit): the member's current epoch commits anything; a newer
        one is refused; an older one commits each partition it was assigned at or before that
        epoch (createAssignmentEpochValidator, KIP-1251), checked per partition."""
        if member_epoch < 0 and not self.members:
            return None     # the admin client or a consumer without group management: an empty group
        if is_transactional and member_epoch == -1 and member_id == "" and instance_id is None:
            return None     # TxnOffsetCommit below v3 names no member
        m = self._member_or_unknown(member_id)
        classic = m.classic_member_metadata is not None
        if not is_transactional and not classic and api_version < 9:
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "OffsetCommit version 9 or above must be used "
                                                            "by members using the consumer group protocol")
        if member_epoch == m.member_epoch:
            return None
        if member_epoch > m.member_epoch:
            if classic:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION, f"Received generation id {member_epoch} is newer "
                                                               f"than current member epoch {m.member_epoch}.")
            raise KafkaError(ErrorCode.STALE_MEMBER_EPOCH, f"Received member epoch {member_epoch} is newer than "
                                                           f"current member epoch {m.member_epoch}.")
        return _assignment_epoch_validator(m, member_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """OffsetFetch v9+ with a member id and epoch (require the member's current epoch)."""
        if member_id is None and member_epoch < 0:
            return      # the admin client, or a client that gives neither
        m = self._member_or_unknown(member_id)
        self._check_epoch(member_epoch, m.member_epoch, m.classic_member_metadata is not None)

    def validate_offset_delete(self) -> None:
        """Offsets of a consumer group may be deleted in any state (those of subscribed topics
        are refused per topic)."""

    def validate_delete_group(self) -> None:
        if self.state is not ConsumerGroupState.EMPTY:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """By name, or through a subscribed regex's resolution (Kafka counts both)."""
        if topic in self.subscribed_topic_names:
            return True
        return any(topic in self.resolved_regexes.get(r, EMPTY_RESOLVED_REGEX).topics
                   for r in self.subscribed_regexes)

    def offset_expiration_condition(self):
        return _commit_timestamp

    def create_group_tombstone_records(self, records: list) -> None:
        records.extend(group_deletion_records(self))

    def cancel_timers(self, timer) -> None:
        for member_id in self.members:
            cancel_member_timers(timer, self.group_id, member_id)

    def durable_view(self) -> dict:
        """Everything records determine, canonical, for live == replayed comparisons."""
        def a(x):
            return {t.hex(): sorted(p) for t, p in sorted(x.items())}
        return {
            "group_epoch": self.group_epoch, "assignment_epoch": self.assignment_epoch,
            "state": self.state.value,
            "subscription_metadata": {k: tuple(v) for k, v in sorted(self.subscription_metadata.items())},
            "target": {m: a(x) for m, x in sorted(self.target_assignment.items())},
            "members": {mid: (m.member_epoch, m.previous_member_epoch, int(m.state), m.instance_id, m.rack_id,
                              m.rebalance_timeout_ms, m.client_id, m.client_host, sorted(m.subscribed_topic_names),
                              m.subscribed_topic_regex, m.server_assignor_name, m.classic_member_metadata,
                              a(m.assigned_partitions), a(m.partitions_pending_revocation),
                              {t.hex(): sorted(e.items()) for t, e in sorted(m.assignment_epochs_view().items())})
                        for mid, m in sorted(self.members.items())},
            "static_members": dict(sorted(self.static_members.items())),
            "partition_epochs": sorted((t.hex(), p, e) for (t, p), e in self.partition_epochs.items()),
            "subscribed_topic_names": dict(sorted(self.subscribed_topic_names.items())),
            "subscribed_regexes": dict(sorted(self.subscribed_regexes.items())),
            "server_assignors": dict(sorted(self.server_assignors.items())),
            "classic_members": self.classic_members,
            "resolved_regexes": {r: (sorted(v.topics), v.version, v.timestamp)
                                 for r, v in sorted(self.resolved_regexes.items())},
        }

    # -- changes (only from replay) ------------------------------------------------------------------
    def _update_member(self, new: ConsumerGroupMember) -> None:
        old = self.members.get(new.member_id)
        if old is None:
            self.member_slots = timeline_hash_grown_slots(self.member_slots, len(self.members))
        self.members[new.member_id] = new
        self._count(old, -1)
        self._count(new, +1)
        if old is not None:
            self._remove_epochs(old)
        self._add_epochs(new.assigned_partitions, new.member_epoch)
        self._add_epochs(new.partitions_pending_revocation, new.member_epoch)
        if new.instance_id is not None:
            if self.static_members is NO_ENTRIES:
                self.static_members = {}
            self.static_members[new.instance_id] = new.member_id

    def _remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id)
        self._count(old, -1)
        self._remove_epochs(old)
        if old.instance_id is not None:
            # unconditionally, as Kafka does: a replacing static member's records come after
            # the old member's tombstones
            self.static_members.pop(old.instance_id, None)
            if not self.static_members:
                self.static_members = NO_ENTRIES

    def _count(self, m: ConsumerGroupMember | None, delta: int) -> None:
        if m is None:
            return
        regex, assignor = m.subscribed_topic_regex, m.server_assignor_name
        for name, keys in (("subscribed_topic_names", m.subscribed_topic_names),
                           ("subscribed_regexes", (regex,) if regex else ()),
                           ("server_assignors", (assignor,) if assignor else ())):
            if not keys:
                continue
            counter = getattr(self, name)
            if counter is NO_COUNTS:
                counter = Counter()
                setattr(self, name, counter)
            for k in keys:
                counter[k] += delta
                if counter[k] <= 0:
                    del counter[k]
            if not counter:
                setattr(self, name, NO_COUNTS)
        if m.classic_member_metadata is not None:
            self.classic_members += delta

    def _add_epochs(self, assignment, epoch: int) -> None:
        epochs = self.partition_epochs
        for topic_id, parts in assignment.items():
            for p in parts:
                tp = (topic_id, p)
                prev = epochs.get(tp)
                if prev is not None:
                    raise IllegalReplayState(f"Cannot set the epoch of {topic_id.hex()}-{p} to {epoch} because "
                                             f"the partition is still owned at epoch {prev}")
                epochs[tp] = epoch

    def _remove_epochs(self, m: ConsumerGroupMember) -> None:
        epochs = self.partition_epochs
        for assignment in (m.assigned_partitions, m.partitions_pending_revocation):
            for topic_id, parts in assignment.items():
                for p in parts:
                    prev = epochs.pop((topic_id, p), None)
                    if prev != m.member_epoch:
                        raise IllegalReplayState(
                            f"Cannot remove the epoch {m.member_epoch} from {topic_id.hex()}-{p} because the "
                            f"partition is still owned at a different epoch {prev}")


def _assignment_epoch_validator(member: ConsumerGroupMember, received: int):
    """Kafka's createAssignmentEpochValidator: a partition the member neither holds nor is revoking,
    or one assigned after the received epoch, is refused (ILLEGAL_GENERATION for a classic member,
    else STALE_MEMBER_EPOCH)."""
    code = ErrorCode.ILLEGAL_GENERATION if member.classic_member_metadata is not None else \
        ErrorCode.STALE_MEMBER_EPOCH
    what = "generation id" if member.classic_member_metadata is not None else "member epoch"

    def validate(topic: str, topic_id: bytes | None, partition: int) -> None:
        epoch = None if topic_id is None else member.assignment_epoch(topic_id, partition)
        if epoch is None:
            raise KafkaError(code, f"Partition {topic}-{partition} is not assigned or pending revocation "
                                   f"for member.")
        if received < epoch:
            raise KafkaError(code, f"Received {what} {received} is older than assignment epoch {epoch} for "
                                   f"partition {topic}-{partition}.")
    return validate


def compute_subscription_type(members, resolved_regexes: Mapping[str, ResolvedRegex]) -> SubscriptionType:
    """Kafka's ConsumerGroup.subscriptionType over ``members`` and the regex resolutions: without
    regexes, HOMOGENEOUS when every subscribed topic name is subscribed by every member; with
    regexes, HOMOGENEOUS only when every member subscribes to the same one regex and no topic is
    also subscribed by name (nor by another resolved regex). Topics count whether they exist or not."""
    n = 0
    by_name: Counter = Counter()
    regexes: Counter = Counter()
    for m in members:
        n += 1
        by_name.update(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            regexes[m.subscribed_topic_regex] += 1
    if not regexes:
        if all(c == n for c in by_name.values()):
            return SubscriptionType.HOMOGENEOUS
        return SubscriptionType.HETEROGENEOUS
    # a member has at most one regex: one regex counted n times is the only one
    if next(iter(regexes.values())) != n:
        return SubscriptionType.HETEROGENEOUS
    if by_name:
        return SubscriptionType.HETEROGENEOUS
    by_regex: Counter = Counter()
    for resolved in resolved_regexes.values():
        by_regex.update(resolved.topics)
    if any(c != 1 for c in by_regex.values()):
        return SubscriptionType.HETEROGENEOUS
    return SubscriptionType.HOMOGENEOUS


def _commit_timestamp(offset) -> int:
    return offset.commit_timestamp_ms


def _string_map_order(keys) -> list[str]:
    return string_map_order(sorted(keys))


def _classic(value) -> tuple | None:
    c = value.classic_member_metadata
    if c is None:
        return None
    return (c.session_timeout_ms, tuple((p.name, bytes(p.metadata)) for p in c.supported_protocols))


def _assignment_epochs(member_epoch: int, assigned, pending, *lists: Any) -> dict[bytes, dict[int, int]] | tuple:
    """Kafka's Utils.assignmentFromTopicPartitions: each partition's assignment epoch, the member's
    epoch (at least 0) for a record without them or with a list of another length; when every
    partition has the same, ``(epoch, assigned, pending)`` (``ConsumerGroupMember.assignment_epochs``)."""
    default = max(member_epoch, 0)
    out: dict[bytes, dict[int, int]] = {}
    seen: set[int] = set()
    for topic_partitions in lists:
        for tp in topic_partitions:
            epochs = tp.assignment_epochs
            if epochs is None or len(epochs) != len(tp.partitions):
                epochs = [default] * len(tp.partitions)
            if tp.partitions:
                out.setdefault(tp.topic_id, {}).update(zip(tp.partitions, epochs))
                seen.update(epochs)
    if len(seen) <= 1:
        return (seen.pop() if seen else default, assigned, pending)
    return out


def _assignment(topic_partitions) -> dict[bytes, frozenset]:
    return freeze({tp.topic_id: tp.partitions for tp in topic_partitions})


def replay(groups: dict[str, Group], record: CoordinatorRecord) -> None:
    """Apply one KIP-848 record to the consumer groups of a shard (Kafka's replay of types 3-8, 16).
    A tombstone for a group or member that does not exist is ignored, as in Kafka."""
    t, key, value = record.record_type, record.key_struct, record.value_struct
    group = groups.get(key.group_id)
    if group is None or group.type is not GroupType.CONSUMER:
        if value is None:
            return
        if group is not None and not group.is_empty():
            raise IllegalReplayState(f"Group {key.group_id} is not a consumer group")
        # An empty classic group (a simple group holding offsets, or one whose tombstone comes
        # first) gives way to the consumer group, as Kafka's getOrMaybeCreatePersistedConsumerGroup.
        group = groups[key.group_id] = ConsumerGroup(key.group_id)
    assert isinstance(group, ConsumerGroup)

    if t == rec.MEMBER_METADATA:
        old = group.members.get(key.member_id)
        if value is not None:
            base = old if old is not None else ConsumerGroupMember(key.member_id)
            group._update_member(base.replace(
                instance_id=value.instance_id, rack_id=value.rack_id, client_id=shared_name(value.client_id),
                client_host=shared_name(value.client_host),
                subscribed_topic_names=shared_frozenset(value.subscribed_topic_names),
                subscribed_topic_regex=value.subscribed_topic_regex, rebalance_timeout_ms=value.rebalance_timeout_ms,
                server_assignor_name=shared_name(value.server_assignor), classic_member_metadata=_classic(value)))
        elif old is not None:
            if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
                raise IllegalReplayState(f"Received a tombstone record to delete member {key.member_id} but did "
                                         f"not receive ConsumerGroupCurrentMemberAssignmentValue tombstone.")
            if key.member_id in group.target_assignment:
                raise IllegalReplayState(f"Received a tombstone record to delete member {key.member_id} but did "
                                         f"not receive ConsumerGroupTargetAssignmentMetadataValue tombstone.")
            group._remove_member(key.member_id)
    elif t == rec.CURRENT_MEMBER_ASSIGNMENT:
        old = group.members.get(key.member_id)
        if value is not None:
            base = old if old is not None else ConsumerGroupMember(key.member_id)
            assigned = _assignment(value.assigned_partitions)
            pending = _assignment(value.partitions_pending_revocation)
            group._update_member(base.replace(
                member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                state=MemberState.from_value(value.state), assigned_partitions=assigned,
                partitions_pending_revocation=pending,
                assignment_epochs=_assignment_epochs(value.member_epoch, assigned, pending,
                                                     value.assigned_partitions, value.partitions_pending_revocation)))
        elif old is not None:
            group._update_member(old.replace(member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                             previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                             assigned_partitions={}, partitions_pending_revocation={},
                                             assignment_epochs=NO_EPOCHS))
    elif t == rec.TARGET_ASSIGNMENT_MEMBER:
        if value is not None:
            group.target_assignment[key.member_id] = _assignment(value.topic_partitions)
        else:
            group.target_assignment.pop(key.member_id, None)
    elif t == rec.TARGET_ASSIGNMENT_METADATA:
        if value is not None:
            group.assignment_epoch = value.assignment_epoch
        else:
            if group.target_assignment:
                raise IllegalReplayState(f"Received a tombstone record to delete target assignment of "
                                         f"{key.group_id} but the assignment still has "
                                         f"{len(group.target_assignment)} members.")
            group.assignment_epoch = -1
    elif t == rec.PARTITION_METADATA:
        if value is not None:
            group.subscription_metadata = shared_mapping({
                tm.topic_name: TopicMetadata(tm.topic_id, tm.topic_name, tm.num_partitions,
                                             tuple((pm.partition, tuple(pm.racks)) for pm in tm.partition_metadata))
                for tm in value.topics})
        else:
            group.subscription_metadata = {}
    elif t == rec.REGULAR_EXPRESSION:
        if value is not None:
            if group.resolved_regexes is NO_ENTRIES:
                group.resolved_regexes = {}
            group.resolved_regexes[key.regular_expression] = ResolvedRegex(frozenset(value.topics), value.version,
                                                                           value.timestamp)
        else:
            group.resolved_regexes.pop(key.regular_expression, None)
            if not group.resolved_regexes:
                group.resolved_regexes = NO_ENTRIES
    elif t == rec.GROUP_METADATA:
        if value is not None:
            group.group_epoch = value.epoch
        else:
            if group.members:
                raise IllegalReplayState(f"Received a tombstone record to delete group {key.group_id} but the "
                                         f"group still has {len(group.members)} members.")
            if group.target_assignment:
                raise IllegalReplayState(f"Received a tombstone record to delete group {key.group_id} but the "
                                         f"target assignment still has {len(group.target_assignment)} members.")
            if group.assignment_epoch != -1:
                raise IllegalReplayState(f"Received a tombstone record to delete group {key.group_id} but did "
                                         f"not receive ConsumerGroupTargetAssignmentMetadataValue tombstone.")
            del groups[key.group_id]
    else:
        raise ValueError(f"not a consumer group record type: {t}")


# -- views shared by the heartbeat and the migration paths ------------------------------------------

def assignment_state(m: ConsumerGroupMember) -> tuple:
    """What a member's current assignment record says: equal tuples need no new record."""
    return (m.member_epoch, m.previous_member_epoch, m.state, m.assigned_partitions, m.partitions_pending_revocation)


def preferred_assignor(members, default: str) -> str:
    """The server assignor ``members`` would choose (``ConsumerGroup.preferred_server_assignor``)."""
    probe = ConsumerGroup("")
    probe.server_assignors = Counter(m.server_assignor_name for m in members if m.server_assignor_name)
    return probe.preferred_server_assignor(default)


def subscription_metadata(members, image: Mapping[str, TopicMetadata],
                          resolved_regexes: Mapping[str, ResolvedRegex] | None = None) -> dict[str, TopicMetadata]:
    """The metadata of every existing topic some member subscribes to, by name or by regex (the
    topics ``resolved_regexes`` says the regex stands for)."""
    names: set = set()
    for m in members:
        names |= ConsumerGroup.resolve_subscription(m, resolved_regexes or {})
    return {n: image[n] for n in sorted(names) if n in image}


# -- the record sequences Kafka writes for removals --------------------------------------------------

def member_removal_records(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """A member leaves or is fenced: its current assignment, target and subscription, in that order."""
    return [rec.current_assignment_tombstone(group_id, member_id),
            rec.target_assignment_tombstone(group_id, member_id),
            rec.member_subscription_tombstone(group_id, member_id)]


def group_deletion_records(group: ConsumerGroup) -> list[CoordinatorRecord]:
    """Deleting a group (Kafka's ConsumerGroup.createGroupTombstoneRecords): current assignments,
    targets, the assignment epoch, subscriptions, resolved regexes, topic metadata, then the group
    epoch."""
    gid, ids = group.group_id, sorted(group.members)
    out = [rec.current_assignment_tombstone(gid, m) for m in ids]
    out += [rec.target_assignment_tombstone(gid, m) for m in sorted(group.target_assignment)]
    out.append(rec.target_assignment_epoch_tombstone(gid))
    out += [rec.member_subscription_tombstone(gid, m) for m in ids]
    out += [rec.regular_expression_tombstone(gid, r) for r in sorted(group.resolved_regexes)]
    out.append(rec.subscription_metadata_tombstone(gid))
    out.append(rec.group_epoch_tombstone(gid))
    return out
