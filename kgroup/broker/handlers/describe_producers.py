"""DescribeProducers (61) v0 (KIP-664): the active producers of each partition, from its log's
producer state (UnifiedLog.activeProducers): id, epoch, last sequence and timestamp, coordinator
epoch and the first offset of its open transaction (-1 for none). ``kgroup transactions
find-hanging`` and ``abort`` read it, as kafka-transactions.sh does. A partition this broker does
not have is UNKNOWN_TOPIC_OR_PARTITION (KafkaApis.handleDescribeProducersRequest)."""
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_producers import DescribeProducersResponse
from ..authorization import READ, denied_topics

TopicResponse = DescribeProducersResponse.TopicResponse
PartitionResponse = TopicResponse.PartitionResponse
ProducerState = PartitionResponse.ProducerState


def handle(broker, ctx, req, version):
    denied = denied_topics(broker, ctx, READ, (t.name for t in req.topics))     # KafkaApis: TOPIC READ
    topics = []
    for t in req.topics:
        if denied and t.name in denied:
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            topics.append(TopicResponse(name=t.name, partitions=[PartitionResponse(
                partition_index=p, error_code=int(code), error_message=code.message, active_producers=[])
                for p in t.partition_indexes]))
            continue
        topic = broker.metadata.get(t.name)
        parts = []
        for p in t.partition_indexes:
            plog = broker.data_path.log(t.name, p) if topic is not None and 0 <= p < topic.num_partitions else None
            if plog is None:
                # an unknown topic carries the error's message (ApiError), a missing partition none
                parts.append(PartitionResponse(partition_index=p, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                               error_message=None if topic else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message,
                                               active_producers=[]))
                continue
            producers = [ProducerState(
                producer_id=pid, producer_epoch=e.producer_epoch, last_sequence=e.last_seq,
                last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                current_txn_start_offset=-1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
                for pid, e in plog.producer_state.producers.items()]
            parts.append(PartitionResponse(partition_index=p, error_code=0, error_message=None,
                                           active_producers=producers))
        topics.append(TopicResponse(name=t.name, partitions=parts))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
