"""Share groups of one shard (the KIP-932 half of Kafka's GroupMetadataManager): ShareGroupHeartbeat,
ShareGroupDescribe, session timeouts, the group epoch bump when subscribed topics change, and the
bookkeeping of which share-partitions the share coordinator has initialized (record 15).

Every operation adds records and replies to a ``Result``; groups change only when the shard replays
those records. A heartbeat writes, in Kafka's order:

    member subscription (10), group epoch with metadata hash (11)        when they change
    target of every changed member (13), assignment epoch (12)          when the group epoch is ahead
    the member's current assignment (14)                                 when it moved
    state-partition metadata (15), topics to initialize                  when subscribed partitions lack state

Only initialized share-partitions are assigned (Kafka's isPartitionAssignable): a heartbeat that
subscribes to new partitions marks them initializing and queues an initialization for the share
coordinator (``drain_initializations``); once it succeeds, ``initialize_share_group_state`` moves
them to initialized and the next heartbeat computes a new target that includes them.
"""
from __future__ import annotations

from typing import Callable, Mapping, NamedTuple

from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsResponse
from ...protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsResponse
from ...protocol.messages.share_group_describe import ShareGroupDescribeResponse
from ...protocol.messages.share_group_heartbeat import ShareGroupHeartbeatResponse
from ..config import SHARE_HEARTBEAT_INTERVAL_MS, SHARE_SESSION_TIMEOUT_MS, GroupConfigs
from ..group import Group, GroupType
from ..timer import session_key
from . import share_group_records as rec
from . import simple_assignor
from .group import (InitMapValue, ShareGroup, compute_metadata_hash, member_removal_records)
from .member import MemberState, ShareGroupMember

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
_HbAssignment = ShareGroupHeartbeatResponse.Assignment
_HbTopicPartitions = ShareGroupHeartbeatResponse.TopicPartitions
_Described = ShareGroupDescribeResponse.DescribedGroup


class InitializeShareGroupState(NamedTuple):
    """What the share coordinator is asked to initialize (Kafka's InitializeShareGroupStateParameters):
    the group, its epoch (the state epoch) and topic id -> partitions, each starting at offset -1,
    or (AlterShareGroupOffsets) at ``start_offsets[topic id][partition]``."""

    group_id: str
    group_epoch: int
    topics: dict
    start_offsets: dict | None = None


class ShareStateInitialized(NamedTuple):
    """The share coordinator's answer to an InitializeShareGroupState: which partitions, and
    whether it succeeded."""

    group_id: str
    topics: dict
    succeeded: bool = True


class AlterOffsets(NamedTuple):
    """What AlterShareGroupOffsets leaves to the service: the answer so far, and what to ask the
    share coordinator to initialize (None: nothing)."""

    response: object
    initialize: InitializeShareGroupState | None


class DeleteOffsetsPlan(NamedTuple):
    """Kafka's DeleteShareGroupOffsetsResultHolder: a top-level error, the topics refused, and
    topic id -> partitions the share coordinator is asked to delete (None: nothing)."""

    error_code: int
    error_message: str | None = None
    error_topics: list = []
    delete: dict | None = None


class ShareOffsetsDeleted(NamedTuple):
    """The share coordinator deleted the state of ``deleted`` (topic id -> name); ``error_topics``
    the DeleteShareGroupOffsets answers of the topics refused on the way."""

    group_id: str
    deleted: dict
    error_topics: list


def _alter_partition(index: int, error: ErrorCode = ErrorCode.NONE):
    P = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponsePartition
    return P(partition_index=index, error_code=int(error), error_message=error.message if error else None)


