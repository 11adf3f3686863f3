"""Authorized operations without an authorizer: Kafka's AuthHelper.authorizedOperations answers
every operation the resource type supports (AclEntry.supportedOperations) as a 32-bit field of
AclOperation codes, whenever a client asks (Metadata v8+, DescribeCluster,
DescribeGroups v3+, ConsumerGroupDescribe)."""
from __future__ import annotations

# AclOperation codes
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12


def _bits(*ops: int) -> int:
    return sum(1 << op for op in set(ops))


TOPIC_OPERATIONS = _bits(READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS)
GROUP_OPERATIONS = _bits(READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
CLUSTER_OPERATIONS = _bits(CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE)


def with_group_operations(resp, asked: bool):
    """KafkaApis (DescribeGroups v3+, ConsumerGroupDescribe): every group described without error
    gets its authorized operations, if the client asked."""
    if asked:
        for g in resp.groups:
            if g.error_code == 0:
                g.authorized_operations = GROUP_OPERATIONS
    return resp
