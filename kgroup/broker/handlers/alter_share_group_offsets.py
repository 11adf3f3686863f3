"""AlterShareGroupOffsets (91) v0: the start offsets of an empty share group's share-partitions,
set through the share coordinator (broker/share_group_service.py), as
KafkaApis.handleAlterShareGroupOffsetsRequest serves it: UNSUPPORTED_VERSION below share.version
1; READ on the group (else GROUP_AUTHORIZATION_FAILED); a topic without READ is
TOPIC_AUTHORIZATION_FAILED, a topic the broker does not have UNKNOWN_TOPIC_OR_PARTITION, per
partition, answered first; the group coordinator answers the rest (NON_EMPTY_GROUP,
GROUP_ID_NOT_FOUND for another type of group, partitions beyond the topic's count)."""
import copy

from ...protocol.errors import ErrorCode
from ...protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsResponse
from ...protocol.schema import ZERO_UUID
from .. import share_group_service
from ..authorization import READ, denied_topics, group_denied
from ..pending import PendingResponse
from .share_group_heartbeat import share_groups_enabled

Topic = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
Partition = Topic.AlterShareGroupOffsetsResponsePartition


def _error(code, message=None):
    code = ErrorCode(code)
    return AlterShareGroupOffsetsResponse(error_code=int(code), error_message=message or code.message)


def handle(broker, ctx, req, version):
    if not share_groups_enabled(broker):
        return _error(ErrorCode.UNSUPPORTED_VERSION)
    if group_denied(broker, ctx, READ, req.group_id):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = denied_topics(broker, ctx, READ, (t.topic_name for t in req.topics)) or set()
    refused, authorized = [], []
    for t in req.topics:
        error = None
        if t.topic_name in denied:
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif broker.metadata.get(t.topic_name) is None:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if error is None:
            authorized.append(t)
            continue
        known = broker.metadata.get(t.topic_name)
        refused.append(Topic(topic_name=t.topic_name, topic_id=known.topic_id if known is not None else ZERO_UUID,
                             partitions=[Partition(partition_index=p.partition_index, error_code=int(error),
                                                   error_message=error.message) for p in t.partitions]))
    sub = copy.copy(req)
    sub.topics = authorized
    answer = share_group_service.alter_offsets(broker, sub)

    def merge(resp):
        if resp.error_code:
            return _error(resp.error_code, resp.error_message)
        # AlterShareGroupOffsetsResponse.Builder: the refused topics, then the coordinator's, the
        # topic ids from the broker's metadata
        by_name = {t.topic_name: t for t in refused}
        out = list(refused)
        for t in resp.responses:
            known = broker.metadata.get(t.topic_name)
            entry = by_name.get(t.topic_name)
            if entry is None:
                entry = by_name[t.topic_name] = Topic(topic_name=t.topic_name, partitions=[],
                                                      topic_id=known.topic_id if known is not None else ZERO_UUID)
                out.append(entry)
            entry.partitions.extend(Partition(partition_index=p.partition_index, error_code=p.error_code,
                                              error_message=p.error_message) for p in t.partitions)
        return AlterShareGroupOffsetsResponse(responses=out)
    if type(answer) is PendingResponse:
        return answer.then(merge)
    return merge(answer)
