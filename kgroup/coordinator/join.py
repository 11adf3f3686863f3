# mypy: disable-error-code="attr-defined"
# (JoinGroupMixin reaches the GroupMetadataManager it is mixed into: mypy sees the mixin alone)
"""JoinGroup for classic groups (Kafka's classicGroupJoinToClassicGroup and friends).

Paths, as in Kafka:
- unknown group + known member id -> UNKNOWN_MEMBER_ID; unknown group + empty member id creates
  the group in memory and, if nothing else is written, an "empty group" GroupMetadata record
  (generation 0) is written so the creation is durable; if that write fails the group is removed
  again and the joiner gets the mapped error;
- group.max.size reached -> GROUP_MAX_SIZE_REACHED (in PreparingRebalance the count is of parked
  joiners, so a rejoining member that is not parked yet can be turned away);
- new dynamic member, v4+ -> a pending member with id ``clientId-UUID`` and MEMBER_ID_REQUIRED; it
  expires after its session timeout unless it rejoins with that id (KIP-394);
- new member otherwise -> added (``is_new``: it may expire even while parked, after
  ``new_member_join_timeout_ms``), then rebalance or complete the join phase;
- new static member whose instance id is known -> the old member id is replaced and fenced; in
  Stable, if the vote would not change the protocol, the group is rewritten without a rebalance
  and the new id gets the old assignment (KIP-345);
- existing member -> per state: PreparingRebalance parks it; CompletingRebalance answers again
  with the current generation if its protocols are unchanged, else rebalances; Stable rebalances
  on a leader join or changed protocols, otherwise answers with the current generation.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError
from . import coordinator_records as rec
from .classic_group import ClassicGroup, ClassicGroupMember, ClassicGroupState as S
from .group import GroupType
from .responses import join_response, sync_response
from .timer import heartbeat_key, pending_key

REQUIRES_KNOWN_MEMBER_ID_VERSION = 4     # KIP-394
SUPPORTS_SKIPPING_ASSIGNMENT_VERSION = 9  # KIP-814


class JoinGroupMixin:
    """Mixed into GroupMetadataManager; uses its helpers (timers, rebalance mechanics)."""

    def join_group(self, req, version, token, client_id, client_host, res) -> None:
        gid, member_id = req.group_id, req.member_id
        unknown_member = member_id == ""
        group = self.classic_group(gid)
        is_new_group = group is None
        replaced = None
        if is_new_group:
            # Kafka's getOrMaybeCreateClassicGroup: a share group of that id is not a classic group
            # (an empty consumer group is converted, its tombstones already in ``res``)
            if not unknown_member or self._is_share_group(gid):
                res.reply(token, join_response(version, ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
                return
            group = ClassicGroup(gid, self.now)
            # an empty group of another type being converted (its tombstones are in ``res``)
            replaced = self.groups.get(gid)
            self.groups[gid] = group
        records_before = len(res.records)
        replies_before = res.reply_count()

        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            res.reply(token, join_response(version, ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=""))
        elif unknown_member:
            self._join_new_member(group, req, version, token, client_id, client_host, res)
        else:
            self._join_existing_member(group, req, version, token, client_id, client_host, res)

        if is_new_group and len(res.records) == records_before:
            self._write_new_group(group, version, token, replies_before, res, replaced)

    def _is_share_group(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and group.type is GroupType.SHARE

    def _write_new_group(self, group, version, token, replies_before, res, replaced=None) -> None:
        """Make the group's creation durable; on a failed write forget the group again and turn
        the joiner's answer (immediate or parked) into the write error."""
        res.add_record(rec.group_metadata_record(group.group_id, group.empty_record()))
        res.set_failure(token, lambda e: join_response(version, e), start=replies_before)

        def aborted(r, error):
            if self.groups.get(group.group_id) is group:
                if replaced is None:
                    del self.groups[group.group_id]
                else:
                    self.groups[group.group_id] = replaced
            group.cancel_timers(self.timer)
            for member in group.members.values():
                if member.awaiting_join is not None:
                    tok, ver = member.awaiting_join
                    member.awaiting_join = None
                    r.reply(tok, join_response(ver, error))
        res.on_abort(aborted)

    def _accept_joining_member(self, group, member_id) -> bool:
        max_size = self.config.max_size
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.state is S.PREPARING_REBALANCE:
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join is not None) or \
                group.num_awaiting_join < max_size
        return member_id in group.members or len(group.members) < max_size

    # -- new members -------------------------------------------------------------------------------
    def _join_new_member(self, group, req, version, token, client_id, client_host, res) -> None:
        if group.state is S.DEAD:
            res.reply(token, join_response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, {p.name for p in req.protocols}):
            res.reply(token, join_response(version, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        instance_id = req.group_instance_id
        new_member_id = f"{instance_id if instance_id is not None else client_id}-{self.uuid_factory()}"
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is not None:
                self._update_static_member(group, req, version, token, existing, new_member_id, res)
            else:
                self._add_member(group, req, version, token, new_member_id, client_id, client_host, res)
        elif version >= REQUIRES_KNOWN_MEMBER_ID_VERSION:
            group.add_pending_member(new_member_id)
            gid = group.group_id
            self.timer.schedule(pending_key(gid, new_member_id), req.session_timeout_ms,
                                lambda r: self.expire_pending_member(gid, new_member_id, r))
            res.reply(token, join_response(version, ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id))
        else:
            self._add_member(group, req, version, token, new_member_id, client_id, client_host, res)

    def _add_member(self, group, req, version, token, member_id, client_id, client_host, res) -> None:
        member = ClassicGroupMember(member_id, req.group_instance_id, client_id, client_host,
                                    req.rebalance_timeout_ms, req.session_timeout_ms, req.protocol_type,
                                    [(p.name, bytes(p.metadata)) for p in req.protocols])
        member.is_new = True
        if group.state is S.PREPARING_REBALANCE and group.previous_state is S.EMPTY:
            group.new_member_added = True   # lets the initial rebalance delay be extended
        group.add(member, (token, version))
        # A parked new member cannot heartbeat; expire it if it never completes the join.
        self.reschedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self.maybe_prepare_rebalance_or_complete_join(group, res)

    # -- existing members --------------------------------------------------------------------------
    def _join_existing_member(self, group, req, version, token, client_id, client_host, res) -> None:
        member_id = req.member_id
        if group.state is S.DEAD:
            res.reply(token, join_response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id))
            return
        if not group.supports_protocols(req.protocol_type, {p.name for p in req.protocols}):
            res.reply(token, join_response(version, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:
                # Kafka throws IllegalStateException here: the request fails as an unknown error.
                res.reply(token, join_response(version, ErrorCode.UNKNOWN_SERVER_ERROR, member_id=member_id))
                return
            self.timer.cancel(pending_key(group.group_id, member_id))
            self._add_member(group, req, version, token, member_id, client_id, client_host, res)
            return
        try:
            group.validate_member(member_id, req.group_instance_id)
        except KafkaError as e:
            res.reply(token, join_response(version, e.code, member_id=member_id))
            return
        member = group.members[member_id]
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        if group.state is S.PREPARING_REBALANCE:
            self._update_member_then_rebalance(group, member, req, protocols, version, token, res)
        elif group.state is S.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # It probably missed the JoinGroup response: answer again for this generation.
                res.reply(token, self._current_generation_response(
                    group, member_id, version, with_members=group.is_leader(member_id)))
            else:
                self._update_member_then_rebalance(group, member, req, protocols, version, token, res)
        elif group.state is S.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                self._update_member_then_rebalance(group, member, req, protocols, version, token, res)
            else:
                res.reply(token, self._current_generation_response(group, member_id, version, with_members=False))
        else:
            res.reply(token, join_response(version, ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _current_generation_response(self, group, member_id, version, with_members):
        return join_response(version, member_id=member_id, generation_id=group.generation_id,
                             protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                             leader=group.leader_id,
                             members=self.leader_members(group) if with_members else [])

    def _update_member_then_rebalance(self, group, member, req, protocols, version, token, res) -> None:
        group.update_member(member, protocols, req.rebalance_timeout_ms, req.session_timeout_ms,
                            (token, version))
        self.maybe_prepare_rebalance_or_complete_join(group, res)

    # -- static members ----------------------------------------------------------------------------
    def _update_static_member(self, group, req, version, token, old_id, new_id, res) -> None:
        """A known group.instance.id joined with an unknown member id: replace the old id."""
        instance_id = req.group_instance_id
        current_leader = group.leader_id
        new_member, fenced = group.replace_static_member(instance_id, old_id, new_id)
        for kind, (tok, ver) in fenced:
            if kind == "join":
                res.reply(tok, join_response(ver, ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
            else:
                res.reply(tok, sync_response(ver, ErrorCode.FENCED_INSTANCE_ID))
        self.timer.cancel(heartbeat_key(group.group_id, old_id))
        self.reschedule_heartbeat(group, new_member)
        old_rebalance, old_session = new_member.rebalance_timeout_ms, new_member.session_timeout_ms
        old_protocols = list(new_member.protocols)
        group.update_member(new_member, [(p.name, bytes(p.metadata)) for p in req.protocols],
                            req.rebalance_timeout_ms, req.session_timeout_ms, (token, version))

        if group.state is S.STABLE:
            if group.protocol_name == group.select_protocol():
                # Same protocol: persist the new member id, no rebalance; the new id takes over
                # the old assignment.
                res.add_record(rec.group_metadata_record(group.group_id,
                                                         group.to_record(group.group_assignment())))

                def committed(r):
                    if version >= SUPPORTS_SKIPPING_ASSIGNMENT_VERSION:
                        is_leader = group.is_leader(new_id)
                        self.complete_join(group, new_member, lambda v: join_response(
                            v, member_id=new_id, generation_id=group.generation_id,
                            protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                            leader=group.leader_id, skip_assignment=is_leader,
                            members=self.leader_members(group) if is_leader else []), r)
                    else:
                        self.complete_join(group, new_member, lambda v: join_response(
                            v, member_id=new_id, generation_id=group.generation_id,
                            protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                            leader=current_leader), r)

                def aborted(r, error):
                    # The write failed: put the old member id back.
                    group.update_member(new_member, old_protocols, old_rebalance, old_session, None)
                    old_member, _ = group.replace_static_member(instance_id, new_id, old_id)
                    self.timer.cancel(heartbeat_key(group.group_id, new_id))
                    self.reschedule_heartbeat(group, old_member)
                    r.reply(token, join_response(version, error, member_id="",
                                                 generation_id=group.generation_id,
                                                 protocol_type=group.protocol_type,
                                                 protocol_name=group.protocol_name, leader=current_leader))

                res.on_commit(committed)
                res.on_abort(aborted)
            else:
                self.maybe_prepare_rebalance_or_complete_join(group, res)
        elif group.state is S.COMPLETING_REBALANCE:
            # The leader may already be assigning to the old id: rebalance.
            self.prepare_rebalance(group, res)
        elif group.state is S.PREPARING_REBALANCE:
            self.maybe_complete_join_phase(group, res)
        else:
            raise RuntimeError(f"Group {group.group_id} was not supposed to be in state {group.state} "
                               f"when the known static member {instance_id} rejoins.")
