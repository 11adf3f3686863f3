"""One wording of rebalance-timeline events (kgroup/broker/timeline.py) for the command line
(``kgroup groups --timeline``) and the web console."""
from __future__ import annotations


def _ms(v) -> str:
    return "-" if v is None else f"{v} ms"


def _partitions(assignment) -> str:
    return ", ".join(f"{t}{p}" for t, p in sorted((assignment or {}).items())) or "-"


def describe_event(e: dict) -> str:
    kind = e["event"]
    if kind in ("member-joined", "member-left", "member-expired", "member-removed", "member-fenced"):
        text = f"{e['member_id']} (client {e.get('client_id')!s}"
        if e.get("group_instance_id"):
            text += f", instance {e['group_instance_id']}"
        text += ")"
        if e.get("subscribed_topics") is not None:
            text += " subscribed to " + (", ".join(e["subscribed_topics"]) or "-")
            if e.get("subscribed_topic_regex"):
                text += f" and /{e['subscribed_topic_regex']}/"
        if e.get("reason"):
            text += f": {e['reason']}"
        return text
    # consumer groups (KIP-848)
    if kind == "group-epoch":
        return f"group epoch {e['previous_epoch']} -> {e['group_epoch']} because {e['cause']}"
    if kind == "target-assignment":
        parts = "; ".join(f"{m}: {_partitions(a)}" for m, a in sorted((e.get("target") or {}).items()))
        return (f"assignment epoch {e['assignment_epoch']} (group epoch {e['group_epoch']}), "
                f"{_ms(e.get('assignment_ms'))} after the bump; target: {parts or '-'}")
    if kind in ("member-reconciled", "member-reconciling"):
        text = (f"{e['member_id']} (client {e.get('client_id')!s}) member epoch {e['previous_member_epoch']} -> "
                f"{e['member_epoch']}, {e['member_state']}, owns {_partitions(e.get('assignment'))}")
        if e.get("pending_revocation"):
            text += f", revoking {_partitions(e['pending_revocation'])}"
        return text
    if kind == "member-subscription":
        return (f"{e['member_id']} (client {e.get('client_id')!s}) subscribed to "
                + (", ".join(e.get("subscribed_topics") or []) or "-")
                + (f" and /{e['subscribed_topic_regex']}/" if e.get("subscribed_topic_regex") else ""))
    if kind == "stable" and "group_epoch" in e:
        parts = "; ".join(f"{m}: {_partitions(a)}" for m, a in sorted((e.get("assignment") or {}).items()))
        return f"group epoch {e['group_epoch']}, rebalance {_ms(e.get('rebalance_ms'))}; assignment: {parts or '-'}"
    if kind == "empty" and "group_epoch" in e:
        return f"no members left (group epoch {e['group_epoch']})"
    if kind == "state" and "group_epoch" in e:
        return f"{e['previous_state']} -> {e['state']} (group epoch {e['group_epoch']})"
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
