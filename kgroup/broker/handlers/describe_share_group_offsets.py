"""DescribeShareGroupOffsets (90) v0-1: per group, the start offset, leader epoch and (v1) lag of
its share-partitions, read from the share coordinator (broker/share_group_service.py), as
KafkaApis.handleDescribeShareGroupOffsetsRequest serves it: UNSUPPORTED_VERSION per group below
share.version 1; DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED); with named topics, a
topic without DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED per partition; with null topics
(every share-partition with state) such topics are left out."""
from ...protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsResponse
from ...protocol.schema import ZERO_UUID
from .. import share_group_service
from ..authorization import DESCRIBE, TOPIC_AUTHORIZATION_FAILED, denied_topics, group_denied
from ..pending import PendingResponse
from .share_group_heartbeat import share_groups_enabled
from ...protocol.errors import ErrorCode

Group = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
Topic = Group.DescribeShareGroupOffsetsResponseTopic
Partition = Topic.DescribeShareGroupOffsetsResponsePartition


def handle(broker, ctx, req, version):
    answers = []
    enabled = share_groups_enabled(broker)
    for g in req.groups:
        if not enabled:
            answers.append(Group(group_id=g.group_id, error_code=int(ErrorCode.UNSUPPORTED_VERSION)))
        elif group_denied(broker, ctx, DESCRIBE, g.group_id):
            answers.append(Group(group_id=g.group_id, error_code=int(ErrorCode.GROUP_AUTHORIZATION_FAILED)))
        elif g.topics is None:
            answers.append(_all_offsets(broker, ctx, g.group_id))
        elif not g.topics:
            answers.append(Group(group_id=g.group_id))
        else:
            answers.append(_offsets(broker, ctx, g))
    parts = []
    for a in answers:
        if type(a) is not PendingResponse:
            token = PendingResponse()
            token.answer(a)
            a = token
        parts.append(a)
    return PendingResponse.gather(parts, lambda groups: DescribeShareGroupOffsetsResponse(groups=groups))


def _all_offsets(broker, ctx, group_id):
    answer = share_group_service.describe_offsets(broker, group_id, None)

    def visible(group):
        # clients may not see offsets of topics they may not DESCRIBE
        denied = denied_topics(broker, ctx, DESCRIBE, (t.topic_name for t in group.topics))
        if denied:
            group.topics = [t for t in group.topics if t.topic_name not in denied]
        return group
    if type(answer) is PendingResponse:
        return answer.then(visible)
    return visible(answer)


def _offsets(broker, ctx, g):
    denied = denied_topics(broker, ctx, DESCRIBE, (t.topic_name for t in g.topics)) or set()
    authorized = [(t.topic_name, list(t.partitions)) for t in g.topics if t.topic_name not in denied]
    refused = [Topic(topic_name=t.topic_name, topic_id=ZERO_UUID, partitions=[
        Partition(partition_index=p, start_offset=-1, lag=-1, error_code=int(TOPIC_AUTHORIZATION_FAILED),
                  error_message=TOPIC_AUTHORIZATION_FAILED.message) for p in t.partitions])
        for t in g.topics if t.topic_name in denied]
    answer = share_group_service.describe_offsets(broker, g.group_id, authorized)
    if not refused:
        return answer

    def add_refused(group):
        if not group.error_code:
            group.topics = list(group.topics) + refused
        return group
    if type(answer) is PendingResponse:
        return answer.then(add_refused)
    return add_refused(answer)
