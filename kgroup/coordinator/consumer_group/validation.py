"""ConsumerGroupHeartbeat request validation, as Kafka's
``throwIfConsumerGroupHeartbeatRequestIsInvalid`` (checked in this order, before any group state is
read; Kafka 4.3), and the regex check it applies when a member's regex changes.

- v1+ (KIP-1082: the client generates its member id), an epoch > 0 and a leave (-1) need a member
  id; group, instance and rack ids must not be blank when given;
- a join (epoch 0) needs a rebalance timeout, an empty owned-partitions list and a subscription
  field (names or a regex); an empty list or an empty regex is a member subscribed to nothing
  (Kafka 4.0+, KAFKA-18095);
- a static member's temporary leave (-2) needs its instance id; any epoch below -2 is invalid;
- a server assignor the broker does not have is UNSUPPORTED_ASSIGNOR;
- a regex that does not compile is INVALID_REGULAR_EXPRESSION.

Regexes are RE2 (google-re2, the C++ library RE2/J ports): Kafka compiles them with RE2/J's
``Pattern.compile`` and a topic matches when the whole name does (``matcher(topic).matches()``),
so here ``fullmatch`` with RE2's default (Perl-like) syntax: no lookaround, no backreferences,
``.`` not matching a newline, case-sensitive.
"""
from __future__ import annotations

from typing import Iterable

import re2

from ...protocol.errors import ErrorCode, KafkaError

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False     # a refused regex is the member's error, not the broker's log


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def _blank(value: str | None) -> bool:
    return value is not None and not value.strip()


def validate_heartbeat(req, version: int, assignors: Iterable[str]) -> None:
    """Raise KafkaError (INVALID_REQUEST or UNSUPPORTED_ASSIGNOR) for a request Kafka refuses."""
    epoch = req.member_epoch
    if (version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION or epoch > 0
            or epoch == LEAVE_GROUP_MEMBER_EPOCH) and _blank(req.member_id):
        raise _invalid("MemberId can't be empty.")
    if _blank(req.group_id):
        raise _invalid("GroupId can't be empty.")
    if _blank(req.instance_id):
        raise _invalid("InstanceId can't be empty.")
    if _blank(req.rack_id):
        raise _invalid("RackId can't be empty.")
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        if req.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or req.topic_partitions:
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise _invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise _invalid("MemberEpoch is invalid.")
    assignors = list(assignors)
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise KafkaError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                         f"ServerAssignor {req.server_assignor} is not supported. "
                         f"Supported assignors: {', '.join(assignors)}.")


def check_regex(regex: str):
    """The compiled subscription regex (RE2; ``fullmatch`` is Kafka's ``matches()``), or
    INVALID_REGULAR_EXPRESSION (Kafka's throwIfRegularExpressionIsInvalid; the description is
    RE2's, which RE2/J's follows)."""
    try:
        return re2.compile(regex, _RE2_OPTIONS)
    except re2.error as e:
        reason = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) else str(e)
        raise KafkaError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                         f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {reason}.") from None
