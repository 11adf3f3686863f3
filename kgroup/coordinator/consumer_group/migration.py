"""Online migration between the classic and the consumer group protocol (KIP-848), as Kafka 4.0's
GroupMetadataManager does it, pure.

- **Upgrade** (``upgrade``, Kafka's validateOnlineUpgrade + convertToConsumerGroup): a ConsumerGroupHeartbeat
  joining (epoch 0) a classic group with members that uses the embedded consumer protocol, when
  ``group.consumer.migration.policy`` allows it and the group fits ``group.consumer.max.size``. The
  records: the tombstone of the classic GroupMetadata, then the consumer group as Kafka's
  ConsumerGroup.fromClassicGroup builds it (every member at the classic generation, Stable, its
  target and current assignment the classic assignment, its JoinGroup data kept as
  ClassicMemberMetadata), then the joining member's own records. Parked JoinGroup/SyncGroup answers
  REBALANCE_IN_PROGRESS.
- **Classic members inside a consumer group** (``join`` / ``sync`` / ``heartbeat`` / ``leave``, Kafka's
  classicGroup*ToConsumerGroup): a JoinGroup is a member update computed like a heartbeat (target
  assignment, reconciliation with the owned partitions of its subscription) answered with the member
  epoch as generation; SyncGroup returns the member's current assignment; Heartbeat answers
  REBALANCE_IN_PROGRESS when the member is behind the group epoch, must revoke, or can now get
  partitions it was waiting for; the member's own session timeout, and its rebalance timeout as the
  join and sync deadlines (a member that does not rejoin or sync in time is fenced).
- **Downgrade** (``maybe_downgrade``, Kafka's validateOnlineDowngradeWithFencedMember +
  convertToClassicGroup): when the last consumer-protocol member leaves or is fenced and the others
  all use the classic protocol, the group's records are tombstoned and a GroupMetadata record writes
  the classic group (generation = group epoch, protocol by vote, each member's target assignment
  serialized at its subscription's version); after the write the classic group goes to
  PreparingRebalance so its members rejoin.

State still changes only by replaying records: the upgraded group a heartbeat computes against is
built by replaying the conversion records into a scratch map, so live and loaded agree.
"""
from __future__ import annotations

from ...protocol import consumer_protocol as cp
from ...protocol.consumer_protocol import ConsumerProtocolAssignment, decode_subscription
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.primitives import DecodeError
from .. import coordinator_records as classic_rec
from ..classic_group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, ClassicGroupMember, ClassicGroupState
from ..responses import join_response, sync_response
from . import group as group_model
from . import consumer_group_records as rec
from .current_assignment import reconcile
from .group import (ConsumerGroup, IllegalReplayState, assignment_state, group_deletion_records,
                    member_removal_records, preferred_assignor, subscription_metadata)
from ..timer import join_timeout_key, sync_timeout_key
from .member import ConsumerGroupMember, MemberState, freeze
from .target_assignment import build_target_assignment


# == the embedded consumer protocol ====================================================================

def decode_assignment(data: bytes, ids_by_name) -> dict[bytes, frozenset]:
    """A ConsumerProtocolAssignment as {topic id: partitions}; topics not in the metadata image
    are left out, as Kafka's toTopicPartitionMap does."""
    if not data:
        return {}
    a = cp.decode_assignment(data)
    out: dict = {}
    for tp in a.assigned_partitions:
        tid = ids_by_name.get(tp.topic)
        if tid is not None:
            out[tid] = out.get(tid, frozenset()) | frozenset(tp.partitions)
    return freeze(out)


def encode_assignment(assignment, names_by_id, metadata: bytes) -> bytes:
    """ConsumerProtocol.serializeAssignment at the version of the member's subscription (capped at
    the newest we know, as Kafka caps it); topics no longer in the image are left out."""
    version = cp.deserialize_version(metadata)
    A = ConsumerProtocolAssignment
    return A(assigned_partitions=[A.TopicPartition(topic=names_by_id[t], partitions=sorted(p))
                                  for t, p in sorted(assignment.items()) if t in names_by_id]
             ).to_versioned_bytes(version)


