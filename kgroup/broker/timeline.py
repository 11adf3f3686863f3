"""Rebalance timelines: a bounded, in-memory history per group of what its coordinator did —
members joined, left (with their LeaveGroup reason) or expired, why each rebalance started, whom
it waited for, how long its join and sync phases took, and each generation's members and
assignment.

Consumer groups (KIP-848): members joined, left (a heartbeat with member epoch -1, or -2 for a
static member's temporary leave), expired (session timeout) or fenced (not revoked within the
rebalance timeout), each group epoch bump and why, each target assignment computed, each
member's epoch and reconciliation state as it converges, and the group's states (Assigning,
Reconciling, Stable, Empty).

Derived from what the coordinator already does, never part of it: after every group request
(and on a 250 ms tick, for what timers do: session expiry, rebalance timeouts) the broker
compares each touched group with what it saw last and writes down the difference. A consumer
group changes only by the records its coordinator writes (a steady heartbeat writes none), so it
is compared after each write of its records (``on_written``, the coordinator runtime's write
observer: no ConsumerGroupHeartbeat is looked at); what those records remove a member for comes
from the operation that wrote them: a request (the member left) or the timer that fired (its
session or its rebalance timeout). Nothing is persisted or replayed, so the coordinator's live
state == replayed state property is untouched; after a broker restart timelines start empty.

On when the broker has the metrics listener or fault injection; sees the group requests through
the metrics' sampled path or the request hook (ops.py); read through ``GET /api/groups/<group>``
(the web console), and over the Kafka protocol by ``kgroup groups --describe --group G
--timeline`` (a Produce to ``kgroup/group-timeline``, a topic name Kafka forbids, whose answer's
``error_message`` carries the timeline as JSON; the Produce handler hands it to
``answer_query`` through ``broker.control_topics``, so no Produce pays for the check).
"""
from __future__ import annotations

import asyncio
import collections
import json
import logging

from ..coordinator.consumer_group import consumer_group_records as cg_records
from ..coordinator.group import GroupType
from ..coordinator.timer import rebalance_key, session_key
from ..protocol.api import ApiKey
from ..protocol.consumer_protocol import decode_assignment as decode_consumer_assignment
from ..protocol.errors import ErrorCode
from ..protocol.messages.produce import ProduceResponse
from ..protocol.records import decode_records, iter_batches

log = logging.getLogger("kgroup.timeline")
TIMELINE_TOPIC = "kgroup/group-timeline"
MAX_EVENTS = 200            # per group
MAX_GROUPS = 10_000         # groups with a timeline (the oldest is forgotten beyond)
TICK_S = 0.25
# Requests after which a group is compared: those that change membership or state. Heartbeats and
# offset commits never do (a heartbeat that reports a rebalance reports an earlier change): the
# tick catches what timers change.
GROUP_APIS = frozenset((ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.LEAVE_GROUP, ApiKey.DELETE_GROUPS))
# The consumer group records (KIP-848) after whose write the group is compared: epochs, members,
# target and current assignments (not the subscribed topics' metadata or regexes: an epoch record
# follows any change of theirs that matters).
_CONSUMER_RECORDS = frozenset((cg_records.GROUP_METADATA, cg_records.MEMBER_METADATA,
                               cg_records.TARGET_ASSIGNMENT_METADATA, cg_records.TARGET_ASSIGNMENT_MEMBER,
                               cg_records.CURRENT_MEMBER_ASSIGNMENT))
_SESSION_TIMEOUT = session_key("", "")[0]
_REBALANCE_TIMEOUT = rebalance_key("", "")[0]
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


def decode_assignment(raw) -> dict:
    if not raw or len(raw) < 2:
        return {}
    try:
        a = decode_consumer_assignment(raw)
    except Exception:
        return {}
    return {tp.topic: sorted(tp.partitions) for tp in a.assigned_partitions}


def topic_partitions(broker, assignment) -> dict:
    """{topic id: partitions} as {topic name: sorted partitions} (topics no longer known left out)."""
    out = {}
    for topic_id, parts in assignment.items():
        t = broker.metadata.by_id(topic_id)
        if t is not None:
            out[t.name] = sorted(parts)
    return dict(sorted(out.items()))


