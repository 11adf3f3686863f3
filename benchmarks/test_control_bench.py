#!/usr/bin/env python3
"""A suite of small group tests run three ways, side by side in one run: a fresh broker per
test, one broker ``reset()`` between tests, and that broker with time travel instead of a real
session timeout.

Each test, as a user writes it with confluent-kafka: create a topic (2 partitions), produce 10
records, a consumer joins a group, consumes them and commits (``wait_for_committed``), then one
member is expired — a stuck consumer whose client still runs: its heartbeats stop reaching the
coordinator (fault injection answers them COORDINATOR_LOAD_IN_PROGRESS, which librdkafka
retries), and the test waits for the group to be empty. With time travel the consumer keeps
heartbeating and ``advance_time(session + 1 s)`` expires it at once. The session timeout is
6 s, Kafka's smallest by default (group.min.session.timeout.ms). The fresh-broker and reset runs
use the same names in every test; nothing sleeps (every wait is a ``wait_for_*``).

Usage (from the repo root)::

    python benchmarks/test_control_bench.py [--tests 50]     # ~11 min (two runs of 50 x 6 s)
    python benchmarks/test_control_bench.py --quick          # 5 tests each, ~1.5 min
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kgroup.testing.broker import KafkaBroker  # noqa: E402

SESSION_MS = 6000


def one_test(b: KafkaBroker, travel: bool) -> float:
    """One group test; returns the time from "expire the member" to the group being empty."""
    from confluent_kafka import Consumer, Producer
    b.create_topic("orders", 2)
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
    for i in range(10):
        p.produce("orders", f"v{i}".encode(), key=str(i).encode())
    p.flush(10)
    c = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "billing", "client.id": "stuck",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 500})
    c.subscribe(["orders"])
    got, deadline = 0, time.monotonic() + 30
    while got < 10 and time.monotonic() < deadline:
        m = c.poll(0.1)
        if m is not None and not m.error():
            got += 1
    assert got == 10, got
    c.commit(asynchronous=False)
    b.wait_for_lag("billing", 0, topics=["orders"])
    t0 = time.perf_counter()
    if travel:
        b.advance_time(SESSION_MS / 1000 + 1)
    else:
        b.inject_errors("Heartbeat", ["COORDINATOR_LOAD_IN_PROGRESS"] * 1000, client_id="stuck")
    b.wait_for_group("billing", "Empty", members=0, timeout=SESSION_MS / 1000 + 10)
    expired = time.perf_counter() - t0
    c.close()
    return expired


def run(mode: str, tests: int, root: str) -> tuple[float, list[float], list[float]]:
    """The suite's wall time, each test's set-up (a broker start, or a reset) and expiry."""
    expiries, setups = [], []
    t0 = time.perf_counter()
    if mode == "fresh broker per test":
        for i in range(tests):
            s0 = time.perf_counter()
            b = KafkaBroker(os.path.join(root, f"fresh-{i}")).start()
            setups.append(time.perf_counter() - s0)
            try:
                expiries.append(one_test(b, travel=False))
            finally:
                s0 = time.perf_counter()
                b.close()
                setups[-1] += time.perf_counter() - s0
    else:
        travel = mode.endswith("time travel")
        with KafkaBroker(os.path.join(root, mode.replace(" ", "-"))) as b:
            for _ in range(tests):
                s0 = time.perf_counter()
                b.reset()
                setups.append(time.perf_counter() - s0)
                expiries.append(one_test(b, travel))
    return time.perf_counter() - t0, setups, expiries


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help="5 tests per way")
    args = ap.parse_args()
    tests = 5 if args.quick else args.tests
    with tempfile.TemporaryDirectory(prefix="kgroup-bench-") as root:
        results = {}
        for mode in ("fresh broker per test", "session broker + reset()", "session broker + reset() + time travel"):
            results[mode] = run(mode, tests, root)
    print(f"{tests} small group tests (join, consume 10, commit, expire a member; session.timeout.ms={SESSION_MS})")
    print(f"{'way':42} {'suite wall s':>12} {'per test ms':>12} {'set-up p50 ms':>14} {'expiry p50 ms':>14} "
          f"{'expiry max ms':>14}")
    for mode, (wall, setups, expiries) in results.items():
        print(f"{mode:42} {wall:12.2f} {wall / tests * 1000:12.0f} {statistics.median(setups) * 1000:14.1f} "
              f"{statistics.median(expiries) * 1000:14.1f} {max(expiries) * 1000:14.1f}")
    print("(set-up: starting and closing a broker, or reset(); expiry: from expiring the member to the group "
          "seen empty)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
