"""Admin and console commands, shaped like Kafka's scripts (the lead wires them into ``kgroup``):

* ``main_topics``  ~ kafka-topics.sh          --create / --list / --describe / --delete / --alter
* ``main_configs`` ~ kafka-configs.sh         --describe / --alter (--add-config, --delete-config)
* ``main_delete_records`` ~ kafka-delete-records.sh --offset-json-file
* ``main_groups``  ~ kafka-consumer-groups.sh  --list / --describe [--members|--state] / --delete /
  --reset-offsets (--to-earliest|--to-latest|--to-offset N|--shift-by N|--to-current) [--execute];
  a consumer-protocol group (KIP-848) is described with ConsumerGroupDescribe (epochs, current next
  to target assignment with --verbose), a classic one with DescribeGroups
* ``main_produce`` ~ kafka-console-producer.sh (one record per stdin line)
* ``main_consume`` ~ kafka-console-consumer.sh

Each takes ``argv`` (without the program name) and returns the exit status. Output formats
follow Kafka's tools (column layouts from TopicCommand and ConsumerGroupCommand).
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import sys

from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.primitives import DecodeError

from .admin import (BROKER_RESOURCE, DELETE, EARLIEST, LATEST, SET, TOPIC_RESOURCE, Admin,
                    ConsumerGroupDescription, ConsumerGroupMemberDescription, GroupDescription,
                    MemberDescription, NewTopic)
from .assignors import TopicPartition
from .errors import KafkaError, UnsupportedVersionError

MISSING = "-"


def _uuid(raw: bytes) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _kv(items) -> dict[str, str]:
    out = {}
    for item in items or []:
        k, sep, v = item.partition("=")
        if not sep:
            raise SystemExit(f"Invalid config: {item} (expected key=value)")
        out[k] = v
    return out


def _run(coro) -> int:
    try:
        return asyncio.run(coro)
    except DecodeError:
        raise                   # an unreadable response is a bug to show whole, not a broker's answer
    except KafkaError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except (ConnectionError, TimeoutError, OSError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1


# --- kafka-topics ----------------------------------------------------------------------------------

def main_topics(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kgroup topics", description="Create, delete, describe, or list topics.")
    p.add_argument("--bootstrap-server", required=True)
    act = p.add_mutually_exclusive_group(required=True)
    for a in ("create", "list", "describe", "delete", "alter"):
        act.add_argument(f"--{a}", action="store_true")
    p.add_argument("--topic")
    p.add_argument("--partitions", type=int, default=-1)
    p.add_argument("--replication-factor", type=int, default=-1)
    p.add_argument("--config", action="append", default=[])
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--exclude-internal", action="store_true")
    args = p.parse_args(argv)
    if (args.create or args.delete or args.alter) and not args.topic:
        p.error("--topic is required with --create, --alter and --delete")
    if args.alter and args.partitions == -1:
        p.error("--alter needs --partitions (topic configs are altered with kgroup configs)")
    return _run(_topics(args))


async def _topics(args) -> int:
    async with Admin(bootstrap_servers=args.bootstrap_server) as admin:
        if args.create:
            result = await admin.create_topics([NewTopic(args.topic, args.partitions, args.replication_factor,
                                                         _kv(args.config))])
            err = result.get(args.topic)
            if err is not None:
                if args.if_not_exists and err.code.name == "TOPIC_ALREADY_EXISTS":
                    return 0
                print(f"Error while executing topic command : {err}", file=sys.stderr)
                return 1
            print(f"Created topic {args.topic}.")
            return 0
        if args.alter:   # TopicCommand.alterTopic: raise the partition count, silent on success
            err = (await admin.create_partitions({args.topic: args.partitions})).get(args.topic)
            if err is not None:
                if args.if_exists and err.code.name == "UNKNOWN_TOPIC_OR_PARTITION":
                    return 0
                print(f"Error while executing topic command : {err}", file=sys.stderr)
                return 1
            return 0
        topics = await admin.list_topics(include_internal=not args.exclude_internal)
        if args.topic:
            selected = [t for t in topics if t == args.topic]
            if not selected and not args.if_exists:
                print(f"Error while executing topic command : Topic '{args.topic}' does not exist as expected",
                      file=sys.stderr)
                return 1
        else:
            selected = topics
        if args.list:
            for t in selected:
                print(t)
        elif args.delete:
            for _topic, err in (await admin.delete_topics(selected)).items():
                if err is not None:
                    print(f"Error while executing topic command : {err}", file=sys.stderr)
                    return 1
        else:
            described = await admin.describe_topics(selected)
            for name in selected:
                info = described.get(name)
                if info is None or isinstance(info, Exception):
                    continue
                try:
                    configs = await admin.describe_configs(TOPIC_RESOURCE, name)
                    shown = ",".join(f"{k}={v['value']}" for k, v in sorted(configs.items())
                                     if not v["is_default"] and not v["is_sensitive"])
                except DecodeError:
                    raise
                except KafkaError:
                    shown = ""
                rf = len(next(iter(info.partitions.values())).replicas) if info.partitions else 0
                print(f"Topic: {name}\tTopicId: {_uuid(info.topic_id)}\tPartitionCount: {len(info.partitions)}\t"
                      f"ReplicationFactor: {rf}\tConfigs: {shown}")
                for pnum in sorted(info.partitions):
                    part = info.partitions[pnum]
                    print(f"\tTopic: {name}\tPartition: {pnum}\tLeader: {part.leader if part.leader >= 0 else 'none'}\t"
                          f"Replicas: {','.join(map(str, part.replicas))}\tIsr: {','.join(map(str, part.isr))}")
    return 0


# --- kafka-consumer-groups ---------------------------------------------------------------------------

def main_groups(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kgroup groups", description="List, describe, delete consumer groups, "
                                "or reset their offsets.")
    p.add_argument("--bootstrap-server", required=True)
    act = p.add_mutually_exclusive_group(required=True)
    for a in ("list", "describe", "delete", "reset-offsets"):
        act.add_argument(f"--{a}", action="store_true")
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--all-groups", action="store_true")
    p.add_argument("--members", action="store_true")
    p.add_argument("--state", action="store_true")
    p.add_argument("--offsets", action="store_true")
    p.add_argument("--timeline", action="store_true",
                   help="with --describe: the group's rebalance timeline, as the broker keeps it")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--all-topics", action="store_true")
    scen = p.add_mutually_exclusive_group()
    scen.add_argument("--to-earliest", action="store_true")
    scen.add_argument("--to-latest", action="store_true")
    scen.add_argument("--to-current", action="store_true")
    scen.add_argument("--to-offset", type=int)
    scen.add_argument("--shift-by", type=int)
    p.add_argument("--execute", action="store_true")
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    if (args.describe or args.delete or args.reset_offsets) and not (args.group or args.all_groups):
        p.error("Option --group or --all-groups is required")
    if args.reset_offsets:
        if not (args.to_earliest or args.to_latest or args.to_current or args.to_offset is not None
                or args.shift_by is not None):
            p.error("Option --reset-offsets requires one of --to-earliest, --to-latest, --to-current, "
                    "--to-offset, --shift-by")
        if not (args.topic or args.all_topics):
            p.error("Option --reset-offsets requires --topic or --all-topics")
    if args.timeline:
        if not (args.describe and args.group):
            p.error("Option --timeline requires --describe and --group")
        from .timeline import print_timeline
        return max(print_timeline(args.bootstrap_server, g) for g in args.group)
    return _run(_groups(args))


async def _consumer_groups(admin: Admin) -> list[str]:
    """ListGroupsOptions.forConsumerGroups: the groups of protocol type "" or "consumer" (no share
    groups: ``kgroup share-groups`` lists those)."""
    return [g.group_id for g in await admin.list_groups() if g.protocol_type in ("", "consumer")]


async def _groups(args) -> int:
    async with Admin(bootstrap_servers=args.bootstrap_server) as admin:
        if args.list:
            for g in await _consumer_groups(admin):
                print(g)
            return 0
        groups = await _consumer_groups(admin) if args.all_groups else args.group
        if args.delete:
            results = await admin.delete_groups(groups)
            ok = [g for g, e in results.items() if e is None]
            failed = {g: e for g, e in results.items() if e is not None}
            if ok and not failed:
                print("Deletion of requested consumer groups (" + ", ".join(f"'{g}'" for g in ok) + ") was successful.")
            else:
                print("Deletion of some consumer groups failed:")
                for g, e in failed.items():
                    print(f"* Group '{g}' could not be deleted due to: {e}")
                if ok:
                    print("\nThese consumer groups were deleted successfully: " + ", ".join(f"'{g}'" for g in ok))
            return 1 if failed else 0
        if args.reset_offsets:
            return await _reset_offsets(admin, args, groups)
        status = 0
        for group in sorted(groups):
            status |= await _describe_group(admin, args, group)
        return status


def _state_banner(group: str, state: str) -> bool:
    """ConsumerGroupCommand.shouldPrintMemberState: warn about empty/rebalancing/dead groups."""
    if state == "Dead":
        print(f"\nError: Consumer group '{group}' does not exist.")
        return False
    if state == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    elif state in ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"):
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    return True


async def _consumer_group(admin: Admin, group: str) -> ConsumerGroupDescription | None:
    """The group as ConsumerGroupDescribe (KIP-848) sees it, None for a classic or missing group
    (GROUP_ID_NOT_FOUND) or a broker without the API: Kafka's admin falls back to DescribeGroups."""
    try:
        desc = (await admin.describe_consumer_groups([group]))[group]
    except UnsupportedVersionError:
        return None
    return None if desc.error == ErrorCode.GROUP_ID_NOT_FOUND else desc


