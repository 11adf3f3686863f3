"""What OffsetCommit and TxnOffsetCommit share: partitions of topics this broker does not have
are answered UNKNOWN_TOPIC_OR_PARTITION here (KafkaApis checks them before the coordinator); the
rest go to the group coordinator, and the two answers are merged by topic name (as the
responses' builders in Kafka do).

OffsetCommit v10+ names topics by id (KIP-516): the ids are resolved to names here, before the
coordinator, which works in names only; an unknown id gets UNKNOWN_TOPIC_ID for each of its
partitions, and every topic of the answer carries its id again (KafkaApis.handleOffsetCommitRequest)."""
import copy

from ...protocol.errors import ErrorCode
from ..pending import PendingResponse


def commit_known_partitions(md, req, commit, topic_response, partition_response, denied=None, use_topic_ids=False):
    """``commit(request)``: the coordinator's answer (a response or a PendingResponse) for a
    request holding only known partitions. Returns the whole request's answer. Topics in
    ``denied`` (READ refused by the authorizer) are answered TOPIC_AUTHORIZATION_FAILED."""
    if use_topic_ids:
        return _commit_by_topic_ids(md, req, commit, topic_response, partition_response, denied)
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
    return _merge(req, known, unknown, commit, topic_response, partition_response, None)


def _commit_by_topic_ids(md, req, commit, topic_response, partition_response, denied):
    unknown, known, ids = [], [], {}
    for t in req.topics:
        topic = md.by_id(t.topic_id)
        if topic is None:
            unknown.append((t.topic_id, [p.partition_index for p in t.partitions], ErrorCode.UNKNOWN_TOPIC_ID))
            continue
        ids[topic.name] = topic.topic_id
        t = copy.copy(t)
        t.name = topic.name
        if denied and topic.name in denied:
            bad, code = [p.partition_index for p in t.partitions], ErrorCode.TOPIC_AUTHORIZATION_FAILED
        else:
            bad = [p.partition_index for p in t.partitions if not 0 <= p.partition_index < topic.num_partitions]
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if bad:
            unknown.append((topic.topic_id, bad, code))
            t.partitions = [p for p in t.partitions if p.partition_index not in bad]
        if t.partitions:
            known.append(t)
    return _merge(req, known, unknown, commit, topic_response, partition_response, ids)


def _merge(req, known, unknown, commit, topic_response, partition_response, ids):
    """The coordinator's answer for ``known`` plus the errors of ``unknown`` ((topic name, or
    id when ``ids`` maps names to ids, partitions, error))."""
    sub = copy.copy(req)
    sub.topics = known
    answer = commit(sub)

    def with_unknown(resp):
        if ids is not None:
            for tr in resp.topics:
                tr.topic_id = ids.get(tr.name, tr.topic_id)
        for key, partitions, error in unknown:
            if ids is None:
                tr = next((t for t in resp.topics if t.name == key), None)
            else:
                tr = next((t for t in resp.topics if t.topic_id == key), None)
            if tr is None:
                tr = topic_response(partitions=[], **({"name": key} if ids is None else {"topic_id": key}))
                resp.topics.append(tr)
            tr.partitions.extend(partition_response(partition_index=p, error_code=error) for p in partitions)
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
