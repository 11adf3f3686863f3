"""OffsetCommit (8) v2-10: partitions of topics this broker does not have get
UNKNOWN_TOPIC_OR_PARTITION (Kafka's KafkaApis check, unknown_partitions.py; v10 names topics by
id, resolved there, an unknown id answered UNKNOWN_TOPIC_ID); the rest go to the group's shard,
whose runtime may batch consecutive commits into one write (``GroupRuntime.execute(offset_commit=True)``)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.messages.offset_commit import OffsetCommitResponse
from ..authorization import GROUP_AUTHORIZATION_FAILED, READ, denied_topics, group_denied, whole_request_error
from .unknown_partitions import commit_known_partitions

TopicResponse = OffsetCommitResponse.OffsetCommitResponseTopic
PartitionResponse = OffsetCommitResponse.OffsetCommitResponsePartition


def handle(broker, ctx, req, version):
    coordinator = broker.group_coordinator
    denied = None
    if broker.authorizer is not None:   # KafkaApis.handleOffsetCommitRequest: READ group, READ topics
        if group_denied(broker, ctx, READ, req.group_id):
            return whole_request_error(broker, ctx, version, req, GROUP_AUTHORIZATION_FAILED)
        names = [t.name for t in req.topics] if version < 10 else \
            [topic.name for t in req.topics if (topic := broker.metadata.by_id(t.topic_id)) is not None]
        denied = denied_topics(broker, ctx, READ, names)

    def commit(r):
        return coordinator.execute(r.group_id, Shard.handle_offset_commit, r, version, offset_commit=True)
    return commit_known_partitions(broker.metadata, req, commit, TopicResponse, PartitionResponse, denied,
                                   use_topic_ids=version >= 10)
