"""``kgroup reassign-partitions``: kafka-reassign-partitions.sh (Kafka 4.3's
ReassignPartitionsCommand) --generate / --execute / --verify / --cancel / --list with its JSON
formats and its messages, over AlterPartitionReassignments / ListPartitionReassignments,
Metadata and DescribeCluster.

kgroup has no replication quotas and one log directory per replica move is not offered: the
throttle options and non-"any" ``log_dirs`` are refused, and --verify / --cancel have no
throttles to clear (Kafka prints the throttles it clears)."""
from __future__ import annotations

import argparse
import asyncio
import json
import sys

from kgroup.protocol.errors import KafkaError

from .admin import Admin
from .assignors import TopicPartition

ANY_LOG_DIR = "any"
CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override this and "
    "create a new partition assignment in addition to the existing one. The --additional flag can also be used "
    "to change the throttle by resubmitting the current reassignment.")


class CommandError(Exception):
    """AdminCommandFailedException / TerseException: the message is printed, the exit code is 1."""


def _tp(tp) -> str:
    return f"{tp.topic}-{tp.partition}"


def _sorted(tps):
    return sorted(tps, key=lambda tp: (tp.topic, tp.partition))


def format_as_reassignment_json(parts: dict) -> str:
    """formatAsReassignmentJson: version 1, the partitions sorted, log_dirs "any"."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(parts[tp]),
         "log_dirs": [ANY_LOG_DIR] * len(parts[tp])} for tp in _sorted(parts)]}, separators=(",", ":"))


def _duplicates(items) -> set:
    seen, dups = set(), set()
    for i in items:
        (dups if i in seen else seen).add(i)
    return dups


def _version_1_json(text: str) -> dict:
    """The JSON documents the tool reads all carry "version": 1 (or none)."""
    try:
        doc = json.loads(text)
    except ValueError:
        raise CommandError("The input string is not a valid JSON") from None
    version = doc.get("version", 1)
    if version != 1:
        raise CommandError(f"Not supported version field value {version}")
    return doc


def parse_topics_data(text: str) -> list[str]:
    """parseTopicsData: {"version":1,"topics":[{"topic":"t"},...]}."""
    doc = _version_1_json(text)
    return [t["topic"] for t in doc.get("topics") or []]


def parse_partition_reassignment_data(text: str) -> list[tuple[TopicPartition, list[int]]]:
    """parsePartitionReassignmentData, with parseExecuteAssignmentArgs' checks."""
    doc = _version_1_json(text)
    out = []
    for e in doc.get("partitions") or []:
        tp = TopicPartition(e["topic"], int(e["partition"]))
        replicas = [int(r) for r in e["replicas"]]
        log_dirs = e.get("log_dirs") or [ANY_LOG_DIR] * len(replicas)
        if len(log_dirs) != len(replicas):
            raise CommandError(f"Size of replicas list {replicas} is different from size of log dirs list "
                               f"{log_dirs} for partition {_tp(tp)}")
        if any(d != ANY_LOG_DIR for d in log_dirs):
            raise CommandError("kgroup does not move replicas between log directories: log_dirs must be \"any\"")
        out.append((tp, replicas))
    return out


def _check_execute_args(parts) -> dict:
    if not parts:
        raise CommandError("Partition reassignment list cannot be empty")
    if any(not r for _, r in parts):
        raise CommandError("Partition replica list cannot be empty")
    dup_tps = _duplicates(tp for tp, _ in parts)
    if dup_tps:
        raise CommandError("Partition reassignment contains duplicate topic partitions: "
                           + ",".join(_tp(tp) for tp in _sorted(dup_tps)))
    dup_entries = [(tp, _duplicates(r)) for tp, r in parts if _duplicates(r)]
    if dup_entries:
        raise CommandError("Partition replica lists may not contain duplicate entries: " + ". ".join(
            f"{_tp(tp)} contains multiple entries for {','.join(map(str, sorted(d)))}" for tp, d in dup_entries))
    return dict(parts)


async def _current_parts(admin: Admin, topics) -> dict:
    described = await admin.describe_topics(sorted(set(topics)))
    out = {}
    for name in sorted(set(topics)):
        info = described.get(name)
        if info is None or isinstance(info, KafkaError):
            raise CommandError(f"org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Topic {name} not found.")
        for p, pi in info.partitions.items():
            out[TopicPartition(name, p)] = list(pi.replicas)
    return out


