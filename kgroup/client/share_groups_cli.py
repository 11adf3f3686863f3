"""``kgroup share-groups``: Kafka 4.3's kafka-share-groups.sh (ShareGroupCommand), its options,
checks, messages and column layouts, over our Admin (``kgroup.client.admin``):

    --list [--state [STATES]]
    --describe (--group G ... | --all-groups) [--members | --state | --offsets] [--verbose]
    --reset-offsets --group G (--topic T[:P,...] ... | --all-topics)
                    (--to-earliest | --to-latest | --to-datetime DT | --to-offset N | --by-duration D)
                    (--dry-run | --execute)
    --delete (--group G ... | --all-groups)
    --delete-offsets --group G --topic T ...

``--to-offset`` and ``--by-duration`` are kafka-consumer-groups.sh's scenarios (Kafka's
OffsetsUtils, a new offset outside the log clamped to it), which Kafka 4.3's share tool does not
offer; the others are the share tool's own. Takes ``argv`` without the program name and returns
the exit status: 1 when anything failed (Kafka's tool prints the same error and exits 0, except for
usage errors), as ``kgroup groups`` does.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import re
import sys

from kgroup.protocol.errors import ErrorCode

from .admin import EARLIEST, LATEST, Admin, ShareGroupDescription
from .assignors import TopicPartition
from .errors import KafkaError

MISSING = "-"
SHARE_STATES = ("Empty", "Stable", "Dead")
# the Java exception of an error, as ExecutionException.getMessage prints it
_EXCEPTIONS = {ErrorCode.GROUP_ID_NOT_FOUND: "GroupIdNotFoundException",
               ErrorCode.GROUP_AUTHORIZATION_FAILED: "GroupAuthorizationException",
               ErrorCode.NON_EMPTY_GROUP: "GroupNotEmptyException",
               ErrorCode.INVALID_GROUP_ID: "InvalidGroupIdException",
               ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "UnknownTopicOrPartitionException",
               ErrorCode.TOPIC_AUTHORIZATION_FAILED: "TopicAuthorizationException",
               ErrorCode.UNSUPPORTED_VERSION: "UnsupportedVersionException",
               ErrorCode.COORDINATOR_NOT_AVAILABLE: "CoordinatorNotAvailableException",
               ErrorCode.NOT_COORDINATOR: "NotCoordinatorException",
               ErrorCode.UNKNOWN_SERVER_ERROR: "UnknownServerException"}


def _java(e: KafkaError) -> str:
    """``org.apache.kafka.common.errors.X: message``, as Java's Throwable.toString."""
    name = _EXCEPTIONS.get(e.code, "ApiException")
    return f"org.apache.kafka.common.errors.{name}: {e}"


