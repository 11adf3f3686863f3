"""ACLs and Kafka's StandardAuthorizer, pure: bindings (resource pattern + entry), filters for
Describe/DeleteAcls, CreateAcls' validation (AclControlManager.validateNewAcl and AclApis), the
authorization rule (StandardAuthorizerData.findAclRule: super users, DENY before ALLOW, LITERAL,
PREFIXED and the wildcard, hosts, implied operations) and authorized-operations bit fields
(AuthHelper.authorizedOperations)."""
from __future__ import annotations

from typing import NamedTuple

from .principal import KafkaPrincipal

# ResourceType codes
RT_UNKNOWN, RT_ANY, RT_TOPIC, RT_GROUP, RT_CLUSTER, RT_TRANSACTIONAL_ID, RT_DELEGATION_TOKEN, RT_USER = range(8)
RESOURCE_TYPE_NAMES = {RT_TOPIC: "TOPIC", RT_GROUP: "GROUP", RT_CLUSTER: "CLUSTER",
                       RT_TRANSACTIONAL_ID: "TRANSACTIONAL_ID", RT_DELEGATION_TOKEN: "DELEGATION_TOKEN",
                       RT_USER: "USER", RT_ANY: "ANY", RT_UNKNOWN: "UNKNOWN"}
# AclOperation codes
(UNKNOWN, ANY, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
 ALTER_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS, DESCRIBE_TOKENS) = range(15)
OPERATION_NAMES = {ALL: "ALL", READ: "READ", WRITE: "WRITE", CREATE: "CREATE", DELETE: "DELETE",
                   ALTER: "ALTER", DESCRIBE: "DESCRIBE", CLUSTER_ACTION: "CLUSTER_ACTION",
                   DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS", ALTER_CONFIGS: "ALTER_CONFIGS",
                   IDEMPOTENT_WRITE: "IDEMPOTENT_WRITE", CREATE_TOKENS: "CREATE_TOKENS",
                   DESCRIBE_TOKENS: "DESCRIBE_TOKENS", ANY: "ANY", UNKNOWN: "UNKNOWN"}
# AclPermissionType codes
PERM_UNKNOWN, PERM_ANY, DENY, ALLOW = range(4)
PERMISSION_NAMES = {DENY: "DENY", ALLOW: "ALLOW", PERM_ANY: "ANY", PERM_UNKNOWN: "UNKNOWN"}
# PatternType codes
PT_UNKNOWN, PT_ANY, PT_MATCH, LITERAL, PREFIXED = range(5)
PATTERN_NAMES = {LITERAL: "LITERAL", PREFIXED: "PREFIXED", PT_ANY: "ANY", PT_MATCH: "MATCH", PT_UNKNOWN: "UNKNOWN"}

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

