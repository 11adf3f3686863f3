"""A new target assignment and its records (Kafka's TargetAssignmentBuilder), pure.

The handler computes it from the group as replayed so far plus the members this request changes
(``updated``: member id -> new member, or None for a member being removed), before any of its
records are replayed. A static member that rejoins under a new member id starts from the target of
the member id its instance id had, so it gets its partitions back. Records: the target of every
member whose target changed (in the order of Kafka's HashMap of member specs), then the assignment
epoch, set to the group epoch the target was computed for.
"""
from __future__ import annotations

from typing import Mapping

from ...java_compat import int_hash_set_copy_order, string_map_order, uuid_map_order
from ..assignor import ASSIGNORS, GroupSpec, MemberSpec
from ..coordinator_records import CoordinatorRecord
from . import consumer_group_records as rec
from ..topic_metadata import TopicMetadata
from .group import ConsumerGroup, ResolvedRegex, compute_subscription_type
from .member import ConsumerGroupMember, freeze


def build_target_assignment(group: ConsumerGroup, group_epoch: int, assignor: str,
                            topics_by_name: Mapping[str, TopicMetadata],
                            updated: Mapping[str, ConsumerGroupMember | None] | None = None,
                            resolved_regexes: Mapping[str, ResolvedRegex] | None = None,
                            ) -> tuple[list[CoordinatorRecord], dict[str, dict[bytes, frozenset]]]:
    """``resolved_regexes``: the regex resolutions to use (the group's unless this request
    resolved them again)."""
    updated = updated or {}
    if resolved_regexes is None:
        resolved_regexes = group.resolved_regexes
    members: dict[str, ConsumerGroupMember] = dict(group.members)
    targets: dict[str, Mapping] = {m: group.target_assignment.get(m, {}) for m in members}
    for member_id, new in updated.items():
        if new is None:
            members.pop(member_id, None)
            targets.pop(member_id, None)
            continue
        start = group.target_assignment.get(member_id, {})
        if new.instance_id is not None:
            previous = group.static_members.get(new.instance_id)
            if previous is not None and previous != member_id:
                start = group.target_assignment.get(previous, {})    # a static member's replacement
        members[member_id] = new
        targets[member_id] = start

    resolved = {m: ConsumerGroup.resolve_subscription(x, resolved_regexes) for m, x in members.items()}
    kind = compute_subscription_type(members.values(), resolved_regexes)

    # Kafka's memberSpecs: a HashMap filled from the group's members (in its TimelineHashMap
    # order), then the updated members; a removed member leaves the table as grown
    puts = list(group.member_order) + [m for m, x in updated.items() if x is not None and m not in group.members]
    specs = {}
    for member_id in string_map_order(puts):
        if member_id not in members:
            continue
        m = members[member_id]
        ids = frozenset(topics_by_name[t].topic_id for t in resolved[member_id] if t in topics_by_name)
        specs[member_id] = MemberSpec(ids, _java_ordered(targets[member_id]), m.instance_id, m.rack_id)
    counts = {t.topic_id: t.num_partitions for t in topics_by_name.values()}
    new_assignment = {m: freeze(a) for m, a in ASSIGNORS[assignor](GroupSpec(specs, kind), counts).items()}

    records = []
    for member_id in specs:
        target = new_assignment.get(member_id, {})
        if group.target_assignment.get(member_id) != target:
            records.append(rec.target_assignment_record(group.group_id, member_id, target))
    records.append(rec.target_assignment_epoch_record(group.group_id, group_epoch))
    return records, {m: new_assignment.get(m, {}) for m in specs}


def _java_ordered(assignment: Mapping[bytes, frozenset]) -> dict[bytes, list[int]]:
    """A target as Kafka's Assignment.fromRecord iterates it: topics in HashMap<Uuid> order,
    partitions in HashSet<Integer> order (a record lists them sorted here, which stands in for
    Kafka's list order where two partitions share a bucket)."""
    return {t: int_hash_set_copy_order(sorted(assignment[t])) for t in uuid_map_order(sorted(assignment))}
