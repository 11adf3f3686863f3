"""OffsetFetch (9) v1-10: one group (v1-7) or many (v8+, split across the shards that own them).

v10 names topics by id (KIP-516). As KafkaApis.fetchOffsetsForGroup, the ids are resolved to names
here, before the coordinator, which works in names only: a topic whose id is unknown is answered
UNKNOWN_TOPIC_ID for each of its partitions (unless the group itself fails), and every topic of the
answer carries its id; a topic the broker no longer has is left out of a fetch of all offsets, as
Kafka cannot name it by id."""
import copy

from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.errors import ErrorCode
from ...protocol.messages.offset_fetch import OffsetFetchResponse

Group = OffsetFetchResponse.OffsetFetchResponseGroup
Topic = Group.OffsetFetchResponseTopics
Partition = Topic.OffsetFetchResponsePartitions


def handle(broker, ctx, req, version):
    if version < 8:
        return broker.group_coordinator.execute(req.group_id, Shard.handle_offset_fetch, req, version)
    unknown_ids: dict[str, list] = {}
    if version >= 10:
        req = _resolve_topic_ids(broker.metadata, req, unknown_ids)

    def merge(rs):
        groups = [g for r in rs for g in r.groups]
        if version >= 10:
            _with_topic_ids(broker.metadata, groups, unknown_ids)
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    return broker.group_coordinator.execute_split(req, "groups", Shard.handle_offset_fetch, version, merge,
                                                  group_id_of=lambda g: g.group_id)


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