class _Seen:
    """What was last seen of one classic group."""
    kind = "classic"
    __slots__ = ("state", "state_obj", "generation", "members", "since_ms", "phase_started_ms", "pending_cause",
                 "joined_order", "rebalance_from")

    def __init__(self):
        self.state = None
        self.state_obj = None                    # the group's state object last seen (the fast check)
        self.generation = -1
        self.members: dict[str, tuple] = {}      # member id -> (client id, instance id, protocols)
        self.since_ms = 0
        self.phase_started_ms = 0
        self.pending_cause: list[str] = []
        self.joined_order: list[str] = []        # members in the order their JoinGroup arrived
        self.rebalance_from = None               # the state the rebalance under way started from


class _SeenConsumer:
    """What was last seen of one consumer group (KIP-848). Its members are immutable
    (ConsumerGroupMember): one changed is a new object, so an unchanged group compares equal to
    what was seen by identity."""
    kind = "consumer"
    __slots__ = ("state", "group_epoch", "assignment_epoch", "members", "since_ms", "epoch_bumped_ms")

    def __init__(self, state="Empty", group_epoch=0, assignment_epoch=0, members=None, now_ms=0):
        self.state = state
        self.group_epoch = group_epoch
        self.assignment_epoch = assignment_epoch
        self.members: dict = members or {}      # member id -> ConsumerGroupMember
        self.since_ms = now_ms
        self.epoch_bumped_ms = now_ms           # when the group epoch last moved (a rebalance began)


