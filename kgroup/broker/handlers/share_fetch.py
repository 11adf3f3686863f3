"""ShareFetch (78) v1-2 (KIP-932; Kafka's KafkaApis.handleShareFetchRequest with SharePartitionManager):
the share session (epoch 0 opens, -1 closes, otherwise the next epoch, partitions added and
forgotten), the piggy-backed acknowledgements applied first, then the records acquired for the
member on every partition of its session (long polling when nothing could be acquired) without
waiting for the acknowledgements' write; the response goes once the fetch is done and the
acknowledgements are durable (Kafka's combineShareFetchAndShareAcknowledgeResponses)."""
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.share_fetch import ShareFetchResponse
from ...share.share_session import FINAL_EPOCH, INITIAL_EPOCH
from ..data_path import FetchWaiter
from ..authorization import GROUP_AUTHORIZATION_FAILED, READ, TOPIC_AUTHORIZATION_FAILED, denied_topics, group_denied
from ..pending import PendingResponse
from .share_group_heartbeat import share_groups_enabled

TopicResponse = ShareFetchResponse.ShareFetchableTopicResponse
PartitionData = TopicResponse.PartitionData
Acquired = PartitionData.AcquiredRecords


def _error(code, message=None):
    return ShareFetchResponse(error_code=int(code), error_message=message, responses=[], node_endpoints=[])


def handle(broker, ctx, req, version):
    if not share_groups_enabled(broker):
        return _error(ErrorCode.UNSUPPORTED_VERSION, ErrorCode.UNSUPPORTED_VERSION.message)
    spm = broker.share_partitions
    if broker.authorizer is not None:   # KafkaApis: READ on the group, READ on every topic it names
        if group_denied(broker, ctx, READ, req.group_id or ""):
            return _error(GROUP_AUTHORIZATION_FAILED)
        names = [t.name for t in (broker.metadata.by_id(x.topic_id) for x in req.topics) if t is not None]
        if names and denied_topics(broker, ctx, READ, names):
            return _error(TOPIC_AUTHORIZATION_FAILED)
    group_id, member_id, epoch = req.group_id, req.member_id, req.share_session_epoch
    if not group_id:
        return _error(ErrorCode.INVALID_GROUP_ID)
    if not member_id:
        return _error(ErrorCode.INVALID_REQUEST, "Member id is required.")
    requested = [(t.topic_id, p.partition_index) for t in req.topics for p in t.partitions]
    acks = [(t.topic_id, p.partition_index, p.acknowledgement_batches) for t in req.topics for p in t.partitions
            if p.acknowledgement_batches]
    forgotten = [(t.topic_id, p) for t in req.forgotten_topics_data for p in t.partitions]
    try:
        if epoch == INITIAL_EPOCH:
            if acks:
                return _error(ErrorCode.INVALID_REQUEST, "Acknowledge data present on initial fetch.")
            session, old = spm.sessions.open(group_id, member_id, requested, ctx.connection)
            if old is not None:
                spm.release_session(group_id, member_id, list(old.partitions))
        else:
            session = spm.sessions.check(group_id, member_id, epoch)
            if epoch != FINAL_EPOCH:
                spm.sessions.update(session, requested, forgotten)
    except KafkaError as e:
        return _error(e.code)
    lock_ms = spm.lock_duration_ms(group_id)
    ack_results = {(t, p): spm.acknowledge(group_id, member_id, t, p, batches) for t, p, batches in acks}
    fetch_parts = [] if epoch == FINAL_EPOCH else list(session.partitions)
    if epoch == FINAL_EPOCH:
        spm.sessions.close(group_id, member_id)
        spm.release_session(group_id, member_id, list(session.partitions))
    loaded = {tp: spm.share_partition(group_id, *tp) for tp in fetch_parts}
    out = PendingResponse()

    def answer(resp):
        """The fetch is done: the response goes once the acknowledgements are durable too."""
        if isinstance(resp, BaseException):
            out.fail(resp)
            return
        pending = [r for r in ack_results.values() if not r.answered]
        if pending:
            out.flush_only = True       # done but for the acknowledgements' fsync
            PendingResponse.gather(pending, lambda _responses: None).listen(lambda _: answer(resp))
            return
        for tp, r in ack_results.items():
            pd = resp.partition_data.get(tp)
            if pd is not None:
                pd.acknowledge_error_code = int(r.response)
        out.answer(resp.response)

    def ready(_=None):
        sps = {tp: r.response for tp, r in loaded.items()}
        respond(broker, req, version, member_id, lock_ms, requested, ack_results, sps, answer)
    pending = [w for w in loaded.values() if not w.answered]
    if pending:
        PendingResponse.gather(pending, lambda _responses: None).listen(ready)
    else:
        ready()
    return out.response if out.answered else out


