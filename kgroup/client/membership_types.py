"""Value types of the membership state machine: member states, generations, the machine's
outputs (what the driver must do, in order), its configuration and Java's ExponentialBackoff.

Sans-IO like the machine: no asyncio, socket or time imports.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Callable, Mapping

from .assignors import TopicPartition
from .types import NodeInfo

JOIN_GROUP_TIMEOUT_LAPSE_MS = 5000
MAX_REASON_LENGTH = 255


class MemberState(enum.Enum):
    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
    STABLE = "STABLE"


@dataclass(frozen=True)
class Generation:
    generation_id: int
    member_id: str
    protocol_name: str | None


NO_GENERATION = Generation(-1, "", None)


# --- outputs ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class SendRequest:
    token: int
    request: object
    to_coordinator: bool = True  # False: the least-loaded node (FindCoordinator)
    timeout_ms: int | None = None  # None: request.timeout.ms
    min_version: int | None = None  # the request uses a field older versions lack
    max_version: int | None = None  # the request names its topics (no topic ids below the next version)


@dataclass(frozen=True)
class FetchMetadata:
    """The leader needs partition counts of every topic the group subscribes to."""
    token: int
    topics: tuple[str, ...]


@dataclass(frozen=True)
class ResolveTopicIds:
    """KIP-848 assignments name topics by id: refresh metadata (these topics; None: all topics)
    and answer with :meth:`on_topic_names` and the id -> name map the cluster returned."""
    token: int
    topics: tuple[str, ...] | None


@dataclass(frozen=True)
class CoordinatorDiscovered:
    node: NodeInfo


@dataclass(frozen=True)
class CoordinatorLost:
    """Disconnect from the old coordinator (its in-flight requests then fail)."""
    node: NodeInfo
    reason: str


@dataclass(frozen=True)
class PendingRevocation:
    """Stop fetching and returning records of these partitions (eager commit before revocation)."""
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class PartitionsRevoked:
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class PartitionsAssigned:
    partitions: tuple[TopicPartition, ...]  # newly added ones; the whole set is .assignment


@dataclass(frozen=True)
class PartitionsLost:
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class CommitCompleted:
    token: int
    offsets: Mapping
    error: BaseException | None
    kind: str = "user"  # "user", "auto" or "prepare" (before revocation)


@dataclass(frozen=True)
class GroupError:
    """Raise this from the application's poll(); when fatal the member is finished."""
    error: BaseException
    fatal: bool = False


CALLBACKS = (PartitionsRevoked, PartitionsAssigned, PartitionsLost)


@dataclass
class MembershipConfig:
    group_id: str
    group_instance_id: str | None = None
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000
    rebalance_timeout_ms: int = 300000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    client_rack: str | None = None
    leave_group_on_close: bool = True
    group_protocol: str = "classic"  # "consumer": KIP-848's ConsumerGroupHeartbeat protocol
    group_remote_assignor: str | None = None  # KIP-848: the server-side assignor to ask for

    @classmethod
    def from_consumer_config(cls, c) -> "MembershipConfig":
        return cls(c["group.id"], c["group.instance.id"], c["session.timeout.ms"], c["heartbeat.interval.ms"],
                   c["max.poll.interval.ms"], c["retry.backoff.ms"], c["retry.backoff.max.ms"],
                   c["enable.auto.commit"], c["auto.commit.interval.ms"], c["client.rack"] or None,
                   c["internal.leave.group.on.close"], c["group.protocol"], c["group.remote.assignor"])


class ExponentialBackoff:
    """Java's ExponentialBackoff: initial * multiplier^attempts, capped, times a jitter factor."""

    def __init__(self, initial_ms: int, multiplier: float, max_ms: int, jitter: float,
                 random: Callable[[], float]):
        self.initial, self.multiplier, self.max, self.jitter, self.random = \
            initial_ms, multiplier, max_ms, jitter, random
        self._exp_max = (math.log(max_ms / max(initial_ms, 1)) / math.log(multiplier)
                         if max_ms > initial_ms else 0)

    def backoff(self, attempts: int) -> int:
        if self._exp_max == 0:
            return self.initial
        term = self.initial * self.multiplier ** min(attempts, self._exp_max)
        factor = 1.0 - self.jitter + 2 * self.jitter * self.random() if self.jitter > 0 else 1.0
        return min(int(factor * term), self.max)




@dataclass
class PendingRequest:
    """An answer the machine is waiting for: its kind, the generation it was sent with."""
    kind: str
    generation: Generation
    data: object = None
    sent_ms: int = 0
