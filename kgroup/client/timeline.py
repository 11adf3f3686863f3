"""``kgroup groups --describe --group G --timeline``: a group's rebalance timeline as the broker
keeps it (kgroup/broker/timeline.py), asked for over the Kafka protocol (a Produce of the group
id to ``kgroup/group-timeline``, a topic name Kafka forbids; a broker that keeps no timelines
answers UNKNOWN_TOPIC_OR_PARTITION)."""
from __future__ import annotations

import datetime
import json

from ..protocol.errors import ErrorCode
from ..timeline_text import describe_event
from .fault_injection import control_request

TIMELINE_TOPIC = "kgroup/group-timeline"


class TimelineUnavailable(RuntimeError):
    pass


def fetch_timeline(bootstrap_server: str, group: str, timeout: float = 10.0) -> list[dict]:
    code, message = control_request(bootstrap_server, TIMELINE_TOPIC, group.encode(), timeout)
    if code != ErrorCode.NONE:
        raise TimelineUnavailable(f"the broker at {bootstrap_server} keeps no rebalance timelines "
                                  f"({ErrorCode(code).name}): they are kept when metrics.listener or "
                                  "kgroup.fault.injection.enable is set")
    return json.loads(message).get(group, [])


def print_timeline(bootstrap_server: str, group: str, out=None) -> int:
    import sys
    out = out or sys.stdout
    try:
        events = fetch_timeline(bootstrap_server, group)
    except (TimelineUnavailable, OSError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    print(f"\nGROUP {group}: rebalance timeline (kept in the broker's memory since it started; oldest first)",
          file=out)
    if not events:
        print("(no events)", file=out)
        return 0
    print(f"{'TIME':<23} {'EVENT':<18} DETAIL", file=out)
    for e in events:
        t = datetime.datetime.fromtimestamp(e["time_ms"] / 1000, datetime.timezone.utc)
        print(f"{t.strftime('%Y-%m-%d %H:%M:%S')}.{t.microsecond // 1000:03d} {e['event']:<18} {describe_event(e)}",
              file=out)
    return 0