async def generate(admin: Admin, topics_json: str, broker_list: str, rack_aware: bool) -> None:
    from kgroup.cluster.replica_placement import assign_replicas_to_brokers
    brokers = [int(b) for b in broker_list.split(",")]
    dups = _duplicates(brokers)
    if dups:
        raise CommandError(f"Broker list contains duplicate entries: {sorted(dups)}")
    topics = parse_topics_data(topics_json)
    dups_t = _duplicates(topics)
    if dups_t:
        raise CommandError(f"List of topics to reassign contains duplicate entries: {sorted(dups_t)}")
    current = await _current_parts(admin, topics)
    nodes = {n.node_id: n.rack for n in (await admin.describe_cluster())["brokers"] if n.node_id in set(brokers)}
    racks = {b: (r if rack_aware else None) for b, r in nodes.items()}
    if rack_aware and any(r is None for r in racks.values()) and any(r is not None for r in racks.values()):
        raise CommandError("Not all brokers have rack information. Add --disable-rack-aware in command line to "
                           "make replica assignment without rack information.")
    proposed = {}
    for topic in dict.fromkeys(tp.topic for tp in _sorted(current)):
        parts = [tp for tp in current if tp.topic == topic]
        rf = len(current[TopicPartition(topic, 0)]) if TopicPartition(topic, 0) in current else len(current[parts[0]])
        try:
            placed = assign_replicas_to_brokers(racks, len(parts), rf)
        except KafkaError as e:
            raise CommandError(f"org.apache.kafka.common.errors.InvalidReplicationFactorException: {e}") from None
        for p, replicas in placed.items():
            proposed[TopicPartition(topic, p)] = replicas
    print(f"Current partition replica assignment\n{format_as_reassignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_as_reassignment_json(proposed)}")


async def execute(admin: Admin, reassignment_json: str, additional: bool, disallow_rf_change: bool) -> None:
    proposed = _check_execute_args(parse_partition_reassignment_data(reassignment_json))
    if not additional and await admin.list_partition_reassignments():
        raise CommandError(CANNOT_EXECUTE_BECAUSE_OF_EXISTING_MESSAGE)
    known = {n.node_id for n in (await admin.describe_cluster())["brokers"]}
    unknown = next((b for r in proposed.values() for b in r if b not in known), None)
    if unknown is not None:
        raise CommandError(f"Unknown broker id {unknown}")
    current = await _current_parts(admin, {tp.topic for tp in proposed})
    missing = [tp for tp in _sorted(proposed) if tp not in current]
    if missing:
        raise CommandError("org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Unable to find "
                           f"partition: {','.join(_tp(tp) for tp in missing)}")
    print("Current partition replica assignment\n\n"
          f"{format_as_reassignment_json({tp: current[tp] for tp in proposed})}\n\n"
          "Save this to use as the --reassignment-json-file option during rollback")
    results = await admin.alter_partition_reassignments(proposed, allow_replication_factor_change=not disallow_rf_change)
    errors = {tp: e for tp, e in results.items() if e is not None}
    if errors:
        raise CommandError("Error reassigning partition(s):\n" + "\n".join(
            f"{_tp(tp)}: {errors[tp]}" for tp in _sorted(errors)))
    print(f"Successfully started partition reassignment{'' if len(proposed) == 1 else 's'} for "
          + ",".join(_tp(tp) for tp in _sorted(proposed)))


async def verify(admin: Admin, reassignment_json: str) -> bool:
    """findPartitionReassignmentStates and partitionReassignmentStatesToString; True when none of
    the partitions is still being reassigned."""
    targets = parse_partition_reassignment_data(reassignment_json)
    ongoing = await admin.list_partition_reassignments([tp for tp, _ in targets])
    current = await _current_parts(admin, {tp.topic for tp, _ in targets})
    lines = ["Status of partition reassignment:"]
    for tp, target in sorted(targets, key=lambda e: (e[0].topic, e[0].partition)):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {_tp(tp)} is still in progress.")
        elif current.get(tp) == target:
            lines.append(f"Reassignment of partition {_tp(tp)} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {_tp(tp)}, but replica set is "
                         f"{','.join(map(str, current.get(tp, [])))} rather than {','.join(map(str, target))}.")
    print("\n".join(lines))
    return not ongoing