class _Fetched:
    """A fetch's response and its partitions' data by (topic id, partition)."""

    __slots__ = ("response", "partition_data")

    def __init__(self, response, partition_data):
        self.response, self.partition_data = response, partition_data


def respond(broker, req, version, member_id, lock_ms, requested, acked, sps, answer) -> None:
    """Acquire for the member on its share-partitions ``sps``; ``answer(_Fetched)`` once records
    were acquired or the wait is over (``answer(exception)`` if the fetch failed). ``acked``: the partitions with acknowledgements (in the
    response whatever happens)."""
    spm = broker.share_partitions
    max_records = req.max_records if version >= 1 and req.max_records > 0 else 500
    whole_batches = version < 2 or req.share_acquire_mode == 0      # BATCH_OPTIMIZED (else RECORD_LIMIT)
    md = broker.metadata

    def evaluate(force):
        budget = req.max_bytes
        left = max_records
        got_any = False
        by_topic: dict = {}
        data = {}
        keys = list(dict.fromkeys(list(sps) + list(acked) + requested))
        for tp in keys:
            topic_id, p = tp
            pd = PartitionData(partition_index=p, error_code=0, acknowledge_error_code=0, records=b"",
                               acquired_records=[],
                               current_leader=PartitionData.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1))
            include = tp in acked or tp in requested
            sp = sps.get(tp)
            if tp in sps:
                if md.by_id(topic_id) is None:
                    pd.error_code = int(ErrorCode.UNKNOWN_TOPIC_ID)
                    include = True
                elif isinstance(sp, ErrorCode):
                    pd.error_code = int(sp)
                    include = True
                elif left > 0 and budget > 0:
                    try:
                        records, acquired = spm.acquire(sp, member_id, left, budget, whole_batches)
                    except KafkaError as e:
                        pd.error_code = int(e.code)
                        records, acquired = b"", []
                        include = True
                    if acquired:
                        pd.records = records
                        pd.acquired_records = [Acquired(first_offset=a, last_offset=b, delivery_count=c)
                                               for a, b, c in acquired]
                        left -= sum(b - a + 1 for a, b, _ in acquired)
                        budget -= len(records)
                        got_any = include = True
            if include:
                by_topic.setdefault(topic_id, []).append(pd)
                data[tp] = pd
        if not got_any and not force and req.max_wait_ms > 0 and sps:
            return None
        for sp in sps.values():
            if not isinstance(sp, ErrorCode) and sp.dirty:
                spm._persist(sp)
        return _Fetched(ShareFetchResponse(error_code=0, acquisition_lock_timeout_ms=lock_ms, node_endpoints=[],
                                           responses=[TopicResponse(topic_id=t, partitions=ps)
                                                      for t, ps in by_topic.items()]), data)

    first = evaluate(False)
    if first is not None:
        answer(first)
        return
    names = []
    for topic_id, p in sps:
        topic = md.by_id(topic_id)
        if topic is not None:
            names.append((topic.name, p))
    waiter = FetchWaiter(names, evaluate)
    waiter.pending.listen(lambda w: answer(w.error if w.error is not None else w.response))
    broker.data_path.park(waiter, req.max_wait_ms)