# AclEntry.supportedOperations
SUPPORTED_OPERATIONS = {
    RT_TOPIC: (READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    RT_GROUP: (READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS, ALTER_CONFIGS),
    RT_CLUSTER: (CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE, ALTER, DESCRIBE),
    RT_TRANSACTIONAL_ID: (DESCRIBE, WRITE),
    RT_DELEGATION_TOKEN: (DESCRIBE,),
    RT_USER: (CREATE_TOKENS, DESCRIBE_TOKENS),
}
_IMPLIES_DESCRIBE = frozenset((DESCRIBE, READ, WRITE, DELETE, ALTER))
_IMPLIES_DESCRIBE_CONFIGS = frozenset((DESCRIBE_CONFIGS, ALTER_CONFIGS))


class AclBinding(NamedTuple):
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    def describe(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={OPERATION_NAMES.get(self.operation)}, "
                f"permissionType={PERMISSION_NAMES.get(self.permission_type)}) on "
                f"ResourcePattern(resourceType={RESOURCE_TYPE_NAMES.get(self.resource_type)}, "
                f"name={self.resource_name}, patternType={PATTERN_NAMES.get(self.pattern_type)})")


class AclBindingFilter(NamedTuple):
    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission_type: int

    def matches(self, b: AclBinding) -> bool:
        """Kafka's AclBindingFilter.matches (ResourcePatternFilter + AccessControlEntryFilter)."""
        if self.resource_type != RT_ANY and self.resource_type != b.resource_type:
            return False
        pt, name = self.pattern_type, self.resource_name
        if pt == PT_MATCH:
            if name is not None:
                if b.pattern_type == LITERAL:
                    if b.resource_name != name and b.resource_name != WILDCARD:
                        return False
                elif b.pattern_type == PREFIXED:
                    if not name.startswith(b.resource_name):
                        return False
                else:
                    return False
        else:
            if pt != PT_ANY and pt != b.pattern_type:
                return False
            if name is not None and name != b.resource_name:
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != ANY and self.operation != b.operation:
            return False
        if self.permission_type != PERM_ANY and self.permission_type != b.permission_type:
            return False
        return True

    def unknown_error(self) -> str | None:
        """AclBindingFilter.findIndefiniteField, as DeleteAcls/DescribeAcls reject a filter."""
        if self.resource_type == RT_UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.pattern_type == PT_UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        if self.operation == UNKNOWN:
            return "Operation is UNKNOWN."
        if self.permission_type == PERM_UNKNOWN:
            return "Permission type is UNKNOWN."
        return None


def validate_new_acl(b: AclBinding) -> str | None:
    """Why CreateAcls refuses ``b`` (INVALID_REQUEST), or None: AclApis, then
    AclControlManager.validateNewAcl."""
    if b.resource_type == RT_CLUSTER and b.resource_name != CLUSTER_NAME:
        return "The only valid name for the CLUSTER resource is " + CLUSTER_NAME
    if not b.resource_name:
        return "Invalid empty resource name"
    if b.resource_type in (RT_UNKNOWN, RT_ANY) or b.resource_type not in RESOURCE_TYPE_NAMES:
        return f"Invalid resourceType {RESOURCE_TYPE_NAMES.get(b.resource_type, 'UNKNOWN')}"
    if b.pattern_type not in (LITERAL, PREFIXED):
        return f"Invalid patternType {PATTERN_NAMES.get(b.pattern_type, 'UNKNOWN')}"
    if b.operation in (UNKNOWN, ANY) or b.operation not in OPERATION_NAMES:
        return f"Invalid operation {OPERATION_NAMES.get(b.operation, 'UNKNOWN')}"
    if b.permission_type not in (DENY, ALLOW):
        return f"Invalid permissionType {PERMISSION_NAMES.get(b.permission_type, 'UNKNOWN')}"
    if ":" not in b.principal:
        return (f"Could not parse principal from `{b.principal}` (no colon is present separating the "
                "principal type from the principal name)")
    return None


class StandardAuthorizer:
    """Kafka's StandardAuthorizer over an in-memory ACL set (the store persists it)."""

    def __init__(self, super_users: str | None = None, allow_if_no_acl: bool = False):
        self.super_users = {s.strip() for s in (super_users or "").split(";") if s.strip()}
        self.allow_if_no_acl = allow_if_no_acl
        self.acls: set[AclBinding] = set()
        # resource type -> list of ACLs, for the per-request search
        self._by_type: dict[int, list[AclBinding]] = {}

    def set_acls(self, acls) -> None:
        self.acls = set(acls)
        by: dict[int, list[AclBinding]] = {}
        for a in self.acls:
            by.setdefault(a.resource_type, []).append(a)
        self._by_type = by

    def authorize_principal(self, principal: KafkaPrincipal, host: str, operation: int,
                            resource_type: int, resource_name: str) -> bool:
        if str(principal) in self.super_users:
            return True
        p = str(principal)
        has_resource_acls = False
        allowed = False
        for acl in self._by_type.get(resource_type, ()):
            n = acl.resource_name
            if acl.pattern_type == LITERAL:
                if n != resource_name and n != WILDCARD:
                    continue
            elif not resource_name.startswith(n):
                continue
            has_resource_acls = True
            if acl.principal != p and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.host != WILDCARD and acl.host != host:
                continue
            op = acl.operation
            if acl.permission_type == ALLOW:
                if op != ALL:
                    if operation == DESCRIBE:
                        if op not in _IMPLIES_DESCRIBE:
                            continue
                    elif operation == DESCRIBE_CONFIGS:
                        if op not in _IMPLIES_DESCRIBE_CONFIGS:
                            continue
                    elif op != operation:
                        continue
                allowed = True
            else:
                if op != ALL and op != operation:
                    continue
                return False            # DENY first
        if allowed:
            return True
        return self.allow_if_no_acl and not has_resource_acls

    def authorize(self, ctx, operation: int, resource_type: int, resource_name: str) -> bool:
        """For a request context (its principal and client host)."""
        return self.authorize_principal(ctx.principal, ctx.client_host, operation, resource_type, resource_name)

    def authorized_operations(self, ctx, resource_type: int, resource_name: str) -> int:
        """AuthHelper.authorizedOperations: the supported operations allowed, as a bit field."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(ctx, op, resource_type, resource_name):
                bits |= 1 << op
        return bits

    def authorize_by_resource_type(self, ctx, operation: int, resource_type: int) -> bool:
        """Authorizer.authorizeByResourceType: whether ``operation`` is allowed on at least one
        resource of the type (used by InitProducerId without a transactional id)."""
        principal, host = ctx.principal, ctx.client_host
        if str(principal) in self.super_users:
            return True
        p = str(principal)
        matching = [a for a in self._by_type.get(resource_type, ())
                    if (a.principal == p or a.principal == WILDCARD_PRINCIPAL)
                    and (a.host == WILDCARD or a.host == host)
                    and (a.operation == operation or a.operation == ALL)]
        denied_literal = {a.resource_name for a in matching if a.permission_type == DENY and a.pattern_type == LITERAL}
        denied_prefix = [a.resource_name for a in matching if a.permission_type == DENY and a.pattern_type == PREFIXED]
        if WILDCARD in denied_literal or "" in denied_prefix:
            return False
        for a in matching:
            if a.permission_type != ALLOW:
                continue
            if a.pattern_type == LITERAL:
                if a.resource_name == WILDCARD or (a.resource_name not in denied_literal
                                                   and not any(a.resource_name.startswith(d) for d in denied_prefix)):
                    return True
            elif not any(a.resource_name.startswith(d) for d in denied_prefix):
                return True
        if self.allow_if_no_acl and not self._by_type.get(resource_type):
            return True
        return False
