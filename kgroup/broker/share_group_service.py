"""The share group administration paths of the group coordinator service (Kafka's
GroupCoordinatorService: describeShareGroupOffsets / describeShareGroupAllOffsets,
alterShareGroupOffsets, deleteShareGroupOffsets, deleteShareGroups), chaining the group's shard
(``broker.group_coordinator``) with the share coordinator (``broker.share_coordinator``, the
persister) as Kafka does:

    DescribeShareGroupOffsets  [shard: the initialized partitions, when no topics are named]
                               -> ReadShareGroupStateSummary -> lag against the high watermark
    AlterShareGroupOffsets     shard: record 15 (initializing), the answer so far
                               -> InitializeShareGroupState at the start offsets
                               -> shard: record 15 (initialized)
    DeleteShareGroupOffsets    shard: record 15 (the topics move to deleting)
                               -> DeleteShareGroupState -> shard: record 15 (deleting done)
    DeleteGroups               shard: record 15 (every share-partition to deleting)
                               -> DeleteShareGroupState -> the general group deletion

Each step answers a response or a PendingResponse; ``_chain`` runs the next step on the answer.
Once the share coordinator changed or deleted a group's state, the share-partitions this broker
holds in memory for the group are dropped (``share_partitions.forget_group``), so the next
ShareFetch reads the new state, as Kafka's share-partition cache is empty for an empty group.
"""
from __future__ import annotations

from ..coordinator import GroupCoordinatorShard as Shard
from ..coordinator.share_group.manager import AlterOffsets, ShareOffsetsDeleted, ShareStateInitialized
from ..protocol.errors import ErrorCode
from ..protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsResponse
from ..protocol.messages.delete_groups import DeleteGroupsResponse
from ..protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsResponse
from ..protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsResponse
from ..protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from ..protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest
from ..protocol.schema import ZERO_UUID
from .pending import PendingResponse

UNINITIALIZED_START_OFFSET = -1
UNINITIALIZED_DELIVERY_COMPLETE_COUNT = -1
UNINITIALIZED_LAG = -1
DEFAULT_LEADER_EPOCH = 0
_Group = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
_Topic = _Group.DescribeShareGroupOffsetsResponseTopic
_Partition = _Topic.DescribeShareGroupOffsetsResponsePartition


def _chain(answer, fn):
    """``fn(response)`` once ``answer`` (a response or a PendingResponse) is there; ``fn`` returns
    a response or a PendingResponse. A failed step fails the whole."""
    if type(answer) is not PendingResponse:
        return fn(answer)
    out = PendingResponse()

    def relay(done):
        if done.error is not None:
            out.fail(done.error)
        else:
            out.answer(done.response)

    def step(done):
        if done.error is not None:
            out.fail(done.error)
            return
        try:
            nxt = fn(done.response)
        except Exception as e:      # a bug in a step: the connection closes, as for any handler
            out.fail(e)
            return
        if type(nxt) is PendingResponse:
            nxt.listen(relay)
        else:
            out.answer(nxt)
    answer.listen(step)
    return out


def _after(pendings: list, fn):
    """``fn()`` once every share coordinator call in ``pendings`` is answered or failed (each
    step reads their outcome itself); ``fn`` returns a response or a PendingResponse."""
    waiting = [p for p in pendings if not p.answered]
    if not waiting:
        return fn()
    out = PendingResponse()
    left = len(waiting)

    def relay(done):
        if done.error is not None:
            out.fail(done.error)
        else:
            out.answer(done.response)

    def one(_):
        nonlocal left
        left -= 1
        if left:
            return
        try:
            nxt = fn()
        except Exception as e:
            out.fail(e)
            return
        if type(nxt) is PendingResponse:
            nxt.listen(relay)
        else:
            out.answer(nxt)
    for p in waiting:
        p.listen(one)
    return out


def _persister_failed(done) -> ErrorCode | None:
    """Errors.forException of a share coordinator call that failed as a whole (None: answered)."""
    return ErrorCode.UNKNOWN_SERVER_ERROR if done.error is not None else None


# == DescribeShareGroupOffsets =============================================================================

