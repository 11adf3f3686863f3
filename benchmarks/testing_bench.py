#!/usr/bin/env python3
"""Test-broker start-up: the ``kafka_broker`` fixture's in-process broker vs a ``kgroup serve``
subprocess, each from "start" to the first successful produce, in the same run.

Each start gets a fresh data directory and an ephemeral port, exactly as the fixtures do
(``kgroup.testing.KafkaBroker``; ``process=True`` runs ``python -m kgroup serve``). The first
produce is one record through kgroup's own producer (acks=all, so it is fsynced), to a topic
created by the produce (auto-creation). The two kinds alternate, so the machine's load hits both
alike; p50 and p90 over ``--starts`` of each. The first in-process start pays the broker's imports
once per test session; it is printed apart.

Usage (from the repo root; ~15 s)::

    python benchmarks/testing_bench.py [--starts 20]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kgroup.testing.broker import KafkaBroker  # noqa: E402


def one_start(process: bool) -> float:
    d = tempfile.mkdtemp(prefix="kgroup-bench-")
    b = KafkaBroker(os.path.join(d, "data"), process=process)
    try:
        t0 = time.perf_counter()
        b.start()
        md = b.produce("bench", [b"first"])
        elapsed = time.perf_counter() - t0
        assert md[0].offset == 0, md
        return elapsed
    finally:
        b.close()
        shutil.rmtree(d, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--starts", type=int, default=20)
    args = ap.parse_args()
    first = one_start(process=False)
    times = {False: [], True: []}
    for _ in range(args.starts):
        for process in (False, True):
            times[process].append(one_start(process))

    def pct(xs, q):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(q * len(xs)))]
    print(f"start-up to first successful produce, {args.starts} starts each (alternating), ms")
    print(f"{'broker':<34}{'p50':>8}{'p90':>8}{'min':>8}{'max':>8}")
    for process, label in ((False, "kafka_broker fixture (in-process)"), (True, "kgroup serve (subprocess)")):
        xs = [t * 1000 for t in times[process]]
        print(f"{label:<34}{statistics.median(xs):>8.0f}{pct(xs, 0.9):>8.0f}{min(xs):>8.0f}{max(xs):>8.0f}")
    print(f"first in-process start of this interpreter (imports the broker): {first * 1000:.0f} ms")
    ratio = statistics.median(times[True]) / statistics.median(times[False])
    print(f"subprocess / in-process p50: {ratio:.1f}x; goal p50 <= 300 ms: "
          f"{'met' if statistics.median(times[False]) <= 0.3 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
