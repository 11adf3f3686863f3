"""OffsetFetch (9) v0-9: one group (v0-7) or many (v8+, split across the shards that own them
and answered in request order)."""
import copy

from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.messages.offset_fetch import OffsetFetchResponse
from ...coordinator.responses import FetchGroup, offset_fetch_response
from ...protocol.errors import ErrorCode
from ..authorization import DESCRIBE, RT_TOPIC, allowed, group_denied
from ..pending import PendingResponse


def handle(broker, ctx, req, version):
    if broker.authorizer is not None:
        return _authorized(broker, ctx, req, version)
    if version < 8:
        return broker.group_coordinator.execute(req.group_id, Shard.handle_offset_fetch, req, version)
    return broker.group_coordinator.execute_split(
        req, "groups", Shard.handle_offset_fetch, version,
        lambda rs: OffsetFetchResponse(throttle_time_ms=0, groups=[g for r in rs for g in r.groups]),
        group_id_of=lambda g: g.group_id)


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