class _Usage(Exception):
    """CommandLineUtils.printUsageAndExit: the message, then the usage, on stderr; exit 1."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kgroup share-groups", add_help=True,
                                description="This tool helps to list, describe, reset and delete share groups.")
    p.add_argument("--bootstrap-server", help="REQUIRED: The server(s) to connect to.")
    p.add_argument("--group", action="append", default=[], help="The share group we wish to act on.")
    p.add_argument("--topic", action="append", default=[],
                   help="The topic whose offset information should be deleted or included in the reset offset "
                        "process ('topic1:0,1,2' names partitions).")
    p.add_argument("--all-topics", action="store_true")
    p.add_argument("--list", action="store_true", help="List all share groups.")
    p.add_argument("--describe", action="store_true", help="Describe share group, members and offset information.")
    p.add_argument("--all-groups", action="store_true", help="Apply to all share groups.")
    p.add_argument("--delete", action="store_true", help="Delete share group.")
    p.add_argument("--timeout", type=int, default=30000)
    p.add_argument("--command-config", help="Property file containing configs to be passed to Admin Client.")
    p.add_argument("--reset-offsets", action="store_true", help="Reset offsets of share group.")
    p.add_argument("--delete-offsets", action="store_true", help="Delete offsets of share group.")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--execute", action="store_true")
    p.add_argument("--to-datetime", help="Reset offsets to offset from datetime. Format: 'YYYY-MM-DDThh:mm:ss.sss'")
    p.add_argument("--to-earliest", action="store_true")
    p.add_argument("--to-latest", action="store_true")
    p.add_argument("--to-offset", type=int, help="Reset offsets to a specific offset (kafka-consumer-groups.sh's).")
    p.add_argument("--by-duration", help="Reset offsets to offset by duration from current timestamp, "
                                         "format 'PnDTnHnMnS' (kafka-consumer-groups.sh's).")
    p.add_argument("--members", action="store_true")
    p.add_argument("--offsets", action="store_true")
    p.add_argument("--state", nargs="?", const="", default=None)
    p.add_argument("--verbose", action="store_true")
    return p


_SCENARIOS = ("to_datetime", "to_earliest", "to_latest", "to_offset", "by_duration")


def _given(args, name: str) -> bool:
    v = getattr(args, name)
    return v not in (None, False, [])


def check_args(args) -> None:
    """ShareGroupCommandOptions.checkArgs, then the one-action rule of ShareGroupCommand.main."""
    def opt(*names):
        return ", ".join(f"[{n}]" for n in sorted(names))
    for name, allowed in (("members", ("describe",)), ("offsets", ("describe",)), ("verbose", ("describe",)),
                          ("state", ("describe", "list"))):
        if _given(args, name) and not any(getattr(args, a) for a in allowed):
            raise _Usage(f"Option(s) [{name}] are unavailable given other options on the command line")
    if not args.bootstrap_server:
        raise _Usage('Missing required argument "[bootstrap-server]"')
    if args.describe:
        if not args.group and not args.all_groups:
            raise _Usage(f"Option [describe] takes one of these options: {opt('all-groups', 'group')}")
        if sum(1 for n in ("members", "offsets", "state") if _given(args, n)) > 1:
            raise _Usage(f"Option [describe] takes at most one of these options: {opt('members', 'offsets', 'state')}")
        if args.state:
            raise _Usage("Option [describe] does not take a value for [state]")
    if args.delete:
        if not args.group and not args.all_groups:
            raise _Usage("Option [delete] takes the options [group] or [all-groups]")
        if args.all_groups and args.group:
            raise _Usage("Option [delete] takes either [group] or [all-groups], not both.")
        if args.topic:
            raise _Usage("Option [delete] does not take the option: [topic]")
    if args.delete_offsets and (not args.group or not args.topic):
        raise _Usage(f"Option [delete-offsets] takes the following options: {opt('group', 'topic')}")
    if args.reset_offsets:
        if args.dry_run and args.execute:
            raise _Usage("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if not args.dry_run and not args.execute:
            raise _Usage("Option [reset-offsets] takes the option: [execute] or [dry-run]")
        if not args.group:
            raise _Usage("Option [reset-offsets] takes the option: [group]")
        if not args.topic and not args.all_topics:
            raise _Usage(f"Option [reset-offsets] takes one of these options: {opt('all-topics', 'topic')}")
        scenarios = [n for n in _SCENARIOS if _given(args, n)]
        if not scenarios:
            raise _Usage("Option [reset-offsets] takes one of these options: "
                         + opt(*(n.replace("_", "-") for n in _SCENARIOS)))
        if len(scenarios) > 1:
            raise _Usage(f'Option "[{scenarios[0].replace("_", "-")}]" can\'t be used with option '
                         f'"[{scenarios[1].replace("_", "-")}]"')
    if args.group and args.all_groups:
        raise _Usage('Option "[group]" can\'t be used with option "[all-groups]"')
    if args.group and args.list:
        raise _Usage('Option "[group]" can\'t be used with option "[list]"')
    if args.topic and (args.list or args.describe):
        raise _Usage(f'Option "[topic]" can\'t be used with option "[{"list" if args.list else "describe"}]"')
    actions = [a for a in ("list", "describe", "delete", "reset_offsets", "delete_offsets") if getattr(args, a)]
    if len(actions) != 1:
        raise _Usage("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
                     "--delete-offsets.")


def main_share_groups(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(argv)
    try:
        check_args(args)
        if args.list and args.state:
            _states(args.state)
    except _Usage as e:
        print(e, file=sys.stderr)
        p.print_usage(sys.stderr)
        return 1
    try:
        return asyncio.run(_run(args))
    except _Usage as e:
        print(e, file=sys.stderr)
        p.print_usage(sys.stderr)
        return 1
    except _Exit as e:
        print(e, file=sys.stderr)
        return 1
    except (KafkaError, ConnectionError, TimeoutError, OSError) as e:
        print(f"\nError: Executing share group command failed due to "
              f"{_java(e) if isinstance(e, KafkaError) else e}")
        return 1


class _Exit(Exception):
    """CommandLineUtils.printErrorAndExit: the message on stderr; exit 1."""


def _states(text: str) -> list[str]:
    """ShareGroupCommand.groupStatesFromString (GroupState.parse: case-insensitive)."""
    wanted = []
    for s in text.split(","):
        name = next((x for x in SHARE_STATES if x.lower() == s.strip().lower()), None)
        if name is None:
            raise _Usage(f"Invalid state list '{text}'. Valid states are: {', '.join(SHARE_STATES)}")
        wanted.append(name)
    return wanted


def _admin_config(args) -> dict:
    config = {"bootstrap.servers": args.bootstrap_server, "default.api.timeout.ms": args.timeout}
    if args.command_config:
        from .cli import command_config
        config.update(command_config(args.command_config))
    return config


async def _run(args) -> int:
    async with Admin(_admin_config(args)) as admin:
        if args.list:
            return await _list(admin, args)
        if args.describe:
            return await _describe(admin, args)
        if args.delete:
            return await _delete(admin, args)
        if args.reset_offsets:
            return await _reset_offsets(admin, args)
        return await _delete_offsets(admin, args)


# -- --list ------------------------------------------------------------------------------------------

async def _list(admin: Admin, args) -> int:
    if args.state is None:
        for g in await admin.list_share_groups():
            print(g.group_id)
        return 0
    listings = await admin.list_share_groups(_states(args.state) if args.state else None)
    w = max([15] + [len(g.group_id) for g in listings])
    print(f"%-{w}s %s" % ("GROUP", "STATE"))
    for g in listings:
        print(f"%-{w}s %s" % (g.group_id, g.state or "Unknown"))
    return 0


# -- --describe ----------------------------------------------------------------------------------------

async def _group_ids(admin: Admin, args) -> list[str]:
    return [g.group_id for g in await admin.list_share_groups()] if args.all_groups else list(args.group)


async def _described(admin: Admin, group_ids) -> dict[str, ShareGroupDescription]:
    """describeShareGroups: a group that is missing (or not a share group) fails the command."""
    out = await admin.describe_share_groups(group_ids)
    for d in out.values():
        if d.error:
            raise KafkaError(d.error, d.error_message)
    return dict(sorted(out.items()))


def _empty_group_state(group: str, state: str, rows: int) -> bool:
    """ShareGroupService.maybePrintEmptyGroupState: whether the group's details follow."""
    if state == "Dead":
        print(f"\nError: Share group '{group}' does not exist.")
    elif state == "Empty":
        print(f"\nShare group '{group}' has no active members.", file=sys.stderr)
    return state != "Dead" and rows > 0


