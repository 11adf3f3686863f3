"""ListOffsets (2) v1-11: earliest (-2), latest (-1), max timestamp (-3, v7+), earliest local
(-4, v8+, = earliest without tiered storage), latest tiered (-5, v9+) and earliest pending upload
(-6, v11+, KIP-1023), both -1 as nothing is tiered, or the first offset whose timestamp is >= the
given one (time index). A special timestamp the request's version predates, or one Kafka does not
know, gets UNSUPPORTED_VERSION (ReplicaManager.isListOffsetsTimestampUnsupported).

``isolation_level`` (v2+) sets the last fetchable offset as Kafka's Partition does: read_committed
answers latest with the last stable offset, and a timestamp lookup landing at or beyond it finds
nothing (-1); read_uncommitted uses the high watermark, which is the log end here.

Timestamp lookups read the records of the batch they land in, which for a compressed batch
means decompressing it (every codec is a dependency). A batch that cannot be read answers the
partition with the error's code (CORRUPT_MESSAGE), as Kafka's ``Errors.forException``.

In a cluster only the partition's leader answers (NOT_LEADER_OR_FOLLOWER; the current leader epoch
checked, KIP-320), a consumer's latest is the high watermark with the leader's epoch, and while a
new leader's high watermark is below its first offset a consumer gets OFFSET_NOT_AVAILABLE (KIP-207);
a follower's request (replica id >= 0) sees the log end.
"""
from ...protocol.errors import ErrorCode
from ...protocol.messages.list_offsets import ListOffsetsResponse
from ...protocol.records import RecordBatchError
from ...storage.errors import LogError
from ...storage.log import (EARLIEST_LOCAL_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP, EARLIEST_TIMESTAMP,
                            LATEST_TIERED_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP)
from ..authorization import DESCRIBE, denied_topics

# special timestamp -> the first version that may ask for it
_SPECIAL = {EARLIEST_TIMESTAMP: 1, LATEST_TIMESTAMP: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL_TIMESTAMP: 8,
            LATEST_TIERED_TIMESTAMP: 9, EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11}
TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse


def handle(broker, ctx, req, version):
    lookup = _cluster_offset if broker.replica_manager.enabled else _offset
    resp = ListOffsetsResponse(throttle_time_ms=0, topics=[])
    denied = denied_topics(broker, ctx, DESCRIBE, (t.name for t in req.topics))   # KafkaApis: DESCRIBE
    for t in req.topics:
        tr = TopicResponse(name=t.name, partitions=[])
        resp.topics.append(tr)
        topic = broker.metadata.get(t.name)
        for p in t.partitions:
            pr = PartitionResponse(partition_index=p.partition_index, timestamp=-1, offset=-1, leader_epoch=-1)
            tr.partitions.append(pr)
            plog = _partition_log(broker, t.name, topic, p, pr, denied, version)
            if plog is not None:
                lookup(broker, req, t.name, p, plog, pr)
    return resp


def _offset(broker, req, name, p, plog, pr) -> None:
    """The single node's answer: the log is the partition's only replica."""
    try:
        found = plog.fetch_offset_by_timestamp(p.timestamp)
    except (LogError, RecordBatchError) as e:
        pr.error_code = e.error_code
        return
    if found is not None and req.isolation_level == 1 \
            and p.timestamp not in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        lso = plog.last_stable_offset
        if p.timestamp == LATEST_TIMESTAMP:
            found = found._replace(offset=lso)
        elif found.offset >= lso:
            found = None
    if found is None:
        offset, stamp, epoch = -1, -1, -1
    else:
        offset, stamp = found.offset, found.timestamp
        epoch = found.leader_epoch if found.leader_epoch is not None else -1
    pr.error_code = 0
    pr.offset, pr.timestamp, pr.leader_epoch = offset, stamp, epoch


def _partition_log(broker, name, topic, p, pr, denied, version):
    """The partition's log, or None with ``pr``'s error set: an unauthorized topic, an unknown
    topic or partition, a special timestamp this version does not have (KafkaApis' order)."""
    if denied and name in denied:
        pr.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return None
    plog = broker.data_path.log(name, p.partition_index) if topic else None
    if plog is None or not 0 <= p.partition_index < topic.num_partitions:
        pr.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return None
    if p.timestamp < 0 and version < _SPECIAL.get(p.timestamp, 1 << 15):
        pr.error_code = ErrorCode.UNSUPPORTED_VERSION
        return None
    return plog


def _cluster_offset(broker, req, name, p, plog, pr) -> None:
    """Partition.fetchOffsetForTimestamp on the partition's leader."""
    rm = broker.replica_manager
    consumer = req.replica_id < 0
    part, error = rm.leader_partition(name, p.partition_index, p.current_leader_epoch)
    if error is not None:
        pr.error_code = error
        return
    if not consumer:
        last_fetchable = plog.log_end_offset
    elif req.isolation_level == 1:
        last_fetchable = plog.last_stable_offset
    else:
        last_fetchable = plog.high_watermark
    not_available = consumer and part.leader_epoch_start_offset > plog.high_watermark
    try:
        if p.timestamp == LATEST_TIMESTAMP:
            found = None if not_available else (-1, last_fetchable, part.leader_epoch)
        else:
            hit = plog.fetch_offset_by_timestamp(p.timestamp)
            found = None if hit is None else (
                hit.timestamp, hit.offset, hit.leader_epoch if hit.leader_epoch is not None else -1)
            if found is not None and p.timestamp not in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP) \
                    and found[1] >= last_fetchable and found[1] >= 0:
                found = None
    except (LogError, RecordBatchError) as e:
        pr.error_code = e.error_code
        return
    if found is None and not_available and p.timestamp not in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        pr.error_code = ErrorCode.OFFSET_NOT_AVAILABLE
        return
    pr.error_code = 0
    if found is not None:
        pr.timestamp, pr.offset, pr.leader_epoch = found
