"""Consumer-protocol groups of one shard (the KIP-848 half of Kafka's GroupMetadataManager):
ConsumerGroupHeartbeat, ConsumerGroupDescribe, session and rebalance timeouts, and the epoch bump
when the topics a group subscribes to change.

Like the classic half, every operation adds records and replies to a ``Result``; the groups change
only when the shard replays those records (``group.replay``). So an operation computes the
member's next state and the target assignment from the replayed state plus its own changes, and
writes them as records, in Kafka's order:

    member subscription (5), regex resolutions (16), topic metadata (4), group epoch (3)
                                                                        when they change
    target of every changed member (7), assignment epoch (6)            when the group epoch is ahead
    the member's current assignment (8)                                 when reconciliation moved it

The topics come from ``topics()``, a read-only image of the broker's metadata (name ->
TopicMetadata) the runtime injects, and ``topics_version()`` the version of that image that last
changed the topics (-1: none since start); the core never reads the broker itself.

Regex subscriptions (Kafka's maybeUpdateRegularExpressions): the group resolves every regex its
members subscribe to against the topics and persists each resolution (record 16); a member's
topics are its names plus its regex's resolved topics. The regexes are resolved again when a
member brings a regex new to the group, or, at most every REGEX_BATCH_REFRESH_INTERVAL_MS (10 s),
at a heartbeat when one is unresolved or topics were created since. Kafka resolves on its
executor and writes the records in a later write; here the heartbeat that needs it resolves
(RE2, cheap) and writes the same records before its topic metadata and group epoch, so the member
gets its partitions one heartbeat earlier. A regex no member uses any more is tombstoned.
"""
from __future__ import annotations

from typing import Callable, Mapping

from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse
from ..group import Group, GroupType
from ..timer import cancel_member_timers, rebalance_key, session_key
from ..config import CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS, GroupConfigs
from ..topic_metadata import TopicMetadata
from . import consumer_group_records as rec
from .current_assignment import reconcile
from .migration import Migration
from .describe import describe_group, group_not_found
from .group import (EMPTY_RESOLVED_REGEX, ConsumerGroup, ResolvedRegex, assignment_state,
                    member_removal_records, preferred_assignor, subscription_metadata)
from .member import ConsumerGroupMember, MemberState
from .target_assignment import build_target_assignment
from .validation import (JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                         check_regex, validate_heartbeat)

Topics = Callable[[], Mapping[str, TopicMetadata]]
# Kafka's GroupMetadataManager: the least time between two resolutions of a group's regexes
REGEX_BATCH_REFRESH_INTERVAL_MS = 10_000
_HbAssignment = ConsumerGroupHeartbeatResponse.Assignment
_HbTopicPartitions = ConsumerGroupHeartbeatResponse.TopicPartitions


def heartbeat_error(code, message=None, member_id=None, member_epoch=0) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(error_code=int(code), error_message=message, member_id=member_id,
                                          member_epoch=member_epoch)


def _response_assignment(assignment) -> object:
    return _HbAssignment(topic_partitions=[_HbTopicPartitions(topic_id=t, partitions=sorted(p))
                                           for t, p in sorted(assignment.items())])


def _owned(req):
    if req.topic_partitions is None:
        return None
    return [(tp.topic_id, tp.partitions) for tp in req.topic_partitions]


def _is_subset(owned, assigned) -> bool:
    """Kafka's isSubset: every owned partition is assigned (an absent list is not a subset)."""
    if owned is None:
        return False
    for topic_id, parts in owned:
        have = assigned.get(topic_id)
        if parts and (have is None or not have.issuperset(parts)):
            return False
    return True


