"""ConsumerGroupDescribe answers from the group model (Kafka's ConsumerGroup.asDescribedGroup and
ConsumerGroupMember.asConsumerGroupDescribeMember), pure."""
from __future__ import annotations

from typing import Mapping

from ...protocol.errors import ErrorCode
from ...protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse
from .group import ConsumerGroup
from .member import Assignment

Described = ConsumerGroupDescribeResponse.DescribedGroup
_Member = Described.Member
_Assignment = ConsumerGroupDescribeResponse.Assignment
_TopicPartitions = ConsumerGroupDescribeResponse.TopicPartitions


def _assignment(assignment: Assignment, topic_names: Mapping[bytes, str]):
    # topics no longer in the metadata are left out, as Kafka's topicPartitionsFromMap does
    return _Assignment(topic_partitions=[
        _TopicPartitions(topic_id=t, topic_name=topic_names[t], partitions=sorted(p))
        for t, p in sorted(assignment.items()) if t in topic_names])


def describe_group(group: ConsumerGroup, default_assignor: str, topic_names: Mapping[bytes, str]):
    """The DescribedGroup of a consumer-protocol group; ``topic_names`` maps topic ids to names."""
    members = []
    for m in group.members.values():
        members.append(_Member(
            member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
            client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=sorted(m.subscribed_topic_names),
            subscribed_topic_regex=m.subscribed_topic_regex,
            assignment=_assignment(m.assigned_partitions, topic_names),
            target_assignment=_assignment(group.target_assignment.get(m.member_id, {}), topic_names),
            # v1 (KIP-1099): 0 a member still on the classic protocol, 1 a consumer-protocol one
            member_type=0 if m.classic_member_metadata is not None else 1))
    return Described(error_code=0, group_id=group.group_id, group_state=group.state.value,
                     group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                     assignor_name=group.preferred_server_assignor(default_assignor), members=members)


def group_not_found(group_id: str, is_other_type: bool = False):
    """GROUP_ID_NOT_FOUND, with Kafka's messages for a missing group and for a classic one."""
    message = f"Group {group_id} is not a consumer group." if is_other_type else f"Group {group_id} not found."
    return Described(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message, group_id=group_id)