def member_state(member: ConsumerGroupMemberDescription, group: ConsumerGroupDescription) -> str:
    """A consumer-protocol member's reconciliation state as far as ConsumerGroupDescribe shows it
    (the protocol does not carry Kafka's MemberState; its Assignment is the member's assigned
    partitions without those pending revocation, as Kafka's asConsumerGroupDescribeMember):
    STABLE when it owns its target at the group's assignment epoch; UNRELEASED_PARTITIONS when it
    is at the assignment epoch but still waits for partitions another member is revoking;
    RECONCILING when its epoch is behind the assignment epoch (it is revoking partitions, or takes
    the new assignment at its next heartbeat)."""
    if member.member_epoch < group.assignment_epoch:
        return "RECONCILING"
    if set(member.assignment) != set(member.target_assignment):
        return "UNRELEASED_PARTITIONS"
    return "STABLE"


def _partitions_text(partitions) -> str:
    per_topic: dict[str, list[int]] = {}
    for tp in partitions:
        per_topic.setdefault(tp.topic, []).append(tp.partition)
    return ", ".join(f"{t}({','.join(map(str, sorted(ps)))})" for t, ps in sorted(per_topic.items())) or MISSING


def _describe_consumer_group(args, group: str, cg: ConsumerGroupDescription) -> int:
    """--state / --members of a consumer-protocol group, as Kafka 4.0's ConsumerGroupCommand
    (GROUP-EPOCH, TARGET-ASSIGNMENT-EPOCH; per member CURRENT-EPOCH, CURRENT-ASSIGNMENT,
    TARGET-EPOCH, TARGET-ASSIGNMENT with --verbose), plus MEMBER-STATE and SUBSCRIPTION."""
    if cg.error.value:
        print(f"\nError: Executing consumer group command failed due to {cg.error_message or cg.error.message}")
        return 1
    if not _state_banner(group, cg.state):
        return 0
    if args.state:
        coord = cg.coordinator
        c = f"{coord.host}:{coord.port}  ({coord.node_id})"
        w = max(15, len(group))
        if args.verbose:
            fmt = f"\n%-{w}s %-{max(25, len(c))}s %-20s %-20s %-15s %-25s %s"
            sys.stdout.write(fmt % ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                                    "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"))
            sys.stdout.write(fmt % (group, c, cg.assignor, cg.state, cg.group_epoch, cg.assignment_epoch,
                                    len(cg.members)) + "\n")
        else:
            fmt = f"\n%-{w}s %-{max(25, len(c))}s %-20s %-20s %s"
            sys.stdout.write(fmt % ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"))
            sys.stdout.write(fmt % (group, c, cg.assignor, cg.state, len(cg.members)) + "\n")
        return 0
    members = cg.members
    with_instance = any(m.group_instance_id for m in members)
    head = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if with_instance else []) + ["HOST", "CLIENT-ID",
                                                                                          "#PARTITIONS"]
    rows = []
    for m in members:
        row = [group, m.member_id] + ([m.group_instance_id or ""] if with_instance else []) + [
            m.host, m.client_id, str(len(m.assignment))]
        if args.verbose:
            row += [str(m.member_epoch), _partitions_text(m.assignment), str(cg.assignment_epoch),
                    _partitions_text(m.target_assignment), member_state(m, cg),
                    ",".join(m.subscribed_topic_names) or (m.subscribed_topic_regex or MISSING)]
        rows.append(row)
    if args.verbose:
        head += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT", "MEMBER-STATE",
                 "SUBSCRIPTION"]
    widths = [max([15, len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(head)]
    fmt = " ".join(f"%-{w}s" for w in widths[:-1]) + " %s"
    sys.stdout.write("\n" + (fmt % tuple(head)).rstrip() + "\n")
    for r in rows:
        print((fmt % tuple(r)).rstrip())
    return 0


def _as_group_description(cg: ConsumerGroupDescription) -> GroupDescription:
    """A consumer-protocol group in the shape the offsets view reads (members' current assignments)."""
    return GroupDescription(cg.group_id, cg.state, "consumer", cg.assignor,
                            [MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.host,
                                               list(m.assignment)) for m in cg.members],
                            cg.coordinator, cg.error)


async def _describe_group(admin: Admin, args, group: str) -> int:
    cg = await _consumer_group(admin, group)
    if cg is not None and (args.state or args.members):
        return _describe_consumer_group(args, group, cg)
    desc = _as_group_description(cg) if cg is not None else (await admin.describe_groups([group]))[group]
    if desc.error.value:
        print(f"\nError: Executing consumer group command failed due to {desc.error.message}")
        return 1
    if args.state:
        if _state_banner(group, desc.state):
            coord = desc.coordinator
            c = f"{coord.host}:{coord.port}  ({coord.node_id})"
            w = max(25, len(c))
            fmt = f"\n%-{w}s %-25s %-20s %-15s %s"
            sys.stdout.write(fmt % ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"))
            sys.stdout.write(fmt % (group, c, desc.protocol, desc.state, len(desc.members)) + "\n")
        return 0
    if args.members:
        if not _state_banner(group, desc.state):
            return 0
        widths = [max([15, len(group)]), max([15] + [len(m.member_id) for m in desc.members]),
                  max([17] + [len(m.group_instance_id or "") for m in desc.members]),
                  max([15] + [len(m.host) for m in desc.members]), max([15] + [len(m.client_id) for m in desc.members])]
        with_instance = any(m.group_instance_id for m in desc.members)
        cols = [0, 1, 2, 3, 4] if with_instance else [0, 1, 3, 4]
        fmt = " ".join(f"%-{widths[i]}s" for i in cols) + " %-15s "
        head = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID"]
        sys.stdout.write("\n" + fmt % tuple([head[i] for i in cols] + ["#PARTITIONS"]))
        print("ASSIGNMENT" if args.verbose else "")
        for m in desc.members:
            row = [group, m.member_id, m.group_instance_id or "", m.host, m.client_id]
            line = fmt % tuple([row[i] for i in cols] + [len(m.assignment)])
            if args.verbose:
                per_topic: dict[str, list[int]] = {}
                for tp in m.assignment:
                    per_topic.setdefault(tp.topic, []).append(tp.partition)
                line += ", ".join(sorted(f"{t}({','.join(sorted(map(str, ps)))})" for t, ps in per_topic.items())) or MISSING
            print(line)
        return 0
    # default: offsets
    committed = await admin.list_group_offsets(group)
    rows = []
    assigned: set[TopicPartition] = set()
    members = sorted((m for m in desc.members if m.assignment), key=lambda m: -len(m.assignment))
    for m in members:
        for tp in sorted(m.assignment, key=lambda tp: tp.partition):
            rows.append((tp, m.member_id, m.host, m.client_id))
            assigned.add(tp)
    for tp in sorted(tp for tp in committed if tp not in assigned):
        rows.append((tp, MISSING, MISSING, MISSING))
    if not _state_banner(group, desc.state) or not rows:
        return 0
    ends = await admin.list_offsets({tp: LATEST for tp, *_ in rows}) if rows else {}
    wg = max([15, len(group)])
    wt = max([15] + [len(tp.topic) for tp, *_ in rows])
    wc = max([15] + [len(r[1]) for r in rows])
    wh = max([15] + [len(r[2]) for r in rows])
    fmt = f"\n%-{wg}s %-{wt}s %-10s %-15s %-15s %-15s %-{wc}s %-{wh}s %s"
    sys.stdout.write(fmt % ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                            "CONSUMER-ID", "HOST", "CLIENT-ID"))
    for tp, consumer_id, host, client_id in rows:
        om = committed.get(tp)
        end = ends.get(tp)
        end_offset = end[0] if isinstance(end, tuple) else None
        current = om.offset if om is not None else None
        lag = end_offset - current if current is not None and end_offset is not None else None
        sys.stdout.write(fmt % (group, tp.topic, tp.partition, MISSING if current is None else current,
                                MISSING if end_offset is None else end_offset, MISSING if lag is None else lag,
                                consumer_id, host, client_id))
    print()
    return 0


async def _reset_offsets(admin: Admin, args, groups: list[str]) -> int:
    status = 0
    result: dict[str, dict[TopicPartition, int]] = {}
    for group in groups:
        cg = await _consumer_group(admin, group)
        desc = _as_group_description(cg) if cg is not None else (await admin.describe_groups([group]))[group]
        if desc.state not in ("Empty", "Dead"):
            print(f"\nError: Assignments can only be reset if the group '{group}' is inactive, but the current "
                  f"state is {desc.state}.")
            result[group] = {}
            status = 1
            continue
        committed = await admin.list_group_offsets(group)
        partitions: list[TopicPartition] = []
        if args.all_topics:
            partitions = sorted(committed)
        else:
            for spec in args.topic:
                topic, _, parts = spec.partition(":")
                if parts:
                    partitions += [TopicPartition(topic, int(x)) for x in parts.split(",")]
                else:
                    described = await admin.describe_topics([topic])
                    info = described.get(topic)
                    if info is None or isinstance(info, Exception):
                        print(f"Error: Topic '{topic}' does not exist")
                        return 1
                    partitions += [TopicPartition(topic, p) for p in sorted(info.partitions)]
        earliest = await admin.list_offsets({tp: EARLIEST for tp in partitions})
        latest = await admin.list_offsets({tp: LATEST for tp in partitions})
        new: dict[TopicPartition, int] = {}
        for tp in partitions:
            lo, hi = earliest[tp][0], latest[tp][0]
            current = committed.get(tp).offset if committed.get(tp) is not None else None
            if args.to_earliest:
                target = lo
            elif args.to_latest:
                target = hi
            elif args.to_current:
                target = current if current is not None else hi
            elif args.to_offset is not None:
                target = args.to_offset
            else:
                target = (current if current is not None else hi) + args.shift_by
            if target < lo or target > hi:  # Kafka clamps to the log range (with a warning)
                print(f"\nWarn: New offset ({target}) is {'lower' if target < lo else 'higher'} than "
                      f"{'earliest' if target < lo else 'latest'} offset for topic partition. Value will be set to "
                      f"{lo if target < lo else hi}")
                target = min(max(target, lo), hi)
            new[tp] = target
        if args.execute and not args.dry_run:
            for tp, err in (await admin.alter_group_offsets(group, new)).items():
                if err is not None:
                    print(f"\nError: failed to reset {tp}: {err}")
                    status = 1
        result[group] = new
    fmt = "\n%-30s %-30s %-10s %-15s"
    if result:
        sys.stdout.write(fmt % ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"))
    for group, offsets in result.items():
        for tp, off in offsets.items():
            sys.stdout.write(fmt % (group, tp.topic, tp.partition, off))
    print()
    return status


# --- console producer / consumer ---------------------------------------------------------------------

def main_produce(argv: list[str] | None = None, stdin=None) -> int:
    p = argparse.ArgumentParser(prog="kgroup produce", description="Send stdin lines as records.")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--property", action="append", default=[], help="parse.key=true, key.separator=<sep>")
    p.add_argument("--producer-property", action="append", default=[])
    p.add_argument("--compression-codec", default=None)
    args = p.parse_args(argv)
    props = _kv(args.property)
    return _run(_produce(args, props, stdin or sys.stdin))


async def _produce(args, props, stdin) -> int:
    from .producer import Producer
    cfg = _kv(args.producer_property)
    if args.compression_codec:
        cfg["compression.type"] = args.compression_codec
    parse_key = props.get("parse.key", "false") == "true"
    sep = props.get("key.separator", "\t")
    async with Producer(config=cfg, bootstrap_servers=args.bootstrap_server) as producer:
        futures = []
        for line in stdin:
            line = line.rstrip("\n")
            key = None
            if parse_key:
                if sep not in line:
                    print(f"No key separator found on line: {line}", file=sys.stderr)
                    return 1
                key, line = line.split(sep, 1)
                key = key.encode()
            futures.append(await producer.send(args.topic, line.encode(), key=key))
        results = await asyncio.gather(*futures, return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        for r in failed[:5]:
            print(f"Error when sending message: {r}", file=sys.stderr)
        return 1 if failed else 0


def main_consume(argv: list[str] | None = None, stdout=None) -> int:
    p = argparse.ArgumentParser(prog="kgroup consume", description="Print records to stdout.")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--topic")
    p.add_argument("--include", help="regex of topics to consume")
    p.add_argument("--group")
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--partition", type=int)
    p.add_argument("--offset", default="latest", help="earliest, latest or a number (with --partition)")
    p.add_argument("--max-messages", type=int)
    p.add_argument("--timeout-ms", type=int, help="exit after this long without a record")
    p.add_argument("--property", action="append", default=[], help="print.key=true, key.separator=<sep>")
    p.add_argument("--consumer-property", action="append", default=[])
    p.add_argument("--progress", action="store_true",
                   help="report records consumed and the rate on stderr every second")
    args = p.parse_args(argv)
    if not (args.topic or args.include):
        p.error("one of --topic or --include is required")
    return _run(_consume(args, _kv(args.property), stdout or sys.stdout))


async def _consume_bulk(consumer, args, out, print_key: bool, sep: str, count: int) -> int:
    """One ``poll_batch``: every record's value (and key) written at once; returns the count."""
    polled = await consumer.poll_batch(500)
    n = 0
    for cols in polled.values():
        if args.max_messages is not None and n + len(cols) > args.max_messages - count:
            cols = cols.take(slice(0, args.max_messages - count - n))
        values = [b"null" if v is None else v for v in cols.values().to_pylist()]
        if print_key:
            keys = [b"null" if k is None else k for k in cols.keys().to_pylist()]
            lines = [k + sep.encode() + v for k, v in zip(keys, values)]
        else:
            lines = values
        if lines:
            out.write(b"\n".join(lines).decode(errors="replace") + "\n")
        n += len(cols)
    out.flush()
    return n


async def _consume(args, props, out) -> int:
    from .connection import now_ms
    from .consumer import Consumer
    cfg = _kv(args.consumer_property)
    cfg.setdefault("auto.offset.reset", "earliest" if args.from_beginning else "latest")
    if args.group:
        cfg["group.id"] = args.group
    print_key = props.get("print.key", "false") == "true"
    sep = props.get("key.separator", "\t")
    count = 0
    async with Consumer(config=cfg, bootstrap_servers=args.bootstrap_server) as consumer:
        if args.partition is not None:
            tp = TopicPartition(args.topic, args.partition)
            consumer.assign([tp])
            if args.offset == "earliest" or args.from_beginning:
                consumer.seek_to_beginning(tp)
            elif args.offset == "latest":
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, int(args.offset))
        elif args.group:
            consumer.subscribe(pattern=args.include) if args.include else consumer.subscribe([args.topic])
        else:  # like the Java console consumer without --group: a throwaway group would be used;
            # here: all partitions, manually assigned
            parts = await consumer.partitions_for(args.topic)
            consumer.assign([TopicPartition(args.topic, p) for p in sorted(parts or [])])
        last = started = reported = now_ms()
        try:
            while args.max_messages is None or count < args.max_messages:
                if args.progress:  # throughput mode: records decoded in bulk (record_columns), printed in bulk
                    n = await _consume_bulk(consumer, args, out, print_key, sep, count)
                    if n:
                        last = now_ms()
                        count += n
                    elif args.timeout_ms is not None and now_ms() - last >= args.timeout_ms:
                        break
                    if now_ms() - reported >= 1000:
                        reported = now_ms()
                        rate = count * 1000 / max(1, reported - started)
                        print(f"consumed {count} records ({rate:,.0f}/s)", file=sys.stderr, flush=True)
                    continue
                records = await consumer.poll(500, max_records=None if args.max_messages is None
                                              else args.max_messages - count)
                if records:
                    last = now_ms()
                elif args.timeout_ms is not None and now_ms() - last >= args.timeout_ms:
                    break
                for r in records:
                    value = "null" if r.value is None else bytes(r.value).decode(errors="replace")
                    if print_key:
                        key = "null" if r.key is None else bytes(r.key).decode(errors="replace")
                        out.write(f"{key}{sep}{value}\n")
                    else:
                        out.write(value + "\n")
                    count += 1
                out.flush()
                if args.progress and now_ms() - reported >= 1000:
                    reported = now_ms()
                    rate = count * 1000 / max(1, reported - started)
                    print(f"consumed {count} records ({rate:,.0f}/s)", file=sys.stderr, flush=True)
        except (KeyboardInterrupt, asyncio.CancelledError):
            pass
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


# --- kafka-configs ---------------------------------------------------------------------------------

_SOURCE_NAMES = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
                 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
                 8: "DYNAMIC_GROUP_CONFIG"}
GROUP_RESOURCE = 32


def _parse_add_config(text: str) -> dict[str, str]:
    """ConfigCommand's --add-config: k=v pairs split on commas outside square brackets; a
    bracketed value is a list (``cleanup.policy=[compact,delete]``)."""
    out, depth, cur = {}, 0, ""
    for ch in text + ",":
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            if cur.strip():
                k, sep, v = cur.partition("=")
                if not sep:
                    raise SystemExit(f"Invalid entity config: all configs to be added must be in the format "
                                     f"\"key=val\". Found: {cur}")
                v = v.strip()
                out[k.strip()] = v[1:-1] if v.startswith("[") and v.endswith("]") else v
            cur = ""
        else:
            cur += ch
    return out


def main_configs(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kgroup configs", description="Describe or alter topic and broker configs "
                                "(dynamic broker configs per broker or as the cluster default).")
    p.add_argument("--bootstrap-server")
    p.add_argument("--zookeeper", help="a cluster's ZooKeeper (host:port[/chroot]): only to alter a user's SCRAM "
                                       "credentials, e.g. the inter-broker user's before any broker runs")
    act = p.add_mutually_exclusive_group(required=True)
    act.add_argument("--describe", action="store_true")
    act.add_argument("--alter", action="store_true")
    p.add_argument("--entity-type", choices=["topics", "brokers", "groups", "users"])
    p.add_argument("--entity-name")
    p.add_argument("--entity-default", action="store_true")
    p.add_argument("--topic")
    p.add_argument("--group")
    p.add_argument("--broker")
    p.add_argument("--broker-defaults", action="store_true")
    p.add_argument("--add-config", action="append", default=[])
    p.add_argument("--delete-config", action="append", default=[])
    p.add_argument("--all", action="store_true", help="with --describe: every config, not only overrides")
    p.add_argument("--user")
    p.add_argument("--command-config", help="client properties (security.protocol, sasl.*, ssl.*)")
    args = p.parse_args(argv)
    if args.user:
        args.entity_type, args.entity_name = "users", args.user
    if args.topic:
        args.entity_type, args.entity_name = "topics", args.topic
    elif args.group:
        args.entity_type, args.entity_name = "groups", args.group
    elif args.broker is not None:
        args.entity_type, args.entity_name = "brokers", args.broker
    elif args.broker_defaults:
        args.entity_type, args.entity_default = "brokers", True
    if args.entity_type is None:
        p.error("--entity-type (or --topic / --broker / --broker-defaults) is required")
    if args.entity_type in ("topics", "groups") and not args.entity_name:
        p.error(f"--entity-name is required for {args.entity_type}")
    if args.entity_type == "brokers" and args.entity_name is None and not args.entity_default:
        p.error("--entity-name or --entity-default is required for brokers")
    if args.alter and not (args.add_config or args.delete_config):
        p.error("--alter needs --add-config and/or --delete-config")
    if (args.bootstrap_server is None) == (args.zookeeper is None):
        p.error("exactly one of --bootstrap-server and --zookeeper is required")
    if args.zookeeper is not None:
        if args.entity_type != "users" or not args.alter or not args.entity_name:
            p.error(f"--bootstrap-server option must be specified to {'update' if args.alter else 'describe'} "
                    f"{args.entity_type} configs (--zookeeper alters a user's SCRAM credentials only)")
        return _user_scram_with_zookeeper(args)
    if args.entity_type == "users":
        if args.alter and not args.entity_name:
            p.error("--entity-name is required to alter users")
        return _run(_user_configs(args))
    return _run(_configs(args))


def command_config(path: str | None) -> dict:
    """--command-config: a Java properties file of client settings (security.protocol, sasl.*, ssl.*)."""
    if not path:
        return {}
    from kgroup.broker.config import parse_properties
    return parse_properties(open(path).read())


def _user_scram_with_zookeeper(args) -> int:
    """kafka-configs.sh --zookeeper ... --alter --entity-type users: the SCRAM credentials salted here
    and written to /config/users/<user> with a change notification (ConfigCommand.alterConfigWithZk)."""
    from kazoo.exceptions import NoNodeError

    from kgroup.cluster.zk_client import KafkaZkClient
    from kgroup.cluster.zk_config_data import decode_entity_config, entity_path
    from kgroup.cluster.zk_config_store import alter_user_credentials
    from kgroup.security.scram import MECHANISMS, generate_credential
    changes: dict = {}
    for text in args.add_config:
        for mech, value in _parse_add_config(text).items():
            if mech not in MECHANISMS:
                print("--bootstrap-server option must be specified to update users configs. User configuration "
                      "updates using ZooKeeper are only supported for SCRAM credential updates.", file=sys.stderr)
                return 1
            fields = dict(x.split("=", 1) for x in value.split(",") if "=" in x)
            if "password" not in fields:
                print(f"Invalid credential config {mech}: password is required", file=sys.stderr)
                return 1
            iterations = int(fields.get("iterations", 4096))
            if iterations < MECHANISMS[mech].min_iterations:
                print(f"Iterations {iterations} is less than the minimum {MECHANISMS[mech].min_iterations} required "
                      f"for {mech}", file=sys.stderr)
                return 1
            changes[mech] = generate_credential(MECHANISMS[mech], fields["password"], iterations)
    deletions = [m.strip() for text in args.delete_config for m in text.split(",") if m.strip()]
    print("Warning: --zookeeper is deprecated and will be removed in a future version of Kafka.")
    print("Use --bootstrap-server instead to specify a broker to connect to.")
    zk = KafkaZkClient(args.zookeeper, 30000)
    zk.start()
    try:
        try:
            current = decode_entity_config(zk.zk.get(entity_path("users", args.entity_name))[0])
        except NoNodeError:
            current = {}
        missing = [m for m in deletions if m not in current]
        if missing:
            print(f"Invalid config(s): {','.join(missing)}", file=sys.stderr)
            return 1
        alter_user_credentials(zk.zk, args.entity_name, {**changes, **{m: None for m in deletions}})
    finally:
        zk.close()
    print(f"Completed updating config for entity: user-principal '{args.entity_name}'.")
    return 0


async def _user_configs(args) -> int:
    """kafka-configs.sh --entity-type users: SCRAM credentials (SCRAM-SHA-256/512=[iterations=N,password=P]),
    salted on the client, sent with AlterUserScramCredentials; --describe lists mechanisms and iterations."""
    from kgroup.security.scram import MECHANISMS
    async with Admin({"bootstrap.servers": args.bootstrap_server, **command_config(args.command_config)}) as admin:
        if args.alter:
            ups, dels = [], []
            for text in args.add_config:
                for mech, value in _parse_add_config(text).items():
                    if mech not in MECHANISMS:
                        raise SystemExit(f"Invalid config(s): {mech}")
                    fields = dict(x.split("=", 1) for x in value.split(",") if "=" in x)
                    if "password" not in fields:
                        raise SystemExit(f"Invalid credential config {mech}: password is required")
                    ups.append((args.entity_name, mech, int(fields.get("iterations", 4096)), fields["password"]))
            for text in args.delete_config:
                dels += [(args.entity_name, m.strip()) for m in text.split(",") if m.strip()]
            results = await admin.alter_user_scram_credentials(ups, dels)
            errors = [e for e in results.values() if e is not None]
            if errors:
                print(f"Error while executing config command: {errors[0]}", file=sys.stderr)
                return 1
            print(f"Completed updating config for user {args.entity_name}.")
            return 0
        got = await admin.describe_user_scram_credentials([args.entity_name] if args.entity_name else None)
        for user, infos in sorted(got.items()):
            if isinstance(infos, KafkaError):
                if infos.code != ErrorCode.RESOURCE_NOT_FOUND:
                    print(f"Error: {infos}", file=sys.stderr)
                    return 1
                continue
            creds = ",".join(f"{m}=iterations={i}" for m, i in infos)
            print(f"SCRAM credential configs for user-principal '{user}' are {creds}")
        return 0


async def _configs(args) -> int:
    rtype = {"topics": TOPIC_RESOURCE, "brokers": BROKER_RESOURCE, "groups": GROUP_RESOURCE}[args.entity_type]
    name = "" if args.entity_default else args.entity_name
    what = {TOPIC_RESOURCE: "topic " + name, GROUP_RESOURCE: "group " + name}.get(rtype) or (
        "default config for brokers in the cluster" if name == "" else "broker " + name)
    async with Admin({"bootstrap.servers": args.bootstrap_server, **command_config(args.command_config)}) as admin:
        if args.alter:
            ops = []
            for text in args.add_config:
                ops += [(k, SET, v) for k, v in _parse_add_config(text).items()]
            for text in args.delete_config:
                ops += [(k.strip(), DELETE, None) for k in text.split(",") if k.strip()]
            await admin.incremental_alter_configs(rtype, name, ops)
            print(f"Completed updating {'config for ' if name != '' or rtype != BROKER_RESOURCE else ''}{what}.")
            return 0
        configs = await admin.describe_configs(rtype, name or str((await admin.describe_cluster())["controller_id"]))
        if rtype == GROUP_RESOURCE:
            header = f"Dynamic configs for group {name} are:" if not args.all else f"All configs for group {name} are:"
            dynamic = {8}
        elif rtype == TOPIC_RESOURCE:
            header = f"Dynamic configs for topic {name} are:" if not args.all else f"All configs for topic {name} are:"
            dynamic = {1}
        elif name == "":
            header, dynamic = "Default configs for brokers in the cluster are:", {3}
        else:
            header = f"Dynamic configs for broker {name} are:" if not args.all else f"All configs for broker {name} are:"
            dynamic = {2}
        print(header)
        for key, c in sorted(configs.items()):
            layer = [v for n, v, src in c["synonyms"] if src in dynamic and n == key]
            if not args.all and not layer:
                continue
            value = "null" if c["is_sensitive"] else (layer[0] if layer and not args.all else c["value"])
            syn = ", ".join(f"{_SOURCE_NAMES.get(src, src)}:{n}={v}" for n, v, src in c["synonyms"])
            print(f"  {key}={value} sensitive={str(c['is_sensitive']).lower()} synonyms={{{syn}}}")
        return 0


# --- kafka-delete-records ----------------------------------------------------------------------------

def main_delete_records(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kgroup delete-records",
                                description="Delete records of partitions up to the given offsets.")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--offset-json-file", required=True,
                   help='{"partitions": [{"topic": "t", "partition": 0, "offset": 5}], "version": 1}; '
                        "offset -1 deletes up to the high watermark")
    args = p.parse_args(argv)
    import json
    try:
        doc = json.load(open(args.offset_json_file))
        wanted = {TopicPartition(e["topic"], int(e["partition"])): int(e["offset"]) for e in doc["partitions"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"Error: cannot read {args.offset_json_file}: {e}", file=sys.stderr)
        return 1
    if len(wanted) != len(doc["partitions"]):
        print("Error: Offset json file contains duplicate topic partitions", file=sys.stderr)
        return 1
    return _run(_delete_records(args, wanted))


async def _delete_records(args, wanted) -> int:
    async with Admin(bootstrap_servers=args.bootstrap_server) as admin:
        print("Executing records delete operation")
        results = await admin.delete_records(wanted)
        print("Records delete operation completed:")
        status = 0
        for tp in sorted(results, key=lambda t: (t.topic, t.partition)):
            r = results[tp]
            if isinstance(r, Exception):
                print(f"partition: {tp.topic}-{tp.partition}\terror: {r}")
                status = 1
            else:
                print(f"partition: {tp.topic}-{tp.partition}\tlow_watermark: {r}")
        return status


# --- kafka-features ----------------------------------------------------------------------------------

def main_features(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kgroup features", description="Describe or change the cluster's feature "
                                "levels (like kafka-features.sh).")
    p.add_argument("--bootstrap-server", required=True)
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("describe", help="supported and finalized feature levels")
    for name, what in (("upgrade", "raise feature levels"), ("downgrade", "lower feature levels")):
        q = sub.add_parser(name, help=what)
        q.add_argument("--feature", action="append", metavar="NAME=LEVEL", help="repeatable")
        q.add_argument("--release-version", help="metadata.version as a release, e.g. 4.3-IV0")
        q.add_argument("--dry-run", action="store_true")
        if name == "downgrade":
            q.add_argument("--unsafe", action="store_true")
    q = sub.add_parser("disable", help="set features to level 0")
    q.add_argument("--feature", action="append", metavar="NAME", help="repeatable")
    q.add_argument("--unsafe", action="store_true")
    q.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    return _run(_features(args))


def _level_text(feature: str, level: int) -> str:
    """FeatureCommand.levelToString: metadata.version by its release name."""
    from kgroup.broker.features import METADATA_VERSION, metadata_version_name
    if feature == METADATA_VERSION:
        return metadata_version_name(level) if level else "UNKNOWN 0"
    return str(level)


async def _features(args) -> int:
    from kgroup.broker.features import METADATA_VERSION, metadata_version_level
    async with Admin(bootstrap_servers=args.bootstrap_server) as admin:
        if args.command == "describe":
            fm = await admin.describe_features()
            for feature in sorted(fm.supported):
                lo, hi = fm.supported[feature]
                print(f"Feature: {feature:<40}  SupportedMinVersion: {_level_text(feature, lo):<15}  "
                      f"SupportedMaxVersion: {_level_text(feature, hi):<15}  "
                      f"FinalizedVersionLevel: {_level_text(feature, fm.finalized.get(feature, 0)):<15}  "
                      f"Epoch: {'-' if fm.epoch is None else fm.epoch}")
            return 0
        kind = 1 if args.command == "upgrade" else (3 if args.unsafe else 2)
        updates: dict[str, tuple[int, int]] = {}
        if getattr(args, "release_version", None):
            if args.feature:
                print("Can not specify `release-version` with other feature flags.", file=sys.stderr)
                return 1
            level = metadata_version_level(args.release_version)
            if level is None:
                print(f"Unknown metadata.version {args.release_version}.", file=sys.stderr)
                return 1
            updates[METADATA_VERSION] = (level, kind)
        for text in args.feature or []:
            if args.command == "disable":
                name, level = text.strip(), 0
            else:
                if "=" not in text:
                    print(f"Can't parse feature=level string {text}: equals sign not found.", file=sys.stderr)
                    return 1
                name, _, value = text.partition("=")
                name = name.strip()
                try:
                    level = int(value.strip())
                except ValueError:
                    print(f"Can't parse feature=level string {text}: unable to parse {value.strip()} as a short.",
                          file=sys.stderr)
                    return 1
            if name in updates:
                print(f"Feature {name} was specified more than once.", file=sys.stderr)
                return 1
            updates[name] = (level, kind)
        if not updates:
            print(f"You must specify at least one feature to {args.command}", file=sys.stderr)
            return 1
        try:
            await admin.update_features(updates, validate_only=args.dry_run)
            error = None
        except KafkaError as e:
            error = e
        for name in sorted(updates):
            level = updates[name][0]
            if error is not None:
                what = f"disable {name}" if args.command == "disable" else f"{args.command} {name} to {level}"
                print(f"{'Can not' if args.dry_run else 'Could not'} {what}. {error}")
            else:
                done = "disabled." if args.command == "disable" else f"{args.command}d to {level}."
                print(f"{name}{' can be ' if args.dry_run else ' was '}{done}")
        if error is not None:
            print(f"{len(updates)} out of {len(updates)} operation(s) failed.", file=sys.stderr)
            return 1
        return 0


# --- kafka-transactions ------------------------------------------------------------------------------

def _print_table(headers: list[str], rows: list[list[str]], out=None) -> None:
    """ToolsUtils.prettyPrintTable: columns padded to their widest value, each followed by a tab."""
    out = out or sys.stdout
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    for row in [headers] + rows:
        print("".join(v.ljust(w) + "\t" for v, w in zip(row, widths)), file=out)


def main_transactions(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kgroup transactions", description="List, describe, find hanging and abort "
                                "transactions (like kafka-transactions.sh).")
    p.add_argument("--bootstrap-server", required=True)
    sub = p.add_subparsers(dest="command", required=True)
    q = sub.add_parser("list", help="list transactions")
    q.add_argument("--duration-filter", type=int)
    q.add_argument("--transactional-id-pattern")
    q = sub.add_parser("describe", help="describe the state of an active transactional-id")
    q.add_argument("--transactional-id", required=True)
    q = sub.add_parser("find-hanging", help="find hanging transactions")
    q.add_argument("--broker-id", type=int)
    q.add_argument("--max-transaction-timeout", type=int, default=15,
                   help="maximum transaction timeout in minutes (15 by default)")
    q.add_argument("--topic")
    q.add_argument("--partition", type=int)
    q = sub.add_parser("abort", help="abort a hanging transaction")
    q.add_argument("--topic", required=True)
    q.add_argument("--partition", type=int, required=True)
    q.add_argument("--start-offset", type=int)
    q.add_argument("--producer-id", type=int)
    q.add_argument("--producer-epoch", type=int)
    q.add_argument("--coordinator-epoch", type=int)
    args = p.parse_args(argv)
    return _run(_transactions(args))


def _fail(message: str) -> int:
    print(message, file=sys.stderr)
    return 1


async def _transactions(args) -> int:
    from kgroup.clock import now_ms
    async with Admin(bootstrap_servers=args.bootstrap_server) as admin:
        if args.command == "list":
            try:
                by_broker = await admin.list_transactions(
                    duration_ms=-1 if args.duration_filter is None else args.duration_filter,
                    transactional_id_pattern=args.transactional_id_pattern)
            except KafkaError as e:
                return _fail(f"Failed to list transactions: {e}. Enable debug logging for additional detail.")
            rows = [[t.transactional_id, str(node), str(t.producer_id), t.state]
                    for node, listings in sorted(by_broker.items()) for t in listings]
            _print_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows)
            return 0
        if args.command == "describe":
            tid = args.transactional_id
            try:
                d = (await admin.describe_transactions([tid]))[tid]
            except KafkaError as e:
                return _fail(f"Failed to describe transaction state of transactional-id `{tid}`: {e}. "
                             "Enable debug logging for additional detail.")
            start = "None" if d.transaction_start_time_ms is None else str(d.transaction_start_time_ms)
            duration = "None" if d.transaction_start_time_ms is None else str(now_ms() - d.transaction_start_time_ms)
            _print_table(["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                          "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                          "TopicPartitions"],
                         [[str(d.coordinator_id), tid, str(d.producer_id), str(d.producer_epoch), d.state,
                           str(d.transaction_timeout_ms), start, duration,
                           ",".join(f"{tp.topic}-{tp.partition}" for tp in d.topic_partitions)]])
            return 0
        if args.command == "find-hanging":
            return await _find_hanging(admin, args)
        tp = TopicPartition(args.topic, args.partition)
        if args.start_offset is None and args.producer_id is None:
            return _fail("The transaction to abort must be identified either with --start-offset (for brokers on "
                         "3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older "
                         "brokers)")
        if args.start_offset is None:
            if args.producer_epoch is None:
                return _fail("Missing required argument --producer-epoch")
            if args.coordinator_epoch is None:
                return _fail("Missing required argument --coordinator-epoch")
            spec = (args.producer_id, args.producer_epoch, max(args.coordinator_epoch, 0))
        else:
            try:
                producers = (await admin.describe_producers([tp]))[tp]
            except KafkaError as e:
                return _fail(f"Failed to validate producer state for partition {tp.topic}-{tp.partition}: {e}. "
                             "Enable debug logging for additional detail.")
            found = [s for s in producers if s.current_transaction_start_offset == args.start_offset]
            if not found:
                return _fail(f"Could not find any open transactions starting at offset {args.start_offset} on "
                             f"partition {tp.topic}-{tp.partition}")
            s = found[0]
            spec = (s.producer_id, s.producer_epoch, s.coordinator_epoch or 0)
        try:
            await admin.abort_transaction(tp, *spec)
        except KafkaError as e:
            return _fail(f"Failed to abort transaction {tp.topic}-{tp.partition} producer {spec[0]}: {e}. "
                         "Enable debug logging for additional detail.")
        return 0


