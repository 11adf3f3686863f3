"""Sticky assignor: kgroup vs kafka-python 3.0.12, on identical inputs.

For each size (members x partitions over 10 or 100 topics) two cases run:

* fresh     - nobody owns anything yet;
* rebalance - one member left; the others report (in their sticky user data) the partitions
              they got in kgroup's fresh assignment, with generation 1.

"equal": every member subscribes to every topic (kgroup's constrained algorithm); "unequal":
odd members subscribe to half the topics (the general algorithm, kafka-python's only one).
kgroup's time is the best of several runs; kafka-python's is a single run at the large size
(tens of seconds there).  The unequal group at 1000 x 10,000 is run for kgroup only: a single
fresh kafka-python run of it took about 300 s on the 2-core development machine.
``balance`` is max - min partitions per member, ``moved`` the partitions that changed owner
among the members that stayed (0 is perfectly sticky).

    .venv/bin/python benchmarks/assignor_bench.py [--quick]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor  # noqa: E402
from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData  # noqa: E402

from kgroup.client.assignors import (Assignment, ClusterMetadata, StickyAssignor,  # noqa: E402
                                     Subscription, TopicPartition)


def make_group(members: int, partitions: int, topics: int):
    counts = {f"topic-{t:03d}": partitions // topics for t in range(topics)}
    names = [f"consumer-{m:04d}-{(m * 2654435761) % 2**32:08x}" for m in range(members)]
    return counts, list(counts), names


def topics_of(name: str, topics: list[str], unequal: bool) -> list[str]:
    odd = int(name.split("-")[1]) % 2 == 1
    return topics[:len(topics) // 2] if unequal and odd else topics


def ours(cluster, topics, names, previous, unequal=False):
    subs = {}
    for name in names:
        user_data = None
        if previous is not None:
            member = StickyAssignor()
            member.on_assignment(Assignment(previous[name]), generation_id=1)
            user_data = member.subscription_user_data(set(topics))
        subs[name] = Subscription(topics_of(name, topics, unequal), user_data)
    leader = StickyAssignor()
    start = time.perf_counter()
    result = leader.assign(cluster, subs)
    elapsed = time.perf_counter() - start
    return elapsed, {m: list(a.partitions) for m, a in result.items()}


def theirs(cluster, topics, names, previous, unequal=False):
    members = []
    for name in names:
        user_data = None
        if previous is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in previous[name]:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            user_data = StickyAssignorUserData(list(by_topic.items()), 1).encode()
        members.append(SimpleNamespace(member_id=name, metadata=SimpleNamespace(
            topics=topics_of(name, topics, unequal), user_data=user_data)))
    start = time.perf_counter()
    result = StickyPartitionAssignor().assign(cluster, members)
    elapsed = time.perf_counter() - start
    return elapsed, {m: [TopicPartition(tp.topic, tp.partition) for tp in a.partitions()]
                     for m, a in result.items()}


def check(counts, assignment) -> int:
    """Validity (each partition exactly once) and balance (max - min)."""
    flat = [tp for parts in assignment.values() for tp in parts]
    assert len(flat) == len(set(flat)) == sum(counts.values()), "invalid assignment"
    sizes = [len(parts) for parts in assignment.values()]
    return max(sizes) - min(sizes)


def moved(previous, assignment) -> int:
    return sum(len(set(previous[m]) - set(parts)) for m, parts in assignment.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only 100 x 1,000")
    args = parser.parse_args()
    sizes = [(100, 1_000, 10)] if args.quick else [(100, 1_000, 10), (1_000, 10_000, 100)]

    rows = []
    for members, partitions, topics in sizes:
        counts, topic_names, names = make_group(members, partitions, topics)
        cluster = ClusterMetadata(counts)
        large = members > 100
        for unequal in (False, True):
            skip_theirs = large and unequal
            repeats = 3 if large else 10
            their_repeats = 1 if large else 3
            label = f"{members}x{partitions}", "unequal" if unequal else "equal"

            def timed(fn, group, previous, n, cluster=cluster, topic_names=topic_names, unequal=unequal):
                return min((fn(cluster, topic_names, group, previous, unequal) for _ in range(n)),
                           key=lambda r: r[0])

            t_o, fresh = timed(ours, names, None, repeats)
            t_t, fresh_t = (None, None) if skip_theirs else timed(theirs, names, None,
                                                                   their_repeats)
            rows.append((*label, "fresh", t_o, t_t, check(counts, fresh),
                         None if fresh_t is None else check(counts, fresh_t), None, None))

            stayers = names[:members // 2] + names[members // 2 + 1:]  # one member leaves
            t_o, again = timed(ours, stayers, fresh, repeats)
            t_t, again_t = (None, None) if skip_theirs else timed(theirs, stayers, fresh,
                                                                   their_repeats)
            rows.append((*label, "rebalance", t_o, t_t, check(counts, again),
                         None if again_t is None else check(counts, again_t),
                         moved(fresh, again), None if again_t is None else moved(fresh, again_t)))

    def show(value) -> str:
        return "-" if value is None else str(value)

    print(f"{'size':<11}{'subs':<8}{'case':<10}{'kgroup':>9}{'kafka-python':>14}{'speed-up':>9}"
          f"{'balance k/kp':>14}{'moved k/kp':>12}")
    for size, subs, case, t_o, t_t, b_o, b_t, m_o, m_t in rows:
        theirs_ms = "-" if t_t is None else f"{t_t * 1000:.1f}ms"
        ratio = "-" if t_t is None else f"{t_t / t_o:.0f}x"
        moved_txt = "-" if m_o is None else f"{m_o}/{show(m_t)}"
        print(f"{size:<11}{subs:<8}{case:<10}{t_o * 1000:>7.1f}ms{theirs_ms:>14}{ratio:>9}"
              f"{f'{b_o}/{show(b_t)}':>14}{moved_txt:>12}")
    print("kgroup: best of 10 (100x1000) / 3 (1000x10000) runs; kafka-python: best of 3 / a "
          "single run.")


if __name__ == "__main__":
    main()
