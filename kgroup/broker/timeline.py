"""Rebalance timelines: a bounded, in-memory history per group of what its coordinator did —
members joined, left (with their LeaveGroup reason) or expired, why each rebalance started, whom
it waited for, how long its join and sync phases took, and each generation's members and
assignment.

Derived from what the coordinator already does, never part of it: after every group request
(and on a 250 ms tick, for what timers do: session expiry, rebalance timeouts) the broker
compares each touched group with what it saw last and writes down the difference. Nothing is
persisted or replayed, so the coordinator's live state == replayed state property is untouched;
after a broker restart timelines start empty.

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


def decode_assignment(raw) -> dict:
    if not raw or len(raw) < 2:
        return {}
    try:
        a = decode_consumer_assignment(raw)
    except Exception:
        return {}
    return {tp.topic: sorted(tp.partitions) for tp in a.assigned_partitions}


class _Seen:
    """What was last seen of one group."""
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


class GroupTimelines:
    # The requests dispatch looks at: the group APIs it compares after.
    WATCHED = GROUP_APIS

    def __init__(self, broker):
        self.broker = broker
        self.events: dict[str, collections.deque] = {}
        self.seen: dict[str, _Seen] = {}
        self.leave_reasons: dict[tuple[str, str], str] = {}     # (group, member) -> LeaveGroup reason
        self.join_reasons: dict[tuple[str, str], str] = {}      # (group, client id) -> JoinGroup reason
        self._tick: asyncio.TimerHandle | None = None

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
            if seen is not None and body.member_id and body.member_id not in seen.joined_order:
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
        return shard.group_metadata_manager.classic_group(gid)

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
        if group is None:
            if seen is not None and seen.state != "Dead":
                self._add(gid, "group-deleted", generation=seen.generation)
                seen.state = "Dead"
                seen.state_obj = None
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