def heartbeat_error(code, message=None) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(error_code=int(code), error_message=message)


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def validate_heartbeat(req, version, config):
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid (GroupCoordinatorService), answered
    before any shard sees the request; None when valid."""
    def invalid(message):
        return heartbeat_error(ErrorCode.INVALID_REQUEST, message)
    if _blank(req.member_id):
        return invalid("MemberId can't be empty.")
    if _blank(req.group_id):
        return invalid("GroupId can't be empty.")
    if _blank(req.rack_id):
        return invalid("RackId can't be empty.")
    if req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if not req.subscribed_topic_names:
            return invalid("SubscribedTopicNames must be set in first request.")
    elif req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        return invalid("MemberEpoch is invalid.")
    return None


def _response_assignment(assignment) -> object:
    return _HbAssignment(topic_partitions=[_HbTopicPartitions(topic_id=t, partitions=sorted(p))
                                           for t, p in sorted(assignment.items())])


class ShareGroupManager:
    def __init__(self, config, timer, groups: dict[str, Group], topics: Callable[[], Mapping] | None = None,
                 group_configs: GroupConfigs | None = None):
        self.config = config
        self.timer = timer
        self.groups = groups
        self.topics = topics or (dict)
        self.group_configs: GroupConfigs = {} if group_configs is None else group_configs
        # initializations the runtime hands to the share coordinator (written, not yet sent)
        self._initializations: list[InitializeShareGroupState] = []

    def share_group(self, group_id: str) -> ShareGroup | None:
        group = self.groups.get(group_id)
        return group if group is not None and group.type is GroupType.SHARE else None     # type: ignore[return-value]

    def share_groups(self) -> list[ShareGroup]:
        return [g for g in self.groups.values() if g.type is GroupType.SHARE]     # type: ignore[misc]

    def session_timeout_ms(self, group_id: str) -> int:
        """Kafka's shareGroupSessionTimeoutMs: the group's share.session.timeout.ms, else the broker's."""
        return self._group_config(group_id, SHARE_SESSION_TIMEOUT_MS, self.config.share_session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_config(group_id, SHARE_HEARTBEAT_INTERVAL_MS, self.config.share_heartbeat_interval_ms)

    def _group_config(self, group_id: str, name: str, broker_value: int) -> int:
        v = (self.group_configs.get(group_id) or {}).get(name)
        return broker_value if v is None else v

    # == loading ===================================================================================
    def on_loaded(self) -> None:
        """Every loaded member gets a fresh session (Kafka's onLoaded)."""
        for group in self.share_groups():
            for member_id in group.members:
                self._schedule_session(group.group_id, member_id)

    def drain_initializations(self) -> list[InitializeShareGroupState]:
        out, self._initializations = self._initializations, []
        return out

    # == ShareGroupHeartbeat ===========================================================================
    def heartbeat(self, req, res, client_id: str = "", client_host: str = "") -> ShareGroupHeartbeatResponse:
        """The response (records are added to ``res``); KafkaError for a refused request."""
        if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            return self._leave(req, res)
        return self._heartbeat(req, res, client_id, client_host)

    def _group_or_fail(self, group_id: str, create: bool) -> ShareGroup:
        """Kafka's getOrMaybeCreateShareGroup: no conversion between protocols."""
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
            return ShareGroup(group_id)     # written by the records below, not stored here
        if group.type is not GroupType.SHARE:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        return group        # type: ignore[return-value]

    def _heartbeat(self, req, res, client_id, client_host) -> ShareGroupHeartbeatResponse:
        group_id, member_id, member_epoch = req.group_id, req.member_id, req.member_epoch
        joining = member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._group_or_fail(group_id, joining)
        max_size = self.config.share_max_size
        if len(group.members) >= max_size and (not member_id or member_id not in group.members):
            raise KafkaError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The share group has reached its maximum capacity of {max_size} members.")
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group "
                                                              f"{group_id}.")
            member = ShareGroupMember(member_id)
        elif not joining:
            self._check_member_epoch(member, member_epoch)

        # 1. the member and the group epoch
        changes = {"client_id": client_id, "client_host": client_host}
        if req.rack_id is not None:
            changes["rack_id"] = req.rack_id
        if req.subscribed_topic_names is not None:
            changes["subscribed_topic_names"] = frozenset(req.subscribed_topic_names)
        updated = member.replace(**changes)
        bump = False
        if updated != member or member_id not in group.members:
            res.add_record(rec.member_subscription_record(group_id, updated))
            bump = updated.subscribed_topic_names != member.subscribed_topic_names
        group_epoch = group.group_epoch
        if group.assignment_epoch >= group_epoch:
            bump |= self._initialized_assignment_pending(group)
        old = group.members.get(member_id)
        subscribed = group.subscribed_with(old, updated)
        image = self.topics()
        if bump or group.metadata_refresh:
            metadata_hash = compute_metadata_hash(subscribed, image)
            if metadata_hash != group.metadata_hash:
                bump = True
            if bump:
                group_epoch += 1
                res.add_record(rec.group_epoch_record(group_id, group_epoch, metadata_hash))
            group.metadata_refresh = False       # in memory: this heartbeat looked at the topics

        # 2. the target assignment
        if group_epoch > group.assignment_epoch:
            members = {m: (updated if m == member_id else x).subscribed_topic_names for m, x in group.members.items()}
            members[member_id] = updated.subscribed_topic_names
            topic_ids = {n: image[n].topic_id for n in subscribed if n in image}
            target = simple_assignor.assign(members, group.target_assignment, topic_ids,
                                            group.initialized_partitions())
            for m, assignment in target.items():
                if group.target_assignment.get(m, {}) != assignment or m not in group.target_assignment:
                    res.add_record(rec.target_assignment_record(group_id, m, assignment))
            res.add_record(rec.target_assignment_epoch_record(group_id, group_epoch, res.now_ms))
            target_epoch, member_target = group_epoch, target.get(member_id, {})
        else:
            target_epoch, member_target = group.assignment_epoch, group.target_assignment.get(member_id, {})

        # 3. reconcile the member (Kafka's ShareGroupAssignmentBuilder: no revocation step)
        reconciled = updated
        if bump or not updated.is_reconciled_to(target_epoch):
            topic_ids_of_member = {image[n].topic_id for n in updated.subscribed_topic_names if n in image}
            filtered = {t: p for t, p in member_target.items() if t in topic_ids_of_member}
            if target_epoch != updated.member_epoch:
                reconciled = updated.with_epoch(target_epoch, state=MemberState.STABLE, assigned_partitions=filtered)
            elif bump:
                reconciled = updated.replace(assigned_partitions=filtered)
            if reconciled != updated or member_id not in group.members:
                res.add_record(rec.current_assignment_record(group_id, reconciled))

        self._schedule_session(group_id, member_id)
        response = ShareGroupHeartbeatResponse(member_id=member_id, member_epoch=reconciled.member_epoch,
                                               heartbeat_interval_ms=self.heartbeat_interval_ms(group_id))
        if joining or req.subscribed_topic_names is not None \
                or reconciled.assigned_partitions != member.assigned_partitions:
            response.assignment = _response_assignment(reconciled.assigned_partitions)
        self._maybe_initialize(group, group_id, group_epoch, subscribed, image, res)
        return response

    @staticmethod
    def _check_member_epoch(member: ShareGroupMember, received: int) -> None:
        """Kafka's throwIfShareGroupMemberEpochIsInvalid: the previous epoch is accepted (the
        response with the bump may have been lost)."""
        if received > member.member_epoch:
            raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The share group member has a greater member epoch ({received}) than the one known "
                             f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                             f"partitions and rejoin.")
        if received < member.member_epoch and received != member.previous_member_epoch:
            raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The share group member has a smaller member epoch ({received}) than the one known "
                             f"by the group coordinator ({member.member_epoch}), and it does not match the "
                             f"previous member epoch ({member.previous_member_epoch}). The member must abandon "
                             f"all its partitions and rejoin.")

    def _initialized_assignment_pending(self, group: ShareGroup) -> bool:
        """Kafka's initializedAssignmentPending: some subscribed topic's initialized partitions are
        not exactly the ones the target assigns."""
        if not group.members or group.state_partitions is None or not group.state_partitions.initialized:
            return False
        if not group.subscribed_topic_names:
            return False
        assigned: dict = {}
        for a in group.target_assignment.values():
            for t, ps in a.items():
                assigned.setdefault(t, set()).update(ps)
        for t, v in group.state_partitions.initialized.items():
            if v.name in group.subscribed_topic_names and assigned.get(t) != set(v.partitions):
                return True
        return False

    def _maybe_initialize(self, group: ShareGroup, group_id, group_epoch, subscribed, image, res) -> None:
        """Kafka's maybeCreateInitializeShareGroupStateRequest: the subscribed partitions with no
        state yet (or initializing for longer than group.share.initialize.retry.interval.ms) are
        marked initializing (record 15) and queued for the share coordinator."""
        if not subscribed or not image:
            return
        now = res.now_ms
        sp = group.state_partitions
        delta = self.config.share_initialize_retry_interval_ms
        have: dict = {}
        if sp is not None:
            have = {t: set(v.partitions) for t, v in sp.initialized.items()}
            for t, v in sp.initializing.items():
                if now - v.timestamp < delta:
                    have.setdefault(t, set()).update(v.partitions)
        change: dict = {}
        for name in sorted(subscribed):
            topic = image.get(name)
            if topic is None:
                continue
            already = have.get(topic.topic_id, set())
            if len(already) < topic.num_partitions:
                change[topic.topic_id] = InitMapValue(name, frozenset(range(topic.num_partitions)) - already, now)
        if not change:
            return
        self._add_initializing(group, change, image, res)
        request = InitializeShareGroupState(group_id, group_epoch,
                                            {t: frozenset(v.partitions) for t, v in change.items()})
        res.on_commit(lambda _res: self._initializations.append(request))

    def _add_initializing(self, group: ShareGroup, change: Mapping, image, res) -> None:
        """Kafka's addInitializingTopicsRecords: record 15 with ``change`` (topic id -> InitMapValue)
        merged into the initializing topics; a topic initializing again leaves the deleting set."""
        if not change:
            return
        sp = group.state_partitions
        if sp is None:
            res.add_record(rec.state_partition_metadata_record(group.group_id, change, {}, {}))
            return
        initializing = dict(sp.initializing)
        for t, v in change.items():
            prev = initializing.get(t)
            initializing[t] = v if prev is None else InitMapValue(v.name, prev.partitions | v.partitions, v.timestamp)
        deleting = {t: self._topic_name(t, image) for t in sp.deleting if t not in initializing}
        res.add_record(rec.state_partition_metadata_record(group.group_id, initializing, sp.initialized, deleting))

    @staticmethod
    def _topic_name(topic_id: bytes, image) -> str:
        for t in image.values():
            if t.topic_id == topic_id:
                return t.name
        return "<UNKNOWN>"

    # == the share coordinator's answer ==================================================================
    def initialize_share_group_state(self, group_id: str, topics: Mapping[bytes, frozenset], res) -> None:
        """Kafka's initializeShareGroupState: the share coordinator initialized these partitions;
        they move from initializing to initialized (record 15)."""
        group = self.share_group(group_id)
        if not topics or group is None:
            return
        image = self.topics()
        now = res.now_ms
        sp = group.state_partitions
        enriched = {t: InitMapValue(self._topic_name(t, image), frozenset(p), now) for t, p in topics.items()}
        if sp is None:
            res.add_record(rec.state_partition_metadata_record(group_id, {}, enriched, {}))
            return
        initialized = dict(sp.initialized)
        for t, v in enriched.items():
            prev = initialized.get(t)
            initialized[t] = v if prev is None else InitMapValue(prev.name, prev.partitions | v.partitions, prev.timestamp)
        initializing = {}
        for t, v in sp.initializing.items():
            left = v.partitions - frozenset(topics.get(t, ()))
            if left:
                initializing[t] = InitMapValue(v.name, left, v.timestamp)
        res.add_record(rec.state_partition_metadata_record(
            group_id, initializing, initialized, {t: self._topic_name(t, image) for t in sp.deleting}))

    def uninitialize_share_group_state(self, group_id: str, topics: Mapping[bytes, frozenset], res) -> None:
        """Kafka's uninitializeShareGroupState: an initialization failed; the partitions leave the
        initializing set, so a later heartbeat asks again."""
        group = self.share_group(group_id)
        sp = group.state_partitions if group is not None else None
        if sp is None or not sp.initializing or not topics:
            return
        image = self.topics()
        initializing = {}
        for t, v in sp.initializing.items():
            left = v.partitions - frozenset(topics.get(t, ()))
            if left:
                initializing[t] = InitMapValue(v.name, left, v.timestamp)
        res.add_record(rec.state_partition_metadata_record(
            group_id, initializing, sp.initialized, {t: self._topic_name(t, image) for t in sp.deleting}))

    # == administration: DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets,
    # DeleteGroups (the share group halves of Kafka's GroupMetadataManager / GroupCoordinatorShard) ======
    def initialized_partitions(self, group_id: str) -> dict[bytes, frozenset]:
        """Kafka's initializedShareGroupPartitions: topic id -> the partitions whose state the share
        coordinator holds (empty for a group without any, or no group)."""
        group = self.share_group(group_id)
        return group.initialized_partitions() if group is not None else {}

    def alter_offsets(self, group_id: str, topics, res) -> AlterOffsets:
        """Kafka's alterShareGroupOffsets: the group (created when missing, as an empty share group)
        must be empty; the partitions of known topics are marked initializing (record 15) and the
        share coordinator is asked to initialize them at the requested start offsets. KafkaError:
        GROUP_ID_NOT_FOUND (another type of group), NON_EMPTY_GROUP."""
        group = self._group_or_fail(group_id, True)
        if group.members:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP, ErrorCode.NON_EMPTY_GROUP.message)
        image = self.topics()
        now = res.now_ms
        R = AlterShareGroupOffsetsResponse
        out = []
        initializing: dict = {}
        offsets: dict = {}
        for topic in topics:
            meta = image.get(topic.topic_name)
            if meta is None:
                out.append(R.AlterShareGroupOffsetsResponseTopic(topic_name=topic.topic_name, partitions=[
                    _alter_partition(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    for p in topic.partitions]))
                continue
            parts = []
            for p in topic.partitions:
                if p.partition_index < meta.num_partitions:
                    parts.append(_alter_partition(p.partition_index))
                    offsets.setdefault(meta.topic_id, {})[p.partition_index] = p.start_offset
                else:
                    parts.append(_alter_partition(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            initializing[meta.topic_id] = InitMapValue(topic.topic_name, frozenset(
                p.partition_index for p in topic.partitions if p.partition_index < meta.num_partitions), now)
            out.append(R.AlterShareGroupOffsetsResponseTopic(topic_name=topic.topic_name, topic_id=meta.topic_id,
                                                              partitions=parts))
        self._add_initializing(group, initializing, image, res)
        init = None
        if offsets:
            init = InitializeShareGroupState(group_id, group.group_epoch,
                                             {t: frozenset(ps) for t, ps in offsets.items()}, offsets)
        return AlterOffsets(R(responses=out), init)

    def initiate_delete_offsets(self, group_id: str, topic_names, res) -> DeleteOffsetsPlan:
        """Kafka's initiateDeleteShareGroupOffsets: an empty share group's initialized topics among
        ``topic_names`` move to deleting (record 15, written whenever the group has state
        metadata) and are what the share coordinator is asked to delete; a topic already deleting
        is asked again with all its partitions. Errors come back in the plan, as Kafka's holder."""
        group = self.share_group(group_id)
        if group is None:
            message = (f"Group {group_id} is not a share group." if group_id in self.groups
                       else f"Group {group_id} not found.")
            return DeleteOffsetsPlan(int(ErrorCode.GROUP_ID_NOT_FOUND), message)
        if group.members:
            return DeleteOffsetsPlan(int(ErrorCode.NON_EMPTY_GROUP), ErrorCode.NON_EMPTY_GROUP.message)
        sp = group.state_partitions
        if sp is None:
            return DeleteOffsetsPlan(0, None, [], None)
        image = self.topics()
        T = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic
        initialized = dict(sp.initialized)
        deleting = set(sp.deleting)
        errors, delete = [], {}
        for name in topic_names:
            meta = image.get(name)
            if meta is None:
                errors.append(T(topic_name=name, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                error_message=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message))
            elif meta.topic_id in initialized:
                delete[meta.topic_id] = initialized.pop(meta.topic_id).partitions
                deleting.add(meta.topic_id)
            elif meta.topic_id in deleting:
                delete[meta.topic_id] = frozenset(range(meta.num_partitions))
            else:
                errors.append(T(topic_name=name, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                error_message="There is no offset information to delete."))
        res.add_record(rec.state_partition_metadata_record(group_id, sp.initializing, initialized,
                                                           {t: self._topic_name(t, image) for t in deleting}))
        return DeleteOffsetsPlan(0, None, errors, delete or None)

    def complete_delete_offsets(self, group_id: str, deleted: Mapping[bytes, str], error_topics, res):
        """Kafka's completeDeleteShareGroupOffsets: the topics whose state the share coordinator
        deleted leave the deleting set (record 15); the answer lists them, then the failed ones."""
        T = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic
        out = []
        group = self.share_group(group_id)
        sp = group.state_partitions if group is not None else None
        if sp is not None:
            image = self.topics()
            res.add_record(rec.state_partition_metadata_record(
                group_id, sp.initializing, sp.initialized,
                {t: self._topic_name(t, image) for t in sp.deleting if t not in deleted}))
            out = [T(topic_name=name, topic_id=t, error_code=0) for t, name in deleted.items()]
        return DeleteShareGroupOffsetsResponse(responses=out + list(error_topics))

    def delete_group_requests(self, group_ids, res) -> dict:
        """Kafka's sharePartitionDeleteRequests (DeleteGroups, before the groups themselves go):
        group id -> (topic id -> partitions to delete from the share coordinator, error). A group
        that is not a share group is left out (its deletion is the general path's); a non-empty
        one is NON_EMPTY_GROUP; an empty one moves its initialized and initializing topics (and
        any still deleting, retried) to deleting (record 15)."""
        out: dict[str, tuple[dict | None, ErrorCode]] = {}
        image = None
        for group_id in group_ids:
            group = self.share_group(group_id)
            if group is None:
                continue
            if group.members:
                out[group_id] = (None, ErrorCode.NON_EMPTY_GROUP)
                continue
            sp = group.state_partitions
            if sp is None:
                continue
            image = image if image is not None else self.topics()
            candidates: dict = {}
            for m in (sp.initialized, sp.initializing):
                for t, v in m.items():
                    prev = candidates.get(t)
                    candidates[t] = (v.name, v.partitions if prev is None else prev[1] | v.partitions)
            by_id = {meta.topic_id: meta for meta in image.values()}
            for t in sp.deleting:
                meta = by_id.get(t)
                if meta is not None:     # a deletion that did not complete is retried
                    prev = candidates.get(t)
                    parts = frozenset(range(meta.num_partitions))
                    candidates[t] = (meta.name, parts if prev is None else prev[1] | parts)
            res.add_record(rec.state_partition_metadata_record(group_id, {}, {},
                                                               {t: n for t, (n, _) in candidates.items()}))
            if candidates:
                out[group_id] = ({t: ps for t, (_, ps) in candidates.items()}, ErrorCode.NONE)
        return out

    # == leaving and fencing ===========================================================================
    def _leave(self, req, res) -> ShareGroupHeartbeatResponse:
        group = self.share_group(req.group_id)
        if group is None:
            if req.group_id in self.groups:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a share group.")
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        member = group.members.get(req.member_id)
        if member is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group "
                                                          f"{req.group_id}.")
        self._fence(group, member, res)
        return ShareGroupHeartbeatResponse(member_id=req.member_id, member_epoch=req.member_epoch)

    def _fence(self, group: ShareGroup, member: ShareGroupMember, res) -> None:
        """Kafka's shareGroupFenceMember: the member's records go, the group epoch is bumped with
        the hash of the topics the others subscribe to."""
        group_id = group.group_id
        for r in member_removal_records(group_id, member.member_id):
            res.add_record(r)
        metadata_hash = compute_metadata_hash(group.subscribed_with(member, None), self.topics())
        res.add_record(rec.group_epoch_record(group_id, group.group_epoch + 1, metadata_hash))
        self.timer.cancel(session_key(group_id, member.member_id))

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        def expire(res, group_id=group_id, member_id=member_id):
            group = self.share_group(group_id)
            if group is None:
                return
            member = group.members.get(member_id)
            if member is not None:
                self._fence(group, member, res)
        self.timer.schedule(session_key(group_id, member_id), self.session_timeout_ms(group_id), expire)

    # == topic metadata changes ========================================================================
    def on_topics_changed(self) -> None:
        """Groups subscribed to topics whose metadata changed compute their hash again at their
        next heartbeat (Kafka's onNewMetadataImage → requestMetadataRefresh)."""
        image = self.topics()
        for group in self.share_groups():
            if group.members and compute_metadata_hash(group.subscribed_topic_names, image) != group.metadata_hash:
                group.metadata_refresh = True

    # == ShareGroupDescribe ==============================================================================
    def describe(self, group_id: str):
        group = self.share_group(group_id)
        if group is None:
            message = (f"Group {group_id} is not a share group." if group_id in self.groups
                       else f"Group {group_id} not found.")
            return _Described(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), error_message=message, group_id=group_id)
        names = {t.topic_id: t.name for t in self.topics().values()}
        TP = ShareGroupDescribeResponse.TopicPartitions
        members = [_Described.Member(
            member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch, client_id=m.client_id,
            client_host=m.client_host, subscribed_topic_names=sorted(m.subscribed_topic_names),
            assignment=ShareGroupDescribeResponse.Assignment(topic_partitions=[
                TP(topic_id=t, topic_name=names[t], partitions=sorted(p))
                for t, p in sorted(m.assigned_partitions.items()) if t in names]))
            for m in group.members.values()]
        return _Described(error_code=0, group_id=group_id, group_state=group.state.value,
                          group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                          assignor_name=simple_assignor.NAME, members=members)
