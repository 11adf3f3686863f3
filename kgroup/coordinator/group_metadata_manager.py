"""Classic groups of one shard: rebalance mechanics, SyncGroup, Heartbeat, LeaveGroup, describe,
list, delete checks, timers, and the replay of GroupMetadata records.

Mirrors the classic-group half of Kafka's GroupMetadataManager. Every operation receives a
``Result`` (``res``) and adds records and replies to it; timer operations receive one too. The
JoinGroup handling lives in ``join.py`` (``JoinGroupMixin``), sharing the helpers here.

Where Kafka completes a future we reply to the token parked on the member. Where Kafka attaches
an append-future callback we register ``res.on_commit`` / ``res.on_abort``.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.describe_groups import DescribeGroupsResponse
from . import coordinator_records as rec
from .classic_group import ClassicGroup, ClassicGroupState as S
from .group import Group, GroupType
from .join import JoinGroupMixin
from .responses import join_member, join_response, sync_response
from .timer import heartbeat_key, initial_delay_key, join_key, pending_key, sync_key



class GroupMetadataManager(JoinGroupMixin):
    """The classic protocol over the shard's one group map (``groups``, shared with the other
    managers): ``classic_group(id)`` is a group of this type or None."""

    def __init__(self, config, timer, uuid_factory, groups: dict[str, Group]):
        self.config = config
        self.timer = timer
        self.uuid_factory = uuid_factory
        self.groups = groups
        self.loading = True
        self._expire_heartbeat = self.expire_heartbeat     # one bound method for every session timer

    def classic_group(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.get(group_id)
        return group if group is not None and group.type is GroupType.CLASSIC else None     # type: ignore[return-value]

    def classic_groups(self) -> list[ClassicGroup]:
        return [g for g in self.groups.values() if g.type is GroupType.CLASSIC]     # type: ignore[misc]

    @property
    def now(self) -> int:
        return self.timer.now

    # == replay ==================================================================================
    def replay_group_metadata(self, group_id: str, value) -> None:
        """GroupMetadata record. A tombstone removes the group. A value becomes the group's
        durable image; when the shard has no in-memory group (loading, or the first record of a
        group) the group is rebuilt from it, exactly Kafka's load path. A live group is already
        in the state the record describes (the record was produced from it), so only its durable
        image moves."""
        if value is None:
            if self.classic_group(group_id) is not None:
                del self.groups[group_id]
            return
        group = self.classic_group(group_id)
        if self.loading or group is None:
            self.groups[group_id] = ClassicGroup.from_record(group_id, value)
        else:
            group.record = value

    def ensure_simple_group(self, group_id: str) -> None:
        """An offset commit for a group that does not exist creates an empty "simple" group."""
        if group_id not in self.groups:
            self.groups[group_id] = ClassicGroup(group_id, self.now)

    def on_loaded(self, res) -> None:
        """Sessions restart for every loaded member; oversize groups rebalance (config change)."""
        self.loading = False
        for group in self.classic_groups():
            for member in group.members.values():
                self.reschedule_heartbeat(group, member)
            if len(group.members) > self.config.max_size:
                self.prepare_rebalance(group, res)

    def on_unloaded(self, res) -> None:
        """Partition emigration: every group goes Dead; parked requests get NOT_COORDINATOR."""
        for group in self.classic_groups():
            previous = group.state
            group.transition_to(S.DEAD, self.now)
            for member in group.members.values():
                if previous is S.PREPARING_REBALANCE:
                    self.complete_join(group, member, lambda v, m=member: join_response(
                        v, ErrorCode.NOT_COORDINATOR, member_id=m.member_id), res)
                elif previous in (S.COMPLETING_REBALANCE, S.STABLE):
                    self.complete_sync(member, lambda v: sync_response(v, ErrorCode.NOT_COORDINATOR), res)
        self.loading = True

    # == parked requests ===========================================================================
    def complete_join(self, group, member, build, res) -> bool:
        """Answer the member's parked JoinGroup with ``build(version)``."""
        parked = member.awaiting_join
        if parked is None:
            return False
        token, version = parked
        member.awaiting_join = None
        group.num_awaiting_join -= 1
        res.reply(token, build(version))
        return True

    @staticmethod
    def complete_sync(member, build, res) -> bool:
        parked = member.awaiting_sync
        if parked is None:
            return False
        token, version = parked
        member.awaiting_sync = None
        res.reply(token, build(version))
        return True

    def leader_members(self, group):
        return [join_member(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()]

    # == timers ===================================================================================
    def reschedule_heartbeat(self, group, member, timeout_ms=None) -> None:
        key = member.heartbeat_key
        if key is None:
            key = member.heartbeat_key = heartbeat_key(group.group_id, member.member_id)
        self.timer.schedule(key, member.session_timeout_ms if timeout_ms is None else timeout_ms,
                            self._expire_heartbeat, (group.group_id, member.member_id))

    def expire_heartbeat(self, group_id, member_id, res) -> None:
        group = self.classic_group(group_id)
        if group is None or group.state is S.DEAD:
            return
        if group.is_pending_member(member_id):
            self.remove_pending_member_and_update(group, member_id, res)
            return
        member = group.members.get(member_id)
        if member is not None and not member.has_satisfied_heartbeat():
            self.remove_member_and_update(group, member, res)

    def expire_pending_member(self, group_id, member_id, res) -> None:
        group = self.classic_group(group_id)
        if group is not None and group.state is not S.DEAD and group.is_pending_member(member_id):
            self.remove_pending_member_and_update(group, member_id, res)

    def remove_member_and_update(self, group, member, res) -> None:
        self.complete_join(group, member, lambda v: join_response(
            v, ErrorCode.UNKNOWN_MEMBER_ID, member_id=""), res)
        group.remove(member.member_id)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance_or_complete_join(group, res)
        elif group.state is S.PREPARING_REBALANCE and group.has_all_members_joined():
            self.complete_group_join(group, res)

    def remove_pending_member_and_update(self, group, member_id, res) -> None:
        group.remove(member_id)
        if group.state is S.PREPARING_REBALANCE and group.has_all_members_joined():
            self.complete_group_join(group, res)

    # == rebalance mechanics ======================================================================
    def maybe_prepare_rebalance_or_complete_join(self, group, res) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, res)
        else:
            self.maybe_complete_join_phase(group, res)

    def maybe_complete_join_phase(self, group, res) -> None:
        if (group.state is S.PREPARING_REBALANCE and group.previous_state is not S.EMPTY
                and group.has_all_members_joined()):
            self.complete_group_join(group, res)

    def prepare_rebalance(self, group, res) -> None:
        if group.state is S.COMPLETING_REBALANCE:
            self.reset_and_propagate_assignment_with_error(group, ErrorCode.REBALANCE_IN_PROGRESS, res)
        group.clear_pending_sync_members()
        self.timer.cancel(sync_key(group.group_id))
        initial = group.state is S.EMPTY
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            gid = group.group_id
            self.timer.schedule(initial_delay_key(gid), delay,
                                lambda r: self.try_complete_initial_rebalance(gid, delay, remaining, r))
        group.transition_to(S.PREPARING_REBALANCE, self.now)
        if not initial:
            self.maybe_complete_join_else_schedule(group, res)

    def maybe_complete_join_else_schedule(self, group, res) -> None:
        if group.has_all_members_joined():
            self.complete_group_join(group, res)
        else:
            gid = group.group_id
            self.timer.schedule(join_key(gid), group.rebalance_timeout_ms(),
                                lambda r: self.complete_group_join_by_id(gid, r))

    def try_complete_initial_rebalance(self, group_id, delay, remaining, res) -> None:
        """Delayed initial rebalance: each new joiner re-arms the delay, within the rebalance timeout."""
        group = self.classic_group(group_id)
        if group is None or group.state is not S.PREPARING_REBALANCE:
            return
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            new_remaining = max(remaining - delay, 0)
            self.timer.schedule(initial_delay_key(group_id), new_delay,
                                lambda r: self.try_complete_initial_rebalance(group_id, new_delay, new_remaining, r))
        else:
            self.complete_group_join(group, res)

    def complete_group_join_by_id(self, group_id, res) -> None:
        group = self.classic_group(group_id)
        if group is not None and group.state is S.PREPARING_REBALANCE:
            self.complete_group_join(group, res)

    def complete_group_join(self, group, res) -> None:
        """End of the join phase: drop dynamic members that did not rejoin, bump the generation,
        answer every parked JoinGroup (members only to the leader), await SyncGroups."""
        gid = group.group_id
        self.timer.cancel(join_key(gid))
        self.timer.cancel(initial_delay_key(gid))
        for failed in [m for m in group.not_yet_rejoined_members() if not m.is_static]:
            group.remove(failed.member_id)
            self.timer.cancel(heartbeat_key(gid, failed.member_id))
        if group.state is S.DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined (only static members are left): wait another rebalance timeout.
            self.timer.schedule(join_key(gid), group.rebalance_timeout_ms(),
                                lambda r: self.complete_group_join_by_id(gid, r))
            return
        group.init_next_generation(self.now)
        if group.state is S.EMPTY:
            res.add_record(rec.group_metadata_record(gid, group.to_record({})))
            return
        leader_members = self.leader_members(group)
        for member in list(group.members.values()):
            members = leader_members if group.is_leader(member.member_id) else []
            self.complete_join(group, member, lambda v, m=member, ms=members: join_response(
                v, member_id=m.member_id, generation_id=group.generation_id,
                protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                leader=group.leader_id, members=ms), res)
            self.reschedule_heartbeat(group, member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        generation = group.generation_id
        self.timer.schedule(sync_key(gid), group.rebalance_timeout_ms(),
                            lambda r: self.expire_pending_sync(gid, generation, r))

    def expire_pending_sync(self, group_id, generation_id, res) -> None:
        """Members that never sent SyncGroup are removed and the group rebalances."""
        group = self.classic_group(group_id)
        if group is None or generation_id != group.generation_id:
            return
        if group.state in (S.COMPLETING_REBALANCE, S.STABLE) and group.pending_sync_members:
            for mid in list(group.pending_sync_members):
                group.remove(mid)
                self.timer.cancel(heartbeat_key(group_id, mid))
            self.prepare_rebalance(group, res)

    def reset_and_propagate_assignment_with_error(self, group, error, res) -> None:
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error, res)

    def set_and_propagate_assignment(self, group, assignment, res) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self.propagate_assignment(group, ErrorCode.NONE, res)

    def propagate_assignment(self, group, error, res) -> None:
        ok = error == ErrorCode.NONE
        ptype = group.protocol_type if ok else None
        pname = group.protocol_name if ok else None
        for member in group.members.values():
            if self.complete_sync(member, lambda v, m=member: sync_response(
                    v, error, protocol_type=ptype, protocol_name=pname, assignment=m.assignment), res):
                self.reschedule_heartbeat(group, member)

    # == SyncGroup ================================================================================
    def sync_group(self, req, version, token, res) -> None:
        group = self.classic_group(req.group_id)
        if group is None or group.state is S.EMPTY:
            res.reply(token, sync_response(version, ErrorCode.UNKNOWN_MEMBER_ID))
            return
        error = self._validate_sync(group, req)
        mid = req.member_id
        if error is not None:
            res.reply(token, sync_response(version, error))
        elif group.state is S.PREPARING_REBALANCE:
            res.reply(token, sync_response(version, ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.state is S.COMPLETING_REBALANCE:
            group.members[mid].awaiting_sync = (token, version)
            self._remove_pending_sync_member(group, mid)
            if group.is_leader(mid):
                self._write_leader_assignment(group, req, res)
        elif group.state is S.STABLE:
            self._remove_pending_sync_member(group, mid)
            res.reply(token, sync_response(version, protocol_type=group.protocol_type,
                                           protocol_name=group.protocol_name,
                                           assignment=group.members[mid].assignment))

    def _write_leader_assignment(self, group: ClassicGroup, req, res) -> None:
        """Persist the leader's assignment; nobody is answered until the record is written."""
        assignment = {a.member_id: bytes(a.assignment) for a in req.assignments}
        for m in group.members:
            assignment.setdefault(m, b"")
        res.add_record(rec.group_metadata_record(group.group_id, group.to_record(assignment)))
        generation = req.generation_id

        def still_current():
            return (self.classic_group(group.group_id) is group and group.state is S.COMPLETING_REBALANCE
                    and generation == group.generation_id)

        def committed(r):
            if still_current():
                self.set_and_propagate_assignment(group, assignment, r)
                group.transition_to(S.STABLE, self.now)

        def aborted(r, error):
            if still_current():
                self.reset_and_propagate_assignment_with_error(group, error, r)
                # Kafka drops records this could produce; here it cannot: the leader is a member.
                self.maybe_prepare_rebalance_or_complete_join(group, r)

        res.on_commit(committed)
        res.on_abort(aborted)

    @staticmethod
    def _validate_sync(group, req):
        """Kafka's validateSyncGroup: the member checks Heartbeat makes too, then the protocol."""
        error = _validate_member_generation(group, req.member_id, req.group_instance_id, req.generation_id)
        if error is None and (_inconsistent(req.protocol_type, group.protocol_type)
                              or _inconsistent(req.protocol_name, group.protocol_name)):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return error

    def _remove_pending_sync_member(self, group, member_id) -> None:
        group.remove_pending_sync_member(member_id)
        if group.state in (S.COMPLETING_REBALANCE, S.STABLE):
            if not group.pending_sync_members:
                self.timer.cancel(sync_key(group.group_id))
        else:
            self.timer.cancel(sync_key(group.group_id))

    # == Heartbeat ================================================================================
    def heartbeat(self, req) -> ErrorCode:
        group = self.classic_group(req.group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        error = _validate_member_generation(group, req.member_id, req.group_instance_id, req.generation_id)
        if error is not None:
            return error
        if group.state is S.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.reschedule_heartbeat(group, group.members[req.member_id])
        if group.state is S.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # == LeaveGroup ===============================================================================
    def leave_group(self, group_id, members, res):
        """``members``: (member_id, group_instance_id, reason). Returns (top_error, [(member_id,
        group_instance_id, error)]); may add records (the join phase can complete to Empty)."""
        group = self.classic_group(group_id)
        if group is None:
            return ErrorCode.NONE, [(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i, _ in members]
        if group.state is S.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        out = []
        for member_id, instance_id, _reason in members:
            if member_id == "":
                if instance_id is not None and instance_id in group.static_members:
                    self._remove_current_member(group, group.static_members[instance_id], res)
                    out.append((member_id, instance_id, ErrorCode.NONE))
                else:
                    out.append((member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
            elif group.is_pending_member(member_id):
                group.remove(member_id)
                self.timer.cancel(pending_key(group_id, member_id))
                out.append((member_id, instance_id, ErrorCode.NONE))
            else:
                try:
                    group.validate_member(member_id, instance_id)
                except KafkaError as e:
                    out.append((member_id, instance_id, e.code))
                    continue
                self._remove_current_member(group, member_id, res)
                out.append((member_id, instance_id, ErrorCode.NONE))
        if any(e == ErrorCode.NONE for _, _, e in out):
            if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
                self.maybe_prepare_rebalance_or_complete_join(group, res)
            elif group.state is S.PREPARING_REBALANCE:
                self.maybe_complete_join_phase(group, res)
        return ErrorCode.NONE, out

    def _remove_current_member(self, group, member_id, res) -> None:
        member = group.members[member_id]
        self.timer.cancel(heartbeat_key(group.group_id, member_id))
        self.complete_join(group, member, lambda v: join_response(
            v, ErrorCode.UNKNOWN_MEMBER_ID, member_id=""), res)
        group.remove(member_id)

    # == DescribeGroups / ListGroups / DeleteGroups =================================================
    def describe_group(self, group_id: str):
        D = DescribeGroupsResponse.DescribedGroup
        M = D.DescribedGroupMember
        group = self.classic_group(group_id)
        if group is None:
            # Kafka's classicGroup(): a group of another type is not found either, with its own
            # message (the v6 answer carries it)
            message = f"Group {group_id} is not a classic group." if group_id in self.groups else None
            return D(group_id=group_id, group_state=str(S.DEAD), error_message=message)
        stable = group.state is S.STABLE
        members = [M(member_id=m.member_id, group_instance_id=m.group_instance_id,
                     client_id=m.client_id, client_host=m.client_host,
                     member_metadata=m.metadata(group.protocol_name) if stable else b"",
                     member_assignment=m.assignment) for m in group.members.values()]
        return D(group_id=group_id, group_state=str(group.state),
                 protocol_type=group.protocol_type or "",
                 protocol_data=group.protocol_name if stable else "", members=members)

    def delete_group(self, group, res) -> None:
        """Tombstone the group (its offsets are tombstoned by the offset manager first)."""
        group.create_group_tombstone_records(res.records)
        group.cancel_timers(self.timer)


def _validate_member_generation(group, member_id, group_instance_id, generation_id) -> ErrorCode | None:
    """What SyncGroup and Heartbeat both check first (Kafka's validateSyncGroup and
    validateClassicGroupHeartbeat): the group is not Dead, the member is known (and its static
    instance id matches), and the generation is the group's."""
    if group.state is S.DEAD:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    try:
        group.validate_member(member_id, group_instance_id)
    except KafkaError as e:
        return e.code
    if generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    return None


def _inconsistent(requested, current) -> bool:
    return requested is not None and current is not None and requested != current
