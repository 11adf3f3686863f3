"""Server-side assignors of the consumer group protocol (KIP-848), pure functions.

``ASSIGNORS`` maps Kafka's names to ``assign(group_spec, topic_partitions) -> assignment``;
``group.consumer.assignors`` lists them with ``uniform`` first (Kafka's default), and a
ConsumerGroupHeartbeat naming another assignor gets UNSUPPORTED_ASSIGNOR.
"""
from . import range as range_assignor
from . import uniform
from .spec import GroupAssignment, GroupSpec, MemberSpec, PartitionAssignorError, SubscriptionType

ASSIGNORS = {uniform.NAME: uniform.assign, range_assignor.NAME: range_assignor.assign}
DEFAULT_ASSIGNORS = (uniform.NAME, range_assignor.NAME)

__all__ = ["ASSIGNORS", "DEFAULT_ASSIGNORS", "GroupAssignment", "GroupSpec", "MemberSpec",
           "PartitionAssignorError", "SubscriptionType"]
