"""Test control: time travel, instant reset, waiting on broker state, and state as JSON — the
surface a test drives a broker with from any language (in process, over HTTP, over the wire).

On when fault injection is (``kgroup.fault.injection.enable``): ``broker.test_control``,
else None. Every method runs on the broker's event loop; ``command(cmd)`` is the one entry point
every surface uses (``KafkaBroker`` in process, ``/admin/...`` in http.py, the fault-injection
control topic in faults.py), and answers a dict or a PendingResponse (a wait).

- **Time travel** (``advance-time``): the broker's clock (``BrokerClock``, one per broker) moves
  forward. Every coordinator timer that falls due on the way runs, in deadline order, each at its
  own deadline, through each coordinator runtime's one hook ``fire_due_timers()`` (the timers of
  every shard: classic, consumer and share groups, transactions, the share coordinator) and the
  share-partitions' (acquisition locks); then the logs' time checks run (retention by time, producer-id
  expiry; a segment rolls by ``segment.ms`` at its next append). No client acts during the jump:
  a member still heartbeating is expired when the jump passes its session timeout.
- **Reset**: back to an empty broker without a restart — every shard of the coordinator runtimes
  (groups, transactions, share state) unloaded, its partition emptied and loaded again (groups,
  offsets, transactions, share-partitions and share sessions gone;
  the partitions kept, which is what makes it take milliseconds), every other topic deleted, the
  dynamic broker and group configs, fault rules, timelines and the clock's offset cleared.
  Producer id allocation goes on (ids never repeat in a broker's life).
- **Waits**: a condition on a group, its assignment, its committed offsets or lag, a
  transaction or a topic, checked when a coordinator runtime reports a change
  (``state_observer``), never on a poll loop; a timeout answers what was last seen and the
  group's rebalance timeline.
"""
from __future__ import annotations

import asyncio
import logging

from ..coordinator.classic_group import ClassicGroupState
from ..coordinator.group import GroupType
from .pending import PendingResponse
from .timeline import decode_assignment

log = logging.getLogger("kgroup.test_control")
MAX_TIMER_STEPS = 1_000_000     # a time travel runs at most this many deadlines (a timer loop)
GROUP_WAITS = ("group", "assignment", "committed", "lag")


class ControlError(ValueError):
    """A command this broker cannot run (bad arguments)."""


class _Waiter:
    __slots__ = ("kind", "params", "check", "pending", "handle", "last_seen")

    def __init__(self, kind, params, check):
        self.kind = kind
        self.params = params
        self.check = check              # fn() -> (done, what it saw)
        self.pending = PendingResponse()
        self.handle = None
        self.last_seen = None


