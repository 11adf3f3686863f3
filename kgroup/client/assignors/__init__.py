"""Consumer partition assignors: Kafka's ConsumerPartitionAssignor and its four built-in
strategies ("range", "roundrobin", "sticky", "cooperative-sticky")."""
from .base import (AbstractPartitionAssignor, Assignment, ClusterMetadata,
                   ConsumerPartitionAssignor, RebalanceProtocol, Subscription, TopicPartition)
from .cooperative_sticky import CooperativeStickyAssignor
from .range import RangeAssignor
from .roundrobin import RoundRobinAssignor
from .sticky import AbstractStickyAssignor, MemberData, StickyAssignor

ASSIGNORS: dict[str, type[ConsumerPartitionAssignor]] = {
    cls.name: cls for cls in (RangeAssignor, RoundRobinAssignor, StickyAssignor,
                              CooperativeStickyAssignor)
}


def get_assignor(name: str) -> ConsumerPartitionAssignor:
    """A new instance of the built-in assignor called ``name`` (e.g. "cooperative-sticky")."""
    try:
        return ASSIGNORS[name]()
    except KeyError:
        raise ValueError(f"unknown partition assignor {name!r}") from None


__all__ = [
    "ASSIGNORS", "AbstractPartitionAssignor", "AbstractStickyAssignor", "Assignment",
    "ClusterMetadata", "ConsumerPartitionAssignor", "CooperativeStickyAssignor", "MemberData",
    "RangeAssignor", "RebalanceProtocol", "RoundRobinAssignor", "StickyAssignor",
    "Subscription", "TopicPartition", "get_assignor",
]
