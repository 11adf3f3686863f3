"""Response builders that respect what each request version can carry.

The core builds response objects ready to encode at the request's version: e.g. JoinGroup before
v7 cannot carry a null protocol name (Kafka's JoinGroupResponse sends "" there), LeaveGroup before
v3 has one top-level error (the first member error), OffsetFetch before v2 has no top-level
error (a group error goes into every requested partition), OffsetFetch before v8 has one group.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..protocol.messages.delete_groups import DeleteGroupsResponse
from ..protocol.messages.describe_groups import DescribeGroupsResponse
from ..protocol.messages.join_group import JoinGroupResponse
from ..protocol.messages.leave_group import LeaveGroupResponse
from ..protocol.messages.offset_commit import OffsetCommitResponse
from ..protocol.messages.offset_fetch import OffsetFetchResponse
from ..protocol.messages.sync_group import SyncGroupResponse
from ..protocol.messages.txn_offset_commit import TxnOffsetCommitResponse

NONE = ErrorCode.NONE


def join_response(version: int, error=NONE, *, member_id: str = "", generation_id: int = -1,
                  protocol_type=None, protocol_name=None, leader: str = "", skip_assignment=False,
                  members=None) -> JoinGroupResponse:
    if version < 7 and protocol_name is None:
        protocol_name = ""
    return JoinGroupResponse(error_code=int(error), generation_id=generation_id,
                             protocol_type=protocol_type, protocol_name=protocol_name,
                             leader=leader if leader is not None else "",
                             skip_assignment=skip_assignment, member_id=member_id,
                             members=members if members is not None else [])


def join_member(member_id: str, group_instance_id, metadata: bytes):
    return JoinGroupResponse.JoinGroupResponseMember(member_id=member_id,
                                                     group_instance_id=group_instance_id,
                                                     metadata=metadata)


def sync_response(version: int, error=NONE, *, protocol_type=None, protocol_name=None,
                  assignment: bytes = b"") -> SyncGroupResponse:
    return SyncGroupResponse(error_code=int(error), protocol_type=protocol_type,
                             protocol_name=protocol_name, assignment=assignment)


def leave_response(version: int, top_error=NONE, members=()) -> LeaveGroupResponse:
    """``members``: list of (member_id, group_instance_id, error)."""
    if version <= 2:
        error = ErrorCode(top_error)
        if error == NONE:
            for _, _, e in members:
                if e != NONE:
                    error = ErrorCode(e)
                    break
        return LeaveGroupResponse(error_code=int(error))
    return LeaveGroupResponse(error_code=int(top_error), members=[
        LeaveGroupResponse.MemberResponse(member_id=m, group_instance_id=i, error_code=int(e))
        for m, i, e in members])


def offset_commit_error_response(request, error) -> OffsetCommitResponse:
    """OffsetCommitRequest.getErrorResponse: every requested partition gets ``error``."""
    T, P = OffsetCommitResponse.OffsetCommitResponseTopic, OffsetCommitResponse.OffsetCommitResponseTopic.OffsetCommitResponsePartition
    return OffsetCommitResponse(topics=[
        T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=int(error))
                                   for p in t.partitions]) for t in request.topics])


def describe_error_group(group_id: str, error):
    return DescribeGroupsResponse.DescribedGroup(error_code=int(error), group_id=group_id)


def delete_groups_response(results) -> DeleteGroupsResponse:
    """``results``: list of (group_id, error)."""
    return DeleteGroupsResponse(results=[DeleteGroupsResponse.DeletableGroupResult(
        group_id=g, error_code=int(e)) for g, e in results])


class FetchGroup:
    """One group's OffsetFetch answer, version-neutral: ``topics`` is a list of
    (name, [(partition, offset, leader_epoch, metadata, error)]) and ``error`` the group error."""

    __slots__ = ("group_id", "topics", "error", "requested")

    def __init__(self, group_id, topics=(), error=NONE, requested=None):
        self.group_id = group_id
        self.topics = list(topics)
        self.error = ErrorCode(error)
        self.requested = requested  # the request's topics (name, [partitions]) or None


def _group_error_topics(group: FetchGroup):
    return [(name, [(p, -1, -1, "", group.error) for p in parts]) for name, parts in group.requested or ()]


def offset_fetch_response(version: int, groups: list[FetchGroup]) -> OffsetFetchResponse:
    """OffsetFetchResponse.Builder + groupError: v8+ one entry per group; before v8 one group,
    with a top-level error from v2 and the group error in every requested partition before v2."""
    if version >= 8:
        G = OffsetFetchResponse.OffsetFetchResponseGroup
        T = G.OffsetFetchResponseTopics
        P = T.OffsetFetchResponsePartitions
        out = []
        for g in groups:
            topics = [] if g.error != NONE else g.topics
            out.append(G(group_id=g.group_id, error_code=int(g.error), topics=[
                T(name=n, partitions=[P(partition_index=p, committed_offset=o, committed_leader_epoch=le,
                                        metadata=md, error_code=int(e)) for p, o, le, md, e in parts])
                for n, parts in topics]))
        return OffsetFetchResponse(groups=out)
    (g,) = groups
    T = OffsetFetchResponse.OffsetFetchResponseTopic
    P = T.OffsetFetchResponsePartition
    if g.error != NONE:
        topics = _group_error_topics(g) if version < 2 else []
    else:
        topics = g.topics
    return OffsetFetchResponse(error_code=int(g.error) if version >= 2 else 0, topics=[
        T(name=n, partitions=[P(partition_index=p, committed_offset=o, committed_leader_epoch=le,
                                metadata=md, error_code=int(e)) for p, o, le, md, e in parts])
        for n, parts in topics])


def txn_offset_commit_error_response(req, error):
    """TxnOffsetCommit answered with one error for every partition it names."""
    T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
    P = T.TxnOffsetCommitResponsePartition
    return TxnOffsetCommitResponse(topics=[T(name=t.name, partitions=[
        P(partition_index=p.partition_index, error_code=int(error)) for p in t.partitions]) for t in req.topics])
