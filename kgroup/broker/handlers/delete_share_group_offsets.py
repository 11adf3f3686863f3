"""DeleteShareGroupOffsets (92) v0: an empty share group's state for whole topics, deleted through
the share coordinator (broker/share_group_service.py), as
KafkaApis.handleDeleteShareGroupOffsetsRequest serves it: UNSUPPORTED_VERSION below share.version
1; DELETE on the group (else GROUP_AUTHORIZATION_FAILED); a topic without READ is answered
TOPIC_AUTHORIZATION_FAILED first; the group coordinator answers the rest (GROUP_ID_NOT_FOUND,
NON_EMPTY_GROUP, UNKNOWN_TOPIC_OR_PARTITION for a topic without state)."""
import copy

from ...protocol.errors import ErrorCode
from ...protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsResponse
from .. import share_group_service
from ..authorization import DELETE, READ, TOPIC_AUTHORIZATION_FAILED, denied_topics, group_denied
from ..pending import PendingResponse
from .share_group_heartbeat import share_groups_enabled

Topic = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic


def _error(code, message=None):
    code = ErrorCode(code)
    return DeleteShareGroupOffsetsResponse(error_code=int(code), error_message=message or code.message)


def handle(broker, ctx, req, version):
    if not share_groups_enabled(broker):
        return _error(ErrorCode.UNSUPPORTED_VERSION)
    if group_denied(broker, ctx, DELETE, req.group_id):
        return _error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    denied = denied_topics(broker, ctx, READ, (t.topic_name for t in req.topics)) or set()
    refused = [Topic(topic_name=t.topic_name, error_code=int(TOPIC_AUTHORIZATION_FAILED),
                     error_message=TOPIC_AUTHORIZATION_FAILED.message) for t in req.topics if t.topic_name in denied]
    sub = copy.copy(req)
    sub.topics = [t for t in req.topics if t.topic_name not in denied]
    answer = share_group_service.delete_offsets(broker, sub)

    def merge(resp):
        if resp.error_code:
            return _error(resp.error_code, resp.error_message)
        return DeleteShareGroupOffsetsResponse(responses=refused + list(resp.responses))
    if type(answer) is PendingResponse:
        return answer.then(merge)
    return merge(answer)
