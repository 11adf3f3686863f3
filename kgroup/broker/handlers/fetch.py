"""Fetch (1) v4-17: whole batches as stored, long polling, size limits, topic ids (v13+).

Kafka 4.0 serves v4+ (KIP-896). A response is sent at once when it has ``min_bytes`` of data, an
error, or ``max_wait_ms`` is 0; otherwise the fetch parks on its partitions and is answered by the
append that brings enough data, or at ``max_wait_ms`` with whatever there is.

Limits (KIP-74): partitions are filled in request order up to ``max_bytes`` and each up to its
``partition_max_bytes``; the first non-empty partition returns at least one whole batch even when
that batch is larger, so a large batch always makes progress. Sessions (KIP-227): the broker never
creates one (``session_id`` 0 in the response), so every fetch is a full fetch, which every client
handles. read_committed (``isolation_level`` 1) reads nothing at or beyond the last stable offset
and lists the aborted transactions overlapping what it returns (an empty list, not null, as Kafka
sends), from which the client drops aborted records; read_uncommitted gets null there.

In a cluster (``replica_manager.enabled``) as Kafka's ReplicaManager.readFromLocalLog: a follower's
Fetch (its replica id) is served by the partition's leader up to the log end and tells the leader
the follower's log end offset (the high watermark and the ISR follow); a consumer reads below the
high watermark, from the leader or, from v11, from a follower (KIP-392; the leader may name one in
the consumer's rack as PreferredReadReplica); the current leader epoch is checked (KIP-320); a
last fetched epoch that diverges from the leader's log is answered with the diverging epoch (v12+);
NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH carry KIP-951's CurrentLeader and NodeEndpoints (v16+).
"""
import functools

from ...protocol.errors import ErrorCode
from ...protocol.messages.fetch import FetchResponse
from ...storage.errors import OffsetOutOfRangeError
from ...storage.leader_epoch_cache import UNDEFINED_EPOCH
from ..data_path import FetchWaiter
from ..authorization import CLUSTER_ACTION, CLUSTER_NAME, READ, RT_CLUSTER, allowed, denied_topics

TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData
AbortedTransaction = PartitionData.AbortedTransaction
_HINTED = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


def handle(broker, ctx, req, version):
    md = broker.metadata
    plan = []  # (response topic object, topic name or None, [(partition request, ...)])
    for ft in req.topics:
        if version >= 13:
            topic = md.by_id(ft.topic_id)
            name = topic.name if topic else None
        else:
            topic = md.get(ft.topic)
            name = ft.topic
        plan.append((ft, name, topic))
    replica_id = req.replica_state.replica_id if version >= 15 else req.replica_id
    denied = None
    if broker.authorizer is not None:
        # KafkaApis.handleFetchRequest: a follower (replica id >= 0) needs CLUSTER_ACTION on the
        # cluster, else every partition is TOPIC_AUTHORIZATION_FAILED; a consumer READ on each topic
        if replica_id >= 0:
            denied = (None if allowed(broker, ctx, CLUSTER_ACTION, RT_CLUSTER, CLUSTER_NAME)
                      else {name for ft, name, topic in plan if name is not None})
        else:
            denied = denied_topics(broker, ctx, READ, (name for ft, name, topic in plan if topic))
        if denied:
            plan = [(ft, name, None if name in denied else topic) for ft, name, topic in plan]
    partitions = [(name, p.partition) for ft, name, topic in plan if topic for p in ft.partitions]

    read = _read
    if broker.replica_manager.enabled:
        read = functools.partial(_read, cluster=True, replica_id=replica_id)

    def evaluate(force):
        resp, size, error = read(broker, req, version, plan, denied)
        if force or error or size >= req.min_bytes or req.max_wait_ms <= 0 or size >= req.max_bytes:
            return resp
        return None

    first = evaluate(False)
    if first is not None or not partitions:
        return first if first is not None else evaluate(True)
    waiter = FetchWaiter(partitions, evaluate)
    broker.data_path.park(waiter, req.max_wait_ms)
    return waiter.pending


