"""Errors of the cluster mode that ``kgroup serve`` reports in one line (no kazoo import here)."""


class ClusterStartError(RuntimeError):
    """The broker cannot join its cluster: ZooKeeper unreachable, or its node id registered by
    a live broker."""
