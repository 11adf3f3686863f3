"""OffsetFetch (9) v1-10: one group (v1-7) or many (v8+, split across the shards that own them).

v10 names topics by id (KIP-516). As KafkaApis.fetchOffsetsForGroup, the ids are resolved to names
here, before the coordinator, which works in names only: a topic whose id is unknown is answered
UNKNOWN_TOPIC_ID for each of its partitions (unless the group itself fails), and every topic of the
answer carries its id; a topic the broker no longer has is left out of a fetch of all offsets, as
Kafka cannot name it by id."""
import copy

from ...coordinator import GroupCoordinatorShard as Shard
from ...coordinator.responses import FetchGroup, offset_fetch_response
from ...protocol.errors import ErrorCode
from ...protocol.messages.offset_fetch import OffsetFetchResponse
from ..authorization import DESCRIBE, RT_TOPIC, allowed, group_denied
from ..pending import PendingResponse

Group = OffsetFetchResponse.OffsetFetchResponseGroup
Topic = Group.OffsetFetchResponseTopics
Partition = Topic.OffsetFetchResponsePartitions


def handle(broker, ctx, req, version):
    if version < 8:
        if broker.authorizer is not None:
            return _authorized(broker, ctx, req, version)
        return broker.group_coordinator.execute(req.group_id, Shard.handle_offset_fetch, req, version)
    unknown_ids: dict[str, list] = {}
    if version >= 10:
        req = _resolve_topic_ids(broker.metadata, req, unknown_ids)
    if broker.authorizer is not None:
        answer = _authorized(broker, ctx, req, version)
    else:
        answer = broker.group_coordinator.execute_split(
            req, "groups", Shard.handle_offset_fetch, version,
            lambda rs: OffsetFetchResponse(throttle_time_ms=0, groups=[g for r in rs for g in r.groups]),
            group_id_of=lambda g: g.group_id)
    if version < 10:
        return answer

    def with_ids(resp):
        _with_topic_ids(broker.metadata, resp.groups, unknown_ids)
        return resp
    return answer.then(with_ids) if type(answer) is PendingResponse else with_ids(answer)


def _resolve_topic_ids(md, req, unknown_ids):
    req = copy.copy(req)
    groups = []
    for g in req.groups:
        if g.topics is not None:
            g = copy.copy(g)
            known = []
            for t in g.topics:
                topic = md.by_id(t.topic_id)
                if topic is None:
                    unknown_ids.setdefault(g.group_id, []).append(t)
                else:
                    t = copy.copy(t)
                    t.name = topic.name
                    known.append(t)
            g.topics = known
        groups.append(g)
    req.groups = groups
    return req


def _with_topic_ids(md, groups, unknown_ids):
    for g in groups:
        errors = unknown_ids.pop(g.group_id, [])
        if g.error_code:
            continue
        topics = []
        for t in g.topics:
            topic = md.get(t.name)
            if topic is not None:
                t.topic_id = topic.topic_id
                topics.append(t)
        topics += [Topic(topic_id=t.topic_id, partitions=[
            Partition(partition_index=p, committed_offset=-1, metadata="",
                      error_code=int(ErrorCode.UNKNOWN_TOPIC_ID)) for p in t.partition_indexes])
            for t in errors]
        g.topics = topics


def _authorized(broker, ctx, req, version):
    """KafkaApis.handleOffsetFetchRequest with an authorizer: DESCRIBE on each group (else
    GROUP_AUTHORIZATION_FAILED), DESCRIBE on each topic: a topic asked for by name is answered
    TOPIC_AUTHORIZATION_FAILED, one not asked for (all topics) is left out."""
    groups = req.groups if version >= 8 else [req]
    denied_groups = {g.group_id for g in groups if group_denied(broker, ctx, DESCRIBE, g.group_id)}
    requested = {g.group_id: g.topics for g in groups}
    cache: dict = {}

    def topic_ok(name):
        ok = cache.get(name)
        if ok is None:
            ok = cache[name] = allowed(broker, ctx, DESCRIBE, RT_TOPIC, name)
        return ok

    def filter_topics(group_id, topics):
        explicit = requested.get(group_id) is not None
        out = []
        for t in topics:
            if topic_ok(t.name):
                out.append(t)
            elif explicit:
                for p in t.partitions:
                    p.committed_offset, p.committed_leader_epoch, p.metadata = -1, -1, ""
                    p.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                out.append(t)
        return out

    def denied_entry(g):
        return FetchGroup(g.group_id, error=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                          requested=[(t.name, t.partition_indexes) for t in g.topics or ()])

    if version < 8:
        if denied_groups:
            return offset_fetch_response(version, [denied_entry(req)])

        def fix_one(resp):
            resp.topics = filter_topics(req.group_id, resp.topics)
            return resp
        answer = broker.group_coordinator.execute(req.group_id, Shard.handle_offset_fetch, req, version)
        return answer.then(fix_one) if type(answer) is PendingResponse else fix_one(answer)
    denied_resp = offset_fetch_response(version, [denied_entry(g) for g in groups if g.group_id in denied_groups])

    def fix(resp):
        for g in resp.groups:
            g.topics = filter_topics(g.group_id, g.topics)
        order = {g.group_id: i for i, g in enumerate(groups)}
        resp.groups = sorted(resp.groups + denied_resp.groups, key=lambda g: order.get(g.group_id, 0))
        return resp
    if len(denied_groups) == len(groups):
        return fix(OffsetFetchResponse(throttle_time_ms=0, groups=[]))
    sub = copy.copy(req)
    sub.groups = [g for g in groups if g.group_id not in denied_groups]
    answer = broker.group_coordinator.execute_split(
        sub, "groups", Shard.handle_offset_fetch, version,
        lambda rs: OffsetFetchResponse(throttle_time_ms=0, groups=[g for r in rs for g in r.groups]),
        group_id_of=lambda g: g.group_id)
    return answer.then(fix) if type(answer) is PendingResponse else fix(answer)
