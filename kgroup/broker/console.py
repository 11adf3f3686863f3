"""The web console, on the metrics listener (kgroup/broker/http.py): server-rendered pages, no
JavaScript, no build step, nothing fetched from elsewhere.

- ``/``                 groups, classic and consumer (KIP-848): state, protocol, members, lag;
                        links to each
- ``/groups/<group>``   one group: members and their assignment, committed offsets and lag, the
                        last rebalance, and its rebalance timeline drawn as an inline SVG chart
                        (phases as bars, member events as marks) above the event table; for a
                        consumer group its group and assignment epochs and per member its epoch,
                        reconciliation state, assigned, revoking and target partitions
- ``/share-groups``     share groups (KIP-932): state, epoch, members, share-partitions, lag
- ``/share-groups/<group>``  one share group: members and their assignment, and per share-partition
                        its start offset, records in flight by state (acquired, available,
                        acknowledged, archived) and by delivery count, and lag
- ``/topics``           topics with each partition's log start, high watermark and size
- ``/api/groups``, ``/api/groups/<group>``, ``/api/share-groups``, ``/api/share-groups/<group>``,
  ``/api/topics``: the same as JSON

Every page is built from one snapshot taken on the broker's event loop (``BrokerMetrics.snapshot``
and the group's timeline), so a page never mixes two moments.
"""
from __future__ import annotations

import datetime
import html
import urllib.parse

from ..timeline_text import describe_event

PHASE_COLOURS = {"PreparingRebalance": "#f0ad4e", "CompletingRebalance": "#5bc0de", "Assigning": "#f0ad4e",
                 "Reconciling": "#5bc0de", "Stable": "#5cb85c", "Empty": "#cccccc", "Dead": "#999999"}
MARK_COLOURS = {"member-joined": "#2e7d32", "member-left": "#1565c0", "member-expired": "#c62828",
                "member-removed": "#c62828", "member-fenced": "#c62828", "rebalance-started": "#ef6c00",
                "group-epoch": "#ef6c00", "target-assignment": "#6a1b9a"}
STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;font-size:.9em;vertical-align:top}
th{background:#f4f4f4} td.n{text-align:right} nav a{margin-right:1em}
.state{padding:.1em .4em;border-radius:.3em;background:#eee} code{font-size:.85em}
"""


def _e(v) -> str:
    return html.escape("" if v is None else str(v))


def _time(ms) -> str:
    t = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return t.strftime("%H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{_e(title)} - kgroup</title>"
            f"<style>{STYLE}</style></head><body><nav><a href='/'>Groups</a><a href='/share-groups'>Share groups</a>"
            f"<a href='/topics'>Topics</a>"
            f"<a href='/metrics'>Metrics</a></nav><h1>{_e(title)}</h1>{body}</body></html>")


def group_lag(snap, g) -> int:
    hw = {(t, p): h for t, ps in snap["topics"].items() for p, _, h in ps}
    return sum(hw[tp] - off for tp, off in g["offsets"].items() if tp in hw and off >= 0)


def share_group_lag(g) -> int | None:
    """The lag of a share group's share-partitions (None when none has a start offset)."""
    lags = [sp["lag"] for sp in g["partitions"] if sp["lag"] is not None]
    return sum(lags) if lags else None


def _offsets(snap, g) -> list[dict]:
    hw = {(t, p): h for t, ps in snap["topics"].items() for p, _, h in ps}
    return [{"topic": t, "partition": p, "committed": off, "high_watermark": hw.get((t, p)),
             "lag": hw[(t, p)] - off if (t, p) in hw else None}
            for (t, p), off in sorted(g["offsets"].items())]


def group_json(snap, gid, g, timeline=None) -> dict:
    out = {"group": gid, "type": "classic", "state": g["state"], "protocol_type": g["protocol_type"],
           "protocol": g["protocol"], "generation": g["generation"], "leader": g["leader"], "members": g["members"],
           "lag": group_lag(snap, g), "offsets": _offsets(snap, g)}
    if timeline is not None:
        out["timeline"] = timeline
        out["last_rebalance"] = last_rebalance(timeline)
    return out


def consumer_group_json(snap, gid, g, timeline=None) -> dict:
    """A consumer group (KIP-848): epochs, members with their epochs and partitions, offsets."""
    out = {"group": gid, "type": "consumer", "state": g["state"], "protocol_type": "consumer",
           "group_epoch": g["group_epoch"], "assignment_epoch": g["assignment_epoch"], "assignor": g["assignor"],
           "members": g["members"], "lag": group_lag(snap, g), "offsets": _offsets(snap, g)}
    if timeline is not None:
        out["timeline"] = timeline
        out["last_rebalance"] = last_consumer_rebalance(timeline)
    return out


def last_consumer_rebalance(timeline: list[dict]) -> dict | None:
    """A consumer group's newest rebalance: the group epoch bump that started it, its target
    assignment, and when the group was Stable again (None before any)."""
    starts = [i for i, e in enumerate(timeline) if e["event"] == "group-epoch"]
    if not starts:
        return None
    i = starts[-1]
    out = {"started_ms": timeline[i]["time_ms"], "cause": timeline[i]["cause"],
           "from_group_epoch": timeline[i]["previous_epoch"], "group_epoch": timeline[i]["group_epoch"]}
    for e in timeline[i + 1:]:
        if e["event"] == "target-assignment":
            out["assignment_epoch"], out["assignment_ms"], out["target"] = \
                e["assignment_epoch"], e["assignment_ms"], e["target"]
        elif e["event"] == "stable":
            out["stable_epoch"], out["rebalance_ms"], out["assignment"] = \
                e["group_epoch"], e["rebalance_ms"], e["assignment"]
    return out


def last_rebalance(timeline: list[dict]) -> dict | None:
    """The newest rebalance: what started it and how it ended (None before any)."""
    starts = [i for i, e in enumerate(timeline) if e["event"] == "rebalance-started"]
    if not starts:
        return None
    i = starts[-1]
    out = {"started_ms": timeline[i]["time_ms"], "cause": timeline[i]["cause"], "from_generation": timeline[i]["generation"]}
    for e in timeline[i + 1:]:
        if e["event"] == "join-phase-done":
            out["join_phase_ms"], out["waited_for"] = e["duration_ms"], e.get("waited_for")
        elif e["event"] == "stable":
            out["generation"], out["rebalance_ms"], out["assignment"] = e["generation"], e["rebalance_ms"], e["assignment"]
    return out


def timeline_svg(timeline: list[dict], now_ms: int, width: int = 960) -> str:
    """Phases as coloured bars along a time axis, member events as marks below them."""
    if not timeline:
        return "<p>No rebalance events yet.</p>"
    t0 = timeline[0]["time_ms"]
    t1 = max(now_ms, timeline[-1]["time_ms"] + 1)
    left, right = 10, width - 10
    span = max(1, t1 - t0)

    def x(t):
        return left + (right - left) * (t - t0) / span
    parts = [f"<svg id='timeline-chart' xmlns='http://www.w3.org/2000/svg' width='{width}' height='150' "
             f"role='img' aria-label='rebalance timeline'>",
             "<text x='10' y='14' font-size='12'>phases</text>",
             "<text x='10' y='84' font-size='12'>member events</text>"]
    # phases: derived from the state-changing events
    phase_at = []
    for e in timeline:
        state = {"group-created": e.get("state"), "rebalance-started": "PreparingRebalance",
                 "join-phase-done": "CompletingRebalance", "stable": "Stable", "empty": "Empty",
                 "group-deleted": "Dead", "state": e.get("state")}.get(e["event"])
        if state:
            # a classic group's generation, a consumer group's group epoch
            phase_at.append((e["time_ms"], state, e.get("generation", e.get("group_epoch"))))
    for i, (t, state, gen) in enumerate(phase_at):
        end = phase_at[i + 1][0] if i + 1 < len(phase_at) else t1
        w = max(2.0, x(end) - x(t))
        parts.append(f"<rect class='phase' x='{x(t):.1f}' y='20' width='{w:.1f}' height='30' "
                     f"fill='{PHASE_COLOURS.get(state, '#ddd')}'><title>{_e(state)} (epoch/generation {_e(gen)}) "
                     f"from {_time(t)}, {end - t} ms</title></rect>")
        if w > 60:
            parts.append(f"<text x='{x(t) + 3:.1f}' y='40' font-size='11'>{_e(state)} g{_e(gen)}</text>")
    for e in timeline:
        colour = MARK_COLOURS.get(e["event"])
        if colour is None:
            continue
        cx = x(e["time_ms"])
        label = e["event"] + (f" {e.get('client_id')}" if e.get("client_id") else "")
        parts.append(f"<circle class='mark' cx='{cx:.1f}' cy='100' r='5' fill='{colour}'>"
                     f"<title>{_e(_time(e['time_ms']))} {_e(label)}</title></circle>")
    parts.append(f"<line x1='{left}' y1='125' x2='{right}' y2='125' stroke='#888'/>"
                 f"<text x='{left}' y='142' font-size='11'>{_time(t0)}</text>"
                 f"<text x='{right}' y='142' font-size='11' text-anchor='end'>{_time(t1)} (UTC)</text></svg>")
    legend = " ".join(f"<span class='state' style='background:{c}'>{_e(s)}</span>" for s, c in PHASE_COLOURS.items())
    marks = " ".join(f"<span style='color:{c}'>&#9679; {_e(k)}</span>" for k, c in MARK_COLOURS.items())
    return "".join(parts) + f"<p>{legend}<br>{marks}</p>"


class Console:
    def __init__(self, broker):
        self.broker = broker

    def _snapshot(self, group: str | None = None):
        def take():
            snap = self.broker.metrics.snapshot()
            timeline = None
            if group is not None and self.broker.timelines is not None:
                timeline = self.broker.timelines.timeline(group)
            return snap, timeline
        return take

    def handle(self, server, req, method: str, path: str) -> bool:
        if method != "GET":
            return False
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/") if p]
        if parts[:1] == ["api"]:
            return self._api(server, req, parts[1:])
        if len(parts) == 2 and parts[0] == "groups":
            snap, timeline = server.call(self._snapshot(parts[1]))
            page = self.group_page(snap, parts[1], timeline or [])
            server.reply(req, 200 if page else 404, page or _page("Not found", f"<p>No group {_e(parts[1])}.</p>"),
                         "text/html; charset=utf-8")
            return True
        if not parts:
            snap, _ = server.call(self._snapshot())
            server.reply(req, 200, self.groups_page(snap), "text/html; charset=utf-8")
            return True
        if parts == ["topics"]:
            snap, _ = server.call(self._snapshot())
            server.reply(req, 200, self.topics_page(snap), "text/html; charset=utf-8")
            return True
        if parts == ["share-groups"]:
            snap, _ = server.call(self._snapshot())
            server.reply(req, 200, self.share_groups_page(snap), "text/html; charset=utf-8")
            return True
        if len(parts) == 2 and parts[0] == "share-groups":
            snap, _ = server.call(self._snapshot())
            page = self.share_group_page(snap, parts[1])
            server.reply(req, 200 if page else 404,
                         page or _page("Not found", f"<p>No share group {_e(parts[1])}.</p>"),
                         "text/html; charset=utf-8")
            return True
        return False

    def _api(self, server, req, parts) -> bool:
        if parts == ["groups"]:
            snap, _ = server.call(self._snapshot())
            server.reply_json(req, 200, [dict(self._list_row(snap, gid, g), lag=group_lag(snap, g))
                                         for gid, g in self._every_group(snap)])
            return True
        if len(parts) == 2 and parts[0] == "groups":
            snap, timeline = server.call(self._snapshot(parts[1]))
            g = snap["groups"].get(parts[1])
            cg = snap["consumer_groups"].get(parts[1])
            if g is not None:
                server.reply_json(req, 200, group_json(snap, parts[1], g, timeline or []))
            elif cg is not None:
                server.reply_json(req, 200, consumer_group_json(snap, parts[1], cg, timeline or []))
            else:
                server.reply_json(req, 404, {"error": f"no group {parts[1]}"})
            return True
        if parts == ["share-groups"]:
            snap, _ = server.call(self._snapshot())
            server.reply_json(req, 200, [{"group": gid, "state": g["state"], "group_epoch": g["group_epoch"],
                                          "members": len(g["members"]), "share_partitions": len(g["partitions"]),
                                          "lag": share_group_lag(g)}
                                         for gid, g in sorted(snap["share_groups"].items())])
            return True
        if len(parts) == 2 and parts[0] == "share-groups":
            snap, _ = server.call(self._snapshot())
            g = snap["share_groups"].get(parts[1])
            if g is None:
                server.reply_json(req, 404, {"error": f"no share group {parts[1]}"})
            else:
                server.reply_json(req, 200, dict(g, group=parts[1], lag=share_group_lag(g)))
            return True
        if parts == ["topics"]:
            snap, _ = server.call(self._snapshot())
            server.reply_json(req, 200, {t: [{"partition": p, "log_start_offset": ls, "high_watermark": hw,
                                              "size_bytes": snap["log_sizes"].get((t, p))} for p, ls, hw in ps]
                                         for t, ps in sorted(snap["topics"].items())})
            return True
        return False

    # -- pages ---------------------------------------------------------------------------------
    @staticmethod
    def _every_group(snap) -> list:
        """(group id, data) of the classic and the consumer groups, by id."""
        return sorted([*snap["groups"].items(), *snap["consumer_groups"].items()], key=lambda kv: kv[0])

    @staticmethod
    def _list_row(snap, gid, g) -> dict:
        if gid in snap["consumer_groups"] and "group_epoch" in g:
            # a consumer group's protocol is its server-side assignor, its generation its group epoch
            return {"group": gid, "type": "consumer", "state": g["state"], "protocol_type": "consumer",
                    "protocol": g["assignor"], "epoch": g["group_epoch"], "members": len(g["members"])}
        return {"group": gid, "type": "classic", "state": g["state"], "protocol_type": g["protocol_type"],
                "protocol": g["protocol"], "epoch": g["generation"], "members": len(g["members"])}

    @classmethod
    def groups_page(cls, snap) -> str:
        rows = []
        for gid, g in cls._every_group(snap):
            r = cls._list_row(snap, gid, g)
            rows.append(f"<tr class='group-{r['type']}'><td><a href='/groups/{urllib.parse.quote(gid, safe='')}'>"
                        f"{_e(gid)}</a></td><td>{r['type']}</td><td><span class='state'>{_e(r['state'])}</span></td>"
                        f"<td>{_e(r['protocol_type'])}</td><td>{_e(r['protocol'])}</td><td class='n'>{r['epoch']}</td>"
                        f"<td class='n'>{r['members']}</td><td class='n'>{group_lag(snap, g)}</td></tr>")
        table = ("<table id='groups'><tr><th>Group</th><th>Type</th><th>State</th><th>Protocol type</th>"
                 "<th>Protocol / assignor</th><th>Generation / group epoch</th>"
                 f"<th>Members</th><th>Lag</th></tr>{''.join(rows)}</table>") if rows else "<p>No groups.</p>"
        return _page("Consumer groups", table)

    @staticmethod
    def share_groups_page(snap) -> str:
        rows = "".join(
            f"<tr><td><a href='/share-groups/{urllib.parse.quote(gid, safe='')}'>{_e(gid)}</a></td>"
            f"<td><span class='state'>{_e(g['state'])}</span></td><td class='n'>{g['group_epoch']}</td>"
            f"<td class='n'>{len(g['members'])}</td><td class='n'>{len(g['partitions'])}</td>"
            f"<td class='n'>{_e(share_group_lag(g))}</td></tr>"
            for gid, g in sorted(snap["share_groups"].items()))
        table = ("<table id='share-groups'><tr><th>Group</th><th>State</th><th>Group epoch</th><th>Members</th>"
                 f"<th>Share-partitions</th><th>Lag</th></tr>{rows}</table>") if rows else "<p>No share groups.</p>"
        return _page("Share groups", table)

    @staticmethod
    def share_group_page(snap, gid) -> str | None:
        g = snap["share_groups"].get(gid)
        if g is None:
            return None
        body = [f"<p>State <span class='state' id='group-state'>{_e(g['state'])}</span>, group epoch "
                f"{g['group_epoch']}, assignment epoch {g['assignment_epoch']}, total lag "
                f"<b id='group-lag'>{_e(share_group_lag(g))}</b></p>", "<h2>Members</h2>"]
        if g["members"]:
            rows = "".join(
                f"<tr class='member'><td><code>{_e(m['member_id'])}</code></td><td class='n'>{m['member_epoch']}</td>"
                f"<td>{_e(m['client_id'])}</td><td>{_e(m['client_host'])}</td>"
                f"<td>{_e(', '.join(m['subscribed_topics']))}</td>"
                f"<td>{_e('; '.join(f'{t} {p}' for t, p in sorted(m['assignment'].items())))}</td></tr>"
                for m in sorted(g["members"], key=lambda m: m["member_id"]))
            body.append("<table id='members'><tr><th>Member id</th><th>Member epoch</th><th>Client id</th><th>Host</th>"
                        f"<th>Subscribed topics</th><th>Assignment</th></tr>{rows}</table>")
        else:
            body.append("<p>No members.</p>")
        rows = "".join(
            f"<tr class='share-partition'><td>{_e(sp['topic'])}</td><td class='n'>{sp['partition']}</td>"
            f"<td class='n'>{sp['start_offset']}</td><td class='n'>{sp['in_flight']}</td>"
            + "".join(f"<td class='n'>{sp['records'][st]}</td>" for st in ("Acquired", "Available", "Acknowledged",
                                                                           "Archived"))
            + f"<td>{_e(', '.join(f'{c}: {n}' for c, n in sp['delivery_counts'].items()) or '-')}</td>"
            f"<td class='n'>{_e('-' if sp['lag'] is None else sp['lag'])}</td></tr>"
            for sp in g["partitions"])
        body.append("<h2>Share-partitions</h2>" + (
            "<table id='share-partitions'><tr><th>Topic</th><th>Partition</th><th>Start offset</th><th>In flight</th>"
            "<th>Acquired</th><th>Available</th><th>Acknowledged</th><th>Archived</th>"
            f"<th>Delivery counts (count: records)</th><th>Lag</th></tr>{rows}</table>" if rows else "<p>None.</p>"))
        return _page(f"Share group {gid}", "".join(body))

    @staticmethod
    def topics_page(snap) -> str:
        out = []
        for t, ps in sorted(snap["topics"].items()):
            rows = "".join(f"<tr><td class='n'>{p}</td><td class='n'>{ls}</td><td class='n'>{hw}</td>"
                           f"<td class='n'>{snap['log_sizes'].get((t, p), 0)}</td></tr>" for p, ls, hw in ps)
            out.append(f"<h2>{_e(t)}</h2><table class='topic'><tr><th>Partition</th><th>Log start offset</th>"
                       f"<th>High watermark</th><th>Size (bytes)</th></tr>{rows}</table>")
        return _page("Topics", "".join(out) or "<p>No topics.</p>")

    def _timeline_html(self, timeline) -> list[str]:
        body = ["<h2>Rebalance timeline</h2>", timeline_svg(timeline, self.broker.clock.now_ms())]
        rows = "".join(f"<tr><td>{_time(e['time_ms'])}</td><td>{_e(e['event'])}</td><td>{_e(self._detail(e))}</td></tr>"
                       for e in reversed(timeline))
        if rows:
            body.append(f"<table id='events'><tr><th>Time (UTC)</th><th>Event</th><th>Detail</th></tr>{rows}</table>")
        return body

    @staticmethod
    def _offsets_html(data) -> str:
        offs = "".join(f"<tr><td>{_e(o['topic'])}</td><td class='n'>{o['partition']}</td><td class='n'>{o['committed']}</td>"
                       f"<td class='n'>{_e(o['high_watermark'])}</td><td class='n'>{_e(o['lag'])}</td></tr>"
                       for o in data["offsets"])
        return "<h2>Committed offsets</h2>" + (
            f"<table id='offsets'><tr><th>Topic</th><th>Partition</th><th>Committed</th><th>High watermark</th>"
            f"<th>Lag</th></tr>{offs}</table>" if offs else "<p>None.</p>")

    def consumer_group_page(self, snap, gid, timeline) -> str | None:
        g = snap["consumer_groups"].get(gid)
        if g is None:
            return None
        data = consumer_group_json(snap, gid, g, timeline)

        def parts(a) -> str:
            return "; ".join(f"{t} {p}" for t, p in sorted(a.items()))
        body = [f"<p>Consumer group (KIP-848). State <span class='state' id='group-state'>{_e(g['state'])}</span>, "
                f"group epoch <b id='group-epoch'>{g['group_epoch']}</b>, assignment epoch "
                f"<b id='assignment-epoch'>{g['assignment_epoch']}</b>, assignor {_e(g['assignor'])}, "
                f"total lag <b id='group-lag'>{data['lag']}</b></p>", "<h2>Members</h2>"]
        if g["members"]:
            rows = "".join(
                f"<tr class='member'><td><code>{_e(m['member_id'])}</code></td><td class='n'>{m['member_epoch']}</td>"
                f"<td>{_e(m['member_state'])}</td><td>{_e(m['client_id'])}</td><td>{_e(m['client_host'])}</td>"
                f"<td>{_e(m['group_instance_id'] or '')}</td><td>{_e(', '.join(m['subscribed_topics']))}"
                f"{_e(' /' + m['subscribed_topic_regex'] + '/' if m['subscribed_topic_regex'] else '')}</td>"
                f"<td class='assigned'>{_e(parts(m['assignment']))}</td>"
                f"<td class='revoking'>{_e(parts(m['pending_revocation']))}</td>"
                f"<td class='target'>{_e(parts(m['target_assignment']))}</td></tr>"
                for m in sorted(g["members"], key=lambda m: m["member_id"]))
            body.append("<table id='members'><tr><th>Member id</th><th>Member epoch</th><th>Reconciliation</th>"
                        "<th>Client id</th><th>Host</th><th>Group instance id</th><th>Subscribed topics</th>"
                        f"<th>Assigned</th><th>Revoking</th><th>Target</th></tr>{rows}</table>")
        else:
            body.append("<p>No members.</p>")
        last = data["last_rebalance"]
        body.append("<h2>Last rebalance</h2>")
        if last is None:
            body.append("<p id='last-rebalance'>None seen since the broker started.</p>")
        else:
            body.append(
                f"<p id='last-rebalance'>Group epoch {last['from_group_epoch']} &rarr; {last['group_epoch']} at "
                f"{_time(last['started_ms'])} UTC because {_e(last['cause'])}. "
                + (f"Target assignment (epoch {last['assignment_epoch']}) after {last['assignment_ms']} ms. "
                   if "assignment_epoch" in last else "Target assignment not computed yet. ")
                + (f"Group epoch {last['stable_epoch']} Stable after {last['rebalance_ms']} ms."
                   if "stable_epoch" in last else "Members reconciling.") + "</p>")
        body += self._timeline_html(timeline)
        body.append(self._offsets_html(data))
        return _page(f"Group {gid}", "".join(body))

    def group_page(self, snap, gid, timeline) -> str | None:
        g = snap["groups"].get(gid)
        if g is None:
            return self.consumer_group_page(snap, gid, timeline)
        data = group_json(snap, gid, g, timeline)
        body = [f"<p>State <span class='state' id='group-state'>{_e(g['state'])}</span>, protocol "
                f"{_e(g['protocol_type'])}/{_e(g['protocol'])}, generation {_e(g['generation'])}, "
                f"total lag <b id='group-lag'>{data['lag']}</b></p>", "<h2>Members</h2>"]
        if g["members"]:
            rows = "".join(
                f"<tr class='member'><td><code>{_e(m['member_id'])}</code>{' (leader)' if m['member_id'] == g['leader'] else ''}"
                f"</td><td>{_e(m['client_id'])}</td><td>{_e(m['client_host'])}</td><td>{_e(m['group_instance_id'] or '')}</td>"
                f"<td>{_e('; '.join(f'{t} {p}' for t, p in sorted(m['assignment'].items())))}</td></tr>"
                for m in g["members"])
            body.append("<table id='members'><tr><th>Member id</th><th>Client id</th><th>Host</th>"
                        f"<th>Group instance id</th><th>Assignment</th></tr>{rows}</table>")
        else:
            body.append("<p>No members.</p>")
        last = data["last_rebalance"]
        body.append("<h2>Last rebalance</h2>")
        if last is None:
            body.append("<p id='last-rebalance'>None seen since the broker started.</p>")
        else:
            body.append(
                f"<p id='last-rebalance'>Started {_time(last['started_ms'])} UTC because {_e(last['cause'])}. "
                + (f"Join phase {last['join_phase_ms']} ms (waited for {_e(last.get('waited_for') or '-')}). "
                   if "join_phase_ms" in last else "Join phase under way. ")
                + (f"Generation {last['generation']} Stable after {last['rebalance_ms']} ms."
                   if "generation" in last else "") + "</p>")
        body += self._timeline_html(timeline)
        body.append(self._offsets_html(data))
        return _page(f"Group {gid}", "".join(body))

    @staticmethod
    def _detail(e) -> str:
        return describe_event(e)
