"""Sans-IO consumer-group membership (classic protocol): Java's AbstractCoordinator, Heartbeat and
the group half of ConsumerCoordinator, as a state machine that never touches a socket or a clock.

Inputs are method calls carrying ``now_ms``: :meth:`GroupMembership.poll` (a timer tick; with
``foreground=True`` it is the application's ``poll()``), :meth:`on_response` /
:meth:`on_failure` for a request the machine asked for, :meth:`on_metadata` for the cluster view
the leader asked for, :meth:`commit`, :meth:`leave`, :meth:`subscribe`. Outputs are lists of
small records for the driver to act on, in order: :class:`SendRequest` (to the coordinator, or to
the least-loaded node for FindCoordinator), :class:`FetchMetadata`, rebalance callbacks
(:class:`PartitionsRevoked` / :class:`PartitionsAssigned` / :class:`PartitionsLost`),
:class:`PendingRevocation`, coordinator changes, :class:`CommitCompleted` and :class:`GroupError`.
The driver calls ``poll`` again after acting on a non-empty list; so a JoinGroup is only sent once
the revocation callbacks emitted before it have run.

Theory of operation (states are Java's MemberState)::

    UNJOINED --(foreground poll: join prepare done, JoinGroup sent)--> PREPARING_REBALANCE
    PREPARING_REBALANCE --(JoinGroup ok)--> COMPLETING_REBALANCE   heartbeats enabled
    COMPLETING_REBALANCE --(SyncGroup ok)--> STABLE                assignment applied on the next
                                                                   foreground poll
    STABLE --(heartbeat REBALANCE_IN_PROGRESS, metadata/subscription change)--> STABLE + rejoin
    any --(UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, poll timeout, leave)--> UNJOINED (generation reset)

Joining happens only in foreground polls (as the Java client joins inside ``poll()``); heartbeats,
coordinator discovery and the JoinGroup -> SyncGroup chain run in background ticks too. Join
preparation: with auto-commit the consumed offsets are committed first (waiting up to the rebalance
timeout, retrying retriable failures), then EAGER revokes everything while COOPERATIVE (KIP-429)
revokes only partitions of topics no longer subscribed; a reset generation turns revocation into
"lost". With COOPERATIVE, partitions missing from the new assignment are revoked after SyncGroup
and a second rebalance follows. Retriable failures back off exponentially with jitter
(retry.backoff.ms doubling up to retry.backoff.max.ms, +-20%); the random source is injected.
"""
from __future__ import annotations

import logging
import random as _random
from dataclasses import dataclass, field
from typing import Callable, Mapping

from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.messages.find_coordinator import FindCoordinatorRequest
from kgroup.protocol.messages.heartbeat import HeartbeatRequest
from kgroup.protocol.messages.join_group import JoinGroupRequest
from kgroup.protocol.messages.leave_group import LeaveGroupRequest
from kgroup.protocol.messages.sync_group import SyncGroupRequest

from .assignors import (Assignment, ClusterMetadata, ConsumerPartitionAssignor, RebalanceProtocol,
                        Subscription, TopicPartition)
from .consumer_protocol import PROTOCOL_TYPE, decode_assignment, decode_subscription, encode_assignment, \
    encode_subscription
from .errors import FencedInstanceIdError, is_retriable
from .membership_commit import OffsetCommitMixin
from .membership_types import (CALLBACKS, JOIN_GROUP_TIMEOUT_LAPSE_MS, MAX_REASON_LENGTH, NO_GENERATION,
                               CoordinatorDiscovered, CoordinatorLost, ExponentialBackoff,
                               FetchMetadata, Generation, GroupError, MembershipConfig, MemberState,
                               PartitionsAssigned, PartitionsLost, PartitionsRevoked, PendingRevocation,
                               PendingRequest, SendRequest)
from .types import NodeInfo, OffsetAndMetadata

log = logging.getLogger("kgroup.client.membership")

@dataclass
class _Leader:
    members: dict = field(default_factory=dict)  # member id -> Subscription
    skip_assignment: bool = False