async def _describe(admin: Admin, args) -> int:
    described = await _described(admin, await _group_ids(admin, args))
    if args.members:
        _print_members(described, args.verbose)
    elif args.state is not None:
        _print_states(described, args.verbose)
    else:
        offsets = {g: await admin.list_share_group_offsets(g) for g in described}
        _print_offsets(offsets, args.verbose)
    return 0


def _print_offsets(offsets: dict, verbose: bool) -> None:
    for group, by_tp in offsets.items():
        rows = sorted(by_tp.items(), key=lambda kv: (kv[0].topic, kv[0].partition))
        if not rows:
            print(f"\nShare group '{group}' has no offset information.")
            continue
        wg = max(15, len(group))
        wt = max([15] + [len(tp.topic) for tp, _ in rows])
        if verbose:
            fmt = f"\n%-{wg}s %-{wt}s %-10s %-13s %-13s %s"
            sys.stdout.write(fmt % ("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"))
        else:
            fmt = f"\n%-{wg}s %-{wt}s %-10s %-13s %s"
            sys.stdout.write(fmt % ("GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"))
        for tp, info in rows:
            start = MISSING if info is None else str(info.start_offset)
            epoch = MISSING if info is None or info.leader_epoch is None else str(info.leader_epoch)
            lag = MISSING if info is None or info.lag is None else str(info.lag)
            if verbose:
                sys.stdout.write(fmt % (group, tp.topic, tp.partition, epoch, start, lag))
            else:
                sys.stdout.write(fmt % (group, tp.topic, tp.partition, start, lag))
        print()