def _owned_from_subscription(sub, ids_by_name) -> list:
    """The owned partitions a classic member reports in its subscription (v1+), as topic ids."""
    out = []
    for tp in sub.owned_partitions or ():
        tid = ids_by_name.get(tp.topic)
        if tid is not None:
            out.append((tid, list(tp.partitions)))
    return out


def _classic_protocol_name(member: ConsumerGroupMember) -> str:
    """The protocol a classic member inside a consumer group is told: its first one (Kafka's
    supportedClassicProtocols().iterator().next())."""
    return member.classic[1][0][0]


def _classic_metadata(member: ConsumerGroupMember) -> bytes:
    return member.classic[1][0][1]


def supports_classic_protocols(group: ConsumerGroup, protocol_type, names) -> bool:
    """ConsumerGroup.supportsClassicProtocols: the consumer protocol type and a protocol every
    classic member of the group supports."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return False
    if not group.members:
        return bool(names)
    counts: dict = {}
    for m in group.members.values():
        if m.classic_member_metadata is not None:
            for n, _ in m.classic_member_metadata[1]:
                counts[n] = counts.get(n, 0) + 1
    return any(counts.get(n, 0) == group.classic_members for n in names)


def waiting_on_unreleased_partition(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """ConsumerGroup.waitingOnUnreleasedPartition: a target partition still owned by someone else."""
    if member.state is not MemberState.UNRELEASED_PARTITIONS:
        return False
    for topic_id, parts in group.target_assignment.get(member.member_id, {}).items():
        have = member.assigned_partitions.get(topic_id, frozenset())
        for p in parts:
            if p not in have and group.current_partition_epoch(topic_id, p) != -1:
                return True
    return False


def _replayed(group_id: str, records) -> ConsumerGroup | None:
    """The consumer group ``records`` describe, built by replay into a scratch map."""
    scratch: dict = {}
    for r in records:
        if r.record_type in rec.RECORD_TYPES:
            group_model.replay(scratch, r)
    return scratch.get(group_id)


class Migration:
    """Both directions of online migration plus the classic protocol inside consumer groups, for one
    shard: ``classic`` is its GroupMetadataManager, ``consumer`` its ConsumerGroupManager."""

    def __init__(self, config, timer, uuid_factory, classic, consumer):
        self.config = config
        self.timer = timer
        self.uuid_factory = uuid_factory
        self.classic = classic
        self.consumer = consumer

    def _image(self):
        image = self.consumer.topics()
        return image, {t.name: t.topic_id for t in image.values()}, {t.topic_id: t.name for t in image.values()}

    # == upgrade: classic -> consumer ==================================================================
    def validate_online_upgrade(self, group: ClassicGroup) -> bool:
        """Kafka's validateOnlineUpgrade."""
        return (self.config.upgrade_enabled and group.uses_consumer_protocol()
                and len(group.members) <= self.config.consumer_max_size)

    def upgrade(self, group_id: str, res) -> ConsumerGroup | None:
        """Convert the classic group ``group_id`` for a joining ConsumerGroupHeartbeat: adds the
        conversion records to ``res`` and returns the consumer group they describe, or None when
        the policy, the protocol type or the size refuse it. KafkaError when a member's embedded
        consumer protocol does not decode."""
        classic = self.classic.classic_group(group_id)
        if classic is None or not classic.members or not self.validate_online_upgrade(classic):
            return None
        records = [classic_rec.group_metadata_tombstone(group_id)]
        try:
            records += self._consumer_group_records(classic)
            group = _replayed(group_id, records)
        except (DecodeError, ValueError, IllegalReplayState) as e:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND,
                             f"Cannot upgrade the classic group {group_id} to consumer group because the "
                             f"embedded consumer protocol is malformed: {e}.") from None
        assert group is not None        # the conversion records always hold the group's epoch
        # Members parked in a rebalance rejoin the new group (completeAllJoin/SyncFutures)
        for m in classic.members.values():
            self.classic.complete_join(classic, m, lambda v, m=m: join_response(
                v, ErrorCode.REBALANCE_IN_PROGRESS, member_id=m.member_id), res)
            self.classic.complete_sync(m, lambda v: sync_response(v, ErrorCode.REBALANCE_IN_PROGRESS), res)
        for r in records:
            res.add_record(r)
        # Session timeouts of the converted members (their own); the classic timers go once the
        # conversion is written (if it is not, the group stays classic and they still apply).
        for m in group.members.values():
            self.consumer._schedule_session(group_id, m.member_id, m.classic[0])

        def committed(r):
            if self.classic.classic_group(group_id) is not classic:     # the tombstone was replayed
                classic.cancel_timers(self.timer)
        res.on_commit(committed)
        return group

    def _consumer_group_records(self, classic: ClassicGroup) -> list:
        """ConsumerGroup.fromClassicGroup + createConsumerGroupRecords."""
        gid, generation = classic.group_id, classic.generation_id
        if classic.protocol_name is None:
            raise ValueError("the group has no protocol yet")
        _image, ids_by_name, _names = self._image()
        members = []
        for cm in classic.members.values():
            sub = decode_subscription(cm.metadata(classic.protocol_name))
            assigned = decode_assignment(cm.assignment, ids_by_name)
            members.append(ConsumerGroupMember(
                cm.member_id, member_epoch=generation, previous_member_epoch=generation, state=MemberState.STABLE,
                instance_id=cm.group_instance_id, rack_id=sub.rack_id, rebalance_timeout_ms=cm.rebalance_timeout_ms,
                client_id=cm.client_id, client_host=cm.client_host, subscribed_topic_names=frozenset(sub.topics),
                assigned_partitions=assigned,
                classic_member_metadata=(cm.session_timeout_ms, tuple((n, bytes(md)) for n, md in cm.protocols))))
        out = [rec.member_subscription_record(gid, m) for m in members]
        out.append(rec.group_epoch_record(gid, generation))
        out += [rec.target_assignment_record(gid, m.member_id, m.assigned_partitions) for m in members]
        out.append(rec.target_assignment_epoch_record(gid, generation))
        out += [rec.current_assignment_record(gid, m) for m in members]
        return out

    # == downgrade: consumer -> classic ================================================================
    def validate_online_downgrade(self, group: ConsumerGroup, leaving: ConsumerGroupMember) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember."""
        if leaving.classic_member_metadata is not None or group.classic_members != len(group.members) - 1:
            return False
        if len(group.members) <= 1:
            return False
        if not self.config.downgrade_enabled:
            return False
        return len(group.members) - 1 <= self.config.max_size

    def maybe_downgrade(self, group: ConsumerGroup, leaving: ConsumerGroupMember, res) -> bool:
        """``leaving`` (the last consumer-protocol member) leaves or is fenced: convert the group
        back to a classic one if allowed. True when the conversion records were added."""
        if not self.validate_online_downgrade(group, leaving):
            return False
        try:
            value, protocols = self._classic_group_value(group, leaving.member_id)
        except (DecodeError, ValueError):
            return False    # an embedded protocol that does not parse: the group stays a consumer group
        gid = group.group_id
        for r in group_deletion_records(group):
            res.add_record(r)
        for member_id in group.members:
            self.consumer._cancel_member_timers(gid, member_id)
        self._write_classic_group(gid, value, protocols, res, rebalance=True)
        return True

    def _classic_group_value(self, group: ConsumerGroup, leaving_id: str, joining: ConsumerGroupMember | None = None):
        """ClassicGroup.fromConsumerGroup + createClassicGroupRecords: the GroupMetadataValue and
        every member's JoinGroup protocols. ``joining`` replaces ``leaving_id`` (a static member
        rejoining with the classic protocol) and takes over its target assignment."""
        now = self.timer.now
        classic = ClassicGroup(group.group_id, now, ClassicGroupState.EMPTY, group.group_epoch,
                               CONSUMER_PROTOCOL_TYPE, None, None, now)
        protocols = {}
        others = [m for mid, m in group.members.items() if mid != leaving_id]
        for m in others + ([joining] if joining is not None else []):
            session, protos = m.classic
            classic.add(ClassicGroupMember(m.member_id, m.instance_id, m.client_id, m.client_host,
                                           m.rebalance_timeout_ms, session, CONSUMER_PROTOCOL_TYPE, list(protos)))
            protocols[m.member_id] = list(protos)
        classic.protocol_name = classic.select_protocol()
        _image, _ids, names_by_id = self._image()
        assignment = {}
        for mid, cm in classic.members.items():
            source = leaving_id if joining is not None and mid == joining.member_id else mid
            assignment[mid] = encode_assignment(group.target_assignment.get(source, {}), names_by_id,
                                                cm.metadata(classic.protocol_name))
        return classic.to_record(assignment), protocols

    def _write_classic_group(self, gid: str, value, protocols, res, rebalance: bool) -> None:
        """The GroupMetadata record of a downgraded group; once written, the in-memory classic group
        keeps every protocol its members joined with (the record carries only the chosen one),
        their sessions start, and (after a leave) it rebalances so they rejoin."""
        res.add_record(classic_rec.group_metadata_record(gid, value))

        def committed(r):
            classic = self.classic.classic_group(gid)
            if classic is None:
                return
            for mid, member in classic.members.items():
                classic.update_member(member, protocols[mid], member.rebalance_timeout_ms,
                                      member.session_timeout_ms, None)
                self.classic.reschedule_heartbeat(classic, member)
            if rebalance:
                self.classic.prepare_rebalance(classic, r)
        res.on_commit(committed)

    def _static_replacement_downgrade(self, group: ConsumerGroup, replaced: ConsumerGroupMember,
                                      joining: ConsumerGroupMember):
        """validateOnlineDowngradeWithReplacedMemberId + convertToClassicGroup: the last
        consumer-protocol member was a static member and a classic member takes over its instance
        id. The group becomes classic at once, Stable, the joiner with the replaced member's target.
        Returns (tombstones, GroupMetadataValue, protocols), or None when it stays a consumer group."""
        if replaced.classic_member_metadata is not None or group.classic_members != len(group.members) - 1:
            return None
        if not self.config.downgrade_enabled or len(group.members) > self.config.max_size:
            return None
        try:
            value, protocols = self._classic_group_value(group, replaced.member_id, joining)
        except (DecodeError, ValueError):
            return None
        gid = group.group_id
        # createGroupTombstoneRecordsWithReplacedMember (the joiner's records came first in this
        # batch), then the topic metadata and the group epoch, so nothing of the group is left
        ids = [joining.member_id if m == replaced.member_id else m for m in group.members]
        records = [rec.current_assignment_tombstone(gid, m) for m in ids]
        records += [rec.target_assignment_tombstone(gid, m) for m in ids]
        records.append(rec.target_assignment_epoch_tombstone(gid))
        records += [rec.member_subscription_tombstone(gid, m) for m in ids]
        records.append(rec.subscription_metadata_tombstone(gid))
        records.append(rec.group_epoch_tombstone(gid))
        for member_id in group.members:
            self.consumer._cancel_member_timers(gid, member_id)
        return records, value, protocols

    # == classic members inside a consumer group =======================================================
    def _validate_classic_member(self, group: ConsumerGroup, req) -> ConsumerGroupMember:
        """What SyncGroup and Heartbeat both check first (Kafka's validateConsumerGroupMember,
        throwIfMemberDoesNotUseClassicProtocol and throwIfGenerationIdUnmatched): the member is
        known (UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID), uses the classic protocol
        (UNKNOWN_MEMBER_ID), and its generation is its member epoch (ILLEGAL_GENERATION)."""
        m = self._member(group, req.member_id, req.group_instance_id)
        self._classic_only(m)
        if m.member_epoch != req.generation_id:
            raise KafkaError(ErrorCode.ILLEGAL_GENERATION,
                             f"The request generation id {req.generation_id} is not equal to the member epoch "
                             f"{m.member_epoch} of member {m.member_id}.")
        return m

    @staticmethod
    def _member(group: ConsumerGroup, member_id: str, instance_id) -> ConsumerGroupMember:
        """Kafka's validateConsumerGroupMember: UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID."""
        if instance_id is None:
            m = group.members.get(member_id)
            if m is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
            return m
        sid = group.static_member_id(instance_id)
        m = group.members.get(sid) if sid is not None else None
        if m is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member with instance id {instance_id} is not a member "
                                                          f"of group {group.group_id}.")
        if m.member_id != member_id:
            raise KafkaError(ErrorCode.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id "
                                                           f"{instance_id} was fenced by member {m.member_id}.")
        return m

    @staticmethod
    def _classic_only(m: ConsumerGroupMember) -> None:
        if m.classic_member_metadata is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {m.member_id} does not use the classic protocol.")

    def _schedule_join_timeout_if_absent(self, group_id: str, m: ConsumerGroupMember) -> None:
        key = join_timeout_key(group_id, m.member_id)
        if self.timer.deadline(key) is None:
            self.timer.schedule(key, max(m.rebalance_timeout_ms, 0),
                                lambda r, g=group_id, mid=m.member_id: self._fence(g, mid, r))

    def _fence(self, group_id: str, member_id: str, res) -> None:
        """consumerGroupFenceMemberOperation: the classic member did not rejoin or sync in time."""
        group = self.consumer.consumer_group(group_id)
        m = group.members.get(member_id) if group is not None else None
        if m is not None:
            self.consumer._remove_member(group, m, res)

    # -- JoinGroup ------------------------------------------------------------------------------------
    def join(self, group: ConsumerGroup, req, version: int, token, client_id: str, client_host: str, res) -> None:
        """classicGroupJoinToConsumerGroup; errors answer the JoinGroup."""
        try:
            self._join(group, req, version, token, client_id, client_host, res)
        except KafkaError as e:
            del res.records[:]
            res.reply(token, join_response(version, e.code, member_id=req.member_id))

    def _join(self, group, req, version, token, client_id, client_host, res) -> None:
        gid, instance_id = group.group_id, req.group_instance_id
        member_id = req.member_id
        unknown = member_id == ""
        if unknown:
            member_id = self.uuid_factory()
        if member_id not in group.members and len(group.members) >= self.config.consumer_max_size:
            raise KafkaError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The consumer group has reached its maximum capacity of "
                             f"{self.config.consumer_max_size} members.")
        protocols = tuple((p.name, bytes(p.metadata)) for p in req.protocols)
        if not supports_classic_protocols(group, req.protocol_type, {n for n, _ in protocols}):
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                             f"Member {member_id}'s protocols are not supported.")
        if unknown and instance_id is None and version >= 4:
            # KIP-394: a dynamic member first gets its id
            res.reply(token, join_response(version, ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id))
            return

        records = []
        replaced = None
        if instance_id is None:
            member = group.members.get(member_id) or ConsumerGroupMember(member_id)
        else:
            sid = group.static_member_id(instance_id)
            static = group.members.get(sid) if sid is not None else None
            if unknown:
                if static is None:
                    member = ConsumerGroupMember(member_id)
                else:
                    # replaceMember: the new member id takes over the old one's assignment
                    replaced = static
                    member = static.replace(member_id=member_id, member_epoch=0, previous_member_epoch=0)
                    records += member_removal_records(gid, static.member_id)
                    records.append(rec.member_subscription_record(gid, member))
                    records.append(rec.target_assignment_record(gid, member_id,
                                                                group.target_assignment.get(static.member_id, {})))
                    records.append(rec.current_assignment_record(gid, member))
            else:
                if static is None:
                    raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                if static.member_id != member_id:
                    raise KafkaError(ErrorCode.FENCED_INSTANCE_ID,
                                     f"Static member {member_id} with instance id {instance_id} was fenced by "
                                     f"member {static.member_id}.")
                member = static
        try:
            sub = decode_subscription(protocols[0][1])
        except (DecodeError, ValueError, IndexError):
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             "Malformed embedded consumer protocol in subscription deserialization.") from None

        changes = {"client_id": client_id, "client_host": client_host,
                   "subscribed_topic_names": frozenset(sub.topics),
                   "classic_member_metadata": (req.session_timeout_ms, protocols)}
        if instance_id is not None:
            changes["instance_id"] = instance_id
        if sub.rack_id is not None:
            changes["rack_id"] = sub.rack_id
        if req.rebalance_timeout_ms != -1:
            changes["rebalance_timeout_ms"] = req.rebalance_timeout_ms
        updated = member.replace(**changes)

        # 1. the member, the subscribed topics' metadata, the group epoch
        bump = False
        if updated != member or (replaced is None and member_id not in group.members):
            records.append(rec.member_subscription_record(gid, updated))
            bump = updated.subscribed_topic_names != member.subscribed_topic_names or \
                updated.subscribed_topic_regex != member.subscribed_topic_regex
        members = dict(group.members)
        if replaced is not None:
            members.pop(replaced.member_id, None)
        members[member_id] = updated
        image, ids_by_name, _names = self._image()
        metadata = subscription_metadata(members.values(), image, group.resolved_regexes)
        if metadata != group.subscription_metadata:
            records.append(rec.subscription_metadata_record(gid, metadata))
            bump = True
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append(rec.group_epoch_record(gid, group_epoch))

        # 2. the target assignment
        if group_epoch > group.assignment_epoch:
            upd: dict = {member_id: updated}
            if replaced is not None:
                upd[replaced.member_id] = None
            assignor = preferred_assignor(members.values(), self.consumer.default_assignor)
            target_records, targets = build_target_assignment(group, group_epoch, assignor, metadata, upd)
            records += target_records
            target, target_epoch = targets.get(member_id, {}), group_epoch
        else:
            source = replaced.member_id if replaced is not None else member_id
            target, target_epoch = group.target_assignment.get(source, {}), group.assignment_epoch

        # 3. reconciliation against what the member's subscription says it owns
        def partition_epoch(topic_id, p):
            if replaced is not None and p in replaced.assigned_partitions.get(topic_id, ()):
                return -1       # the replaced member's, handed over by the records above
            return group.current_partition_epoch(topic_id, p)
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            reconciled = reconcile(updated, target_epoch, target, partition_epoch,
                                   _owned_from_subscription(sub, ids_by_name))
        if assignment_state(reconciled) != assignment_state(updated) or \
                (replaced is None and member_id not in group.members):
            records.append(rec.current_assignment_record(gid, reconciled))
        # 4. the last consumer-protocol member was the static member this one replaces: downgrade
        downgrade = self._static_replacement_downgrade(group, replaced, reconciled) if replaced is not None else None
        if downgrade is not None:
            records += downgrade[0]
        for r in records:
            res.add_record(r)
        if downgrade is not None:
            self._write_classic_group(gid, downgrade[1], downgrade[2], res, rebalance=False)

        response = join_response(version, member_id=member_id, generation_id=reconciled.member_epoch,
                                 protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=protocols[0][0])
        res.reply(token, response, lambda e: join_response(version, e, member_id=req.member_id))
        session, rebalance = req.session_timeout_ms, req.rebalance_timeout_ms

        if downgrade is not None:
            return      # the classic group's own timers apply from now on

        def committed(r):
            # the member must now sync within its rebalance timeout; its session is its own
            self.timer.cancel(join_timeout_key(gid, member_id))
            if replaced is not None:
                self.consumer._cancel_member_timers(gid, replaced.member_id)
            self.consumer._schedule_session(gid, member_id, session)
            self.timer.schedule(sync_timeout_key(gid, member_id), max(rebalance, 0),
                                lambda r2: self._fence(gid, member_id, r2))
        res.on_commit(committed)

    # -- SyncGroup ------------------------------------------------------------------------------------
    def sync(self, group: ConsumerGroup, req, version: int, token, res) -> None:
        """classicGroupSyncToConsumerGroup: the member's current assignment, in the consumer
        protocol at its subscription's version."""
        try:
            m = self._validate_classic_member(group, req)
            name = _classic_protocol_name(m)
            if req.protocol_type is not None and req.protocol_type != CONSUMER_PROTOCOL_TYPE:
                raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                 f"The protocol type {req.protocol_type} from member {m.member_id} request is not "
                                 f"equal to the group protocol type {CONSUMER_PROTOCOL_TYPE}.")
            if req.protocol_name is not None and req.protocol_name != name:
                raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                 f"The protocol name {req.protocol_name} from member {m.member_id} request is not "
                                 f"equal to the protocol name {name} returned in the join response.")
            self._throw_if_rebalance_in_progress(group, m)
        except KafkaError as e:
            res.reply(token, sync_response(version, e.code))
            return
        gid = group.group_id
        self.timer.cancel(sync_timeout_key(gid, m.member_id))
        self.consumer._schedule_session(gid, m.member_id, m.classic[0])
        _image, _ids, names_by_id = self._image()
        res.reply(token, sync_response(version, protocol_type=req.protocol_type, protocol_name=req.protocol_name,
                                       assignment=encode_assignment(m.assigned_partitions, names_by_id,
                                                                    _classic_metadata(m))))

    def _throw_if_rebalance_in_progress(self, group: ConsumerGroup, m: ConsumerGroupMember) -> None:
        """A member behind the group epoch rejoins first, unless it is revoking (its next join
        finishes that)."""
        if group.group_epoch > m.member_epoch and m.state is not MemberState.UNREVOKED_PARTITIONS:
            self._schedule_join_timeout_if_absent(group.group_id, m)
            raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS,
                             f"A new rebalance is triggered in group {group.group_id} and member {m.member_id} "
                             f"should rejoin to catch up.")

    # -- Heartbeat ------------------------------------------------------------------------------------
    def heartbeat(self, group: ConsumerGroup, req) -> ErrorCode:
        """classicGroupHeartbeatToConsumerGroup."""
        try:
            m = self._validate_classic_member(group, req)
        except KafkaError as e:
            return e.code
        gid = group.group_id
        self.consumer._schedule_session(gid, m.member_id, m.classic[0])
        # rejoin when the group epoch moved on, when it must revoke, or when partitions it waits
        # for are free now
        if m.member_epoch < group.group_epoch or m.state is MemberState.UNREVOKED_PARTITIONS or \
                (m.state is MemberState.UNRELEASED_PARTITIONS and not waiting_on_unreleased_partition(group, m)):
            self._schedule_join_timeout_if_absent(gid, m)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # -- LeaveGroup -----------------------------------------------------------------------------------
    def leave(self, group: ConsumerGroup, members, res) -> list:
        """classicGroupLeaveToConsumerGroup; ``members``: (member_id, instance_id, reason).
        Returns [(member_id, instance_id, error)]."""
        gid = group.group_id
        out, leaving = [], []
        for member_id, instance_id, _reason in members:
            try:
                if instance_id is None:
                    m = group.members.get(member_id)
                    if m is None:
                        raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
                    self._classic_only(m)
                else:
                    sid = group.static_member_id(instance_id)
                    m = group.members.get(sid) if sid is not None else None
                    if m is None:
                        raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
                    # the admin client removes static members by instance id alone
                    if member_id != "" and m.member_id != member_id:
                        raise KafkaError(ErrorCode.FENCED_INSTANCE_ID)
                    self._classic_only(m)
                    member_id = m.member_id
            except KafkaError as e:
                out.append((member_id, instance_id, e.code))
                continue
            for r in member_removal_records(gid, m.member_id):
                res.add_record(r)
            self.consumer._cancel_member_timers(gid, m.member_id)
            leaving.append(m)
            out.append((member_id, instance_id, ErrorCode.NONE))
        if leaving:
            gone = {m.member_id for m in leaving}
            rest = [m for mid, m in group.members.items() if mid not in gone]
            metadata = subscription_metadata(rest, self.consumer.topics(), group.resolved_regexes)
            if metadata != group.subscription_metadata:
                res.add_record(rec.subscription_metadata_record(gid, metadata))
            res.add_record(rec.group_epoch_record(gid, group.group_epoch + 1))
        return out
