"""DescribeTopicPartitions (75) v0 (KIP-966): topics with their partitions, paged. The answer
holds at most min(``response_partition_limit``, ``max.request.partition.size.limit``) partitions
(at least 1), topics in name order from the request's cursor (topic, first partition); when more
remain, ``next_cursor`` names where the next request starts. No topics asked means every topic,
unknown ones then left out; an unknown topic asked for is UNKNOWN_TOPIC_OR_PARTITION (an invalid
name INVALID_TOPIC_EXCEPTION). A cursor naming a topic the request does not ask for, or a negative
partition, fails the request with INVALID_REQUEST (DescribeTopicPartitionsRequestHandler,
KRaftMetadataCache.describeTopicResponse). This node leads every partition at epoch 0, as
Metadata answers; in a cluster (kgroup/cluster/) each partition's leader, leader epoch,
replicas, ISR and offline replicas come from the metadata cache, as Metadata's."""
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.describe_topic_partitions import DescribeTopicPartitionsResponse
from ..authorization import DESCRIBE, RT_TOPIC, denied_topics, operations
from ..metadata import INTERNAL_TOPICS, validate_topic_name

Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
Partition = Topic.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor


def handle(broker, ctx, req, version):
    md = broker.metadata
    cursor = req.cursor
    start_name = cursor.topic_name if cursor is not None else ""
    every = not req.topics
    names = md.topics if every else [t.name for t in req.topics]
    wanted = sorted({n for n in names if n >= start_name})
    if cursor is not None and ((not every and cursor.topic_name not in wanted) or cursor.partition_index < 0):
        return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[
            Topic(error_code=int(ErrorCode.INVALID_REQUEST), name=t.name, is_internal=False, partitions=[])
            for t in req.topics])
    # DescribeTopicPartitionsRequestHandler: topics not authorized for DESCRIBE are left out of a
    # listing of every topic, and answered TOPIC_AUTHORIZATION_FAILED (whether they exist or not)
    # when named
    denied = denied_topics(broker, ctx, DESCRIBE, wanted)
    remaining = max(min(broker.config["max.request.partition.size.limit"], req.response_partition_limit), 1)
    node = broker.config.node_id
    resp = DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[], next_cursor=None)
    for name in wanted:
        if remaining == 0:      # the next page starts with this topic
            resp.next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        if denied and name in denied:
            if not every:
                resp.topics.append(Topic(error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), name=name,
                                         is_internal=False, partitions=[], topic_authorized_operations=-2147483648))
            continue
        topic = md.get(name)
        if topic is None:
            if not every:
                resp.topics.append(Topic(error_code=int(_missing(name)), name=name, is_internal=name in INTERNAL_TOPICS,
                                         partitions=[], topic_authorized_operations=-2147483648))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        upper = min(topic.num_partitions, first + remaining)
        if broker.cluster is None:
            partitions = [Partition(error_code=0, partition_index=p, leader_id=node, leader_epoch=0,
                                    replica_nodes=[node], isr_nodes=[node], eligible_leader_replicas=[],
                                    last_known_elr=[], offline_replicas=[]) for p in range(first, upper)]
        else:
            partitions = [Partition(error_code=int(ErrorCode.LEADER_NOT_AVAILABLE) if i.leader < 0 else 0,
                                    partition_index=i.partition, leader_id=i.leader, leader_epoch=i.leader_epoch,
                                    replica_nodes=list(i.replicas), isr_nodes=list(i.isr), eligible_leader_replicas=[],
                                    last_known_elr=[], offline_replicas=list(i.offline_replicas))
                          for i in broker.cluster.cache.partitions(name) if first <= i.partition < upper]
        resp.topics.append(Topic(
            error_code=0, name=name, topic_id=topic.topic_id, is_internal=topic.is_internal,
            topic_authorized_operations=operations(broker, ctx, RT_TOPIC, name), partitions=partitions))
        if upper < topic.num_partitions:
            resp.next_cursor = Cursor(topic_name=name, partition_index=upper)
            break
        remaining -= upper - first
    return resp


def _missing(name: str) -> ErrorCode:
    try:
        validate_topic_name(name)
    except KafkaError:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
