"""DeleteRecords (21) v0-2: advance partitions' log start offsets (offset -1: the high
watermark); the answer's low watermark is the new log start offset, -1 on error."""
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.delete_records import DeleteRecordsResponse
from .. import admin
from ..authorization import DELETE, denied_topics

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = TopicResult.DeleteRecordsPartitionResult


def handle(broker, ctx, req, version):
    resp = DeleteRecordsResponse(throttle_time_ms=0, topics=[])
    denied = denied_topics(broker, ctx, DELETE, (t.name for t in req.topics))     # KafkaApis: DELETE on topics
    for t in req.topics:
        result = TopicResult(name=t.name, partitions=[])
        for p in t.partitions:
            if denied and t.name in denied:
                result.partitions.append(PartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                                         error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            try:
                low = admin.delete_records(broker, t.name, p.partition_index, p.offset)
                result.partitions.append(PartitionResult(partition_index=p.partition_index, low_watermark=low,
                                                         error_code=0))
            except KafkaError as e:
                result.partitions.append(PartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                                         error_code=e.code))
        resp.topics.append(result)
    return resp
