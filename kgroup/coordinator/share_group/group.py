"""The share group (Kafka's ShareGroup) and the replay of its records (types 10-15).

State changes only by replaying records, at load and live alike (``replay(groups, record, now_ms)``,
Kafka's GroupMetadataManager.replay for these records). A group holds its group epoch and the
metadata hash of its subscribed topics (11), the target assignment and its epoch (12, 13), its
members with their epochs and assignments (10, 14), and which of its share-partitions the share
coordinator holds state for (15: initializing, initialized, deleting). A partition may be assigned
to several members at once, so replay keeps no owner per partition. The state is Empty without
members, else Stable.

Pure: no I/O, no clock.
"""
from __future__ import annotations

import enum
import struct
from collections import Counter
from typing import Mapping, NamedTuple

import xxhash

from ...protocol.errors import ErrorCode, KafkaError
from ..coordinator_records import CoordinatorRecord
from ..group import Group, GroupType
from ..timer import cancel_member_timers
from . import share_group_records as rec
from .member import MemberState, ShareGroupMember, freeze

LEAVE_GROUP_MEMBER_EPOCH = -1
PROTOCOL_TYPE = "share"


class IllegalReplayState(Exception):
    """Kafka's IllegalStateException during replay: the records contradict each other."""


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"
    UNKNOWN = "Unknown"


class InitMapValue(NamedTuple):
    """Kafka's InitMapValue: a topic's share-partitions in one of the states of record 15. The
    timestamp is when this coordinator wrote or loaded it (not durable, as in Kafka)."""

    name: str
    partitions: frozenset
    timestamp: int


class StatePartitionMetadata(NamedTuple):
    """Kafka's ShareGroupStatePartitionMetadataInfo: topic id -> InitMapValue, and deleting ids."""

    initializing: dict
    initialized: dict
    deleting: frozenset


# -- the metadata hash (Kafka's Utils.computeTopicHash / computeGroupHash: streaming XXH3-64) ------------
# hash4j's stream: putByte 1 byte, putInt/putLong little-endian, putString = the UTF-16LE chars
# followed by the int length.
_TOPIC_HASH_MAGIC_BYTE = b"\x00"
_I = struct.Struct("<i")
_Q = struct.Struct("<q")