def _print_states(described: dict, verbose: bool) -> None:
    for group, d in described.items():
        _empty_group_state(group, d.state, 1)
        wg = max(15, len(group))
        c = d.coordinator
        coordinator = f"{c.host}:{c.port}  ({c.node_id})"
        wc = max(25, len(coordinator))
        if verbose:
            fmt = f"\n%-{wg}s %-{wc}s %-15s %-12s %-17s %s"
            sys.stdout.write(fmt % ("GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"))
            sys.stdout.write(fmt % (group, coordinator, d.state, d.group_epoch, d.assignment_epoch, len(d.members)))
        else:
            fmt = f"\n%-{wg}s %-{wc}s %-15s %s"
            sys.stdout.write(fmt % ("GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"))
            sys.stdout.write(fmt % (group, coordinator, d.state, len(d.members)))
        print()


def _assignment_text(assignment) -> str:
    """ShareGroupService.getAssignmentString: ``topic:p,p;topic:p`` sorted."""
    per_topic: dict[str, list[int]] = {}
    for tp in assignment:
        per_topic.setdefault(tp.topic, []).append(tp.partition)
    return ";".join(sorted(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in per_topic.items()))


def _print_members(described: dict, verbose: bool) -> None:
    for group, d in described.items():
        members = sorted(d.members, key=lambda m: m.member_id)
        if not _empty_group_state(group, d.state, len(d.members)):
            continue
        wg = max(15, len(group))
        wm = max([15] + [len(m.member_id) for m in members])
        wh = max([15] + [len(m.host) for m in members])
        wc = max([15] + [len(m.client_id) for m in members])
        if verbose:
            fmt = f"\n%-{wg}s %-{wm}s %-{wh}s %-{wc}s %-12s %-13s %s"
            sys.stdout.write(fmt % ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH",
                                    "ASSIGNMENT"))
            for m in members:
                sys.stdout.write(fmt % (group, m.member_id, m.host, m.client_id, len(m.assignment), m.member_epoch,
                                        _assignment_text(m.assignment)))
        else:
            fmt = f"\n%-{wg}s %-{wm}s %-{wh}s %-{wc}s %-12s %s"
            sys.stdout.write(fmt % ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"))
            for m in members:
                sys.stdout.write(fmt % (group, m.member_id, m.host, m.client_id, len(m.assignment),
                                        _assignment_text(m.assignment)))
        print()


# -- --delete ------------------------------------------------------------------------------------------

async def _delete(admin: Admin, args) -> int:
    """ShareGroupService.deleteShareGroups: groups that are not share groups, Dead or not Empty
    fail before any request; the rest go to DeleteGroups."""
    listed = {g.group_id: g for g in await admin.list_share_groups()}
    group_ids = list(listed) if args.all_groups else list(dict.fromkeys(args.group))
    failed: dict[str, str] = {}
    for g in group_ids:
        listing = listed.get(g)
        if listing is None:
            failed[g] = f"java.lang.IllegalArgumentException: Group '{g}' is not a share group."
        elif listing.state == "Dead":
            failed[g] = f"java.lang.IllegalStateException: Share group '{g}' group state is DEAD."
        elif listing.state is not None and listing.state != "Empty":
            failed[g] = f"org.apache.kafka.common.errors.GroupNotEmptyException: Share group '{g}' is not EMPTY."
    to_delete = [g for g in group_ids if g not in failed]
    success = []
    if to_delete:
        for g, e in (await admin.delete_share_groups(to_delete)).items():
            if e is None:
                success.append(g)
            else:
                failed[g] = _java(e)
    if not failed:
        print("Deletion of requested share groups (" + ", ".join(f"'{g}'" for g in success) + ") was successful.")
        return 0
    print("\nError: Deletion of some share groups failed:")
    for g, e in failed.items():
        print(f"* Group '{g}' could not be deleted due to: {e}")
    if success:
        print("\nThese share groups were deleted successfully: " + ", ".join(f"'{g}'" for g in success))
    return 1


# -- --delete-offsets ----------------------------------------------------------------------------------

async def _delete_offsets(admin: Admin, args) -> int:
    """ShareGroupService.deleteOffsets: the first error (the group's, else the first failed
    topic's), printed when it is a group-level kind, then TOPIC / STATUS per topic."""
    group = args.group[0]
    topics = list(dict.fromkeys(args.topic))
    per_topic: dict[str, str | None] = {}
    top: KafkaError | str | None = None
    try:
        results = await admin.delete_share_group_offsets(group, topics)
    except KafkaError as e:
        top = e
        per_topic = {t: str(e) for t in topics}
    else:
        for t in topics:
            if t not in results:       # Java's DeleteShareGroupOffsetsResult: an IllegalArgumentException
                per_topic[t] = f'Offset deletion result for topic "{t}" was not included in the response'
                top = top or f"java.lang.IllegalArgumentException: {per_topic[t]}"
            else:
                per_topic[t] = None if results[t] is None else str(results[t])
                top = top or results[t]
    if isinstance(top, KafkaError):
        if top.code in (ErrorCode.INVALID_GROUP_ID, ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                        ErrorCode.NON_EMPTY_GROUP):
            print(f"\nError: {top}")
        elif top.code not in (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            print(f"\nError: Encounter some unknown error: {_java(top)}")
    elif top is not None:
        print(f"\nError: Encounter some unknown error: {top}")
    if per_topic:
        w = max([15] + [len(t) for t in per_topic])
        fmt = f"\n%-{w}s %s"
        sys.stdout.write(fmt % ("TOPIC", "STATUS"))
        for t, e in sorted(per_topic.items()):
            sys.stdout.write(fmt % (t, "Successful" if e is None else f"Error: {e}"))
    print()
    return 0 if top is None else 1


# -- --reset-offsets -----------------------------------------------------------------------------------

async def _reset_offsets(admin: Admin, args) -> int:
    """ShareGroupService.resetOffsets: only for an empty (or missing) group."""
    group = args.group[0]
    d = (await admin.describe_share_groups([group]))[group]
    if d.error == ErrorCode.GROUP_ID_NOT_FOUND:
        pass                        # a missing group is created by the alter
    elif d.error:
        raise _Exit(str(KafkaError(d.error, d.error_message)))
    elif d.state not in ("Empty", "Dead"):
        raise _Exit(f"Share group '{group}' is not empty.")
    if args.topic:
        partitions = await _parse_topic_partitions(admin, args.topic)
    else:
        partitions = list(await admin.list_share_group_offsets(group))
    await _check_partitions(admin, partitions)
    new = await _prepare_offsets(admin, args, partitions)
    if args.execute and not args.dry_run:
        results = await admin.alter_share_group_offsets(group, new)
        failed = next((e for e in results.values() if e is not None), None)
        if failed is not None:
            raise failed
    _print_offsets_to_reset({group: new})
    return 0


async def _parse_topic_partitions(admin: Admin, topic_args) -> list[TopicPartition]:
    """OffsetsUtils.parseTopicPartitionsToReset: ``topic:0,1`` names partitions, ``topic`` all."""
    named, whole = [], []
    for arg in topic_args:
        if ":" in arg:
            parts = arg.split(":")
            if len(parts) != 2:
                raise _Usage(f"Invalid topic arg '{arg}', expected topic name and partitions")
            for p in parts[1].split(","):
                try:
                    named.append(TopicPartition(parts[0], int(p)))
                except ValueError:
                    raise _Usage(f"Invalid partition '{p}' specified in topic arg '{arg}''") from None
        else:
            whole.append(arg)
    if whole:
        described = await admin.describe_topics(whole)
        for t in whole:
            info = described.get(t)
            if info is None or isinstance(info, Exception):
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
            named += [TopicPartition(t, p) for p in sorted(info.partitions)]
    return named


async def _check_partitions(admin: Admin, partitions) -> None:
    """OffsetsUtils.checkAllTopicPartitionsValid: every partition exists."""
    topics = sorted({tp.topic for tp in partitions})
    described = await admin.describe_topics(topics) if topics else {}
    missing = [tp for tp in partitions if isinstance(described.get(tp.topic), Exception)
               or described.get(tp.topic) is None or tp.partition not in described[tp.topic].partitions]
    if missing:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         'The partitions "' + ",".join(f"{tp.topic}-{tp.partition}" for tp in missing)
                         + '" do not exist')


def _parse_datetime(text: str) -> int:
    """Kafka's Utils.getDateTime: ``yyyy-MM-ddTHH:mm:ss[.SSS]`` with an optional zone (Z, +hh:mm),
    local time without one; epoch milliseconds."""
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(\.\d{1,3})?(Z|[+-]\d{2}:?\d{2})?", text)
    if m is None:
        raise _Usage(f"Unparseable date: \"{text}\"")
    when = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")
    ms = int((m.group(2) or ".0")[1:].ljust(3, "0"))
    zone = m.group(3)
    if zone:
        tz = datetime.timezone.utc if zone == "Z" else datetime.timezone(
            (1 if zone[0] == "+" else -1) * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[-2:])))
        when = when.replace(tzinfo=tz)
    else:
        when = when.astimezone()
    return int(when.timestamp()) * 1000 + ms


