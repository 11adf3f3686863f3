"""What OffsetCommit and TxnOffsetCommit share: partitions of topics this broker does not have
are answered UNKNOWN_TOPIC_OR_PARTITION here (KafkaApis checks them before the coordinator); the
rest go to the group coordinator, and the two answers are merged by topic name (as the
responses' builders in Kafka do)."""
import copy

from ...protocol.errors import ErrorCode
from ..pending import PendingResponse


def commit_known_partitions(md, req, commit, topic_response, partition_response, denied=None):
    """``commit(request)``: the coordinator's answer (a response or a PendingResponse) for a
    request holding only known partitions. Returns the whole request's answer. Topics in
    ``denied`` (READ refused by the authorizer) are answered TOPIC_AUTHORIZATION_FAILED."""
    if not denied and _all_known(md, req.topics):
        return commit(req)
    unknown, known = [], []
    for t in req.topics:
        topic = md.get(t.name)
        if denied and t.name in denied:
            bad = [p.partition_index for p in t.partitions]
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        else:
            bad = [p.partition_index for p in t.partitions
                   if topic is None or not 0 <= p.partition_index < topic.num_partitions]
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if bad:
            unknown.append((t.name, bad, code))
            t = copy.copy(t)
            t.partitions = [p for p in t.partitions if p.partition_index not in bad]
        if t.partitions:
            known.append(t)
    if not unknown:             # only topics naming no partition were missing
        return commit(req)
    sub = copy.copy(req)
    sub.topics = known
    answer = commit(sub)

    def with_unknown(resp):
        for name, partitions, code in unknown:
            tr = next((t for t in resp.topics if t.name == name), None)
            if tr is None:
                tr = topic_response(name=name, partitions=[])
                resp.topics.append(tr)
            tr.partitions.extend(partition_response(partition_index=p, error_code=code) for p in partitions)
        return resp
    if type(answer) is PendingResponse:
        return answer.then(with_unknown)
    return with_unknown(answer)


def _all_known(md, topics) -> bool:
    for t in topics:
        topic = md.get(t.name)
        if topic is None:
            return False
        n = topic.num_partitions
        for p in t.partitions:
            if not 0 <= p.partition_index < n:
                return False
    return True
