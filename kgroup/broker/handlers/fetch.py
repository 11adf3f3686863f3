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
"""
from ...protocol.errors import ErrorCode
from ...protocol.messages.fetch import FetchResponse
from ...storage.errors import OffsetOutOfRangeError
from ..data_path import FetchWaiter
from ..authorization import READ, denied_topics

TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData
AbortedTransaction = PartitionData.AbortedTransaction


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
    denied = None
    if broker.authorizer is not None:   # KafkaApis.handleFetchRequest: READ on each topic
        denied = denied_topics(broker, ctx, READ, (name for ft, name, topic in plan if topic))
        if denied:
            plan = [(ft, name, None if name in denied else topic) for ft, name, topic in plan]
    partitions = [(name, p.partition) for ft, name, topic in plan if topic for p in ft.partitions]

    def evaluate(force):
        resp, size, error = _read(broker, req, version, plan, denied)
        if force or error or size >= req.min_bytes or req.max_wait_ms <= 0 or size >= req.max_bytes:
            return resp
        return None

    first = evaluate(False)
    if first is not None or not partitions:
        return first if first is not None else evaluate(True)
    waiter = FetchWaiter(partitions, evaluate)
    broker.data_path.park(waiter, req.max_wait_ms)
    return waiter.pending


def _read(broker, req, version, plan, denied=None):
    dp = broker.data_path
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
            if topic is None:
                pd.error_code = (ErrorCode.TOPIC_AUTHORIZATION_FAILED if denied and name in denied else
                                 ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                error = True
                continue
            plog = dp.log(name, fp.partition) if 0 <= fp.partition < topic.num_partitions else None
            if plog is None:
                pd.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                error = True
                continue
            pd.high_watermark = plog.high_watermark
            pd.last_stable_offset = plog.last_stable_offset
            pd.log_start_offset = plog.log_start_offset
            try:
                limit = min(fp.partition_max_bytes, budget)
                if read_committed:
                    got, aborted = plog.read_committed(fp.fetch_offset, limit, min_one_batch=total == 0)
                    pd.aborted_transactions = [AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                                               for a in aborted]
                else:
                    got = plog.read(fp.fetch_offset, limit, min_one_batch=total == 0)
            except OffsetOutOfRangeError:
                pd.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                error = True
                continue
            pd.error_code = 0
            n = len(got.records)
            pd.records = got.records if n else b""
            total += n
            budget = max(0, budget - n)
    return resp, total, error
