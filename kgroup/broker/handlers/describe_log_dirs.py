"""DescribeLogDirs (35) v1-5: each log directory with the partitions asked for (null: every
partition this broker holds a log of), their size, offset lag and the volume's total and usable
bytes (ReplicaManager.describeLogDirs). DESCRIBE on the CLUSTER, else no results and
CLUSTER_AUTHORIZATION_FAILED (KafkaApis.handleDescribeLogDirsRequest).

The offset lag is Kafka's getLogEndOffsetLag for a current (not future) log: the high watermark
minus the log end offset, never below 0 -- so 0 on a leader and on a follower alike, as a Kafka
broker answers, since a replica's high watermark never passes its own log end. No
AlterReplicaLogDirs: no future logs, ``is_future_key`` is false; no cordoned directories (KIP-1066)."""
import os

from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_log_dirs import DescribeLogDirsResponse
from ..authorization import CLUSTER_NAME, DESCRIBE, RT_CLUSTER, allowed

Result = DescribeLogDirsResponse.DescribeLogDirsResult
Topic = Result.DescribeLogDirsTopic
Partition = Topic.DescribeLogDirsPartition


def handle(broker, ctx, req, version):
    if broker.authorizer is not None and not allowed(broker, ctx, DESCRIBE, RT_CLUSTER, CLUSTER_NAME):
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                       results=[])
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=describe_log_dirs(broker, req.topics))


def describe_log_dirs(broker, topics) -> list:
    logs = broker.data_path.logs
    asked = None if topics is None else {(t.topic, p) for t in topics for p in t.partitions}
    by_dir: dict[str, dict[str, list]] = {d: {} for d in logs.log_dirs}
    for tp, plog in logs:
        if asked is not None and tuple(tp) not in asked:
            continue
        parts = by_dir.setdefault(os.path.dirname(plog.directory), {}).setdefault(tp[0], [])
        parts.append(Partition(partition_index=tp[1], partition_size=plog.size_in_bytes,
                               offset_lag=max(plog.high_watermark - plog.log_end_offset, 0), is_future_key=False))
    out = []
    for log_dir, by_topic in by_dir.items():
        if broker.log_dir_failure.offline:
            out.append(Result(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=log_dir, topics=[],
                              total_bytes=-1, usable_bytes=-1, is_cordoned=False))
            continue
        try:
            st = os.statvfs(log_dir)
        except OSError:
            out.append(Result(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=log_dir, topics=[],
                              total_bytes=-1, usable_bytes=-1, is_cordoned=False))
            continue
        out.append(Result(error_code=0, log_dir=log_dir, is_cordoned=False,
                          total_bytes=st.f_blocks * st.f_frsize, usable_bytes=st.f_bavail * st.f_frsize,
                          topics=[Topic(name=name, partitions=sorted(parts, key=lambda p: p.partition_index))
                                  for name, parts in sorted(by_topic.items())]))
    return out
