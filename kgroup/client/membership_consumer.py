"""Sans-IO membership under the consumer group protocol (KIP-848, ``group.protocol=consumer``):
Java's ConsumerMembershipManager + ConsumerHeartbeatRequestManager as a state machine that never
touches a socket or a clock.

It keeps the driver contract of :class:`~kgroup.client.membership.GroupMembership` (same inputs,
same outputs, same coordinator discovery and offset commits, which it inherits) and replaces the
JoinGroup/SyncGroup rebalance with one request, ConsumerGroupHeartbeat. The broker computes the
assignment; the member only reconciles it.

Theory of operation (states are Java's MemberState)::

    UNSUBSCRIBED --(subscribe, foreground poll)--> JOINING       heartbeat epoch 0, full request
    JOINING/STABLE --(heartbeat with an assignment)--> RECONCILING
    RECONCILING --(foreground poll: commit if auto-commit, on_partitions_revoked(revoked),
                   on_partitions_assigned(added))--> ACKNOWLEDGING
    ACKNOWLEDGING --(next foreground poll: callbacks done)--> heartbeat at once with the owned
                   partitions --(answered, target reached)--> STABLE
    any --(FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID)--> FENCED --(foreground poll:
           on_partitions_lost)--> JOINING (epoch 0, the same member id: KIP-1082)
    any --(max.poll.interval.ms expired)--> leave with epoch -1 --> STALE --(next poll)--> FENCED path
    close/unsubscribe --> on_partitions_revoked(all) --> leave with epoch -1 (-2 for a static member)

A joining member picks its own member id (KIP-1082: a random UUID written as Java's Uuid.toString,
url-safe base64 without padding). Only changed fields are sent (Java's HeartbeatState): the
rebalance timeout, rack, subscription (topic names or, for a pattern, the regex the broker
resolves, ConsumerGroupHeartbeat v1) and server assignor on a join or when they change; the owned
partitions on a join and in the first heartbeat after a reconciliation. After a failed heartbeat
the next one carries every field again. Assignments name topics by id; unknown ids make the
machine ask for metadata (:class:`ResolveTopicIds`) and reconcile what it can meanwhile.
"""
from __future__ import annotations

import base64
import enum
import logging
import uuid
from dataclasses import dataclass
from typing import Callable, Mapping

from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest

from .assignors import TopicPartition
from .errors import CommitFailedError, FencedInstanceIdError, UnsupportedVersionError
from .membership import GroupMembership
from .membership_types import (CALLBACKS, Generation, MembershipConfig, PartitionsAssigned, PartitionsLost,
                               PartitionsRevoked, PendingRequest, PendingRevocation, ResolveTopicIds,
                               SendRequest)

log = logging.getLogger("kgroup.client.membership")

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

# Errors after which the member cannot go on (Java's ConsumerHeartbeatRequestManager.onErrorResponse).
_FATAL = (ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.INVALID_REQUEST,
          ErrorCode.GROUP_MAX_SIZE_REACHED, ErrorCode.UNSUPPORTED_ASSIGNOR, ErrorCode.UNSUPPORTED_VERSION,
          ErrorCode.UNRELEASED_INSTANCE_ID, ErrorCode.INVALID_REGULAR_EXPRESSION)


class ConsumerMemberState(enum.Enum):
    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    ACKNOWLEDGING = "ACKNOWLEDGING"
    STABLE = "STABLE"
    FENCED = "FENCED"
    STALE = "STALE"  # left because max.poll.interval.ms expired; rejoins on the next poll
    FATAL = "FATAL"


_IN_GROUP = (ConsumerMemberState.RECONCILING, ConsumerMemberState.ACKNOWLEDGING, ConsumerMemberState.STABLE)


def random_member_id(random_bytes: Callable[[int], bytes] | None = None) -> str:
    """KIP-1082: a client-generated id, written as Java's ``Uuid.toString()``."""
    raw = random_bytes(16) if random_bytes is not None else uuid.uuid4().bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@dataclass(frozen=True)
class _Sent:
    """The fields the broker has seen (Java's HeartbeatState.sentFields)."""
    rebalance_timeout_ms: int
    topics: tuple[str, ...] | None
    regex: str | None
    assignor: str | None
    owned: frozenset | None