async def _find_hanging(admin: Admin, args) -> int:
    """FindHangingTransactionsCommand: the open transactions of the partitions searched (their
    producers' last write older than --max-transaction-timeout) that their coordinator does not
    know: no transactional id lists the producer, or its transaction does not hold the partition."""
    from kgroup.clock import now_ms
    if args.topic is None and args.broker_id is None:
        return _fail("The `find-hanging` command requires either --topic or --broker-id to limit the scope of "
                     "the search")
    if args.partition is not None and args.topic is None:
        return _fail("The --partition argument requires --topic to be provided")
    max_ms = args.max_transaction_timeout * 60_000
    if args.topic is not None and args.partition is not None:
        partitions = [TopicPartition(args.topic, args.partition)]
    else:
        topics = [args.topic] if args.topic is not None else await admin.list_topics(include_internal=True)
        described = await admin.describe_topics(topics)
        partitions = []
        for name in topics:
            info = described.get(name)
            if info is None or isinstance(info, Exception):
                return _fail(f"Failed to describe {len(topics)} topics: {info}. Enable debug logging for additional "
                             "detail.")
            partitions += [TopicPartition(name, p.partition) for p in sorted(info.partitions.values(),
                                                                              key=lambda p: p.partition)
                           if args.broker_id is None or args.broker_id in p.replicas]
    now = now_ms()
    candidates = []
    if partitions:
        try:
            producers = await admin.describe_producers(partitions)
        except KafkaError as e:
            return _fail(f"Failed to describe producers for {len(partitions)} partitions on broker {args.broker_id}: "
                         f"{e}. Enable debug logging for additional detail.")
        candidates = [(tp, s) for tp in partitions for s in producers.get(tp, [])
                      if s.current_transaction_start_offset is not None and now - s.last_timestamp > max_ms]
    hanging = []
    if candidates:
        pids = {s.producer_id for _, s in candidates}
        listed = await admin.list_transactions(producer_ids=pids)
        tids = {t.producer_id: t.transactional_id for ts in listed.values() for t in ts if t.producer_id in pids}
        descriptions = {}
        for tid in set(tids.values()):
            try:
                descriptions[tid] = (await admin.describe_transactions([tid]))[tid]
            except KafkaError as e:
                if e.code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                    raise
                descriptions[tid] = None
        for tp, s in candidates:
            d = descriptions.get(tids.get(s.producer_id))
            if d is None or tp not in d.topic_partitions:
                hanging.append((tp, s))
    _print_table(["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                  "LastTimestamp", "Duration(min)"],
                 [[tp.topic, str(tp.partition), str(s.producer_id), str(s.producer_epoch),
                   str(-1 if s.coordinator_epoch is None else s.coordinator_epoch),
                   str(s.current_transaction_start_offset), str(s.last_timestamp), str((now - s.last_timestamp) // 60000)]
                  for tp, s in hanging])
    return 0