class GroupMembership(OffsetCommitMixin):
    """One consumer's membership in a classic consumer group. See the module docstring."""

    def __init__(self, config: MembershipConfig, assignors: list[ConsumerPartitionAssignor], *,
                 random: Callable[[], float] = _random.random,
                 offsets_to_commit: Callable[[], Mapping[TopicPartition, OffsetAndMetadata]] = dict):
        self.config = config
        self.assignors = list(assignors)
        self.protocol = self._choose_protocol(self.assignors)
        self._offsets_to_commit = offsets_to_commit
        self._backoff = ExponentialBackoff(config.retry_backoff_ms, 2, config.retry_backoff_max_ms, 0.2, random)
        self.state = MemberState.UNJOINED
        self.generation = NO_GENERATION
        self.rejoin_needed = True
        self.rejoin_reason = ""
        self.needs_join_prepare = True
        self.coordinator: NodeInfo | None = None
        self.subscription: frozenset[str] | None = None  # None: no group management
        self.pattern = None  # compiled regex for pattern subscriptions
        self.joined_subscription: frozenset[str] | None = None
        self.group_subscription: frozenset[str] = frozenset()  # leader: every member's topics
        self.assignment: set[TopicPartition] = set()
        self.is_leader = False
        self.fatal_error: BaseException | None = None
        self._metadata_snapshot: dict[str, int] = {}
        self._assignment_snapshot: dict[str, int] | None = None
        self._pending: dict[int, PendingRequest] = {}
        self._next_token = 0
        # heartbeat (Java's Heartbeat timers)
        self._hb_enabled = False
        self._hb_due = 0
        self._hb_token: int | None = None
        self._hb_attempts = 0
        self._session_deadline = 0
        self._poll_deadline = 0
        # coordinator discovery
        self._coordinator_wanted = False
        self._find_token: int | None = None
        self._find_attempts = 0
        self._find_retry_at = 0
        # rebalance
        self._rebalance_token: int | None = None
        self._join_pending = False
        self._join_attempts = 0
        self._join_retry_at = 0
        self._sync_result: bytes | None = None
        self._prepare_deadline: int | None = None
        self._prepare_commit: str | None = None  # None, "inflight", "retry", "done"
        self._prepare_commit_token: int | None = None
        self._prepare_retry_at = 0
        # commits
        self._next_auto_commit: int | None = None
        self._waiting_commits: list[tuple[int, dict, str]] = []

    # --- public queries ------------------------------------------------------------------------

    @staticmethod
    def _choose_protocol(assignors) -> RebalanceProtocol | None:
        if not assignors:
            return None
        common = set(assignors[0].supported_protocols())
        for a in assignors:
            common &= set(a.supported_protocols())
        if not common:
            raise ValueError(f"Specified assignors {[a.name for a in assignors]} do not have commonly "
                             "supported rebalance protocol")
        return max(common)

    @property
    def group_managed(self) -> bool:
        return self.subscription is not None

    def rebalance_in_progress(self) -> bool:
        return self.state in (MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE)

    def generation_if_stable(self) -> Generation | None:
        return self.generation if self.state == MemberState.STABLE else None

    def is_stable(self) -> bool:
        """Joined with an applied assignment and no rebalance pending."""
        return (self.state == MemberState.STABLE and self._sync_result is None
                and not self._rejoin_needed_or_pending())

    def metadata_topics(self) -> set[str]:
        """Topics whose metadata the driver should keep fresh (the leader watches the group's)."""
        topics = set(self.subscription or ())
        if self.is_leader:
            topics |= self.group_subscription
        return topics

    def next_deadline(self, now: int, foreground: bool = False) -> int | None:
        """The earliest time a tick could produce something, for the driver's sleep; a
        foreground caller (the application's poll) also waits for join retries and commits."""
        if self.fatal_error is not None:
            return None
        times = []
        if self._wants_coordinator() and self.coordinator is None and self._find_token is None:
            times.append(self._find_retry_at)
        if self._hb_enabled and self.coordinator is not None:
            times += [self._session_deadline, self._poll_deadline]
            if self._hb_token is None:
                times.append(self._hb_due)
        if foreground:
            if self.group_managed and self.coordinator is not None and self._rebalance_token is None:
                if self._sync_result is not None:
                    times.append(now)  # an assignment is waiting to be applied
                elif (not self._join_pending and self._prepare_commit != "inflight"
                      and self._rejoin_needed_or_pending()):
                    times.append(self._join_retry_at)
            if self._prepare_commit == "retry":
                times.append(self._prepare_retry_at)
            if self._next_auto_commit is not None and self.config.enable_auto_commit:
                times.append(self._next_auto_commit)
        return max(min(times), now) if times else None

    # --- inputs: subscription --------------------------------------------------------------------

    def subscribe(self, topics, pattern=None) -> None:
        """Subscribe to these topics (for a pattern: the topics it currently matches)."""
        self.subscription = frozenset(topics)
        self.pattern = pattern

    def update_metadata(self, partition_counts: Mapping[str, int]) -> None:
        """The partition count of the metadata topics after a refresh (leader rejoins on change)."""
        self._metadata_snapshot = dict(partition_counts)

    def mark_coordinator_unknown(self, reason: str) -> list:
        out: list = []
        self._mark_coordinator_unknown(reason, out)
        return out

    def want_coordinator(self) -> None:
        """Find the coordinator even without a subscription (offset fetch/commit in manual mode)."""
        self._coordinator_wanted = True

    # --- inputs: ticks ---------------------------------------------------------------------------

    def poll(self, now: int, foreground: bool = False) -> list:
        out: list = []
        if self.fatal_error is not None:
            return out
        if foreground:
            if self.group_managed:
                self._poll_deadline = now + self.config.rebalance_timeout_ms  # Heartbeat.poll(now)
            if self._next_auto_commit is None:
                self._next_auto_commit = now + self.config.auto_commit_interval_ms
        self._maybe_find_coordinator(now, out)
        self._heartbeat_tick(now, out)
        if self.coordinator is not None and self._waiting_commits:
            waiting, self._waiting_commits = self._waiting_commits, []
            for token, offsets, kind in waiting:
                self._send_commit(token, offsets, kind, now, out)
        if foreground and self.fatal_error is None:
            if self.group_managed and self.coordinator is not None and self._rejoin_needed_or_pending():
                self._join_group_if_needed(now, out)
            if not any(isinstance(o, CALLBACKS) for o in out):
                self._maybe_auto_commit(now, out)
        return out

    # --- inputs: responses -----------------------------------------------------------------------

    def on_response(self, token: int, response, now: int) -> list:
        out: list = []
        pending = self._pending.pop(token, None)
        if pending is None:
            return out
        handler = getattr(self, "_handle_" + pending.kind)
        handler(token, pending, response, now, out)
        return out

    def on_failure(self, token: int, error: BaseException, now: int) -> list:
        """A request could not be sent or answered (disconnect, timeout): Java's
        CoordinatorResponseHandler.onFailure marks the coordinator unknown, then fails the future."""
        out: list = []
        pending = self._pending.pop(token, None)
        if pending is None:
            return out
        if pending.kind == "find_coordinator":
            self._find_token = None
            self._find_retry_at = now + self._backoff.backoff(self._find_attempts)
            self._find_attempts += 1
            return out
        if pending.kind != "metadata":
            self._mark_coordinator_unknown(f"{pending.kind} request failed: {error}", out)
        if pending.kind in ("join_group", "sync_group", "metadata"):
            self._rebalance_failed(error, now, out, retriable=True)
        elif pending.kind == "heartbeat":
            self._hb_token = None
            self._fail_heartbeat(now)
        elif pending.kind == "offset_commit":
            self._commit_done(token, pending, error, now, out)
        return out

    def on_metadata(self, token: int, cluster: ClusterMetadata, now: int) -> list:
        """The leader's metadata for all subscribed topics: run the assignor, send SyncGroup."""
        out: list = []
        pending = self._pending.pop(token, None)
        if pending is None:
            return out
        self._rebalance_token = None
        if self.state != MemberState.COMPLETING_REBALANCE or self.generation != pending.generation:
            self._join_pending = False
            self.request_rejoin("generation changed while the leader was assigning")
            return out
        leader: _Leader = pending.data
        try:
            assignments = self._assign(leader, cluster)
        except Exception as e:  # an assignor bug must not kill the machine
            log.exception("assignment failed")
            self._rebalance_failed(e, now, out)
            return out
        self._send_sync(now, out, [SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                                   for m, a in assignments.items()])
        return out

    # --- inputs: application calls ---------------------------------------------------------------

    def leave(self, now: int, reason: str = "the consumer is being closed") -> list:
        """close(): :meth:`on_leave_prepare` then :meth:`maybe_leave_group`. A driver that runs
        callbacks calls the two separately, so listeners still see a live generation (and may
        commit) before the LeaveGroup resets it."""
        out = self.on_leave_prepare(now)
        out += self.maybe_leave_group(now, reason)
        return out

    def on_leave_prepare(self, now: int) -> list:
        """Revoke the assignment (lose it if the generation is gone or a rebalance is running)."""
        out: list = []
        if self.group_managed and self.assignment:
            dropped = tuple(sorted(self.assignment))
            if self.generation.generation_id == -1 or not self.generation.member_id or self.rebalance_in_progress():
                out.append(PartitionsLost(dropped))
            else:
                out.append(PartitionsRevoked(dropped))
            self.assignment = set()
        return out

    def maybe_leave_group(self, now: int, reason: str = "the consumer is being closed") -> list:
        """LeaveGroup unless static (group.instance.id) or not joined; resets the generation."""
        out: list = []
        if self.config.leave_group_on_close:
            self._maybe_leave_group(reason, now, out)
        self._hb_enabled = False
        return out

    def unsubscribe(self, now: int) -> list:
        """Drop the subscription; the driver then calls :meth:`maybe_leave_group`."""
        out = self.on_leave_prepare(now)
        self.subscription = None
        self.pattern = None
        self.joined_subscription = None
        self._assignment_snapshot = None
        return out

    def request_rejoin(self, reason: str) -> None:
        log.info("Request joining group due to: %s", reason)
        self.rejoin_reason = reason
        self.rejoin_needed = True

    # --- coordinator discovery ---------------------------------------------------------------------

    def _wants_coordinator(self) -> bool:
        return self.group_managed or self._coordinator_wanted or bool(self._waiting_commits)

    def _maybe_find_coordinator(self, now: int, out: list) -> None:
        if (self.coordinator is None and self._find_token is None and self._wants_coordinator()
                and now >= self._find_retry_at):
            token = self._new_token()
            self._find_token = token
            self._pending[token] = PendingRequest("find_coordinator", self.generation, sent_ms=now)
            req = FindCoordinatorRequest(key=self.config.group_id, key_type=0,
                                         coordinator_keys=[self.config.group_id])
            out.append(SendRequest(token, req, to_coordinator=False))

    def _handle_find_coordinator(self, token, pending, resp, now, out) -> None:
        self._find_token = None
        if resp.coordinators:
            c = resp.coordinators[0]
            code, node_id, host, port, msg = c.error_code, c.node_id, c.host, c.port, c.error_message
        else:
            code, node_id, host, port, msg = resp.error_code, resp.node_id, resp.host, resp.port, \
                getattr(resp, "error_message", None)
        error = ErrorCode(code)
        if error == ErrorCode.NONE:
            self.coordinator = NodeInfo(node_id, host, port)
            self._find_attempts = 0
            self._session_deadline = now + self.config.session_timeout_ms  # resetSessionTimeout
            log.info("Discovered group coordinator %s:%s (id: %s)", host, port, node_id)
            out.append(CoordinatorDiscovered(self.coordinator))
            return
        self._find_retry_at = now + self._backoff.backoff(self._find_attempts)
        self._find_attempts += 1
        if error == ErrorCode.GROUP_AUTHORIZATION_FAILED:
            self._fatal(KafkaError(error, f"Not authorized to access group: {self.config.group_id}"), out)
        elif not error.retriable:
            out.append(GroupError(KafkaError(error, msg)))
        else:
            log.debug("Group coordinator lookup failed: %s", error.name)

    def _mark_coordinator_unknown(self, reason: str, out: list) -> None:
        if self.coordinator is not None:
            log.info("Group coordinator %s is unavailable or invalid due to cause: %s. Rediscovery "
                     "will be attempted.", self.coordinator, reason)
            old, self.coordinator = self.coordinator, None
            out.append(CoordinatorLost(old, reason))

    # --- heartbeats ------------------------------------------------------------------------------

    def _enable_heartbeat(self, now: int) -> None:
        self._hb_enabled = True
        self._session_deadline = now + self.config.session_timeout_ms
        self._poll_deadline = now + self.config.rebalance_timeout_ms
        self._hb_due = now + self.config.heartbeat_interval_ms

    def _heartbeat_tick(self, now: int, out: list) -> None:
        if not self._hb_enabled:
            return
        if self.state in (MemberState.UNJOINED, MemberState.PREPARING_REBALANCE):
            self._hb_enabled = False
            return
        if self.coordinator is None:
            return
        if now >= self._session_deadline:
            self._mark_coordinator_unknown("session timed out without receiving a heartbeat response", out)
        elif now >= self._poll_deadline:
            log.warning("consumer poll timeout has expired. This means the time between subsequent calls "
                        "to poll() was longer than the configured max.poll.interval.ms, which typically "
                        "implies that the poll loop is spending too much time processing messages.")
            self._maybe_leave_group("consumer poll timeout has expired.", now, out)
        elif self._hb_token is None and now >= self._hb_due:
            self._hb_due = now + self.config.heartbeat_interval_ms
            token = self._new_token()
            self._hb_token = token
            self._pending[token] = PendingRequest("heartbeat", self.generation, sent_ms=now)
            out.append(SendRequest(token, HeartbeatRequest(
                group_id=self.config.group_id, generation_id=self.generation.generation_id,
                member_id=self.generation.member_id, group_instance_id=self.config.group_instance_id)))

    def _receive_heartbeat(self, now: int) -> None:
        self._hb_attempts = 0
        self._session_deadline = now + self.config.session_timeout_ms

    def _fail_heartbeat(self, now: int) -> None:
        self._hb_due = now + self._backoff.backoff(self._hb_attempts)
        self._hb_attempts += 1

    def _handle_heartbeat(self, token, pending, resp, now, out) -> None:
        self._hb_token = None
        error = ErrorCode(resp.error_code)
        if error == ErrorCode.NONE:
            self._receive_heartbeat(now)
        elif error in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
            self._mark_coordinator_unknown(f"error response {error.name}", out)
            self._fail_heartbeat(now)
        elif error == ErrorCode.REBALANCE_IN_PROGRESS:
            if self.state == MemberState.STABLE:
                self.request_rejoin("group is already rebalancing")
            self._receive_heartbeat(now)
        elif error in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            if self.generation == pending.generation:
                log.info("Attempt to heartbeat with %s failed due to %s, resetting generation",
                         pending.generation, error.name)
                self._reset_state_and_rejoin(f"encountered {error.name} from HEARTBEAT response",
                                             error != ErrorCode.ILLEGAL_GENERATION)
                if error == ErrorCode.FENCED_INSTANCE_ID:
                    self._fatal(FencedInstanceIdError(self.config.group_instance_id, "Heartbeat"), out)
                else:
                    self._fail_heartbeat(now)
            else:
                self._receive_heartbeat(now)  # stale generation: ignore
        elif error == ErrorCode.GROUP_AUTHORIZATION_FAILED:
            self._fatal(KafkaError(error, f"Not authorized to access group: {self.config.group_id}"), out)
        else:
            log.warning("Unexpected error in heartbeat response: %s", error.name)
            self._fail_heartbeat(now)

    # --- joining ---------------------------------------------------------------------------------

    def _rejoin_needed_or_pending(self) -> bool:
        if not self.group_managed:
            return False
        if self._assignment_snapshot is not None and any(
                self._metadata_snapshot.get(t, 0) != n for t, n in self._assignment_snapshot.items()):
            if not self.rejoin_needed:
                self.request_rejoin("cached metadata has changed")
            return True
        if self.joined_subscription is not None and self.joined_subscription != self.subscription:
            if not self.rejoin_needed:
                self.request_rejoin("subscription has changed")
            return True
        return self.rejoin_needed or self._join_pending

    def _join_group_if_needed(self, now: int, out: list) -> None:
        if self._rebalance_token is not None:
            return
        if self._sync_result is not None:
            self._complete_join(now, out)
            return
        if self._join_pending or now < self._join_retry_at:
            return
        if self.needs_join_prepare:
            if not self._on_join_prepare(now, out):
                return
            self.needs_join_prepare = False
            if any(isinstance(o, CALLBACKS) for o in out):
                return  # the driver runs the callbacks, then polls again to send JoinGroup
        self._send_join_group(now, out)

    def _on_join_prepare(self, now: int, out: list) -> bool:
        """ConsumerCoordinator.onJoinPrepare: commit (auto-commit), then revoke or lose."""
        if self._prepare_deadline is None:
            self._prepare_deadline = now + self.config.rebalance_timeout_ms
        if self.config.enable_auto_commit:
            st = self._prepare_commit
            if st is None or (st == "retry" and now >= self._prepare_retry_at):
                if st is None and self.protocol == RebalanceProtocol.EAGER and self.assignment:
                    out.append(PendingRevocation(tuple(sorted(self.assignment))))
                offsets = dict(self._offsets_to_commit())
                if offsets and self.coordinator is not None:
                    token = self._new_token()
                    self._prepare_commit, self._prepare_commit_token = "inflight", token
                    self._send_commit(token, offsets, "prepare", now, out)
                else:
                    self._prepare_commit = "done"
            if self._prepare_commit in ("inflight", "retry"):
                if now < self._prepare_deadline:
                    return False
                log.error("Asynchronous auto-commit of offsets failed: joinPrepare timeout. Will continue to join group")
                self._prepare_commit_token = None
        gen = self.generation
        if gen.generation_id == -1 or not gen.member_id:
            if self.assignment:
                log.info("Giving away all assigned partitions as lost since generation/memberID has been "
                         "reset, indicating that consumer is in old state or no longer part of the group")
                out.append(PartitionsLost(tuple(sorted(self.assignment))))
                self.assignment = set()
        elif self.protocol == RebalanceProtocol.EAGER:
            out.append(PartitionsRevoked(tuple(sorted(self.assignment))))
            self.assignment = set()
        else:
            revoked = {tp for tp in self.assignment if not self._subscribed(tp.topic)}
            if revoked:
                out.append(PartitionsRevoked(tuple(sorted(revoked))))
                self.assignment -= revoked
        self.is_leader = False
        self.group_subscription = frozenset()
        self._prepare_deadline = None
        self._prepare_commit = None
        self._prepare_commit_token = None
        return True

    def _subscribed(self, topic: str) -> bool:
        return topic in (self.subscription or ())

    def _send_join_group(self, now: int, out: list) -> None:
        self.state = MemberState.PREPARING_REBALANCE
        self._join_pending = True
        self.joined_subscription = self.subscription
        topics = sorted(self.joined_subscription)
        owned = sorted(self.assignment)
        protocols = []
        for a in self.assignors:
            sub = Subscription(topics, a.subscription_user_data(set(topics)), owned,
                               self.generation.generation_id, self.config.client_rack)
            protocols.append(JoinGroupRequest.JoinGroupRequestProtocol(name=a.name, metadata=encode_subscription(sub)))
        req = JoinGroupRequest(
            group_id=self.config.group_id, session_timeout_ms=self.config.session_timeout_ms,
            rebalance_timeout_ms=self.config.rebalance_timeout_ms, member_id=self.generation.member_id,
            group_instance_id=self.config.group_instance_id, protocol_type=PROTOCOL_TYPE,
            protocols=protocols, reason=self.rejoin_reason[:MAX_REASON_LENGTH] or None)
        token = self._new_token()
        self._rebalance_token = token
        self._pending[token] = PendingRequest("join_group", self.generation, sent_ms=now)
        log.info("(Re-)joining group %s", self.config.group_id)
        out.append(SendRequest(token, req, timeout_ms=self.config.rebalance_timeout_ms + JOIN_GROUP_TIMEOUT_LAPSE_MS))

    def _handle_join_group(self, token, pending, resp, now, out) -> None:
        self._rebalance_token = None
        error = ErrorCode(resp.error_code)
        if error == ErrorCode.NONE:
            if resp.protocol_type is not None and resp.protocol_type != PROTOCOL_TYPE:
                self._rebalance_failed(KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL), now, out)
            elif self.state != MemberState.PREPARING_REBALANCE:
                self._rebalance_failed(KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "UnjoinedGroupException"),
                                       now, out, retriable=True)
            else:
                self.state = MemberState.COMPLETING_REBALANCE
                self._enable_heartbeat(now)
                self.generation = Generation(resp.generation_id, resp.member_id, resp.protocol_name)
                log.info("Successfully joined group with %s", self.generation)
                if resp.leader == resp.member_id:
                    self._on_leader_elected(resp, now, out)
                else:
                    self._send_sync(now, out, [])
            return
        if error == ErrorCode.UNKNOWN_MEMBER_ID:
            if self.generation == pending.generation:
                self._reset_state_and_rejoin("encountered UNKNOWN_MEMBER_ID from JOIN_GROUP response", True)
        elif error in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
            self._mark_coordinator_unknown(f"error response {error.name}", out)
        elif error == ErrorCode.FENCED_INSTANCE_ID:
            self._fatal(FencedInstanceIdError(self.config.group_instance_id, "JoinGroup"), out)
            return
        elif error == ErrorCode.MEMBER_ID_REQUIRED:  # KIP-394: retry with the id the broker gave
            self.generation = Generation(-1, resp.member_id, None)
            self.request_rejoin(f"need to re-join with the given member-id: {resp.member_id}")
        elif error == ErrorCode.GROUP_MAX_SIZE_REACHED:
            self._rebalance_failed(KafkaError(error, f"Consumer group {self.config.group_id} already has "
                                              "the configured maximum number of members."), now, out)
            return
        elif error not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REBALANCE_IN_PROGRESS,
                           ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ErrorCode.INVALID_SESSION_TIMEOUT,
                           ErrorCode.INVALID_GROUP_ID, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                           ErrorCode.UNSUPPORTED_VERSION):
            self._rebalance_failed(KafkaError(error, f"Unexpected error in join group response: {error.message}"),
                                   now, out)
            return
        self._rebalance_failed(KafkaError(error), now, out)

    def _on_leader_elected(self, resp, now: int, out: list) -> None:
        leader = _Leader(skip_assignment=resp.skip_assignment)
        topics: set[str] = set()
        for m in resp.members:
            sub = decode_subscription(m.metadata, m.group_instance_id)
            leader.members[m.member_id] = sub
            topics.update(sub.topics)
        self.group_subscription = frozenset(topics)
        token = self._new_token()
        self._rebalance_token = token
        self._pending[token] = PendingRequest("metadata", self.generation, leader, now)
        out.append(FetchMetadata(token, tuple(sorted(topics))))

    def _assign(self, leader: _Leader, cluster: ClusterMetadata) -> dict[str, bytes]:
        name = self.generation.protocol_name
        assignor = self._lookup_assignor(name)
        if assignor is None:
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                             f"Coordinator selected invalid assignment protocol: {name}")
        self.is_leader = True
        self._assignment_snapshot = {t: cluster.partition_count(t) or 0 for t in self.group_subscription}
        self._metadata_snapshot.update(self._assignment_snapshot)
        if leader.skip_assignment:  # KIP-814: a returning static leader keeps its assignment
            return {}
        assignments = assignor.assign(cluster, leader.members)
        if self.protocol == RebalanceProtocol.COOPERATIVE and assignor.name != "cooperative-sticky":
            self._validate_cooperative(leader.members, assignments)
        log.info("Finished assignment for group at generation %s: %s", self.generation.generation_id, assignments)
        return {m: encode_assignment(a) for m, a in assignments.items()}

    @staticmethod
    def _validate_cooperative(members: Mapping[str, Subscription], assignments: Mapping[str, Assignment]) -> None:
        added: set = set()
        revoked: set = set()
        for member, a in assignments.items():
            owned = set(members[member].owned_partitions)
            added |= set(a.partitions) - owned
            revoked |= owned - set(a.partitions)
        if added & revoked:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             "Assignor supporting the COOPERATIVE protocol violates its requirements")

    def _lookup_assignor(self, name: str | None) -> ConsumerPartitionAssignor | None:
        return next((a for a in self.assignors if a.name == name), None)

    def _send_sync(self, now: int, out: list, assignments: list) -> None:
        req = SyncGroupRequest(group_id=self.config.group_id, generation_id=self.generation.generation_id,
                               member_id=self.generation.member_id,
                               group_instance_id=self.config.group_instance_id, protocol_type=PROTOCOL_TYPE,
                               protocol_name=self.generation.protocol_name, assignments=assignments)
        token = self._new_token()
        self._rebalance_token = token
        self._pending[token] = PendingRequest("sync_group", self.generation, sent_ms=now)
        out.append(SendRequest(token, req))

    def _handle_sync_group(self, token, pending, resp, now, out) -> None:
        self._rebalance_token = None
        error = ErrorCode(resp.error_code)
        if error == ErrorCode.NONE:
            if resp.protocol_type is not None and resp.protocol_type != PROTOCOL_TYPE:
                self._rebalance_failed(KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL), now, out)
            elif not self._generation_reset(self.generation) and self.state == MemberState.COMPLETING_REBALANCE:
                if resp.protocol_name is not None and resp.protocol_name != self.generation.protocol_name:
                    self._rebalance_failed(KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL), now, out)
                else:
                    log.info("Successfully synced group in %s", self.generation)
                    self.state = MemberState.STABLE
                    self.rejoin_reason = ""
                    self.rejoin_needed = False
                    self._join_attempts = 0
                    self._sync_result = bytes(resp.assignment)
            else:
                self._rebalance_failed(KafkaError(ErrorCode.ILLEGAL_GENERATION), now, out)
            return
        if error == ErrorCode.FENCED_INSTANCE_ID:
            self._fatal(FencedInstanceIdError(self.config.group_instance_id, "SyncGroup"), out)
            return
        if error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            if self.generation == pending.generation:
                self._reset_state_and_rejoin(f"encountered {error.name} from SYNC_GROUP response",
                                             error != ErrorCode.ILLEGAL_GENERATION)
        elif error in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
            self._mark_coordinator_unknown(f"error response {error.name}", out)
        elif error not in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.GROUP_AUTHORIZATION_FAILED):
            self._rebalance_failed(KafkaError(error, f"Unexpected error from SyncGroup: {error.message}"), now, out)
            return
        self._rebalance_failed(KafkaError(error), now, out)

    @staticmethod
    def _generation_reset(gen: Generation) -> bool:
        return gen.generation_id == NO_GENERATION.generation_id and gen.protocol_name is None

    def _rebalance_failed(self, error: BaseException, now: int, out: list, retriable: bool = False) -> None:
        """AbstractCoordinator.joinGroupIfNeeded's failure path."""
        self._rebalance_token = None
        self._join_pending = False
        self._sync_result = None
        code = getattr(error, "code", None)
        if code != ErrorCode.MEMBER_ID_REQUIRED:
            self.request_rejoin(f"rebalance failed due to {getattr(code, 'name', type(error).__name__)}")
        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS,
                    ErrorCode.MEMBER_ID_REQUIRED):
            self._join_retry_at = now  # re-join at once
            return
        self._join_retry_at = now + self._backoff.backoff(self._join_attempts)
        self._join_attempts += 1
        if not (retriable or is_retriable(error)):
            out.append(GroupError(error))

    def _complete_join(self, now: int, out: list) -> None:
        """ConsumerCoordinator.onJoinComplete, run in a foreground poll."""
        buf, self._sync_result = self._sync_result, None
        self._join_pending = False
        gen = self.generation
        if self._generation_reset(gen) or self.state != MemberState.STABLE:
            self._reset_state_and_rejoin(f"rebalance failed since the generation/state was modified to "
                                         f"{gen}/{self.state.name} before the rebalance callback triggered", True)
            return
        self.needs_join_prepare = True
        if not self.is_leader:
            self._assignment_snapshot = None
        assignor = self._lookup_assignor(gen.protocol_name)
        if assignor is None or len(buf) < 2:
            self._rebalance_failed(KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                                              f"invalid assignment for protocol {gen.protocol_name}"), now, out)
            return
        assignment = decode_assignment(buf)
        assigned = set(assignment.partitions)
        if not all(self._subscribed(tp.topic) or (self.pattern is not None and self.pattern.fullmatch(tp.topic))
                   for tp in assigned):
            self.request_rejoin("received assignment does not match the current subscription")
            return
        owned = set(self.assignment)
        added = assigned - owned
        if self.protocol == RebalanceProtocol.COOPERATIVE:
            revoked = owned - assigned
            if revoked:
                out.append(PartitionsRevoked(tuple(sorted(revoked))))
                self.request_rejoin("need to revoke partitions and re-join")
        try:
            assignor.on_assignment(assignment, gen.generation_id)
        except Exception:
            log.exception("assignor %s on_assignment failed", assignor.name)
        if self.config.enable_auto_commit:
            self._next_auto_commit = now + self.config.auto_commit_interval_ms
        self.assignment = assigned
        out.append(PartitionsAssigned(tuple(sorted(added))))

    # --- leaving ---------------------------------------------------------------------------------

    def _maybe_leave_group(self, reason: str, now: int, out: list) -> None:
        if (self.config.group_instance_id is None and self.coordinator is not None
                and self.state != MemberState.UNJOINED and self.generation.member_id):
            log.info("Member %s sending LeaveGroup request to coordinator %s due to %s",
                     self.generation.member_id, self.coordinator, reason)
            token = self._new_token()
            self._pending[token] = PendingRequest("leave_group", self.generation, sent_ms=now)
            out.append(SendRequest(token, LeaveGroupRequest(
                group_id=self.config.group_id, member_id=self.generation.member_id,
                members=[LeaveGroupRequest.MemberIdentity(member_id=self.generation.member_id,
                                                          reason=reason[:MAX_REASON_LENGTH])])))
        self._reset_state_and_rejoin("consumer pro-actively leaving the group", True)

    def _handle_leave_group(self, token, pending, resp, now, out) -> None:
        if resp.error_code:
            log.error("LeaveGroup request with %s failed with error: %s", pending.generation,
                      ErrorCode(resp.error_code).name)

    def _reset_state_and_rejoin(self, reason: str, reset_member_id: bool) -> None:
        log.info("Resetting generation %sdue to: %s", "and member id " if reset_member_id else "", reason)
        self.state = MemberState.UNJOINED
        self.generation = NO_GENERATION if reset_member_id else Generation(-1, self.generation.member_id, None)
        self.request_rejoin(reason)
        self.needs_join_prepare = True

    # --- helpers ---------------------------------------------------------------------------------

    def _fatal(self, error: BaseException, out: list) -> None:
        log.error("%s", error)
        self.fatal_error = error
        self._hb_enabled = False
        out.append(GroupError(error, fatal=True))

    def _new_token(self) -> int:
        self._next_token += 1
        return self._next_token