class GroupTimelines:
    # The requests dispatch looks at: the group APIs it compares after.
    WATCHED = GROUP_APIS

    def __init__(self, broker):
        self.broker = broker
        self.events: dict[str, collections.deque] = {}
        self.seen: dict[str, _Seen | _SeenConsumer] = {}
        self.leave_reasons: dict[tuple[str, str], str] = {}     # (group, member) -> LeaveGroup reason
        self.join_reasons: dict[tuple[str, str], str] = {}      # (group, client id) -> JoinGroup reason
        # (consumer group, member) -> (event, reason) of its removal, from the written records' operation
        self.removals: dict[tuple[str, str], tuple[str, str]] = {}
        self._dirty: set[str] = set()           # consumer groups written to, compared at the loop's next turn
        self._tick: asyncio.TimerHandle | None = None

    def clear(self) -> None:
        self.events.clear()
        self.seen.clear()
        self.leave_reasons.clear()
        self.join_reasons.clear()
        self.removals.clear()
        self._dirty.clear()

    def watch_writes(self, runtime) -> None:
        """Be called with every batch the group coordinator runtime writes (after the metrics'
        counters, when there are metrics)."""
        before = runtime.write_observer
        if before is None:
            runtime.write_observer = self.on_written
        else:
            def both(results, offset_commits=0, before=before, after=self.on_written):
                before(results, offset_commits)
                after(results, offset_commits)
            runtime.write_observer = both

    def on_written(self, results, offset_commits: int = 0, _watched=_CONSUMER_RECORDS,
                   _member=cg_records.MEMBER_METADATA) -> None:
        """The records of one written batch (before they are replayed): the consumer groups they
        touch are compared at the loop's next turn; a member's removal is told why here, while
        the operation that wrote it is known. Never raises into the runtime."""
        if offset_commits:
            return          # the runtime's held offset commits: nothing but commits
        try:
            dirty = self._dirty
            was_clean = not dirty
            for res in results:
                for r in res.records:
                    if r.record_type in _watched:
                        gid = r.key_struct.group_id
                        dirty.add(gid)
                        if r.record_type == _member and r.value is None:
                            self._removal(gid, r.key_struct.member_id, res)
            if dirty and was_clean:
                asyncio.get_running_loop().call_soon(self._observe_dirty)
        except Exception:
            log.exception("rebalance timelines: watching the coordinator's records")

    def _removal(self, gid: str, member_id: str, res) -> None:
        timer_key = getattr(res, "timer_key", None)
        if timer_key is not None:
            name = timer_key[0] if type(timer_key) is tuple else timer_key
            if name == _SESSION_TIMEOUT:
                why = ("member-expired", "session timeout (no heartbeat within the session timeout)")
            elif name == _REBALANCE_TIMEOUT:
                why = ("member-fenced", "did not revoke its partitions within its rebalance timeout")
            else:
                why = ("member-removed", f"timer {name}")
        else:
            group = self._group(gid)
            member = group.members.get(member_id) if group is not None and group.type is GroupType.CONSUMER else None
            instance_id = member.instance_id if member is not None else None
            replaced_by = None
            if instance_id is not None:
                for r in res.records:
                    if r.record_type == cg_records.MEMBER_METADATA and r.value is not None \
                            and r.value_struct.instance_id == instance_id:
                        replaced_by = r.key_struct.member_id
            if replaced_by is not None:
                why = ("member-left", f"replaced by static member {replaced_by} (instance {instance_id})")
            elif member is not None and member.classic_member_metadata is not None:
                why = ("member-left", "LeaveGroup (a classic member)")
            else:
                why = ("member-left", "left the group (heartbeat with member epoch -1)")
        self.removals[(gid, member_id)] = why

    def _observe_dirty(self) -> None:
        dirty, self._dirty = self._dirty, set()
        for gid in dirty:
            self.observe(gid, None)

    def start(self) -> None:
        self._tick = asyncio.get_running_loop().call_later(TICK_S, self._on_tick)

    def close(self) -> None:
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None

    def _on_tick(self) -> None:
        try:
            for gid in list(self.seen):
                self.observe(gid, None)
        finally:
            self._tick = asyncio.get_running_loop().call_later(TICK_S, self._on_tick)

    # -- the request path ----------------------------------------------------------------------
    def dispatch(self, handler, broker, ctx, body, version, inner=None):
        api_key = body.API_KEY
        if api_key not in GROUP_APIS:
            return handler(broker, ctx, body, version) if inner is None else inner(handler, broker, ctx, body, version)
        gid = getattr(body, "group_id", None)
        if gid:
            # First what happened since the last look (a timer completing a join phase or
            # expiring a member), so this request's own effect is told apart from it.
            self.observe(gid, None)
        if api_key == ApiKey.JOIN_GROUP:
            if getattr(body, "reason", None):
                self.join_reasons[(gid, ctx.client_id)] = body.reason
            seen = self.seen.get(gid)
            # (a classic member joining a consumer group, KIP-848's online migration, is not ordered)
            if seen is not None and seen.kind == "classic" and body.member_id \
                    and body.member_id not in seen.joined_order:
                seen.joined_order.append(body.member_id)
        elif api_key == ApiKey.LEAVE_GROUP:
            if version >= 3:
                for m in body.members:
                    self.leave_reasons[(gid, m.member_id)] = m.reason or "LeaveGroup"
            else:
                self.leave_reasons[(gid, body.member_id)] = "LeaveGroup"
        result = handler(broker, ctx, body, version) if inner is None else inner(handler, broker, ctx, body, version)
        if api_key == ApiKey.DELETE_GROUPS:
            for g in body.groups_names:
                self.observe(g, None)
        elif gid:
            self.observe(gid, (api_key, ctx.client_id, getattr(body, "member_id", "")))
        return result

    # -- diffing -------------------------------------------------------------------------------
    def _group(self, gid):
        groups = self.broker.group_coordinator
        shard = groups.shards.get(groups.shard_for(gid))
        if shard is None or not shard.is_loaded:
            return None
        return shard.groups.get(gid)

    def _add(self, gid, kind, **detail) -> None:
        q = self.events.get(gid)
        if q is None:
            if len(self.events) >= MAX_GROUPS:
                oldest = next(iter(self.events))
                del self.events[oldest]
                self.seen.pop(oldest, None)
            q = self.events[gid] = collections.deque(maxlen=MAX_EVENTS)
        q.append({"time_ms": self.broker.clock.now_ms(), "event": kind, **detail})

    def observe(self, gid: str, cause) -> None:
        """Compare group ``gid`` with what was seen last and record the difference. ``cause``:
        (api key, client id, member id) of the request just handled, or None (the tick).
        A failure here is logged, never passed on: a timeline must not break a request."""
        try:
            self._observe(gid, cause)
        except Exception:
            log.exception("rebalance timeline of group %s", gid)

    def _observe(self, gid: str, cause) -> None:
        group = self._group(gid)
        seen = self.seen.get(gid)
        kind = group.type if group is not None else None
        if kind is not GroupType.CLASSIC and kind is not GroupType.CONSUMER:
            if seen is not None and seen.state != "Dead":
                if seen.kind == "consumer":
                    self._add(gid, "group-deleted", group_epoch=seen.group_epoch)
                else:
                    self._add(gid, "group-deleted", generation=seen.generation)
                    seen.state_obj = None
                seen.state = "Dead"
            return
        if seen is not None and seen.kind != kind.value:
            if seen.state == "Dead":        # deleted, then created again under the other protocol
                seen = None
                del self.seen[gid]
            else:
                # online migration (KIP-848): the same members, now under the other protocol
                self._add(gid, "group-converted", previous_type=seen.kind, type=kind.value,
                          state=group.state_string(), members=sorted(group.members))
                old, seen = seen, self._seen_now(group)
                self.seen[gid] = seen
                if kind is not GroupType.CONSUMER:
                    # the downgrade: the last consumer-protocol member's leave (or expiry) did it
                    for mid, m in old.members.items():
                        if mid not in group.members:
                            event, reason = self.removals.pop((gid, mid), ("member-removed", None))
                            self._add(gid, event, member_id=mid, client_id=m.client_id,
                                      group_instance_id=m.instance_id, reason=reason)
                    return
                # What the upgrade's own write did is told as usual: the member whose join converted
                # the group joined, the classic generation (the converted group epoch) was bumped.
                seen.members = {mid: m for mid, m in seen.members.items() if mid in old.members}
                seen.group_epoch = seen.assignment_epoch = old.generation
                seen.state = old.state
        if kind is GroupType.CONSUMER:
            self._observe_consumer(gid, group, seen)
            return
        state_obj = group.state
        members = group.members
        # nothing changed (the common case: a heartbeat, a tick): identity and C-level compares
        # only, as the tick runs this for every group four times a second
        if seen is not None and seen.state_obj is state_obj and seen.generation == group.generation_id \
                and seen.members.keys() == members.keys():
            return
        state = str(state_obj)
        now = self.broker.clock.now_ms()
        if seen is None:
            # A new group (or one loaded at start-up, first seen now): it was Empty before.
            seen = self.seen[gid] = _Seen()
            seen.since_ms = seen.phase_started_ms = now
            self._add(gid, "group-created", state=state, generation=group.generation_id)
            seen.state = "Empty"
        # members
        current = {mid: (m.client_id, m.group_instance_id, tuple(p[0] for p in m.protocols) if m.protocols else ())
                   for mid, m in members.items()}
        causes = []
        for mid, (client_id, instance_id, protocols) in current.items():
            if mid not in seen.members:
                reason = self.join_reasons.pop((gid, client_id), None)
                self._add(gid, "member-joined", member_id=mid, client_id=client_id, group_instance_id=instance_id,
                          protocols=list(protocols), reason=reason)
                causes.append(f"member {mid} ({client_id}) joined" + (f": {reason}" if reason else ""))
        for mid, (client_id, _instance_id, _) in seen.members.items():
            if mid in current:
                continue
            reason = self.leave_reasons.pop((gid, mid), None)
            if reason is not None:
                self._add(gid, "member-left", member_id=mid, client_id=client_id, reason=reason)
                causes.append(f"member {mid} ({client_id}) left: {reason}")
            elif seen.state == "PreparingRebalance" and state != "PreparingRebalance":
                self._add(gid, "member-removed", member_id=mid, client_id=client_id,
                          reason="did not rejoin within the rebalance timeout")
                causes.append(f"member {mid} ({client_id}) did not rejoin in time")
            else:
                self._add(gid, "member-expired", member_id=mid, client_id=client_id,
                          reason="session timeout (no heartbeat)")
                causes.append(f"member {mid} ({client_id}) expired: session timeout")
        seen.members = current
        # state
        if seen.state != state:
            previous = seen.state
            duration = now - seen.since_ms
            if state == "PreparingRebalance":
                why = causes or seen.pending_cause or [
                    f"a known member rejoined (client {cause[1]}: new metadata, or the leader rejoining)"
                    if cause and cause[0] == ApiKey.JOIN_GROUP else "the coordinator began a rebalance"]
                self._add(gid, "rebalance-started", generation=group.generation_id, previous_state=previous,
                          cause="; ".join(why))
                seen.phase_started_ms = now
                seen.joined_order = []
                seen.rebalance_from = previous
            elif state == "CompletingRebalance":
                if cause and cause[0] == ApiKey.JOIN_GROUP:
                    waited = f"{cause[2] or 'a new member'} ({cause[1]}), whose JoinGroup completed the phase"
                elif any(e.startswith("member") and "did not rejoin" in e for e in causes):
                    waited = "members that did not rejoin (removed at the rebalance timeout)"
                elif seen.rebalance_from == "Empty":
                    waited = "group.initial.rebalance.delay.ms (more members of a new group)"
                elif seen.joined_order:
                    waited = f"{seen.joined_order[-1]} (the last JoinGroup)"
                else:
                    waited = None
                self._add(gid, "join-phase-done", generation=group.generation_id, duration_ms=duration,
                          leader=group.leader_id, protocol=group.protocol_name, members=sorted(current),
                          waited_for=waited)
            elif state == "Stable":
                assignment = {mid: decode_assignment(m.assignment) for mid, m in members.items()}
                self._add(gid, "stable", generation=group.generation_id, protocol=group.protocol_name,
                          leader=group.leader_id, sync_phase_ms=duration if previous == "CompletingRebalance" else None,
                          rebalance_ms=now - seen.phase_started_ms, assignment=assignment)
            elif state == "Empty":
                self._add(gid, "empty", generation=group.generation_id, previous_state=previous)
            else:
                self._add(gid, "state", state=state, previous_state=previous)
            seen.state = state
            seen.since_ms = now
        elif causes and state == "PreparingRebalance":
            # More members joined or left while a rebalance was already under way.
            seen.pending_cause = causes
        seen.generation = group.generation_id
        seen.state_obj = state_obj

    def _seen_now(self, group):
        """What is seen of ``group`` as it is, with no event written."""
        now = self.broker.clock.now_ms()
        if group.type is GroupType.CONSUMER:
            return _SeenConsumer(group.state_string(), group.group_epoch, group.assignment_epoch, dict(group.members),
                                 now)
        seen = _Seen()
        seen.since_ms = seen.phase_started_ms = now
        seen.state, seen.state_obj, seen.generation = str(group.state), group.state, group.generation_id
        seen.members = {mid: (m.client_id, m.group_instance_id, tuple(p[0] for p in m.protocols) if m.protocols else ())
                        for mid, m in group.members.items()}
        return seen

    def _observe_consumer(self, gid: str, group, seen) -> None:
        members = group.members
        # nothing changed (a tick, a write touching nothing shown): C-level compares only
        if seen is not None and seen.group_epoch == group.group_epoch \
                and seen.assignment_epoch == group.assignment_epoch and seen.members == members:
            return
        now = self.broker.clock.now_ms()
        state = group.state_string()
        if seen is None or seen.state == "Dead":
            # a new group (or one loaded at start-up, first seen now): it was Empty before
            seen = self.seen[gid] = _SeenConsumer(now_ms=now)
            self._add(gid, "group-created", state=state, group_epoch=group.group_epoch, type="consumer")
        b = self.broker
        causes = []
        for mid, m in members.items():
            old = seen.members.get(mid)
            if old is None:
                self._add(gid, "member-joined", member_id=mid, client_id=m.client_id, group_instance_id=m.instance_id,
                          subscribed_topics=sorted(m.subscribed_topic_names),
                          subscribed_topic_regex=m.subscribed_topic_regex,
                          member_type="classic" if m.classic_member_metadata is not None else "consumer")
                causes.append(f"member {mid} ({m.client_id}) joined")
            elif old.subscribed_topic_names != m.subscribed_topic_names \
                    or old.subscribed_topic_regex != m.subscribed_topic_regex:
                self._add(gid, "member-subscription", member_id=mid, client_id=m.client_id,
                          subscribed_topics=sorted(m.subscribed_topic_names),
                          subscribed_topic_regex=m.subscribed_topic_regex)
                causes.append(f"member {mid} ({m.client_id}) changed its subscription")
        for mid, old in seen.members.items():
            if mid in members:
                continue
            event, reason = self.removals.pop((gid, mid), ("member-removed", None))
            self._add(gid, event, member_id=mid, client_id=old.client_id, group_instance_id=old.instance_id,
                      reason=reason)
            causes.append(f"member {mid} ({old.client_id}) {event[len('member-'):]}" + (f": {reason}" if reason else ""))
        if group.group_epoch != seen.group_epoch:
            self._add(gid, "group-epoch", group_epoch=group.group_epoch, previous_epoch=seen.group_epoch,
                      cause="; ".join(causes) or "the subscribed topics' metadata changed (or a regex matched "
                                                 "other topics)")
            seen.epoch_bumped_ms = now
        if group.assignment_epoch != seen.assignment_epoch:
            self._add(gid, "target-assignment", assignment_epoch=group.assignment_epoch,
                      group_epoch=group.group_epoch, assignment_ms=now - seen.epoch_bumped_ms,
                      target={mid: topic_partitions(b, t) for mid, t in sorted(group.target_assignment.items())})
        for mid, m in members.items():
            old = seen.members.get(mid)
            if old is m or (old is not None and old.member_epoch == m.member_epoch and old.state == m.state
                            and old.assigned_partitions == m.assigned_partitions
                            and old.partitions_pending_revocation == m.partitions_pending_revocation):
                continue
            if m.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                self._add(gid, "member-left", member_id=mid, client_id=m.client_id, group_instance_id=m.instance_id,
                          reason="a static member's temporary leave (member epoch -2): it keeps its partitions "
                                 "until it returns under its instance id or its session expires")
                continue
            reconciled = m.is_reconciled_to(group.assignment_epoch)
            self._add(gid, "member-reconciled" if reconciled else "member-reconciling", member_id=mid,
                      client_id=m.client_id, member_epoch=m.member_epoch,
                      previous_member_epoch=old.member_epoch if old is not None else m.previous_member_epoch,
                      member_state=m.state.name, assignment=topic_partitions(b, m.assigned_partitions),
                      pending_revocation=topic_partitions(b, m.partitions_pending_revocation))
        if seen.state != state:
            previous = seen.state
            if state == "Stable":
                self._add(gid, "stable", group_epoch=group.group_epoch, rebalance_ms=now - seen.epoch_bumped_ms,
                          assignment={mid: topic_partitions(b, m.assigned_partitions)
                                      for mid, m in sorted(members.items())})
            elif state == "Empty":
                self._add(gid, "empty", group_epoch=group.group_epoch, previous_state=previous)
            else:
                self._add(gid, "state", state=state, previous_state=previous, group_epoch=group.group_epoch)
            seen.state = state
            seen.since_ms = now
        seen.group_epoch = group.group_epoch
        seen.assignment_epoch = group.assignment_epoch
        seen.members = dict(members)

    def timeline(self, gid: str) -> list[dict]:
        self.observe(gid, None)
        return list(self.events.get(gid, ()))

    # -- over the wire -------------------------------------------------------------------------
    def answer_query(self, body):
        """A Produce to TIMELINE_TOPIC (broker.control_topics): each record's value a group id."""
        T, P = ProduceResponse.TopicProduceResponse, ProduceResponse.TopicProduceResponse.PartitionProduceResponse
        answers = []
        for pd in body.topic_data[0].partition_data:
            try:
                groups = [bytes(r.value or b"").decode() for _, h, batch in iter_batches(pd.records or b"")
                          for r in decode_records(batch, h)]
                answers.append(P(index=pd.index, error_code=0, base_offset=-1,
                                 error_message=json.dumps({g: self.timeline(g) for g in groups})))
            except ValueError as e:
                answers.append(P(index=pd.index, error_code=int(ErrorCode.INVALID_REQUEST), base_offset=-1,
                                 error_message=str(e)))
        return ProduceResponse(responses=[T(name=TIMELINE_TOPIC, partition_responses=answers)])