def _partition_log(dp, name, topic, fp, pd, denied, version):
    """The partition's log, or None with ``pd``'s error set (an unknown or unauthorized topic,
    an unknown partition)."""
    if topic is None:
        pd.error_code = (ErrorCode.TOPIC_AUTHORIZATION_FAILED if denied and name in denied else
                         ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return None
    plog = dp.log(name, fp.partition) if 0 <= fp.partition < topic.num_partitions else None
    if plog is None:
        pd.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return plog


def _set_log_offsets(pd, plog) -> None:
    pd.high_watermark = plog.high_watermark
    pd.last_stable_offset = plog.last_stable_offset
    pd.log_start_offset = plog.log_start_offset


def _read(broker, req, version, plan, denied=None, *, cluster=False, replica_id=-1):
    """Each requested partition's records, or its error; in a cluster (``cluster``) after
    ``_cluster_read``'s checks: leadership, epochs, the high watermark, follower fetches."""
    dp = broker.data_path
    rm = broker.replica_manager
    resp = FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[])
    budget = req.max_bytes
    total = 0
    error = False
    read_committed = req.isolation_level == 1
    for ft, name, topic in plan:
        tr = TopicResponse(topic=ft.topic if version < 13 else name or "", topic_id=ft.topic_id, partitions=[])
        resp.responses.append(tr)
        for fp in ft.partitions:
            # Records are never null, errors included: Kafka sends MemoryRecords.EMPTY, and
            # librdkafka fails the whole response on a null (size -1) record set.
            pd = PartitionData(partition_index=fp.partition, high_watermark=-1, last_stable_offset=-1,
                               log_start_offset=-1, aborted_transactions=None, records=b"")
            tr.partitions.append(pd)
            plog = _partition_log(dp, name, topic, fp, pd, denied, version)
            if plog is None:
                error = True
                continue
            part = max_offset = None
            if cluster:
                part, max_offset = _cluster_read(rm, req, version, name, fp, plog, pd, resp, replica_id)
                if part is None:        # answered now: an error, a diverging epoch, another replica
                    error = True
                    continue
            _set_log_offsets(pd, plog)
            try:
                limit = min(fp.partition_max_bytes, budget)
                if read_committed:      # the last stable offset is never past the high watermark
                    got, aborted = plog.read_committed(fp.fetch_offset, limit, min_one_batch=total == 0)
                    pd.aborted_transactions = [AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                                               for a in aborted]
                else:                   # a consumer below the high watermark, a follower up to the end
                    got = plog.read(fp.fetch_offset, limit, min_one_batch=total == 0, max_offset=max_offset)
            except OffsetOutOfRangeError:
                pd.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                error = True
                continue
            if replica_id >= 0:
                rm.on_follower_fetch(part, replica_id, fp.fetch_offset, fp.log_start_offset)
                pd.high_watermark = plog.high_watermark
            pd.error_code = 0
            n = len(got.records)
            pd.records = got.records if n else b""
            total += n
            budget = max(0, budget - n)
    return resp, total, error


def _cluster_read(rm, req, version, name, fp, plog, pd, resp, replica_id):
    """(Partition, the offset a consumer reads below: the high watermark, None for a follower)
    when this broker serves the read now; (None, None) with ``pd`` answered otherwise."""
    part, code = _replica_read(rm, name, fp, version, replica_id)
    if code is not None:
        pd.error_code = code
        if code in _HINTED and version >= 16:
            _leader_hint(rm, name, fp.partition, pd, resp)
        return None, None
    if not _check_epoch(part, plog, fp, pd, version):
        return None, None           # diverging (or unknown) last fetched epoch
    if replica_id >= 0:
        return part, None
    if version >= 11 and req.rack_id:
        preferred = rm.preferred_read_replica(part, fp.fetch_offset, req.rack_id)
        if preferred >= 0:
            pd.preferred_read_replica = preferred
            _set_log_offsets(pd, plog)
            return None, None
    return part, plog.high_watermark


def _replica_read(rm, topic, fp, version, replica_id):
    """(Partition, None) when this broker serves the read, else (None, error): a follower's fetch
    needs the leader and a replica of the partition; a consumer's the leader, or from v11 (client
    metadata, KIP-392) any replica."""
    if replica_id >= 0:
        part, code = rm.leader_partition(topic, fp.partition, fp.current_leader_epoch)
        if part is not None and replica_id not in part.remote:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return part, code
    if version >= 11:
        return rm.replica_partition(topic, fp.partition, fp.current_leader_epoch)
    return rm.leader_partition(topic, fp.partition, fp.current_leader_epoch)


def _check_epoch(part, plog, fp, pd, version) -> bool:
    """Partition.fetchRecords' last fetched epoch check (v12+): False with the diverging epoch
    (or OFFSET_OUT_OF_RANGE) set on ``pd`` when the fetcher's log diverges from the leader's."""
    if version < 12 or fp.last_fetched_epoch == UNDEFINED_EPOCH or not part.is_leader:
        return True
    epoch, end = plog.leader_epoch_cache.end_offset_for(fp.last_fetched_epoch, plog.log_end_offset)
    _set_log_offsets(pd, plog)
    if end < 0 or epoch < 0 or fp.fetch_offset < plog.log_start_offset:
        pd.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
        return False
    if epoch < fp.last_fetched_epoch or end < fp.fetch_offset:
        pd.error_code = 0
        pd.diverging_epoch = PartitionData.EpochEndOffset(epoch=epoch, end_offset=end)
        return False
    return True


def _leader_hint(rm, topic, partition, pd, resp) -> None:
    """KIP-951: the leader this broker knows for the partition, and its endpoint."""
    leader, epoch = rm.leader_hint(topic, partition)
    pd.current_leader = PartitionData.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch)
    endpoint = rm.endpoint(leader) if leader >= 0 else None
    if endpoint is not None and all(n.node_id != leader for n in resp.node_endpoints):
        resp.node_endpoints.append(FetchResponse.NodeEndpoint(node_id=leader, host=endpoint[0], port=endpoint[1],
                                                              rack=endpoint[2]))