def _put_string(out: list, s: str) -> None:
    out.append(s.encode("utf-16-le"))
    out.append(_I.pack(len(s.encode("utf-16-le")) // 2))


def _signed(h: int) -> int:
    return h - (1 << 64) if h >= 1 << 63 else h


def compute_topic_hash(topic) -> int:
    """The hash of a topic's id, name, partition count and racks per partition (0: no topic)."""
    if topic is None:
        return 0
    out = [_TOPIC_HASH_MAGIC_BYTE, topic.topic_id[:8][::-1], topic.topic_id[8:][::-1]]
    _put_string(out, topic.name)
    out.append(_I.pack(topic.num_partitions))
    racks = dict(topic.racks)
    for p in range(topic.num_partitions):
        out.append(_I.pack(p))
        for rack in sorted(racks.get(p, ())):
            out.append(_I.pack(len(rack)))
            _put_string(out, rack)
    return _signed(xxhash.xxh3_64_intdigest(b"".join(out)))


def compute_group_hash(topic_hashes: Mapping[str, int]) -> int:
    """The hashes of the topics, in topic name order (0: no topic)."""
    if not topic_hashes:
        return 0
    return _signed(xxhash.xxh3_64_intdigest(b"".join(_Q.pack(topic_hashes[n]) for n in sorted(topic_hashes))))


def compute_metadata_hash(topic_names, image) -> int:
    """Kafka's ModernGroup.computeMetadataHash over the subscribed topic names."""
    return compute_group_hash({n: compute_topic_hash(image.get(n)) for n in topic_names})


class ShareGroup(Group):
    type = GroupType.SHARE
    __slots__ = ("group_id", "group_epoch", "metadata_hash", "members", "assignment_epoch", "assignment_timestamp",
                 "target_assignment", "subscribed_topic_names", "state_partitions", "metadata_refresh")

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.assignment_epoch = 0
        self.assignment_timestamp = 0
        self.target_assignment: dict[str, dict[bytes, frozenset]] = {}
        self.subscribed_topic_names: Counter = Counter()
        self.state_partitions: StatePartitionMetadata | None = None
        # topics the group subscribes to changed: the next heartbeat computes the hash again
        # (Kafka's requestMetadataRefresh); in memory only
        self.metadata_refresh = False

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_with(self, old: ShareGroupMember | None, new: ShareGroupMember | None) -> Counter:
        """Kafka's computeSubscribedTopicNames: the counts with ``old`` replaced by ``new``."""
        out = Counter(self.subscribed_topic_names)
        if old is not None:
            out.subtract(old.subscribed_topic_names)
        if new is not None:
            out.update(new.subscribed_topic_names)
        return +out

    def initialized_partitions(self) -> dict[bytes, frozenset]:
        if self.state_partitions is None:
            return {}
        return {t: v.partitions for t, v in self.state_partitions.initialized.items()}

    # -- the Group interface (Kafka's ShareGroup: offsets are not theirs) --------------------------
    def state_string(self) -> str:
        return self.state.value

    def is_empty(self) -> bool:
        return not self.members

    def _not_consumer_group(self):
        return KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {self.group_id} is not a consumer group.")

    def validate_offset_commit(self, member_id, instance_id, generation_or_epoch, is_transactional, api_version):
        raise self._not_consumer_group()

    def validate_offset_fetch(self, member_id, member_epoch) -> None:
        raise self._not_consumer_group()

    def validate_offset_delete(self) -> None:
        raise self._not_consumer_group()

    def validate_delete_group(self) -> None:
        if self.members:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names

    def offset_expiration_condition(self):
        return None

    def should_expire(self) -> bool:
        return False        # a share group is deleted only by DeleteGroups, as in Kafka

    def create_group_tombstone_records(self, records: list) -> None:
        records.extend(group_deletion_records(self))

    def cancel_timers(self, timer) -> None:
        for member_id in self.members:
            cancel_member_timers(timer, self.group_id, member_id)

    def protocol_type_name(self) -> str:
        return PROTOCOL_TYPE

    def durable_view(self) -> dict:
        """Everything records determine, canonical, for live == replayed comparisons."""
        def a(x):
            return {t.hex(): sorted(p) for t, p in sorted(x.items())}

        def init(m):
            return {t.hex(): (v.name, sorted(v.partitions)) for t, v in sorted(m.items())}
        sp = self.state_partitions
        return {
            "group_epoch": self.group_epoch, "metadata_hash": self.metadata_hash,
            "assignment_epoch": self.assignment_epoch, "assignment_timestamp": self.assignment_timestamp,
            "state": self.state.value,
            "target": {m: a(x) for m, x in sorted(self.target_assignment.items())},
            "members": {mid: (m.member_epoch, m.previous_member_epoch, int(m.state), m.rack_id, m.client_id,
                              m.client_host, sorted(m.subscribed_topic_names), a(m.assigned_partitions))
                        for mid, m in sorted(self.members.items())},
            "subscribed_topic_names": dict(sorted(self.subscribed_topic_names.items())),
            "state_partitions": None if sp is None else (init(sp.initializing), init(sp.initialized),
                                                         sorted(t.hex() for t in sp.deleting)),
        }

    # -- changes (only from replay) -------------------------------------------------------------
    def _update_member(self, new: ShareGroupMember) -> None:
        old = self.members.get(new.member_id)
        self.members[new.member_id] = new
        if old is not None:
            self.subscribed_topic_names.subtract(old.subscribed_topic_names)
        self.subscribed_topic_names.update(new.subscribed_topic_names)
        self.subscribed_topic_names = +self.subscribed_topic_names

    def _remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id)
        self.subscribed_topic_names.subtract(old.subscribed_topic_names)
        self.subscribed_topic_names = +self.subscribed_topic_names


def _assignment(topic_partitions) -> dict[bytes, frozenset]:
    return freeze({tp.topic_id: tp.partitions for tp in topic_partitions})


def _init_map(infos, now_ms: int) -> dict:
    return {i.topic_id: InitMapValue(i.topic_name, frozenset(i.partitions), now_ms) for i in infos}


def replay(groups: dict[str, Group], record: CoordinatorRecord, now_ms: int = 0) -> None:
    """Apply one KIP-932 record to the shard's group map (Kafka's replay of records 10-15)."""
    t, key, value = record.record_type, record.key_struct, record.value_struct
    found = groups.get(key.group_id)
    if found is not None and not isinstance(found, ShareGroup):
        raise IllegalReplayState(f"Group {key.group_id} is not a share group.")
    group = found
    if group is None:
        if value is None:
            return          # a tombstone for a group that is gone
        group = ShareGroup(key.group_id)
        groups[key.group_id] = group
    if t == rec.MEMBER_METADATA:
        old = group.members.get(key.member_id)
        if value is not None:
            base = old if old is not None else ShareGroupMember(key.member_id)
            group._update_member(base.replace(rack_id=value.rack_id, client_id=value.client_id,
                                              client_host=value.client_host,
                                              subscribed_topic_names=frozenset(value.subscribed_topic_names)))
        elif old is not None:
            if old.member_epoch != LEAVE_GROUP_MEMBER_EPOCH:
                raise IllegalReplayState(f"Received a tombstone record to delete member {key.member_id} "
                                         f"with invalid leave group epoch.")
            if key.member_id in group.target_assignment:
                raise IllegalReplayState(f"Received a tombstone record to delete member {key.member_id} but "
                                         f"member exists in target assignment.")
            group._remove_member(key.member_id)
    elif t == rec.CURRENT_MEMBER_ASSIGNMENT:
        old = group.members.get(key.member_id)
        if value is not None:
            base = old if old is not None else ShareGroupMember(key.member_id)
            group._update_member(base.replace(member_epoch=value.member_epoch,
                                              previous_member_epoch=value.previous_member_epoch,
                                              state=MemberState.from_value(value.state),
                                              assigned_partitions=_assignment(value.assigned_partitions)))
        elif old is not None:
            group._update_member(old.replace(member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                             previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH, assigned_partitions={}))
    elif t == rec.TARGET_ASSIGNMENT_MEMBER:
        if value is not None:
            group.target_assignment[key.member_id] = _assignment(value.topic_partitions)
        else:
            group.target_assignment.pop(key.member_id, None)
    elif t == rec.TARGET_ASSIGNMENT_METADATA:
        if value is not None:
            group.assignment_epoch = value.assignment_epoch
            group.assignment_timestamp = value.assignment_timestamp
        else:
            if group.target_assignment:
                raise IllegalReplayState(f"Received a tombstone record to delete target assignment of "
                                         f"{key.group_id} but the assignment still has "
                                         f"{len(group.target_assignment)} members.")
            group.assignment_epoch, group.assignment_timestamp = -1, 0
    elif t == rec.STATE_PARTITION_METADATA:
        if value is None:
            group.state_partitions = None
        else:
            group.state_partitions = StatePartitionMetadata(
                _init_map(value.initializing_topics, now_ms), _init_map(value.initialized_topics, now_ms),
                frozenset(i.topic_id for i in value.deleting_topics))
    elif t == rec.GROUP_METADATA:
        if value is not None:
            group.group_epoch = value.epoch
            group.metadata_hash = value.metadata_hash
        else:
            if group.members:
                raise IllegalReplayState(f"Received a tombstone record to delete group {key.group_id} but the "
                                         f"group still has {len(group.members)} members.")
            if group.target_assignment:
                raise IllegalReplayState(f"Received a tombstone record to delete group {key.group_id} but the "
                                         f"target assignment still has {len(group.target_assignment)} members.")
            if group.assignment_epoch != -1:
                raise IllegalReplayState(f"Received a tombstone record to delete group {key.group_id} but "
                                         f"target assignment epoch in invalid.")
            del groups[key.group_id]
    else:
        raise ValueError(f"not a share group record type: {t}")


def member_removal_records(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """A member leaves or is fenced: its current assignment, target and subscription, in that order."""
    return [rec.current_assignment_tombstone(group_id, member_id),
            rec.target_assignment_tombstone(group_id, member_id),
            rec.member_subscription_tombstone(group_id, member_id)]


def group_deletion_records(group: ShareGroup) -> list[CoordinatorRecord]:
    """Kafka's ShareGroup.createGroupTombstoneRecords: current assignments, targets, the assignment
    epoch, subscriptions, the state-partition metadata, then the group epoch."""
    gid, ids = group.group_id, sorted(group.members)
    out = [rec.current_assignment_tombstone(gid, m) for m in ids]
    out += [rec.target_assignment_tombstone(gid, m) for m in ids]
    out.append(rec.target_assignment_epoch_tombstone(gid))
    out += [rec.member_subscription_tombstone(gid, m) for m in ids]
    out.append(rec.state_partition_metadata_tombstone(gid))
    out.append(rec.group_epoch_tombstone(gid))
    return out