def _parse_duration(text: str) -> int:
    """java.time.Duration.parse (PnDTnHnMn.nS) in milliseconds."""
    m = re.fullmatch(r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
                     text, re.IGNORECASE)
    if m is None or text.upper().endswith("T") or not any(m.group(i) for i in range(2, 6)):
        raise _Usage(f"Text cannot be parsed to a Duration: {text}")
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in range(2, 6))
    ms = ((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000 + int((m.group(6) or "0").ljust(3, "0")[:3])
    return -ms if m.group(1) == "-" else ms


async def _prepare_offsets(admin: Admin, args, partitions) -> dict[TopicPartition, int]:
    if not partitions:
        return {}
    if args.to_earliest or args.to_latest:
        got = await admin.list_offsets({tp: EARLIEST if args.to_earliest else LATEST for tp in partitions})
        return {tp: got[tp][0] for tp in partitions}
    if args.to_datetime is not None or args.by_duration is not None:
        from kgroup.clock import now_ms
        ts = _parse_datetime(args.to_datetime) if args.to_datetime is not None else now_ms() - _parse_duration(
            args.by_duration)
        got = await admin.list_offsets({tp: ts for tp in partitions})
        out, empty = {}, []
        for tp in partitions:
            r = got.get(tp)
            if isinstance(r, tuple) and r[0] >= 0:
                out[tp] = r[0]
            else:
                print(f"\nWarn: Partition {tp.partition} from topic {tp.topic} is empty. Falling back to latest "
                      "known offset.")
                empty.append(tp)
        if empty:
            latest = await admin.list_offsets({tp: LATEST for tp in empty})
            out.update({tp: latest[tp][0] for tp in empty})
        return {tp: out[tp] for tp in partitions}
    # --to-offset: OffsetsUtils.checkOffsetsRange clamps into [log start, log end]
    lo = await admin.list_offsets({tp: EARLIEST for tp in partitions})
    hi = await admin.list_offsets({tp: LATEST for tp in partitions})
    out = {}
    for tp in partitions:
        target = args.to_offset
        if target > hi[tp][0]:
            print(f"New offset ({target}) is higher than latest offset for topic partition {tp.topic}-{tp.partition}. "
                  f"Value will be set to {hi[tp][0]}", file=sys.stderr)
            target = hi[tp][0]
        elif target < lo[tp][0]:
            print(f"New offset ({target}) is lower than earliest offset for topic partition {tp.topic}-{tp.partition}. "
                  f"Value will be set to {lo[tp][0]}", file=sys.stderr)
            target = lo[tp][0]
        out[tp] = target
    return out


def _print_offsets_to_reset(plan: dict[str, dict[TopicPartition, int]]) -> None:
    """OffsetsUtils.printOffsetsToReset."""
    wg = max([15] + [len(g) for g in plan])
    wt = max([15] + [len(tp.topic) for offsets in plan.values() for tp in offsets])
    fmt = f"\n%-{wg}s %-{wt}s %-10s %s"
    if plan:
        sys.stdout.write(fmt % ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"))
    for group, offsets in plan.items():
        for tp, offset in offsets.items():
            sys.stdout.write(fmt % (group, tp.topic, tp.partition, offset))
    print()
