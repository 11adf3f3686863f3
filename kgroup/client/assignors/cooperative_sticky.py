"""Kafka's ``CooperativeStickyAssignor`` ("cooperative-sticky", KIP-429).

Same assignment as the sticky assignor, but members keep their partitions while re-joining and
report them in ``Subscription.owned_partitions`` (with ``generation_id``, ConsumerProtocol v2+).
A partition may not change owner within one rebalance: when the sticky result moves a
partition from A to B, it is left out of B's assignment this round.  A revokes it, re-joins,
and the follow-up rebalance gives it to B.

The subscription user data carries only the member's generation (one int32), for leaders that
read subscriptions older than ConsumerProtocol v2.
"""
from __future__ import annotations

from typing import Mapping

from kgroup.protocol.primitives import INT32

from .base import Assignment, RebalanceProtocol, Subscription, TopicPartition
from .sticky import DEFAULT_GENERATION, AbstractStickyAssignor, MemberData


class CooperativeStickyAssignor(AbstractStickyAssignor):
    name = "cooperative-sticky"

    def __init__(self) -> None:
        super().__init__()
        self._generation = DEFAULT_GENERATION

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER]

    def on_assignment(self, assignment: Assignment | None, generation_id: int) -> None:
        self._generation = generation_id

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        return INT32.pack(self._generation)

    def member_data(self, subscription: Subscription) -> MemberData:
        if subscription.generation_id >= 0:  # ConsumerProtocolSubscription v2+
            return MemberData(subscription.owned_partitions, subscription.generation_id)
        data = subscription.user_data
        if data is None:
            generation = None
        elif len(data) >= 4:
            generation = INT32.unpack_from(data, 0)[0]
        else:
            generation = DEFAULT_GENERATION
        return MemberData(subscription.owned_partitions, generation, subscription.rack_id)

    def assign_partitions(self, partitions_per_topic: Mapping[str, int],
                          subscriptions: Mapping[str, Subscription]
                          ) -> dict[str, list[TopicPartition]]:
        assignments = super().assign_partitions(partitions_per_topic, subscriptions)
        transferring = self.partitions_transferring_ownership
        if transferring is None:
            transferring = _partitions_transferring_ownership(subscriptions, assignments)
        # a partition changing owner is revoked first and assigned in the follow-up rebalance
        by_consumer: dict[str, set[TopicPartition]] = {}
        for tp, consumer in transferring.items():
            by_consumer.setdefault(consumer, set()).add(tp)
        for consumer, moving in by_consumer.items():
            assignments[consumer] = [tp for tp in assignments[consumer] if tp not in moving]
        return assignments


def _partitions_transferring_ownership(subscriptions: Mapping[str, Subscription],
                                       assignments: Mapping[str, list[TopicPartition]]
                                       ) -> dict[TopicPartition, str]:
    added: dict[TopicPartition, str] = {}
    revoked: set[TopicPartition] = set()
    for consumer, assigned in assignments.items():
        owned = subscriptions[consumer].owned_partitions
        owned_set = set(owned)
        for tp in assigned:
            if tp not in owned_set:
                added[tp] = consumer
        assigned_set = set(assigned)
        revoked.update(tp for tp in owned if tp not in assigned_set)
    return {tp: c for tp, c in added.items() if tp in revoked}