def describe_offsets(broker, group_id: str, topics):
    """Kafka's describeShareGroupOffsets (``topics``: [(name, [partitions])]) or, with ``topics``
    None, describeShareGroupAllOffsets: a DescribeShareGroupOffsetsResponseGroup, or a
    PendingResponse of one. The group itself is not checked: a partition without state has start
    offset -1, as an OffsetFetch of a partition without offset."""
    if topics is not None:
        wanted, missing = {}, []
        for name, partitions in topics:
            t = broker.metadata.get(name)
            if t is None:
                # not in the metadata image: no data rather than an error (Kafka)
                missing.append(_Topic(topic_name=name, topic_id=ZERO_UUID, partitions=[
                    _Partition(partition_index=p, start_offset=UNINITIALIZED_START_OFFSET) for p in partitions]))
            else:
                wanted[t.topic_id] = (name, list(partitions))
        return _read_summary(broker, group_id, wanted, missing)
    gc = broker.group_coordinator

    def read(initialized):
        if isinstance(initialized, _Group):            # the shard's error form
            return initialized
        wanted = {}
        for topic_id, partitions in initialized.items():
            t = broker.metadata.by_id(topic_id)
            if t is not None:
                wanted[topic_id] = (t.name, sorted(partitions))
        return _read_summary(broker, group_id, wanted, [])
    return _chain(gc.execute(group_id, Shard.handle_share_group_initialized_partitions, _GroupRef(group_id), 0),
                  read)


class _GroupRef:
    """A request naming one group (the shard handlers read ``group_id``)."""

    __slots__ = ("group_id",)

    def __init__(self, group_id: str):
        self.group_id = group_id


def _read_summary(broker, group_id: str, wanted: dict, missing: list):
    """ReadShareGroupStateSummary for ``wanted`` (topic id -> (name, partitions)), then Kafka's
    computeShareGroupLagAndBuildResponse; ``missing`` (topics not in the image) come last."""
    if not wanted:
        return _Group(group_id=group_id, topics=missing)
    R = ReadShareGroupStateSummaryRequest.ReadStateSummaryData
    req = ReadShareGroupStateSummaryRequest(group_id=group_id, topics=[
        R(topic_id=t, partitions=[R.PartitionData(partition=p, leader_epoch=0) for p in ps])
        for t, (_, ps) in wanted.items()])
    pending = broker.share_coordinator.call("summary", req, 1)

    def build(done):
        error = _persister_failed(done)
        if error is not None:
            return _Group(group_id=group_id, error_code=int(error), error_message=error.message)
        topics = []
        for result in done.response.results:
            name = wanted[result.topic_id][0]
            parts = []
            for p in result.partitions:
                if p.error_code or p.start_offset == UNINITIALIZED_START_OFFSET \
                        or p.delivery_complete_count == UNINITIALIZED_DELIVERY_COMPLETE_COUNT:
                    ok = not p.error_code
                    parts.append(_Partition(partition_index=p.partition,
                                            start_offset=p.start_offset if ok else UNINITIALIZED_START_OFFSET,
                                            leader_epoch=p.leader_epoch if ok else DEFAULT_LEADER_EPOCH,
                                            lag=UNINITIALIZED_LAG))
                    continue
                plog = broker.data_path.log(name, p.partition)
                if plog is None:
                    e = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    parts.append(_Partition(partition_index=p.partition, error_code=int(e), error_message=e.message))
                    continue
                # the partition end offset is the next offset to be produced: no +1
                parts.append(_Partition(partition_index=p.partition, start_offset=p.start_offset,
                                        leader_epoch=p.leader_epoch,
                                        lag=plog.high_watermark - p.start_offset - p.delivery_complete_count))
            topics.append(_Topic(topic_name=name, topic_id=result.topic_id, partitions=parts))
        return _Group(group_id=group_id, topics=topics + missing)
    return _after([pending], lambda: build(pending))


# == AlterShareGroupOffsets ================================================================================

def alter_offsets(broker, req):
    """Kafka's alterShareGroupOffsets + persisterInitialize: an AlterShareGroupOffsetsResponse (its
    topics answered by the group coordinator), or a PendingResponse of one."""
    gc = broker.group_coordinator

    def initialize(plan):
        if not isinstance(plan, AlterOffsets):          # refused: the error response
            return plan
        init = plan.initialize
        if init is None:
            return plan.response
        Init = InitializeShareGroupStateRequest.InitializeStateData
        pending = broker.share_coordinator.call("initialize", InitializeShareGroupStateRequest(
            group_id=init.group_id, topics=[Init(topic_id=t, partitions=[
                Init.PartitionData(partition=p, state_epoch=init.group_epoch, start_offset=init.start_offsets[t][p])
                for p in sorted(ps)]) for t, ps in init.topics.items()]), 0)

        def initialized():
            error = _persister_failed(pending)
            if error is not None:
                # the whole request failed: every partition says so (the partitions stay
                # initializing, as Kafka leaves them)
                out = _alter_copy(plan.response, lambda p, t: (int(error), error.message))
                out.error_code, out.error_message = int(error), error.message
                return out
            failed = {(t.topic_id, p.partition): (p.error_code, p.error_message)
                      for t in pending.response.results for p in t.partitions if p.error_code}
            if failed:
                return _alter_copy(plan.response, lambda p, t: failed.get((t.topic_id, p.partition_index)))
            broker.share_partitions.forget_group(init.group_id)
            done = gc.execute(init.group_id, Shard.handle_initialize_share_group_state,
                              ShareStateInitialized(init.group_id, dict(init.topics)), 0)
            return _chain(done, lambda _: plan.response)
        return _after([pending], initialized)
    return _chain(gc.execute(req.group_id, Shard.handle_alter_share_group_offsets, req, 0), initialize)