async def cancel(admin: Admin, reassignment_json: str) -> None:
    targets = parse_partition_reassignment_data(reassignment_json)
    ongoing = await admin.list_partition_reassignments([tp for tp, _ in targets])
    reassigning = [tp for tp, r in ongoing.items() if r["adding_replicas"] or r["removing_replicas"]]
    if reassigning:
        results = await admin.alter_partition_reassignments({tp: None for tp in reassigning})
        errors = {tp: e for tp, e in results.items() if e is not None}
        if errors:
            raise CommandError(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} for:\n"
                               + "\n".join(f"{_tp(tp)}: {errors[tp]}" for tp in _sorted(errors)))
        print(f"Successfully cancelled partition reassignment{'' if len(reassigning) == 1 else 's'} for: "
              + ",".join(_tp(tp) for tp in _sorted(reassigning)))
    else:
        print("None of the specified partition reassignments are active.")
    print("None of the specified partition moves are active.", end="")
    print()


async def list_reassignments(admin: Admin) -> None:
    """curReassignmentsToString."""
    ongoing = await admin.list_partition_reassignments()
    lines = []
    for tp in _sorted(ongoing):
        r = ongoing[tp]
        line = f"{_tp(tp)}: replicas: {','.join(map(str, r['replicas']))}."
        if r["adding_replicas"]:
            line += f" adding: {','.join(map(str, r['adding_replicas']))}."
        if r["removing_replicas"]:
            line += f" removing: {','.join(map(str, r['removing_replicas']))}."
        lines.append(line)
    print("Current partition reassignments:\n" + "\n".join(lines) if lines else "No partition reassignments found.")


def main_reassign_partitions(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kgroup reassign-partitions",
                                description="This tool helps to move topic partitions between replicas.")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--command-config", help="client properties (security.protocol, sasl.*, ssl.*)")
    for a in ("generate", "execute", "verify", "cancel", "list"):
        p.add_argument(f"--{a}", action="store_true")
    p.add_argument("--topics-to-move-json-file")
    p.add_argument("--reassignment-json-file")
    p.add_argument("--broker-list")
    p.add_argument("--disable-rack-aware", action="store_true")
    p.add_argument("--additional", action="store_true")
    p.add_argument("--disallow-replication-factor-change", action="store_true")
    p.add_argument("--preserve-throttles", action="store_true")
    p.add_argument("--throttle", type=int, default=-1)
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, default=-1)
    p.add_argument("--timeout", type=int, default=10000)
    args = p.parse_args(argv)
    actions = [a for a in ("generate", "execute", "verify", "cancel", "list") if getattr(args, a)]
    if len(actions) != 1:
        p.error("Command must include exactly one action: --generate, --execute, --verify, --cancel, --list")
    action = actions[0]
    if action == "generate" and not (args.topics_to_move_json_file and args.broker_list):
        p.error("Missing required argument \"[topics-to-move-json-file]\"" if not args.topics_to_move_json_file
                else "Missing required argument \"[broker-list]\"")
    if action in ("execute", "verify", "cancel") and not args.reassignment_json_file:
        p.error("Missing required argument \"[reassignment-json-file]\"")
    if args.throttle >= 0 or args.replica_alter_log_dirs_throttle >= 0:
        print("kgroup has no replication quotas: --throttle and --replica-alter-log-dirs-throttle are not supported",
              file=sys.stderr)
        return 1
    return asyncio.run(_run(args, action))


async def _run(args, action: str) -> int:
    from .cli import command_config

    def read(path):
        with open(path) as f:
            return f.read()
    async with Admin({"bootstrap.servers": args.bootstrap_server, **command_config(args.command_config)}) as admin:
        try:
            if action == "generate":
                await generate(admin, read(args.topics_to_move_json_file), args.broker_list, not args.disable_rack_aware)
            elif action == "execute":
                await execute(admin, read(args.reassignment_json_file), args.additional,
                              args.disallow_replication_factor_change)
            elif action == "verify":
                await verify(admin, read(args.reassignment_json_file))
            elif action == "cancel":
                await cancel(admin, read(args.reassignment_json_file))
            else:
                await list_reassignments(admin)
        except CommandError as e:
            print(e)
            return 1
        except KafkaError as e:
            print(f"Error: {e}")
            return 1
    return 0
