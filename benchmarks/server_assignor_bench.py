"""Server-side (KIP-848) assignors: ``uniform`` and ``range`` at 10,000 members x 100,000 partitions.

The shape is Kafka's own JMH benchmark (jmh-benchmarks/.../assignor/ServerSideAssignorBenchmark.java,
memberCount=10000, partitionsToMemberRatio=10, topicCount=100): every member subscribes to the same
100 topics of 1,000 partitions (homogeneous); "heterogeneous" has odd members subscribe to the first
half of the topics. FULL is a fresh assignment; INCREMENTAL recomputes with every member holding its
previous target and one new member joining (one rebalance of a running group), as in Kafka's
benchmark. Times are the best of --rounds runs of assign() alone (spec built beforehand).

Kafka's figure, printed alongside: the Java UniformAssignor assigns 10k members x 10 partitions each
(100k partitions) in about 4 ms in Kafka's JMH benchmark above (running it needs a Gradle build of
Apache Kafka, so it is quoted, not run); our goal is <= 1 s.

    .venv/bin/python benchmarks/server_assignor_bench.py [--quick]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kgroup.coordinator.assignor import ASSIGNORS, GroupSpec, MemberSpec  # noqa: E402

KAFKA_JAVA_MS = 4.0     # UniformAssignor, 10k members x 10 partitions each (Kafka's JMH figure)


def build(members: int, partitions: int, topics: int, heterogeneous: bool):
    ids = [t.to_bytes(16, "big") for t in range(1, topics + 1)]
    counts = {t: partitions // topics for t in ids}
    half = frozenset(ids[:topics // 2])
    everything = frozenset(ids)
    specs = {f"member-{m:05d}": MemberSpec(half if heterogeneous and m % 2 else everything)
             for m in range(members)}
    return specs, counts


def best(fn, rounds: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def check(result, counts) -> tuple[int, int]:
    sizes = [sum(map(len, a.values())) for a in result.values()]
    assert sum(sizes) == sum(counts.values())
    return min(sizes), max(sizes)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="one round, 1,000 members x 10,000 partitions")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    members, partitions, topics = (1000, 10_000, 100) if args.quick else (10_000, 100_000, 100)
    rounds = 1 if args.quick else args.rounds
    print(f"{members:,} members x {partitions:,} partitions over {topics} topics, best of {rounds}")
    print(f"{'assignor':8} {'subscriptions':14} {'assignment':12} {'ms':>9}  {'min/max per member':>18}  "
          f"Kafka Java (UniformAssignor)")
    for name in ("uniform", "range"):
        assign = ASSIGNORS[name]
        for hetero in (False, True):
            specs, counts = build(members, partitions, topics, hetero)
            group = GroupSpec.of(specs)
            full_s, first = best(lambda a=assign, g=group, c=counts: a(g, c), rounds)
            lo, hi = check(first, counts)
            kafka_row = name == "uniform" and not hetero and not args.quick
            java = f"~{KAFKA_JAVA_MS:g} ms (10k x 10 each)" if kafka_row else ""
            kind = "heterogeneous" if hetero else "homogeneous"
            print(f"{name:8} {kind:14} {'FULL':12} {full_s * 1000:9.1f}  {lo:>8}/{hi:<9}  {java}")
            # INCREMENTAL: everyone holds its target, one member joins
            held = {m: s._replace(assignment=first[m]) for m, s in specs.items()}
            held["member-new"] = MemberSpec(next(iter(specs.values())).subscribed_topic_ids)
            group2 = GroupSpec.of(held)
            inc_s, second = best(lambda a=assign, g=group2, c=counts: a(g, c), rounds)
            lo, hi = check(second, counts)
            print(f"{name:8} {kind:14} {'INCREMENTAL':12} {inc_s * 1000:9.1f}  {lo:>8}/{hi:<9}")
    print("goal: uniform, homogeneous, 10,000 x 100,000 FULL <= 1000 ms")


if __name__ == "__main__":
    main()