def _alter_copy(response, error_of):
    """Kafka's buildErrorResponse: the answer with the partitions the share coordinator refused
    (``error_of(partition, topic)`` -> (code, message) or None) replaced by their error."""
    T = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
    P = T.AlterShareGroupOffsetsResponsePartition
    out = AlterShareGroupOffsetsResponse(responses=[])
    for t in response.responses:
        parts = []
        for p in t.partitions:
            if p.error_code:
                parts.append(p)
                continue
            e = error_of(p, t)
            parts.append(p if e is None else P(partition_index=p.partition_index, error_code=e[0], error_message=e[1]))
        out.responses.append(T(topic_name=t.topic_name, topic_id=t.topic_id, partitions=parts))
    return out


# == DeleteShareGroupOffsets ===============================================================================

def delete_offsets(broker, req):
    """Kafka's deleteShareGroupOffsets: a DeleteShareGroupOffsetsResponse, or a PendingResponse."""
    gc = broker.group_coordinator
    T = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic

    def delete(plan):
        if plan.error_code:
            return DeleteShareGroupOffsetsResponse(error_code=plan.error_code, error_message=plan.error_message)
        errors = list(plan.error_topics)
        if plan.delete is None:
            return DeleteShareGroupOffsetsResponse(responses=errors)
        pending = broker.share_coordinator.delete(req.group_id, plan.delete)

        def deleted():
            error = _persister_failed(pending)
            if error is not None:
                return DeleteShareGroupOffsetsResponse(error_code=int(error), error_message=error.message)
            done = {}
            for result in pending.response.results:
                t = broker.metadata.by_id(result.topic_id)
                name = t.name if t is not None else ""
                failed = next((p for p in result.partitions if p.error_code), None)
                if failed is not None:
                    code = ErrorCode(failed.error_code)
                    errors.append(T(topic_name=name, topic_id=result.topic_id, error_code=int(code),
                                    error_message=code.message))
                else:
                    done[result.topic_id] = name
            if not done:
                return DeleteShareGroupOffsetsResponse(responses=errors)
            broker.share_partitions.forget_group(req.group_id)
            return gc.execute(req.group_id, Shard.handle_complete_delete_share_group_offsets,
                              ShareOffsetsDeleted(req.group_id, done, errors), 0)
        return _after([pending], deleted)
    return _chain(gc.execute(req.group_id, Shard.handle_initiate_delete_share_group_offsets, req, 0), delete)


# == DeleteGroups ==========================================================================================

def delete_groups(broker, req, version, refused):
    """Kafka's deleteGroups: share groups first (their share-partitions to deleting, then their
    state deleted by the share coordinator); a share group whose state could not be deleted is
    answered with that error and kept; every other group (and the share groups done) goes
    through the general deletion. ``refused``: results already decided (authorization)."""
    gc = broker.group_coordinator

    def merge_plans(parts):
        out = {}
        for p in parts:
            out.update(p)
        return out

    def delete_state(plans):
        errors = {g: e for g, (_, e) in plans.items() if e != ErrorCode.NONE}
        deletions = [(g, broker.share_coordinator.delete(g, topics)) for g, (topics, e) in plans.items()
                     if e == ErrorCode.NONE and topics]

        def general():
            for g, pending in deletions:
                error = _persister_failed(pending)
                if error is None:
                    failed = next((p for t in pending.response.results for p in t.partitions if p.error_code), None)
                    error = ErrorCode(failed.error_code) if failed is not None else None
                if error is not None:
                    errors[g] = error
                else:
                    broker.share_partitions.forget_group(g)
            R = DeleteGroupsResponse.DeletableGroupResult
            decided = [R(group_id=g, error_code=int(e)) for g, e in errors.items()] + refused
            retained = [g for g in req.groups_names if g not in errors]
            if not retained:
                return DeleteGroupsResponse(throttle_time_ms=0, results=decided)
            sub = type(req)(groups_names=retained)
            return gc.execute_split(sub, "groups_names", Shard.handle_delete_groups, version,
                                    lambda rs: DeleteGroupsResponse(throttle_time_ms=0, results=[
                                        g for r in rs for g in r.results] + decided))
        return _after([p for _, p in deletions], general)
    plans = gc.execute_split(req, "groups_names", Shard.handle_share_group_delete_requests, version, merge_plans)
    return _chain(plans, delete_state)

