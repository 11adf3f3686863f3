"""Consumer-group lag, as ``kgroup groups --describe --all-groups`` computes it, for Spark jobs.

:func:`collect_lag` asks the broker (kgroup Admin) for every group, its members' assignments
and committed offsets, and the log end offsets of those partitions; one :class:`LagRow` per
partition that is assigned to a member or has a committed offset (the rows ConsumerGroupCommand
prints; current offset and lag are None for an assigned partition without a commit).
:func:`lag_dataframe` turns the rows into a Spark DataFrame and :func:`plot_lag` draws the total
lag per group as a PNG bar chart (matplotlib, Agg backend).
"""
from __future__ import annotations

from typing import NamedTuple

from kgroup.client.admin import LATEST
from kgroup.client.sync import KafkaAdmin

MISSING = "-"


class LagRow(NamedTuple):
    group: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str
    state: str


LAG_SCHEMA = ("group string, topic string, partition int, current_offset long, log_end_offset long, lag long, "
              "consumer_id string, state string")


def collect_lag(bootstrap_servers: str, groups: list[str] | None = None) -> list[LagRow]:
    """Lag rows of ``groups`` (default: every group the broker lists), sorted by group, topic,
    partition."""
    rows: list[LagRow] = []
    with KafkaAdmin(bootstrap_servers=bootstrap_servers, client_id="kgroup-lag-report") as admin:
        names = groups if groups is not None else [g.group_id for g in admin.list_groups()]
        for group in sorted(names):
            desc = admin.describe_groups([group])[group]
            if desc.error.value or desc.state == "Dead":
                continue
            committed = admin.list_group_offsets(group)
            owner = {}
            for m in desc.members:
                for tp in m.assignment:
                    owner[tp] = m.member_id
            tps = sorted(set(owner) | set(committed))
            if not tps:
                continue
            ends = admin.list_offsets({tp: LATEST for tp in tps})
            for tp in tps:
                om = committed.get(tp)
                end = ends.get(tp)
                end_offset = end[0] if isinstance(end, tuple) else None
                current = om.offset if om is not None else None
                lag = end_offset - current if current is not None and end_offset is not None else None
                rows.append(LagRow(group, tp.topic, tp.partition, current, end_offset, lag,
                                   owner.get(tp, MISSING), desc.state))
    rows.sort(key=lambda r: (r.group, r.topic, r.partition))
    return rows


def lag_dataframe(spark, rows: list[LagRow]):
    """The rows as a DataFrame with :data:`LAG_SCHEMA`."""
    return spark.createDataFrame([tuple(r) for r in rows], LAG_SCHEMA)


def lag_per_group(rows: list[LagRow]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for r in rows:
        totals[r.group] = totals.get(r.group, 0) + (r.lag or 0)
    return totals


def plot_lag(rows: list[LagRow], path: str, title: str = "Consumer lag per group") -> dict[str, int]:
    """Write a bar chart of the total lag per group to ``path`` (PNG); returns the totals."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    totals = lag_per_group(rows)
    names = sorted(totals)
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(names) + 2), 4))
    try:
        bars = ax.bar(range(len(names)), [totals[n] for n in names], color="#4c72b0")
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=30, ha="right")
        ax.bar_label(bars)
        ax.set_ylabel("lag (records)")
        ax.set_title(title)
        if not names:
            ax.text(0.5, 0.5, "no consumer groups", ha="center", va="center", transform=ax.transAxes)
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return totals