class ConsumerGroupMembership(GroupMembership):
    """One consumer's membership in a KIP-848 consumer group. See the module docstring."""

    def __init__(self, config: MembershipConfig, assignors=(), *, member_id: str | None = None, **kw):
        super().__init__(config, [], **kw)
        self.member_id = member_id or random_member_id()
        self.member_epoch = 0
        self.state = ConsumerMemberState.UNSUBSCRIBED
        self.generation = Generation(0, self.member_id, None)
        self.heartbeat_interval_ms = 0  # the broker's; until the first answer, heartbeat at once
        self.topic_names: dict[bytes, str] = {}  # topic id -> name, from metadata
        self.target: frozenset | None = None  # {(topic id, partition)} the broker wants us to own
        self.owned_ids: frozenset = frozenset()  # {(topic id, partition)} reconciled, callbacks done
        self._reconciled_ids: frozenset | None = None  # set when callbacks are being run
        self._sent: _Sent | None = None
        self._hb_retry_at = 0
        self._resolve_token: int | None = None
        self._resolve_retry_at = 0
        self._lost_pending = False  # FENCED / STALE: give up partitions in the next foreground poll

    # --- queries (the driver's and the consumer's view) ----------------------------------------

    def _set_epoch(self, epoch: int) -> None:
        self.member_epoch = epoch
        self.generation = Generation(epoch, self.member_id, None)

    def rebalance_in_progress(self) -> bool:
        return self.state in (ConsumerMemberState.JOINING, ConsumerMemberState.RECONCILING,
                              ConsumerMemberState.ACKNOWLEDGING)

    def generation_if_stable(self) -> Generation | None:
        """Commits carry the member epoch whenever the member is in the group (also while it
        reconciles: it commits before revoking), as Java's CommitRequestManager."""
        if self.member_epoch > 0 and self.state in _IN_GROUP:
            return self.generation
        return None

    def is_stable(self) -> bool:
        return (self.state == ConsumerMemberState.STABLE and self._reconciled_ids is None
                and not self._needs_reconcile())

    def metadata_topics(self) -> set[str]:
        return set(self.subscription or ())

    def next_deadline(self, now: int, foreground: bool = False) -> int | None:
        if self.fatal_error is not None:
            return None
        times = []
        if self._wants_coordinator() and self.coordinator is None and self._find_token is None:
            times.append(self._find_retry_at)
        if self.coordinator is not None and self._hb_token is None and self._heartbeating():
            times.append(self._next_heartbeat_at())
        if self.coordinator is not None and self.state in _IN_GROUP + (ConsumerMemberState.JOINING,):
            times.append(self._poll_deadline)
        if self._resolve_token is None and self._unresolved():
            times.append(self._resolve_retry_at)
        if foreground:
            committing = self._prepare_commit in ("inflight", "retry")  # its answer wakes the driver
            if (self._lost_pending or self._reconciled_ids is not None
                    or (self._needs_reconcile() and not committing)
                    or (self.group_managed and self.state == ConsumerMemberState.UNSUBSCRIBED)):
                times.append(now)
            if committing and self._prepare_deadline is not None:
                times.append(self._prepare_deadline)
            if self._prepare_commit == "retry":
                times.append(self._prepare_retry_at)
            if self._next_auto_commit is not None and self.config.enable_auto_commit and self._prepare_commit is None:
                times.append(self._next_auto_commit)
        return max(min(times), now) if times else None

    # --- inputs ----------------------------------------------------------------------------------

    def poll(self, now: int, foreground: bool = False) -> list:
        out: list = []
        if self.fatal_error is not None:
            return out
        if foreground:
            if self.group_managed:
                self._poll_deadline = now + self.config.rebalance_timeout_ms
            if self._next_auto_commit is None:
                self._next_auto_commit = now + self.config.auto_commit_interval_ms
        self._maybe_find_coordinator(now, out)
        if self.coordinator is not None and self._waiting_commits:
            waiting, self._waiting_commits = self._waiting_commits, []
            for token, offsets, kind in waiting:
                self._send_commit(token, offsets, kind, now, out)
        if foreground:
            self._foreground(now, out)
        if not any(isinstance(o, CALLBACKS) for o in out):
            self._heartbeat_tick(now, out)
            self._maybe_resolve(now, out)
            if foreground and self._prepare_commit is None:  # no auto-commit racing the one before revocation
                self._maybe_auto_commit(now, out)
        return out

    def on_failure(self, token: int, error: BaseException, now: int) -> list:
        out: list = []
        pending = self._pending.get(token)
        if pending is None:
            return out
        if pending.kind == "cg_heartbeat":
            del self._pending[token]
            self._hb_token = None
            if isinstance(error, UnsupportedVersionError):  # Java: fatal, the cluster lacks KIP-848
                self._fatal_cg(UnsupportedVersionError(
                    f"The cluster does not support the CONSUMER group protocol ({error}). Set "
                    "group.protocol=classic on the consumer configs to revert to the CLASSIC protocol "
                    "until the cluster is upgraded." if not pending.data.regex else
                    f"The cluster does not support regular expressions subscriptions ({error})."), out)
                return out
            self._sent = None  # resend every field (Java: heartbeatState.reset())
            self._mark_coordinator_unknown(f"heartbeat request failed: {error}", out)
            self._hb_retry_at = now + self._backoff.backoff(self._hb_attempts)
            self._hb_attempts += 1
            return out
        if pending.kind == "cg_leave":
            del self._pending[token]
            return out
        if pending.kind == "resolve_topic_ids":
            del self._pending[token]
            self._resolve_token = None
            self._resolve_retry_at = now + self.config.retry_backoff_ms
            return out
        return super().on_failure(token, error, now)

    def commit_topic_ids(self, topics) -> dict[str, bytes] | None:
        """KIP-848's consumer commits with topic ids when every topic's id is known (Java's
        CommitRequestManager: forTopicIdsOrNames), else by name."""
        ids = {name: tid for tid, name in self.topic_names.items()}
        if all(t in ids for t in topics):
            return {t: ids[t] for t in topics}
        return None

    def topic_name_of(self, topic_id: bytes) -> str:
        return self.topic_names.get(topic_id, "")

    def on_topic_names(self, token: int, names: Mapping[bytes, str], now: int) -> list:
        """The answer to :class:`ResolveTopicIds`: every topic id -> name the cluster knows."""
        if self._pending.pop(token, None) is not None:
            self._resolve_token = None
            self._resolve_retry_at = now + self.config.retry_backoff_ms
        self.topic_names.update(names)
        return []

    def update_metadata(self, partition_counts) -> None:
        """The broker tracks topic metadata itself under KIP-848."""

    def request_rejoin(self, reason: str) -> None:
        log.debug("rejoin requested (%s): the consumer protocol reconciles on heartbeats", reason)

    def _reset_state_and_rejoin(self, reason: str, reset_member_id: bool) -> None:
        """A commit found the member unknown: fenced."""
        self._fence(reason)

    # --- leaving -----------------------------------------------------------------------------------

    def on_leave_prepare(self, now: int) -> list:
        """Revoke the owned partitions (lose them when the member is no longer in the group)."""
        out: list = []
        if self.group_managed and self.assignment:
            dropped = tuple(sorted(self.assignment))
            if self.member_epoch > 0 and self.state in _IN_GROUP:
                out.append(PartitionsRevoked(dropped))
            else:
                out.append(PartitionsLost(dropped))
            self.assignment = set()
        self.owned_ids = frozenset()
        self._reconciled_ids = None
        return out

    def maybe_leave_group(self, now: int, reason: str = "the consumer is being closed") -> list:
        """A heartbeat with epoch -1 (-2 for a static member, which the broker keeps for its
        session timeout so that it can come back), then UNSUBSCRIBED."""
        out: list = []
        if self.config.leave_group_on_close:
            epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.config.group_instance_id else LEAVE_GROUP_MEMBER_EPOCH
            self._send_leave(epoch, reason, now, out)
        self._to_unsubscribed()
        return out

    def unsubscribe(self, now: int) -> list:
        out = self.on_leave_prepare(now)
        self.subscription = None
        self.pattern = None
        return out

    def _send_leave(self, epoch: int, reason: str, now: int, out: list) -> None:
        if self.coordinator is None or self.state in (ConsumerMemberState.UNSUBSCRIBED, ConsumerMemberState.FATAL,
                                                      ConsumerMemberState.STALE):
            return
        if self.member_epoch <= 0 and self._sent is None and self._hb_token is None:
            return  # the broker never heard of us
        log.info("Member %s leaving group %s with epoch %s due to %s", self.member_id, self.config.group_id,
                 epoch, reason)
        token = self._new_token()
        self._pending[token] = PendingRequest("cg_leave", self.generation, sent_ms=now)
        out.append(SendRequest(token, self._leave_request(epoch)))

    def _leave_request(self, epoch: int):
        return ConsumerGroupHeartbeatRequest(group_id=self.config.group_id, member_id=self.member_id,
                                             member_epoch=epoch, instance_id=self.config.group_instance_id)

    def _to_unsubscribed(self) -> None:
        if self._hb_token is not None:
            self._pending.pop(self._hb_token, None)  # its answer is about a membership that is over
            self._hb_token = None
        self.state = ConsumerMemberState.UNSUBSCRIBED
        self._set_epoch(0)
        self.target = None
        self._sent = None
        self._lost_pending = False

    def _handle_cg_leave(self, token, pending, resp, now, out) -> None:
        if resp.error_code:
            log.info("Leave heartbeat answered %s", ErrorCode(resp.error_code).name)

    # --- foreground: losing, joining, reconciling ------------------------------------------------

    def _foreground(self, now: int, out: list) -> None:
        if self._reconciled_ids is not None:
            # The callbacks of the last reconciliation have run: report what we own at once.
            self.owned_ids, self._reconciled_ids = self._reconciled_ids, None
            self._hb_due = now
        if self._lost_pending:
            self._lost_pending = False
            if self.assignment:
                log.info("Giving away all assigned partitions as lost since the member was fenced or left")
                out.append(PartitionsLost(tuple(sorted(self.assignment))))
            self.assignment = set()
            self.owned_ids = frozenset()
            self._prepare_commit = self._prepare_commit_token = self._prepare_deadline = None
            if self.group_managed:
                self._join()
            else:
                self.state = ConsumerMemberState.UNSUBSCRIBED
            return
        if self.group_managed and self.state == ConsumerMemberState.UNSUBSCRIBED:
            self._join()
        if self._needs_reconcile():
            self._reconcile(now, out)

    def _join(self) -> None:
        log.info("Member %s joining group %s (%s protocol)", self.member_id, self.config.group_id,
                 self.config.group_protocol)
        self.state = ConsumerMemberState.JOINING
        self._set_epoch(0)
        self.target = None
        self._sent = None
        self._hb_due = 0

    def _fence(self, reason: str) -> None:
        if self.state in (ConsumerMemberState.UNSUBSCRIBED, ConsumerMemberState.FATAL):
            return
        log.info("Member %s fenced (%s): its partitions are lost, it rejoins with epoch 0", self.member_id, reason)
        if self._hb_token is not None:
            self._pending.pop(self._hb_token, None)
            self._hb_token = None
        self.state = ConsumerMemberState.FENCED
        self._set_epoch(0)
        self.target = None
        self._sent = None
        self._reconciled_ids = None
        self._lost_pending = True

    def _resolved_target(self) -> frozenset:
        return frozenset(tp for tp in self.target or () if tp[0] in self.topic_names)

    def _unresolved(self) -> bool:
        return self.target is not None and any(tid not in self.topic_names for tid, _ in self.target)

    def _needs_reconcile(self) -> bool:
        return (self.state in _IN_GROUP and self.target is not None and self._reconciled_ids is None
                and self._resolved_target() != self.owned_ids)

    def _reconcile(self, now: int, out: list) -> None:
        """Java's AbstractMembershipManager.maybeReconcile: revoke, then assign; commit first."""
        ids = self._resolved_target()
        new = {TopicPartition(self.topic_names[tid], p) for tid, p in ids}
        revoked = self.assignment - new
        added = new - self.assignment
        if revoked and self.config.enable_auto_commit and not self._commit_before_revocation(revoked, now, out):
            return
        log.info("Reconciling assignment: revoking %s, adding %s", sorted(revoked), sorted(added))
        if revoked:
            out.append(PartitionsRevoked(tuple(sorted(revoked))))
        self.assignment = new
        if self.config.enable_auto_commit and self._next_auto_commit is None:
            self._next_auto_commit = now + self.config.auto_commit_interval_ms
        out.append(PartitionsAssigned(tuple(sorted(added))))
        self._reconciled_ids = ids
        self.state = ConsumerMemberState.ACKNOWLEDGING

    def _commit_before_revocation(self, revoked, now: int, out: list) -> bool:
        """Java's autoCommitSyncBeforeRevocation: stop fetching the revoked partitions, commit the
        consumed offsets, revoke when done (or when the rebalance timeout has passed)."""
        if self._prepare_deadline is None:
            self._prepare_deadline = now + self.config.rebalance_timeout_ms
        st = self._prepare_commit
        if st is None or (st == "retry" and now >= self._prepare_retry_at):
            if st is None:
                out.append(PendingRevocation(tuple(sorted(revoked))))
            offsets = dict(self._offsets_to_commit())
            if offsets and self.coordinator is not None:
                token = self._new_token()
                self._prepare_commit, self._prepare_commit_token = "inflight", token
                self._send_commit(token, offsets, "prepare", now, out)
            else:
                self._prepare_commit = "done"
        if self._prepare_commit in ("inflight", "retry") and now < self._prepare_deadline:
            return False
        self._prepare_commit = self._prepare_commit_token = self._prepare_deadline = None
        return True

    def _maybe_resolve(self, now: int, out: list) -> None:
        if self._resolve_token is None and self._unresolved() and now >= self._resolve_retry_at:
            token = self._new_token()
            self._resolve_token = token
            self._pending[token] = PendingRequest("resolve_topic_ids", self.generation, sent_ms=now)
            topics = None if self.pattern is not None else tuple(sorted(self.subscription or ()))
            out.append(ResolveTopicIds(token, topics))

    # --- heartbeats --------------------------------------------------------------------------------

    def _heartbeating(self) -> bool:
        return self.state == ConsumerMemberState.JOINING or self.state in _IN_GROUP

    def _next_heartbeat_at(self) -> int:
        """At once when joining or acknowledging a reconciliation; else at the broker's interval."""
        last = self._sent
        urgent = (self.member_epoch == 0 or last is None
                  or (self._reconciled_ids is None and self.owned_ids != last.owned)
                  or (self.pattern is None and last.topics != tuple(sorted(self.subscription or ())))
                  or (self.pattern is not None and last.regex != self.pattern.pattern))
        return max(self._hb_retry_at, 0 if urgent else self._hb_due)

    def _heartbeat_tick(self, now: int, out: list) -> None:
        if self.coordinator is None or not self._heartbeating() or self._hb_token is not None:
            return
        if self.group_managed and now >= self._poll_deadline and self._poll_deadline:
            log.warning("consumer poll timeout has expired. This means the time between subsequent calls "
                        "to poll() was longer than the configured max.poll.interval.ms, which typically "
                        "implies that the poll loop is spending too much time processing messages.")
            # Java: a member whose poll timer expired leaves with -1, even a static one, so
            # its partitions move on; it rejoins on its next poll.
            self._send_leave(LEAVE_GROUP_MEMBER_EPOCH, "consumer poll timeout has expired.", now, out)
            self._to_unsubscribed()
            self.state = ConsumerMemberState.STALE
            self._lost_pending = True
            return
        if now < self._next_heartbeat_at():
            return
        req, sent = self._build_heartbeat()
        token = self._new_token()
        self._hb_token = token
        self._hb_due = now + self.heartbeat_interval_ms
        self._pending[token] = PendingRequest("cg_heartbeat", self.generation, sent, now)
        # a regex needs v1 (KIP-848's broker-side regex); v0 would silently drop it
        out.append(SendRequest(token, req, min_version=self._heartbeat_min_version(req)))

    def _heartbeat_min_version(self, req) -> int | None:
        return 1 if req.subscribed_topic_regex else None

    def _build_heartbeat(self) -> tuple[ConsumerGroupHeartbeatRequest, _Sent]:
        """Java's HeartbeatState.buildRequestData: every field on a join, else only changes."""
        c = self.config
        full = self.member_epoch == 0 or self._sent is None
        last = self._sent
        topics = None if self.pattern is not None else tuple(sorted(self.subscription or ()))
        regex = self.pattern.pattern if self.pattern is not None else None
        owned = frozenset() if self.member_epoch == 0 else self.owned_ids
        sent = _Sent(c.rebalance_timeout_ms, topics, regex, c.group_remote_assignor, owned)
        subscription_changed = full or last.topics != topics or last.regex != regex
        by_topic: dict[bytes, list[int]] = {}
        for tid, p in sorted(owned):
            by_topic.setdefault(tid, []).append(p)
        req = ConsumerGroupHeartbeatRequest(
            group_id=c.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
            instance_id=c.group_instance_id,
            rack_id=c.client_rack if full else None,
            rebalance_timeout_ms=c.rebalance_timeout_ms if full or last.rebalance_timeout_ms != c.rebalance_timeout_ms
            else -1,
            # The subscription travels whole: names and regex together, the unused one empty
            # (as librdkafka sends it; Kafka treats an empty regex as none).
            subscribed_topic_names=list(topics or ()) if subscription_changed else None,
            subscribed_topic_regex=(regex or "") if subscription_changed else None,
            server_assignor=c.group_remote_assignor if full or last.assignor != c.group_remote_assignor else None,
            topic_partitions=[ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=t, partitions=ps)
                              for t, ps in by_topic.items()] if full or last.owned != owned else None)
        return req, sent

    def _handle_cg_heartbeat(self, token, pending, resp, now, out) -> None:
        self._hb_token = None
        error = ErrorCode(resp.error_code)
        if not self._heartbeating() or pending.generation.member_id != self.member_id:
            return  # an answer about a membership that is over
        if error == ErrorCode.NONE:
            self._hb_attempts = 0
            self._hb_retry_at = 0
            self._sent = pending.data
            if resp.member_id:
                self.member_id = resp.member_id  # a pre-KIP-1082 broker chooses the id
            self._set_epoch(resp.member_epoch)
            if resp.heartbeat_interval_ms > 0:
                self.heartbeat_interval_ms = resp.heartbeat_interval_ms
            self._hb_due = now + self.heartbeat_interval_ms
            if resp.assignment is not None:
                self.target = frozenset((tp.topic_id, p) for tp in resp.assignment.topic_partitions
                                        for p in tp.partitions)
            elif self.target is None:
                self.target = frozenset()  # joined with nothing to own yet
            if self.state == ConsumerMemberState.JOINING:
                self.state = ConsumerMemberState.RECONCILING
            self._update_state()
            return
        self._sent = None
        log.info("ConsumerGroupHeartbeat failed: %s %s", error.name, resp.error_message or "")
        if error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            self._fence(f"heartbeat answered {error.name}")
        elif error in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
            self._mark_coordinator_unknown(f"error response {error.name}", out)
            self._hb_retry_at = now + self._backoff.backoff(self._hb_attempts)
            self._hb_attempts += 1
        elif error == ErrorCode.FENCED_INSTANCE_ID:
            self._fatal_cg(FencedInstanceIdError(self.config.group_instance_id, "ConsumerGroupHeartbeat"), out)
        elif error in _FATAL or not error.retriable:
            self._fatal_cg(KafkaError(error, resp.error_message or error.message), out)
        else:
            self._hb_retry_at = now + self._backoff.backoff(self._hb_attempts)
            self._hb_attempts += 1

    def _update_state(self) -> None:
        """STABLE once the broker has been told we own exactly its target; ACKNOWLEDGING while
        the reconciled set waits to be reported; RECONCILING while partitions are to move."""
        if self.state not in _IN_GROUP:
            return
        if (self._reconciled_ids is None and self.owned_ids == self.target
                and self._sent is not None and self._sent.owned == self.owned_ids):
            self.state = ConsumerMemberState.STABLE
        elif self._reconciled_ids is not None or self.target == self.owned_ids:
            self.state = ConsumerMemberState.ACKNOWLEDGING
        else:
            self.state = ConsumerMemberState.RECONCILING

    def _fatal_cg(self, error: BaseException, out: list) -> None:
        self.state = ConsumerMemberState.FATAL
        self._fatal(error, out)

    # --- commits: the member epoch instead of the generation ------------------------------------

    def _commit_error(self, pending: PendingRequest, resp, out: list) -> BaseException | None:
        for topic in resp.topics:
            for p in topic.partitions:
                error = ErrorCode(p.error_code)
                if error == ErrorCode.STALE_MEMBER_EPOCH:
                    # The epoch moved on (a newer heartbeat answer); Java fails the commit.
                    return CommitFailedError(code=error)
                if error == ErrorCode.UNKNOWN_MEMBER_ID and self.member_id != pending.generation.member_id:
                    return CommitFailedError(code=error)
        return super()._commit_error(pending, resp, out)