class ConsumerGroupManager:
    def __init__(self, config, timer, uuid_factory, groups: dict[str, Group], group_metadata_manager,
                 topics: Topics | None = None, topics_version: Callable[[], int] | None = None,
                 group_configs: GroupConfigs | None = None):
        self.config = config
        self.group_configs: GroupConfigs = {} if group_configs is None else group_configs
        self.timer = timer
        self.uuid_factory = uuid_factory
        self.topics: Topics = topics or dict
        self.topics_version: Callable[[], int] = topics_version or (lambda: -1)
        self.groups = groups       # the shard's one group map, shared with the other managers
        self._session_expired = self._expire_session    # one bound method for every session timer
        # online migration between the protocols (KIP-848): upgrades classic groups joined by a
        # consumer-protocol member, downgrades when the last one leaves, and classic members
        # inside consumer groups
        self.migration = Migration(config, timer, uuid_factory, group_metadata_manager, self)

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.get(group_id)
        return group if group is not None and group.type is GroupType.CONSUMER else None     # type: ignore[return-value]

    def consumer_groups(self) -> list[ConsumerGroup]:
        return [g for g in self.groups.values() if g.type is GroupType.CONSUMER]     # type: ignore[misc]

    @property
    def default_assignor(self) -> str:
        return self.config.consumer_assignors[0]

    def session_timeout_ms(self, group_id: str) -> int:
        """Kafka's consumerGroupSessionTimeoutMs: the group's consumer.session.timeout.ms, else the broker's."""
        return self._group_config(group_id, CONSUMER_SESSION_TIMEOUT_MS, self.config.consumer_session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """Kafka's consumerGroupHeartbeatIntervalMs: the group's consumer.heartbeat.interval.ms, else the broker's."""
        return self._group_config(group_id, CONSUMER_HEARTBEAT_INTERVAL_MS, self.config.consumer_heartbeat_interval_ms)

    def _group_config(self, group_id: str, name: str, broker_value: int) -> int:
        overrides = self.group_configs.get(group_id)
        if overrides:
            v = overrides.get(name)
            if v is not None:
                return v
        return broker_value

    # == loading ===================================================================================
    def on_loaded(self) -> None:
        """Every loaded member gets a fresh session (Kafka's onLoaded); members still revoking get
        their rebalance timeout again."""
        for group in self.consumer_groups():
            for m in group.members.values():
                self._schedule_session(group.group_id, m.member_id)
                if m.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance(group.group_id, m)

    # == ConsumerGroupHeartbeat ======================================================================
    def heartbeat(self, req, version: int, res, client_id: str = "", client_host: str = ""):
        """Returns the response (records are added to ``res``); KafkaError for a refused request."""
        validate_heartbeat(req, version, self.config.consumer_assignors)
        steady = self._steady_heartbeat(req, client_id, client_host, res.now_ms)
        if steady is not None:
            return steady
        if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(req, res)
        return self._heartbeat(req, version, res, client_id, client_host)

    def _steady_heartbeat(self, req, client_id, client_host, now_ms):
        """The common case, answered without recomputing anything: a member reconciled to a
        settled group that sends only its epoch (the full path would write nothing and answer
        the same). Topic changes reach the group through ``on_topics_changed``, not here; a
        group whose regexes are due for resolution takes the full path."""
        if req.member_epoch <= 0 or req.topic_partitions is not None or req.subscribed_topic_names is not None \
                or req.rebalance_timeout_ms != -1 or req.server_assignor is not None \
                or getattr(req, "subscribed_topic_regex", None) is not None:
            return None
        group = self.consumer_group(req.group_id)
        if group is None or group.group_epoch != group.assignment_epoch:
            return None
        if group.subscribed_regexes and self._regex_refresh_due(group, set(group.subscribed_regexes), now_ms):
            return None
        m = group.members.get(req.member_id)
        if m is None or m.member_epoch != req.member_epoch or not m.is_reconciled_to(group.assignment_epoch) \
                or (req.instance_id is not None and req.instance_id != m.instance_id) \
                or (req.rack_id is not None and req.rack_id != m.rack_id) \
                or client_id != m.client_id or client_host != m.client_host:
            return None
        self._schedule_session(group.group_id, m.member_id)
        return ConsumerGroupHeartbeatResponse(member_id=m.member_id, member_epoch=m.member_epoch,
                                              heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id))

    def _group_or_fail(self, group_id: str, create: bool, res=None) -> ConsumerGroup:
        """Kafka's getOrMaybeCreateConsumerGroup over the one group id namespace."""
        group = self.groups.get(group_id)
        if group is None:
            if not create:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            return ConsumerGroup(group_id)      # written by the records below, not stored here
        if group.type is GroupType.CONSUMER:
            return group        # type: ignore[return-value]
        if create and res is not None:
            if group.type is GroupType.CLASSIC and group.is_empty():
                # an empty classic group is deleted by its tombstone, then the consumer group's
                # records create the new group (Kafka's maybeDeleteEmptyClassicGroup)
                group.create_group_tombstone_records(res.records)
                group.cancel_timers(self.timer)
                return ConsumerGroup(group_id)
            # a joining member upgrades a classic group when the migration policy allows it
            # (KIP-848 online upgrade)
            if group.type is GroupType.CLASSIC and self.migration is not None:
                converted = self.migration.upgrade(group_id, res)
                if converted is not None:
                    return converted
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def _check_group_size(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> None:
        """Kafka's throwIfConsumerGroupIsFull, before the member is looked up: a full group refuses
        any member id it does not have (an instance id it has is a replacement, not a new member)."""
        if instance_id is not None and group.static_member_id(instance_id) is not None:
            return
        limit = self.config.consumer_max_size
        if len(group.members) >= limit and (not member_id or member_id not in group.members):
            raise KafkaError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The consumer group has reached its maximum capacity of {limit} members.")

    def _heartbeat(self, req, version, res, client_id, client_host):
        group_id, member_epoch = req.group_id, req.member_epoch
        joining = member_epoch == JOIN_GROUP_MEMBER_EPOCH
        group = self._group_or_fail(group_id, joining, res)
        self._check_group_size(group, req.member_id or "", req.instance_id)
        member_id = req.member_id or ""
        if not member_id:
            member_id = self.uuid_factory()     # v0: the coordinator names the member
        records: list = []
        replaced_static = None

        # -- the member, as it is now (Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember)
        if req.instance_id is None:
            existing = group.members.get(member_id)
            if existing is None and not joining:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group_id}.")
        else:
            static_id = group.static_member_id(req.instance_id)
            static = group.members.get(static_id) if static_id is not None else None
            if joining:
                if static is None:
                    existing = group.members.get(member_id)
                else:
                    if static.classic_member_metadata is None and static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        raise KafkaError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                         f"Static member {member_id} with instance id {req.instance_id} cannot join "
                                         f"the group because the instance id is owned by {static.member_id} member.")
                    # KIP-345 under the new protocol: a copy of the old member under the new member id
                    # (its assignment, state and target) replaces it, so the static member gets its
                    # partitions back without a rebalance (Kafka's replaceMember)
                    replaced_static = static
                    existing = static.replace(member_id=member_id, member_epoch=0, previous_member_epoch=0)
                    records += member_removal_records(group_id, static.member_id)
                    records.append(rec.member_subscription_record(group_id, existing))
                    records.append(rec.target_assignment_record(group_id, member_id,
                                                                group.target_assignment.get(static.member_id, {})))
                    records.append(rec.current_assignment_record(group_id, existing))
            else:
                if static is None:
                    raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Instance id {req.instance_id} is unknown.")
                if static.member_id != member_id:
                    raise KafkaError(ErrorCode.FENCED_INSTANCE_ID,
                                     f"Static member {member_id} with instance id {req.instance_id} was fenced "
                                     f"by member {static.member_id}.")
                existing = static
        is_new = existing is None
        if existing is None:
            existing = ConsumerGroupMember(member_id)
        elif not joining:
            # an epoch of 0 is a rejoin, never checked (Kafka's throwIfConsumerGroupMemberEpochIsInvalid)
            self._check_member_epoch(existing, member_epoch, _owned(req))

        # -- the subscription: null fields keep their value ----------------------------------------
        changes = {}
        if req.instance_id is not None:
            changes["instance_id"] = req.instance_id
        if req.rack_id is not None:
            changes["rack_id"] = req.rack_id
        if req.rebalance_timeout_ms != -1:
            changes["rebalance_timeout_ms"] = req.rebalance_timeout_ms
        changes["client_id"] = client_id
        changes["client_host"] = client_host
        changes["classic_member_metadata"] = None      # a consumer-protocol member from now on
        if req.subscribed_topic_names is not None:
            changes["subscribed_topic_names"] = frozenset(req.subscribed_topic_names)
        regex = getattr(req, "subscribed_topic_regex", None)
        if regex is not None:
            if regex != existing.subscribed_topic_regex:
                check_regex(regex)
            changes["subscribed_topic_regex"] = regex
        if req.server_assignor is not None:
            changes["server_assignor_name"] = req.server_assignor
        updated = existing.replace(**changes)

        group_epoch = group.group_epoch
        bump = is_new
        # Kafka's hasMemberSubscriptionChanged: any change is written; only the topics (names or
        # regex) move the group epoch, not the assignor, rack, timeout or client details
        if is_new or updated != existing:
            records.append(rec.member_subscription_record(group_id, updated))
            if _topics_of(updated) != _topics_of(existing):
                bump = True

        # -- the subscribed topics' metadata -------------------------------------------------------
        image = self.topics()
        members = dict(group.members)
        if replaced_static is not None:
            members.pop(replaced_static.member_id, None)
        members[member_id] = updated
        regex_records, resolved = self._update_regexes(group, existing, updated, members, res.now_ms)
        if regex_records:
            records += regex_records
            if any(v.topics != group.resolved_regexes.get(r, EMPTY_RESOLVED_REGEX).topics
                   for r, v in resolved.items()):
                bump = True     # a regex now stands for other topics (Kafka's handleRegularExpressionsResult)
        metadata = subscription_metadata(members.values(), image, resolved)
        if metadata != group.subscription_metadata:
            records.append(rec.subscription_metadata_record(group_id, metadata))
            bump = True
        if bump or group.group_epoch == 0 and not group.members:
            group_epoch = group.group_epoch + 1
            records.append(rec.group_epoch_record(group_id, group_epoch))

        # -- the target assignment ------------------------------------------------------------------
        assignment_epoch = group.assignment_epoch
        # a replacing static member starts from its predecessor's target (Kafka's
        # UpdateTargetAssignmentResult.fromLastTargetAssignment looks the target up by instance id)
        target = group.target_assignment.get(
            member_id if replaced_static is None else replaced_static.member_id, {})
        if group_epoch > group.assignment_epoch:
            upd: dict = {member_id: updated}
            if replaced_static is not None:
                upd[replaced_static.member_id] = None
            assignor = preferred_assignor(members.values(), self.default_assignor)
            target_records, targets = build_target_assignment(group, group_epoch, assignor, metadata, upd, resolved)
            records += target_records
            target = targets.get(member_id, {})
            assignment_epoch = group_epoch

        # -- reconciliation -------------------------------------------------------------------------
        owned = [] if joining else _owned(req)
        reconciled = reconcile(updated, assignment_epoch, target, group.current_partition_epoch, owned)
        if is_new or assignment_state(reconciled) != assignment_state(existing):
            records.append(rec.current_assignment_record(group_id, reconciled))
        for r in records:
            res.add_record(r)

        # -- timers ---------------------------------------------------------------------------------
        if replaced_static is not None:
            self._cancel_member_timers(group_id, replaced_static.member_id)
        self._schedule_session(group_id, member_id)
        if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
            if existing.state is not MemberState.UNREVOKED_PARTITIONS or \
                    existing.member_epoch != reconciled.member_epoch or \
                    self.timer.deadline(rebalance_key(group_id, member_id)) is None:
                self._schedule_rebalance(group_id, reconciled)
        else:
            self.timer.cancel(rebalance_key(group_id, member_id))

        response = ConsumerGroupHeartbeatResponse(
            member_id=member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group_id))
        # Kafka sends the assignment on a full request (a join, or a member resending everything
        # after an error) or when the member's assigned partitions changed
        full = joining or (req.rebalance_timeout_ms != -1 and req.topic_partitions is not None and
                           (req.subscribed_topic_names is not None or regex is not None))
        if full or reconciled.assigned_partitions != existing.assigned_partitions:
            response.assignment = _response_assignment(reconciled.assigned_partitions)
        return response

    # -- regex subscriptions (record 16) -------------------------------------------------------------
    def _regex_refresh_due(self, group: ConsumerGroup, subscribed: set, now_ms: int) -> bool:
        """Kafka's refresh conditions 2-4: the last resolution is older than the refresh interval,
        and a subscribed regex is unresolved or topics were created since."""
        resolved = group.resolved_regexes
        last = min((v.timestamp for v in resolved.values()), default=None)
        if last is not None and now_ms <= last + REGEX_BATCH_REFRESH_INTERVAL_MS:
            return False
        return any(r not in resolved for r in subscribed) or \
            min((v.version for v in resolved.values()), default=-1) < self.topics_version()

    def _update_regexes(self, group: ConsumerGroup, member: ConsumerGroupMember, updated: ConsumerGroupMember,
                        members: Mapping[str, ConsumerGroupMember], now_ms: int) -> tuple[list, dict]:
        """The regex records of a heartbeat and the resolutions it leaves: tombstones for regexes
        no member uses any more, then, when a refresh is needed, every subscribed regex resolved
        against the topics (Kafka's refreshRegularExpressions: the whole topic name matches)."""
        records = _unused_regex_tombstones(group, members)
        subscribed = {m.subscribed_topic_regex for m in members.values() if m.subscribed_topic_regex}
        resolved = {r: v for r, v in group.resolved_regexes.items() if r in subscribed}
        new = updated.subscribed_topic_regex
        brings_new = bool(new) and new != member.subscribed_topic_regex and not group.subscribed_regexes.get(new)
        if subscribed and (brings_new or self._regex_refresh_due(group, subscribed, now_ms)):
            version, image = self.topics_version(), self.topics()
            for regex in sorted(subscribed):
                pattern = check_regex(regex)
                resolved[regex] = ResolvedRegex(frozenset(t for t in image if pattern.fullmatch(t)), version, now_ms)
                records.append(rec.regular_expression_record(group.group_id, regex, resolved[regex]))
        return records, resolved

    @staticmethod
    def _check_member_epoch(member: ConsumerGroupMember, received: int, owned) -> None:
        """Kafka's throwIfMemberEpochIsInvalid: a member behind its epoch is fenced unless it is one
        epoch behind because the previous response was lost, and owns nothing it should not."""
        if received > member.member_epoch:
            raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a greater member epoch ({received}) than the one "
                             f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                             f"all its partitions and rejoin.")
        if received < member.member_epoch:
            if received != member.previous_member_epoch or not _is_subset(owned, member.assigned_partitions):
                raise KafkaError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a smaller member epoch ({received}) than the one "
                                 f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                                 f"all its partitions and rejoin.")

    # -- leaving ----------------------------------------------------------------------------------
    def _leave(self, req, res):
        group_id, member_id = req.group_id, req.member_id
        group = self.consumer_group(group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        if req.instance_id is not None:
            static_id = group.static_member_id(req.instance_id)
            if static_id is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if static_id != member_id:
                raise KafkaError(ErrorCode.FENCED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {req.instance_id} was fenced "
                                 f"by member {static_id}.")
        member = group.members.get(member_id)
        if member is None:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # a static member's temporary leave: it keeps its partitions (nobody else gets them)
            # until it comes back under its instance id or its session expires; their assignment
            # epochs go back to 0, so the member that comes back owns them from epoch 0 and a
            # commit of the old member id is fenced (Kafka's consumerGroupStaticMemberGroupLeave)
            res.add_record(rec.current_assignment_record(
                group_id, member.replace(member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, partitions_pending_revocation={},
                                         assignment_epochs=(0, member.assigned_partitions))))
            self.timer.cancel(rebalance_key(group_id, member_id))
        else:
            self._remove_member(group, member, res)
        return ConsumerGroupHeartbeatResponse(member_id=member_id, member_epoch=req.member_epoch,
                                              heartbeat_interval_ms=0)

    def _remove_member(self, group: ConsumerGroup, member: ConsumerGroupMember, res) -> None:
        """Kafka's consumerGroupFenceMember: the member's records go, the group epoch moves on (the
        next heartbeat of another member computes the new target); topic metadata follows."""
        group_id = group.group_id
        if self.migration is not None and self.migration.maybe_downgrade(group, member, res):
            return      # the last consumer-protocol member left: the group is classic again
        for r in member_removal_records(group_id, member.member_id):
            res.add_record(r)
        members = {m: x for m, x in group.members.items() if m != member.member_id}
        for r in _unused_regex_tombstones(group, members):      # Kafka's maybeDeleteResolvedRegularExpressions
            res.add_record(r)
        metadata = subscription_metadata(members.values(), self.topics(), group.resolved_regexes)
        if metadata != group.subscription_metadata:
            res.add_record(rec.subscription_metadata_record(group_id, metadata))
        res.add_record(rec.group_epoch_record(group_id, group.group_epoch + 1))
        self._cancel_member_timers(group_id, member.member_id)

    def _cancel_member_timers(self, group_id: str, member_id: str) -> None:
        cancel_member_timers(self.timer, group_id, member_id)

    # -- timers -----------------------------------------------------------------------------------
    def _schedule_session(self, group_id: str, member_id: str, timeout_ms: int | None = None) -> None:
        """``timeout_ms``: a classic member's own session timeout (else the group's)."""
        self.timer.schedule(session_key(group_id, member_id),
                            self.session_timeout_ms(group_id) if timeout_ms is None else timeout_ms,
                            self._session_expired, (group_id, member_id))

    def _expire_session(self, group_id: str, member_id: str, res) -> None:
        group = self.consumer_group(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is not None and member is not None:
            self._remove_member(group, member, res)

    def _schedule_rebalance(self, group_id: str, member: ConsumerGroupMember) -> None:
        epoch = member.member_epoch

        def expire(res, group_id=group_id, member_id=member.member_id):
            # the member did not revoke in time: fenced only if it is still revoking at that epoch
            group = self.consumer_group(group_id)
            m = group.members.get(member_id) if group is not None else None
            if group is not None and m is not None and m.state is MemberState.UNREVOKED_PARTITIONS \
                    and m.member_epoch == epoch:
                self._remove_member(group, m, res)
        timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else 0
        self.timer.schedule(rebalance_key(group_id, member.member_id), timeout, expire)

    # == topic metadata changes ======================================================================
    def on_topics_changed(self, res) -> None:
        """Topics were created, deleted or grew: every group whose subscribed topics' metadata is
        no longer what it was computed against gets a new group epoch (its members' next heartbeats
        compute the new target). Regexes are resolved again at a later heartbeat, as in Kafka."""
        image = self.topics()
        for group in self.consumer_groups():
            if not group.members:
                continue
            metadata = subscription_metadata(group.members.values(), image, group.resolved_regexes)
            if metadata != group.subscription_metadata:
                res.add_record(rec.subscription_metadata_record(group.group_id, metadata))
                res.add_record(rec.group_epoch_record(group.group_id, group.group_epoch + 1))

    # == ListGroups / DeleteGroups ==================================================================
    def delete_group(self, group: ConsumerGroup, res) -> None:
        """Tombstones for every record of the group (Kafka's createGroupTombstoneRecords)."""
        group.create_group_tombstone_records(res.records)
        group.cancel_timers(self.timer)

    # == ConsumerGroupDescribe =======================================================================
    def describe(self, group_id: str):
        group = self.consumer_group(group_id)
        if group is None:
            return group_not_found(group_id, group_id in self.groups)
        names = {t.topic_id: t.name for t in self.topics().values()}
        return describe_group(group, self.default_assignor, names)


def _topics_of(m: ConsumerGroupMember) -> tuple:
    """What the member subscribes to: its names and its regex (an empty regex is none, as Kafka's
    isNotEmpty checks treat it)."""
    return (m.subscribed_topic_names, m.subscribed_topic_regex or None)


def _unused_regex_tombstones(group: ConsumerGroup, members: Mapping[str, ConsumerGroupMember]) -> list:
    """Tombstones (record 16) for the group's resolved regexes that none of ``members`` uses."""
    used = {m.subscribed_topic_regex for m in members.values()}
    return [rec.regular_expression_tombstone(group.group_id, r) for r in sorted(group.resolved_regexes)
            if r not in used]
