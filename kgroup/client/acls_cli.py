"""``kgroup acls``: kafka-acls.sh's --add / --remove / --list with its options (principals, hosts,
operations, resources, --resource-pattern-type, the --producer / --consumer conveniences) and its
output, over CreateAcls / DescribeAcls / DeleteAcls."""
from __future__ import annotations

import argparse
import asyncio
import sys

from kgroup.security import acl as A

from .admin import Admin
from .errors import KafkaError

_OPS = {n.replace("_", "").lower(): code for code, n in A.OPERATION_NAMES.items() if code not in (A.UNKNOWN,)}
_PATTERNS = {"literal": A.LITERAL, "prefixed": A.PREFIXED, "match": A.PT_MATCH, "any": A.PT_ANY}


def _pattern_text(rt, name, pt) -> str:
    return (f"ResourcePattern(resourceType={A.RESOURCE_TYPE_NAMES[rt]}, name={name}, "
            f"patternType={A.PATTERN_NAMES[pt]})")


def _entry_text(b: A.AclBinding) -> str:
    return (f"(principal={b.principal}, host={b.host}, operation={A.OPERATION_NAMES[b.operation]}, "
            f"permissionType={A.PERMISSION_NAMES[b.permission_type]})")


def _resources(args) -> list[tuple[int, str]]:
    out = [(A.RT_TOPIC, t) for t in args.topic] + [(A.RT_GROUP, g) for g in args.group]
    out += [(A.RT_TRANSACTIONAL_ID, t) for t in args.transactional_id]
    out += [(A.RT_DELEGATION_TOKEN, t) for t in args.delegation_token]
    out += [(A.RT_USER, u) for u in args.user_principal]
    if args.cluster:
        out.append((A.RT_CLUSTER, A.CLUSTER_NAME))
    return out


def _operations(args, rt) -> list[int]:
    """AclCommand.getAcl's operations, or --producer / --consumer's per resource type."""
    if args.producer or args.consumer:
        ops = []
        if args.producer:
            ops += {A.RT_TOPIC: [A.WRITE, A.DESCRIBE, A.CREATE], A.RT_TRANSACTIONAL_ID: [A.WRITE, A.DESCRIBE],
                    A.RT_CLUSTER: [A.IDEMPOTENT_WRITE] if args.idempotent else []}.get(rt, [])
        if args.consumer:
            ops += {A.RT_TOPIC: [A.READ, A.DESCRIBE], A.RT_GROUP: [A.READ]}.get(rt, [])
        return ops
    ops = []
    for o in args.operation or ["All"]:
        code = _OPS.get(o.replace("_", "").replace("-", "").lower())
        if code is None:
            raise SystemExit(f"Invalid operation: {o}")
        if code != A.ALL and code not in A.SUPPORTED_OPERATIONS[rt]:
            raise SystemExit(f"ResourceType {A.RESOURCE_TYPE_NAMES[rt]} only supports operations "
                             + ",".join(A.OPERATION_NAMES[x] for x in A.SUPPORTED_OPERATIONS[rt]))
        ops.append(code)
    return ops


