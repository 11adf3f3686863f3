"""What the handlers ask the authorizer, in the terms of Kafka's AuthHelper (authorize,
filterByAuthorized): each returns at once when no authorizer is configured (``broker.authorizer``
is None), so a broker without ACLs pays one None test per request."""
from __future__ import annotations

from ..protocol.errors import ErrorCode
from ..security.acl import (ALTER, ALTER_CONFIGS, CLUSTER_ACTION, CLUSTER_NAME, CREATE, DELETE, DESCRIBE,  # noqa: F401
                            DESCRIBE_CONFIGS, IDEMPOTENT_WRITE, READ, RT_CLUSTER, RT_GROUP, RT_TOPIC,
                            RT_TRANSACTIONAL_ID, SUPPORTED_OPERATIONS, WRITE)


def allowed(broker, ctx, operation: int, resource_type: int, name: str) -> bool:
    a = broker.authorizer
    return a is None or a.authorize(ctx, operation, resource_type, name)


def denied_topics(broker, ctx, operation: int, names) -> set | None:
    """The topics among ``names`` ``operation`` is denied on; None without an authorizer."""
    a = broker.authorizer
    if a is None:
        return None
    return {n for n in set(names) if not a.authorize(ctx, operation, RT_TOPIC, n)}


def operations(broker, ctx, resource_type: int, name: str) -> int:
    """AuthHelper.authorizedOperations: the bit field of allowed supported operations (every
    supported one without an authorizer)."""
    a = broker.authorizer
    if a is None:
        return sum(1 << op for op in SUPPORTED_OPERATIONS[resource_type])
    return a.authorized_operations(ctx, resource_type, name)


def group_denied(broker, ctx, operation: int, group_id: str) -> bool:
    a = broker.authorizer
    return a is not None and not a.authorize(ctx, operation, RT_GROUP, group_id)


def whole_request_error(broker, ctx, version, body, code):
    """Kafka's request.getErrorResponse(code): everything the request names fails with ``code``."""
    from .faults import error_response
    return error_response(ctx.header.request_api_key, version, body, code)


TOPIC_AUTHORIZATION_FAILED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_AUTHORIZATION_FAILED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_AUTHORIZATION_FAILED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