class TestControl:
    __test__ = False    # not a pytest test class

    def __init__(self, broker):
        self.broker = broker
        self.waiters: list[_Waiter] = []
        broker.group_coordinator.runtime.state_observer = self._on_group_change
        broker.transaction_coordinator.runtime.state_observer = self._on_transaction_change

    # -- the one entry point ---------------------------------------------------------------------
    def command(self, cmd: dict):
        if not isinstance(cmd, dict):
            raise ControlError("a command is a JSON object")
        op = cmd.get("op") or cmd.get("fault")
        if op == "advance-time":
            ms = cmd.get("ms")
            if ms is None and cmd.get("seconds") is not None:
                ms = float(cmd["seconds"]) * 1000
            if ms is None or float(ms) < 0:
                raise ControlError("advance-time needs ms >= 0")
            return self.advance_time(int(ms))
        if op == "clock":
            return self.clock_state()
        if op == "reset":
            return self.reset()
        if op == "groups":
            return {"groups": self.groups()}
        if op == "group":
            return {"group": self.group(_need(cmd, "group"))}
        if op == "transactions":
            return {"transactions": self.transactions()}
        if op == "topics":
            return {"topics": self.topics(bool(cmd.get("internal")))}
        if op == "wait":
            return self.wait(cmd)
        raise ControlError(f"unknown command {op!r} (advance-time, clock, reset, groups, group, transactions, "
                           "topics, wait)")

    # -- time travel -----------------------------------------------------------------------------
    def clock_state(self) -> dict:
        clock = self.broker.clock
        return {"now_ms": clock.now_ms(), "offset_ms": clock.offset_ms}

    def advance_time(self, ms: int) -> dict:
        """Move the broker's clock ``ms`` forward, running every timer due on the way at its own
        deadline (in deadline order across shards and runtimes), then the logs' time checks."""
        clock = self.broker.clock
        runtimes = (*self._runtimes(), self.broker.share_partitions)     # share-record locks too
        target = clock.now_ms() + ms
        steps = 0
        txn_shards = list(self.broker.transaction_coordinator.runtime.shards.values())
        for shard in txn_shards:
            shard.time_travel_target_ms = target
        try:
            nxt = self._fire(runtimes, False)
            while nxt is not None and nxt <= target:
                steps += 1
                if steps > MAX_TIMER_STEPS:
                    raise ControlError(f"more than {MAX_TIMER_STEPS} timer deadlines before the target time")
                clock.pin(nxt)
                nxt = self._fire(runtimes, False)
        finally:
            for shard in txn_shards:
                shard.time_travel_target_ms = None
            clock.set_to(target)
            self._fire(runtimes, True)      # and every loop timer armed again from the new time
        dp = self.broker.data_path
        deleted = dp.logs.delete_old_segments()
        expired = dp.remove_expired_producers()
        for w in list(self.waiters):
            self._evaluate(w)
        log.warning("time travel: the clock moved %d ms forward (%d deadlines on the way)", ms, steps)
        return {**self.clock_state(), "advanced_ms": ms, "deadlines": steps,
                "segments_deleted": deleted, "producers_expired": expired}

    def _fire(self, runtimes, rearm: bool) -> int | None:
        nexts = [d for rt in runtimes for d in (rt.fire_due_timers(rearm),) if d is not None]
        timelines = self.broker.timelines
        if timelines is not None:       # what the timers did, at the time they did it (its tick's work)
            for gid in list(timelines.seen):
                timelines.observe(gid, None)
        return min(nexts, default=None)

    def _runtimes(self):
        b = self.broker
        return (b.group_coordinator, b.transaction_coordinator, b.share_coordinator)

    # -- reset -----------------------------------------------------------------------------------
    def reset(self) -> dict:
        """Back to an empty broker (see the module doc); answers what was removed."""
        b = self.broker
        md = b.metadata
        for w in list(self.waiters):
            self._finish(w, False, "the broker was reset")
        # The coordinators first: each partition unloads (parked requests answered as by a moved
        # coordinator: NOT_COORDINATOR; its timers stop; what it held is written), its log is
        # emptied (kept, not deleted: a new __consumer_offsets costs 50 partitions' files), and
        # it is loaded again, empty, below.
        groups = 0
        for rt in self._runtimes():
            runtime = rt.runtime
            for p in list(runtime.shards):
                shard = runtime.shards[p]
                if rt is b.group_coordinator and runtime.is_active(p):
                    groups += len(shard.groups)
                runtime.unload(p)
            topic = md.get(rt.topic)
            for p in range(topic.num_partitions if topic is not None else 0):
                plog = b.data_path.log(rt.topic, p)
                if plog is not None:
                    plog.truncate_to(0)
        b.share_partitions.reset()
        topics = sorted(n for n in md.topics if n not in {rt.topic for rt in self._runtimes()})
        for name in topics:
            topic = md.delete_topic(name)
            b.data_path.delete_partitions(name, topic.num_partitions)
        # dynamic configs back to the static ones
        md.broker_configs.clear()
        md.group_configs.clear()
        b.group_coordinator.group_configs.clear()
        from .admin import apply_dynamic_broker_configs
        apply_dynamic_broker_configs(b)
        if b.faults is not None:
            b.faults.apply({"fault": "clear"})
        if b.timelines is not None:
            b.timelines.clear()
        b.clock.offset_ms = 0
        for rt in self._runtimes():     # the emptied coordinator partitions, loaded again
            topic = md.get(rt.topic)
            for p in range(topic.num_partitions if topic is not None else 0):
                rt.runtime.load_empty(p)
        b.group_coordinator.on_topics_changed()
        log.warning("reset: %d topic(s) and %d group(s) removed", len(topics), groups)
        return {"topics_deleted": topics, "groups_deleted": groups}

    # -- state as plain data -----------------------------------------------------------------------
    def topics(self, internal: bool = False) -> list[dict]:
        """Every topic (the internal ones too with ``internal``) with its partitions' offsets."""
        out = []
        for t in sorted(self.broker.metadata.topics.values(), key=lambda t: t.name):
            if t.is_internal and not internal:
                continue
            parts = []
            for p in range(t.num_partitions):
                plog = self.broker.data_path.log(t.name, p)
                parts.append({"partition": p, "log_start_offset": getattr(plog, "log_start_offset", 0),
                              "high_watermark": getattr(plog, "high_watermark", 0)})
            out.append({"name": t.name, "internal": t.is_internal, "partitions": parts, "configs": t.configs})
        return out

    def _shard(self, gid: str):
        rt = self.broker.group_coordinator
        p = rt.shard_for(gid)
        return rt.shards[p] if rt.runtime.is_active(p) else None

    def groups(self) -> list[dict]:
        out = []
        for shard in self.broker.group_coordinator.runtime.active_shards():
            for gid in list(shard.groups):
                g = self.group(gid)
                if g is not None:
                    out.append(g)
        return sorted(out, key=lambda g: g["group_id"])

    def group(self, gid: str) -> dict | None:
        """The group as JSON: type, state, generation (epoch), members with their assignments
        ({topic: [partitions]}) and its committed offsets; None when there is no such group."""
        shard = self._shard(gid)
        if shard is None:
            return None
        offsets = {}
        for topic, parts in shard.offset_metadata_manager.offsets.get(gid, {}).items():
            offsets[topic] = {str(p): o.committed_offset for p, o in sorted(parts.items())}
        group = shard.groups.get(gid)
        kind = getattr(group, "type", None)
        if kind is GroupType.CLASSIC:
            classic = group
            if classic.state is ClassicGroupState.DEAD:
                return None
            members = [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                        "instance_id": m.group_instance_id, "session_timeout_ms": m.session_timeout_ms,
                        "assignment": decode_assignment(m.assignment)
                        if classic.protocol_type in (None, "", "consumer") else {}}
                       for m in classic.members.values()]
            return {"group_id": gid, "type": "classic", "state": str(classic.state),
                    "protocol_type": classic.protocol_type, "protocol": classic.protocol_name,
                    "generation": classic.generation_id, "leader": classic.leader_id,
                    "members": members, "offsets": offsets}
        if kind is GroupType.CONSUMER:
            cg = group
            members = [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                        "instance_id": m.instance_id, "member_epoch": m.member_epoch,
                        "classic": m.classic_member_metadata is not None,
                        "assignment": self._named(m.assigned_partitions)}
                       for m in cg.members.values()]
            return {"group_id": gid, "type": "consumer", "state": cg.state.value, "generation": cg.group_epoch,
                    "assignment_epoch": cg.assignment_epoch, "members": members, "offsets": offsets}
        if group is not None:   # a type with no view of its own here yet (share groups): the common part
            return {"group_id": gid, "type": str(kind), "state": group.state_string(), "generation": None,
                    "members": [], "offsets": offsets}
        if offsets:         # offsets only (a group that commits without joining)
            return {"group_id": gid, "type": "classic", "state": "Empty", "generation": 0, "members": [],
                    "offsets": offsets}
        return None

    def _named(self, assignment) -> dict:
        out = {}
        for tid, parts in assignment.items():
            t = self.broker.metadata.by_id(tid)
            out[t.name if t is not None else tid.hex()] = sorted(parts)
        return out

    def transactions(self) -> list[dict]:
        out = []
        for shard in self.broker.transaction_coordinator.runtime.active_shards():
            for m in shard.transactions.values():
                out.append(self._transaction(m))
        return sorted(out, key=lambda t: t["transactional_id"])

    def transaction(self, tid: str) -> dict | None:
        rt = self.broker.transaction_coordinator
        p = rt.shard_for(tid)
        m = rt.shards[p].transactions.get(tid) if rt.runtime.is_active(p) else None
        return None if m is None else self._transaction(m)

    @staticmethod
    def _transaction(m) -> dict:
        return {"transactional_id": m.transactional_id, "state": m.state.kafka_name,
                "producer_id": m.producer_id, "producer_epoch": m.producer_epoch,
                "timeout_ms": m.txn_timeout_ms, "start_timestamp_ms": m.txn_start_timestamp,
                "partitions": sorted(f"{t}-{p}" for t, p in m.partitions)}

    def lag(self, gid: str, topics=()) -> tuple[int, dict]:
        """The group's lag: high watermark minus committed offset (the log start offset when
        none) over the partitions it committed or was assigned, and every partition of
        ``topics``. Returns (total, {topic: {partition: lag}})."""
        g = self.group(gid) or {"offsets": {}, "members": []}
        parts: set[tuple[str, int]] = {(t, int(p)) for t, ps in g["offsets"].items() for p in ps}
        for m in g["members"]:
            parts.update((t, p) for t, ps in m["assignment"].items() for p in ps)
        for t in topics:
            topic = self.broker.metadata.get(t)
            if topic is not None:
                parts.update((t, p) for p in range(topic.num_partitions))
        total, detail = 0, {}
        for t, p in sorted(parts):
            plog = self.broker.data_path.log(t, p)
            if plog is None:
                continue
            committed = g["offsets"].get(t, {}).get(str(p))
            lag = max(0, plog.high_watermark - (plog.log_start_offset if committed is None else committed))
            detail.setdefault(t, {})[str(p)] = lag
            total += lag
        return total, detail

    # -- waits -----------------------------------------------------------------------------------
    def wait(self, cmd: dict) -> PendingResponse:
        """A PendingResponse answered with {"ok": true, "state": ...} once the condition holds,
        or {"ok": false, "error", "last_seen", "timeline"} after ``timeout_ms`` (default 10 s)."""
        kind = cmd.get("for")
        check = {"group": self._check_group, "assignment": self._check_assignment,
                 "committed": self._check_committed, "lag": self._check_lag,
                 "transaction": self._check_transaction, "topic": self._check_topic}.get(kind)
        if check is None:
            raise ControlError(f"wait for what? 'for' is one of group, assignment, committed, lag, "
                               f"transaction, topic (got {kind!r})")
        for key in {"group": ("group",), "assignment": ("group", "assignment"), "committed": ("group", "offsets"),
                    "lag": ("group",), "transaction": ("transactional_id", "state"), "topic": ("topic",)}[kind]:
            _need(cmd, key)
        w = _Waiter(kind, cmd, lambda: check(cmd))
        timeout_ms = float(cmd.get("timeout_ms", 10_000))
        if self._evaluate(w, register=True):
            return w.pending
        w.handle = asyncio.get_running_loop().call_later(timeout_ms / 1000.0, self._timed_out, w, timeout_ms)
        return w.pending

    def _evaluate(self, w: _Waiter, register: bool = False) -> bool:
        try:
            done, seen = w.check()
        except Exception as e:      # noqa: BLE001 - a bad condition fails its wait, never the broker
            self._finish(w, False, f"cannot evaluate the condition: {e}")
            return True
        w.last_seen = seen
        if done:
            self._finish(w, True, None)
            return True
        if register:
            self.waiters.append(w)
        return False

    def _finish(self, w: _Waiter, ok: bool, error) -> None:
        if w in self.waiters:
            self.waiters.remove(w)
        if w.handle is not None:
            w.handle.cancel()
        if w.pending.answered:
            return
        if ok:
            w.pending.answer({"ok": True, "state": w.last_seen})
            return
        answer = {"ok": False, "error": error, "wait": w.params, "last_seen": w.last_seen}
        gid = w.params.get("group")
        if gid and self.broker.timelines is not None:
            answer["timeline"] = self.broker.timelines.timeline(gid)
        w.pending.answer(answer)

    def _timed_out(self, w: _Waiter, timeout_ms: float) -> None:
        w.handle = None
        self._evaluate(w)           # one last look (and the state it shows)
        if not w.pending.answered:
            self._finish(w, False, f"timed out after {timeout_ms:.0f} ms waiting for {w.kind}")

    def _on_group_change(self, shard) -> None:
        if not self.waiters:
            return
        for w in list(self.waiters):
            if w.kind in GROUP_WAITS or (shard is None and w.kind == "topic"):
                self._evaluate(w)

    def _on_transaction_change(self, shard) -> None:
        if not self.waiters:
            return
        for w in list(self.waiters):
            if w.kind == "transaction":
                self._evaluate(w)

    # the conditions: fn(params) -> (done, what was seen)
    def _check_group(self, p):
        g = self.group(p["group"])
        if g is None:
            return p.get("state") in ("Dead", "dead") and p.get("members") in (None, 0), None
        ok = ((p.get("state") is None or g["state"].lower() == str(p["state"]).lower())
              and (p.get("members") is None or len(g["members"]) == int(p["members"]))
              and (p.get("type") is None or g["type"] == p["type"]))
        return ok, g

    def _check_assignment(self, p):
        g = self.group(p["group"])
        if g is None:
            return False, None
        want = p["assignment"]
        seen = {}
        for key in want:
            member = next((m for m in g["members"] if key in (m["member_id"], m["client_id"], m["instance_id"])),
                          None)
            seen[key] = None if member is None else member["assignment"]
        ok = all(seen[k] is not None and _norm(seen[k]) == _norm(v) for k, v in want.items())
        return ok, {"group": g, "assignments": seen}

    def _check_committed(self, p):
        g = self.group(p["group"])
        offsets = g["offsets"] if g is not None else {}
        ok = all(offsets.get(t, {}).get(str(part), -1) >= int(o)
                 for t, parts in p["offsets"].items() for part, o in parts.items())
        return ok, {"offsets": offsets}

    def _check_lag(self, p):
        total, detail = self.lag(p["group"], p.get("topics") or ())
        return total <= int(p.get("lag", 0)), {"lag": total, "partitions": detail}

    def _check_transaction(self, p):
        t = self.transaction(p["transactional_id"])
        return t is not None and t["state"].lower() == str(p["state"]).lower(), t

    def _check_topic(self, p):
        topic = self.broker.metadata.get(p["topic"])
        if topic is None:
            return bool(p.get("deleted")), None
        ok = not p.get("deleted") and (p.get("partitions") is None or topic.num_partitions == int(p["partitions"]))
        return ok, {"name": topic.name, "partitions": topic.num_partitions}


def _need(cmd: dict, key: str):
    if cmd.get(key) is None:
        raise ControlError(f"missing {key!r}")
    return cmd[key]


def _norm(assignment) -> dict:
    """{topic: sorted partitions}, from a dict or a list of (topic, partition) / "topic-p"."""
    if isinstance(assignment, dict):
        return {t: sorted(int(p) for p in ps) for t, ps in assignment.items() if ps}
    out: dict = {}
    for item in assignment:
        if isinstance(item, str):
            t, _, part = item.rpartition("-")
        else:
            t, part = item
        out.setdefault(t, []).append(int(part))
    return {t: sorted(ps) for t, ps in out.items()}
