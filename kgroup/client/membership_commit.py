"""Offset commits of the membership machine (ConsumerCoordinator's OffsetCommit side), sans-IO.

A mixin of :class:`~kgroup.client.membership.GroupMembership`: user commits (commitSync/Async),
auto-commit every auto.commit.interval.ms in foreground polls, and the commit before revocation.
A group-managed member commits with its generation only when STABLE (otherwise
RebalanceInProgressError or CommitFailedError at once, as Java); a manual assignment commits with
generation -1 and no member id. Response errors are handled as Java's OffsetCommitResponseHandler:
coordinator errors mark the coordinator unknown, REBALANCE_IN_PROGRESS requests a rejoin,
UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION reset the generation.
"""
from __future__ import annotations

import logging
from typing import Mapping

from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
from kgroup.protocol.schema import ZERO_UUID

from .assignors import TopicPartition
from .errors import CommitFailedError, FencedInstanceIdError, RebalanceInProgressError, is_retriable
from .membership_types import NO_GENERATION, CommitCompleted, MemberState, PendingRequest, SendRequest
from .types import NAMES_MAX_VERSIONS, OffsetAndMetadata

log = logging.getLogger("kgroup.client.membership")


class OffsetCommitMixin:
    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], now: int,
               kind: str = "user") -> tuple[int, list]:
        """Commit offsets; the result arrives as a CommitCompleted with the returned token."""
        token = self._new_token()
        out: list = []
        offsets = {tp: (o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o)))
                   for tp, o in offsets.items()}
        if not offsets:
            out.append(CommitCompleted(token, offsets, None, kind))
        elif any(o.offset < 0 for o in offsets.values()):
            out.append(CommitCompleted(token, offsets, ValueError(f"Invalid offset in {offsets}"), kind))
        elif self.coordinator is None:
            self._waiting_commits.append((token, offsets, kind))
        else:
            self._send_commit(token, offsets, kind, now, out)
        return token, out

    def cancel(self, token: int) -> None:
        """Forget a request whose caller gave up (its answer will be ignored)."""
        self._pending.pop(token, None)
        self._waiting_commits = [w for w in self._waiting_commits if w[0] != token]

    # --- offset commits --------------------------------------------------------------------------

    def _maybe_auto_commit(self, now: int, out: list) -> None:
        if not self.config.enable_auto_commit or self._next_auto_commit is None or now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self.config.auto_commit_interval_ms
        offsets = dict(self._offsets_to_commit())
        if offsets:
            _, more = self.commit(offsets, now, "auto")
            out.extend(more)

    def _send_commit(self, token: int, offsets: dict, kind: str, now: int, out: list) -> None:
        if self.group_managed:
            gen = self.generation_if_stable()
            if gen is None:
                if self.rebalance_in_progress():
                    err: BaseException = RebalanceInProgressError(
                        "Offset commit cannot be completed since the consumer is undergoing a rebalance for "
                        "auto partition assignment. You can try completing the rebalance by calling poll() "
                        "and then retry the operation.")
                else:
                    err = CommitFailedError(
                        "Offset commit cannot be completed since the consumer is not part of an active group "
                        "for auto partition assignment; it is likely that the consumer was kicked out of the group.")
                self._commit_done(token, PendingRequest("offset_commit", self.generation, (offsets, kind)), err, now, out)
                return
            instance = self.config.group_instance_id
        else:
            gen, instance = NO_GENERATION, None
        topics: dict[str, list] = {}
        for tp, om in offsets.items():
            topics.setdefault(tp.topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=om.offset,
                committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                committed_metadata=om.metadata))
        ids = self.commit_topic_ids(topics)
        req = OffsetCommitRequest(group_id=self.config.group_id, generation_id_or_member_epoch=gen.generation_id,
                                  member_id=gen.member_id, group_instance_id=instance,
                                  topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                                      name=t, topic_id=ids[t] if ids else ZERO_UUID, partitions=p)
                                          for t, p in topics.items()])
        self._pending[token] = PendingRequest("offset_commit", gen, (offsets, kind), now)
        out.append(SendRequest(token, req, max_version=None if ids else NAMES_MAX_VERSIONS[req.API_KEY]))

    def commit_topic_ids(self, topics) -> dict[str, bytes] | None:
        """The topic ids to commit with (OffsetCommit v10+), or None to name the topics: the
        classic consumer always names them (Java's ConsumerCoordinator builds forTopicNames)."""
        return None

    def topic_name_of(self, topic_id: bytes) -> str:
        """The name of a topic a response names by id only (v10+)."""
        return ""

    def _handle_offset_commit(self, token, pending, resp, now, out) -> None:
        self._commit_done(token, pending, self._commit_error(pending, resp, out), now, out)

    def _commit_error(self, pending: PendingRequest, resp, out: list) -> BaseException | None:
        """ConsumerCoordinator.OffsetCommitResponseHandler."""
        unauthorized = set()
        for topic in resp.topics:
            for p in topic.partitions:
                error = ErrorCode(p.error_code)
                if error == ErrorCode.NONE:
                    continue
                if error == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                    unauthorized.add(topic.name or self.topic_name_of(topic.topic_id))
                    continue
                if error in (ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.OFFSET_METADATA_TOO_LARGE,
                             ErrorCode.INVALID_COMMIT_OFFSET_SIZE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                             ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                    return KafkaError(error)
                if error in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                             ErrorCode.REQUEST_TIMED_OUT):
                    self._mark_coordinator_unknown(f"error response {error.name}", out)
                    return KafkaError(error)
                if error == ErrorCode.FENCED_INSTANCE_ID:
                    if self.generation == pending.generation:
                        return FencedInstanceIdError(self.config.group_instance_id, "OffsetCommit")
                    if self.state == MemberState.PREPARING_REBALANCE:
                        return RebalanceInProgressError()
                    return CommitFailedError(code=error)
                if error == ErrorCode.REBALANCE_IN_PROGRESS:
                    self.request_rejoin("offset commit failed since group is already rebalancing")
                    return RebalanceInProgressError(
                        "Offset commit cannot be completed since the consumer group is executing a rebalance "
                        "at the moment. You can try completing the rebalance by calling poll() and then retry "
                        "commit again")
                if error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                    if self.generation != pending.generation and self.state == MemberState.PREPARING_REBALANCE:
                        return RebalanceInProgressError()
                    self._reset_state_and_rejoin(f"encountered {error.name} from OFFSET_COMMIT response",
                                                 error != ErrorCode.ILLEGAL_GENERATION)
                    return CommitFailedError(code=error)
                return KafkaError(error, f"Unexpected error in commit: {error.message}")
        if unauthorized:
            return KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Not authorized to access topics: {sorted(unauthorized)}")
        return None

    def _commit_done(self, token: int, pending: PendingRequest, error, now: int, out: list) -> None:
        offsets, kind = pending.data
        if kind == "prepare":
            if token == self._prepare_commit_token:
                if error is not None and is_retriable(error) and now < (self._prepare_deadline or 0):
                    self._prepare_commit, self._prepare_retry_at = "retry", now + self.config.retry_backoff_ms
                else:
                    self._prepare_commit = "done"
                self._prepare_commit_token = None
        elif kind == "auto" and error is not None:
            if is_retriable(error):
                self._next_auto_commit = now + self.config.retry_backoff_ms
            log.warning("Asynchronous auto-commit of offsets %s failed: %s", offsets, error)
        out.append(CommitCompleted(token, offsets, error, kind))

