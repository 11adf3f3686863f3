"""Sans-IO membership of a share group (KIP-932): Java's ShareMembershipManager +
ShareHeartbeatRequestManager, on the consumer-protocol machine they share in Java
(AbstractMembershipManager; here :class:`~kgroup.client.membership_consumer.ConsumerGroupMembership`).

What differs from a KIP-848 consumer group member:

* one request, ShareGroupHeartbeat: group id, member id, epoch always; the rack the first time
  (and after a failure); the subscribed topic names on a join or when they change. No rebalance
  timeout, owned partitions, regex, server assignor or instance id (no static membership).
* the broker's ``simple`` assignor may give a partition to several members at once, and a share
  member has nothing to commit or revoke: an assignment is taken as it arrives (the reconciliation
  still reports back with the next heartbeat, so the member is STABLE once the broker has heard
  from it after the change).
* leaving is always epoch -1.

Like a consumer-group member it picks its own member id (KIP-1082), heartbeats at the interval the
broker hands out, rejoins with epoch 0 and the same id when fenced (FENCED_MEMBER_EPOCH /
UNKNOWN_MEMBER_ID), and leaves (epoch -1) when ``max.poll.interval.ms`` passes without a poll.
"""
from __future__ import annotations

from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest

from .errors import UnsupportedVersionError
from .membership_consumer import LEAVE_GROUP_MEMBER_EPOCH, ConsumerGroupMembership, _Sent
from .membership_types import MembershipConfig

# Java's ShareHeartbeatRequestManager messages
SHARE_PROTOCOL_NOT_SUPPORTED_MSG = ("The cluster does not support the share group protocol. To use share groups, "
                                    "the cluster must have the share group protocol enabled.")
SHARE_PROTOCOL_VERSION_NOT_SUPPORTED_MSG = ("The cluster does not support the share group protocol using "
                                            "ShareGroupHeartbeat API version 1 or above")


def share_membership_config(config) -> MembershipConfig:
    """The membership settings of a :class:`~kgroup.client.config.ShareConsumerConfig`."""
    return MembershipConfig(config["group.id"], None, rebalance_timeout_ms=config["max.poll.interval.ms"],
                            retry_backoff_ms=config["retry.backoff.ms"],
                            retry_backoff_max_ms=config["retry.backoff.max.ms"], enable_auto_commit=False,
                            client_rack=config["client.rack"] or None, group_protocol="share")


class ShareGroupMembership(ConsumerGroupMembership):
    """One share consumer's membership in its share group. See the module docstring."""

    def _build_heartbeat(self) -> tuple[ShareGroupHeartbeatRequest, _Sent]:
        """Java's ShareHeartbeatRequestManager.HeartbeatState.buildRequestData."""
        c = self.config
        full = self.member_epoch == 0 or self._sent is None
        topics = tuple(sorted(self.subscription or ()))
        # what we own is not sent, but remembered: the first heartbeat after a reconciliation
        # acknowledges it, and the member is STABLE once that heartbeat is answered
        sent = _Sent(c.rebalance_timeout_ms, topics, None, None, self.owned_ids)
        req = ShareGroupHeartbeatRequest(
            group_id=c.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
            rack_id=c.client_rack if full else None,
            subscribed_topic_names=list(topics) if full or self._sent.topics != topics else None)
        return req, sent

    def _heartbeat_min_version(self, req) -> int | None:
        return None

    def _leave_request(self, epoch: int) -> ShareGroupHeartbeatRequest:
        return ShareGroupHeartbeatRequest(group_id=self.config.group_id, member_id=self.member_id,
                                          member_epoch=LEAVE_GROUP_MEMBER_EPOCH)

    def on_failure(self, token: int, error: BaseException, now: int) -> list:
        pending = self._pending.get(token)
        if pending is not None and pending.kind == "cg_heartbeat" and isinstance(error, UnsupportedVersionError):
            del self._pending[token]
            self._hb_token = None
            out: list = []
            self._fatal_cg(UnsupportedVersionError(f"{SHARE_PROTOCOL_VERSION_NOT_SUPPORTED_MSG} ({error})"), out)
            return out
        return super().on_failure(token, error, now)

    def _handle_cg_heartbeat(self, token, pending, resp, now, out) -> None:
        if resp.error_code == ErrorCode.UNSUPPORTED_VERSION and self._heartbeating():
            self._hb_token = None
            self._fatal_cg(KafkaError(ErrorCode.UNSUPPORTED_VERSION, SHARE_PROTOCOL_NOT_SUPPORTED_MSG), out)
            return
        super()._handle_cg_heartbeat(token, pending, resp, now, out)