def _bindings(args, pt) -> list[A.AclBinding]:
    resources = _resources(args)
    if args.producer:
        if args.idempotent and (A.RT_CLUSTER, A.CLUSTER_NAME) not in resources:
            resources.append((A.RT_CLUSTER, A.CLUSTER_NAME))
    entries = [(p, h, A.ALLOW) for p in args.allow_principal for h in (args.allow_host or ["*"])]
    entries += [(p, h, A.DENY) for p in args.deny_principal for h in (args.deny_host or ["*"])]
    if not entries:
        raise SystemExit("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    out = []
    for rt, name in resources:
        for op in _operations(args, rt):
            for principal, host, perm in entries:
                out.append(A.AclBinding(rt, name, pt, principal, host, op, perm))
    return out


def main_acls(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kgroup acls", description="Add, remove or list ACLs (like kafka-acls.sh).")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--command-config", help="client properties (security.protocol, sasl.*, ssl.*)")
    act = p.add_mutually_exclusive_group(required=True)
    for a in ("add", "remove", "list"):
        act.add_argument(f"--{a}", action="store_true")
    for a in ("allow-principal", "deny-principal", "allow-host", "deny-host", "operation", "topic", "group",
              "transactional-id", "delegation-token", "user-principal"):
        p.add_argument(f"--{a}", action="append", default=[])
    p.add_argument("--principal", action="append", default=[], help="with --list: only these principals' ACLs")
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--resource-pattern-type", default=None)
    p.add_argument("--producer", action="store_true")
    p.add_argument("--consumer", action="store_true")
    p.add_argument("--idempotent", action="store_true")
    p.add_argument("--force", action="store_true")
    args = p.parse_args(argv)
    if args.consumer and not (args.topic and args.group):
        p.error("With --consumer you must specify a --topic and a --group")
    if args.producer and not args.topic:
        p.error("With --producer you must specify a --topic")
    return asyncio.run(_acls(args))


async def _acls(args) -> int:
    from .cli import command_config
    pt_name = (args.resource_pattern_type or ("any" if args.list else "literal")).lower()
    if pt_name not in _PATTERNS:
        raise SystemExit(f"Invalid resource-pattern-type: {args.resource_pattern_type}")
    pt = _PATTERNS[pt_name]
    if (args.add and pt not in (A.LITERAL, A.PREFIXED)):
        raise SystemExit(f"A '--resource-pattern-type' value of '{pt_name.upper()}' is not valid when adding acls.")
    async with Admin({"bootstrap.servers": args.bootstrap_server, **command_config(args.command_config)}) as admin:
        try:
            if args.add:
                bindings = _bindings(args, pt)
                for key in dict.fromkeys((b.resource_type, b.resource_name, b.pattern_type) for b in bindings):
                    print(f"Adding ACLs for resource `{_pattern_text(*key)}`: ")
                    for b in bindings:
                        if (b.resource_type, b.resource_name, b.pattern_type) == key:
                            print(f" \t{_entry_text(b)} ")
                    print()
                errors = [e for e in await admin.create_acls(bindings) if e is not None]
                if errors:
                    print(f"Error while executing ACL command: {errors[0]}", file=sys.stderr)
                    return 1
                await _list(admin, {(b.resource_type, b.resource_name): b.pattern_type for b in bindings}, [])
                return 0
            if args.remove:
                resources = _resources(args)
                if args.allow_principal or args.deny_principal:
                    filters = [A.AclBindingFilter(b.resource_type, b.resource_name, b.pattern_type, b.principal,
                                                  b.host, b.operation, b.permission_type) for b in _bindings(args, pt)]
                else:
                    filters = [A.AclBindingFilter(rt, name, pt, None, None, A.ANY, A.PERM_ANY) for rt, name in resources]
                for rt, name in resources:
                    print(f"Removing ACLs for resource `{_pattern_text(rt, name, pt if pt != A.PT_ANY else A.LITERAL)}`")
                results = await admin.delete_acls(filters)
                errors = [r for r in results if isinstance(r, KafkaError)]
                if errors:
                    print(f"Error while executing ACL command: {errors[0]}", file=sys.stderr)
                    return 1
                return 0
            resources = _resources(args)
            await _list(admin, {r: pt for r in resources} if resources else None, args.principal)
            return 0
        except KafkaError as e:
            print(f"Error while executing ACL command: {e}", file=sys.stderr)
            return 1


async def _list(admin, resources: dict | None, principals: list[str]) -> None:
    if resources is None:
        got = await admin.describe_acls(A.AclBindingFilter(A.RT_ANY, None, A.PT_ANY, None, None, A.ANY, A.PERM_ANY))
    else:
        got = []
        for (rt, name), pt in resources.items():
            got += await admin.describe_acls(A.AclBindingFilter(rt, name, pt, None, None, A.ANY, A.PERM_ANY))
    if principals:
        got = [b for b in got if b.principal in principals]
    by: dict = {}
    for b in got:
        by.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(b)
    for key, bs in by.items():
        head = "Current ACLs for resource" if not principals else f"ACLs for principal `{','.join(principals)}`"
        print(f"{head} `{_pattern_text(*key)}`: ")
        for b in sorted(set(bs)):
            print(f" \t{_entry_text(b)} ")
        print()
