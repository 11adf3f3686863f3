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

from ...java_compat import string_map_order
from ..assignor import ASSIGNORS, GroupSpec, MemberSpec, SubscriptionType
from ..coordinator_records import CoordinatorRecord
from . import consumer_group_records as rec
from ..topic_metadata import TopicMetadata
from .group import ConsumerGroup, ResolvedRegex
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

    # The subscription type counts topic names (regex matches included), existing or not, as
    # ConsumerGroup.subscriptionType does: homogeneous when every member has the same names.
    resolved = {m: ConsumerGroup.resolve_subscription(x, resolved_regexes) for m, x in members.items()}
    kind = SubscriptionType.HOMOGENEOUS if len(set(resolved.values())) <= 1 else SubscriptionType.HETEROGENEOUS

    specs = {}
    for member_id in string_map_order(members):
        m = members[member_id]
        ids = frozenset(topics_by_name[t].topic_id for t in resolved[member_id] if t in topics_by_name)
        specs[member_id] = MemberSpec(ids, targets[member_id], m.instance_id, m.rack_id)
    counts = {t.topic_id: t.num_partitions for t in topics_by_name.values()}
    new_assignment = {m: freeze(a) for m, a in ASSIGNORS[assignor](GroupSpec(specs, kind), counts).items()}

    records = []
    for member_id in specs:
        target = new_assignment.get(member_id, {})
        if group.target_assignment.get(member_id) != target:
            records.append(rec.target_assignment_record(group.group_id, member_id, target))
    records.append(rec.target_assignment_epoch_record(group.group_id, group_epoch))
    return records, {m: new_assignment.get(m, {}) for m in specs}
