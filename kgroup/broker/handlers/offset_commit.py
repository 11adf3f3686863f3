"""OffsetCommit (8) v2-10: partitions of topics this broker does not have get
UNKNOWN_TOPIC_OR_PARTITION (Kafka's KafkaApis check, unknown_partitions.py; v10 names topics by
id, resolved there, an unknown id answered UNKNOWN_TOPIC_ID); the rest go to the group's shard,
whose runtime may batch consecutive commits into one write (``GroupRuntime.execute(offset_commit=True)``)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.messages.offset_commit import OffsetCommitResponse
from .unknown_partitions import commit_known_partitions

TopicResponse = OffsetCommitResponse.OffsetCommitResponseTopic
PartitionResponse = OffsetCommitResponse.OffsetCommitResponsePartition


def handle(broker, ctx, req, version):
    coordinator = broker.group_coordinator

    def commit(r):
        return coordinator.execute(r.group_id, Shard.handle_offset_commit, r, version, offset_commit=True)
    return commit_known_partitions(broker.metadata, req, commit, TopicResponse, PartitionResponse,
                                   use_topic_ids=version >= 10)
