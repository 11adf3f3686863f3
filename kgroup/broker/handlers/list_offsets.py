"""ListOffsets (2) v0-10: earliest (-2), latest (-1), max timestamp (-3, v7+), earliest local
(-4, v8+, = earliest without tiered storage), latest tiered (-5, v9+, = -1 offset: nothing is
tiered), or the first offset whose timestamp is >= the given one (time index). v0 answers in
its old ``old_style_offsets`` array.

``isolation_level`` (v2+) sets the last fetchable offset as Kafka's Partition does: read_committed
answers latest with the last stable offset, and a timestamp lookup landing at or beyond it finds
nothing (-1); read_uncommitted uses the high watermark, which is the log end here.

Timestamp lookups read the records of the batch they land in, which for a compressed batch
means decompressing it. When this broker lacks the codec (lz4, zstd, snappy need optional
packages) the answer falls back to batch granularity: the base offset of the first batch whose
max timestamp reaches the target (never later than the exact answer, so a consumer seeking there
misses nothing), logged once per codec at WARNING. Kafka always has every codec; without the
fallback such a request used to fail the handler and close the client's connection.
"""
import logging

from ...protocol.errors import ErrorCode
from ...protocol.messages.list_offsets import ListOffsetsResponse
from ...protocol.records import RecordBatchError
from ...storage.errors import LogError
from ...storage.log import (EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP,
                            LATEST_TIMESTAMP, MAX_TIMESTAMP, TimestampAndOffset)

log = logging.getLogger("kgroup.list_offsets")
_SPECIAL = (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP, LATEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP, MAX_TIMESTAMP)
TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse
_warned: set[str] = set()


from ..authorization import DESCRIBE, denied_topics


def handle(broker, ctx, req, version):
    resp = ListOffsetsResponse(throttle_time_ms=0, topics=[])
    denied = denied_topics(broker, ctx, DESCRIBE, (t.name for t in req.topics))   # KafkaApis: DESCRIBE
    for t in req.topics:
        tr = TopicResponse(name=t.name, partitions=[])
        resp.topics.append(tr)
        topic = broker.metadata.get(t.name)
        for p in t.partitions:
            pr = PartitionResponse(partition_index=p.partition_index, timestamp=-1, offset=-1, leader_epoch=-1)
            tr.partitions.append(pr)
            if denied and t.name in denied:
                pr.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            plog = broker.data_path.log(t.name, p.partition_index) if topic else None
            if plog is None or not 0 <= p.partition_index < topic.num_partitions:
                pr.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if p.timestamp < 0 and p.timestamp not in _SPECIAL:
                pr.error_code = ErrorCode.INVALID_REQUEST
                continue
            try:
                try:
                    found = plog.fetch_offset_by_timestamp(p.timestamp)
                except RecordBatchError as e:
                    if str(e) not in _warned:
                        _warned.add(str(e))
                        log.warning("ListOffsets on %s-%d answered per batch: %s", t.name, p.partition_index, e)
                    found = _batch_level_lookup(plog, p.timestamp)
            except LogError as e:
                pr.error_code = e.error_code
                continue
            if found is not None and version >= 2 and req.isolation_level == 1 \
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
            if version == 0:
                pr.old_style_offsets = [offset] if offset >= 0 else []
            pr.offset, pr.timestamp, pr.leader_epoch = offset, stamp, epoch
    return resp


def _batch_level_lookup(plog, target):
    """The first batch whose max timestamp is >= target (MAX_TIMESTAMP: the log's largest), read
    from batch headers only: (its max timestamp, its base offset, its epoch)."""
    start = plog.log_start_offset
    segments = plog.segments
    if target == MAX_TIMESTAMP:
        target = max(seg.max_timestamp_so_far for seg in segments)
        if target < 0:
            return None
    for seg in segments:
        if seg.max_timestamp_so_far < target:
            continue
        position = seg.index.lookup(max(seg.time_index.lookup(target).offset, start)).position
        for _, header in seg.iter_headers(position):
            if header.max_timestamp >= target and header.last_offset >= start:
                epoch = header.partition_leader_epoch
                return TimestampAndOffset(header.max_timestamp, max(header.base_offset, start),
                                          epoch if epoch >= 0 else None)
    return None
