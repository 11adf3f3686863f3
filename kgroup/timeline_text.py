"""One wording of rebalance-timeline events (kgroup/broker/timeline.py) for the command line
(``kgroup groups --timeline``) and the web console."""
from __future__ import annotations


def _ms(v) -> str:
    return "-" if v is None else f"{v} ms"


def describe_event(e: dict) -> str:
    kind = e["event"]
    if kind in ("member-joined", "member-left", "member-expired", "member-removed"):
        text = f"{e['member_id']} (client {e.get('client_id')!s}"
        if e.get("group_instance_id"):
            text += f", instance {e['group_instance_id']}"
        text += ")"
        if e.get("reason"):
            text += f": {e['reason']}"
        return text
    if kind == "rebalance-started":
        return f"from {e.get('previous_state')} (generation {e['generation']}) because {e['cause']}"
    if kind == "join-phase-done":
        return (f"generation {e['generation']}, join phase {_ms(e.get('duration_ms'))}, "
                f"{len(e.get('members', []))} member(s), leader {e.get('leader')}, protocol {e.get('protocol')}; "
                f"waited for {e.get('waited_for') or '-'}")
    if kind == "stable":
        parts = "; ".join(f"{m}: " + ", ".join(f"{t}{p}" for t, p in sorted(a.items()))
                          for m, a in sorted((e.get("assignment") or {}).items()))
        return (f"generation {e['generation']} ({e.get('protocol')}), sync phase {_ms(e.get('sync_phase_ms'))}, "
                f"rebalance {_ms(e.get('rebalance_ms'))}; assignment: {parts or '-'}")
    if kind == "empty":
        return f"no members left (generation {e['generation']})"
    return ", ".join(f"{k}={v}" for k, v in e.items() if k not in ("event", "time_ms"))
