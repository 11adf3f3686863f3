"""Replica placement for new topics and partitions: Kafka's AdminUtils.assignReplicasToBrokers
(the ZooKeeper-mode placement; KRaft's StripedReplicaPlacer descends from it).

Without racks, partition p's first replica is broker (p + start) of the brokers sorted by id and
the others follow at a shift that grows each time the partitions wrap around the brokers; with
racks on every broker, the same walk over a rack-alternated broker list, skipping a broker whose
rack already holds a replica while some rack holds none, so replicas spread over racks first.
``start`` and ``shift`` are random in Kafka (fixedStartIndex -1); tests fix them."""
from __future__ import annotations

import random

from ..protocol.errors import ErrorCode, KafkaError


def assign_replicas_to_brokers(brokers: dict[int, str | None], num_partitions: int, replication_factor: int,
                               fixed_start_index: int = -1, start_partition_id: int = -1,
                               rng: random.Random | None = None) -> dict[int, list[int]]:
    """``brokers``: broker id -> rack (None: no rack). Returns partition -> replicas, from
    ``start_partition_id`` (CreatePartitions) or 0."""
    if num_partitions <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    rng = rng or random.Random()
    if all(rack is None for rack in brokers.values()):
        return _rack_unaware(num_partitions, replication_factor, sorted(brokers), fixed_start_index,
                             start_partition_id, rng)
    if any(rack is None for rack in brokers.values()):
        # AdminOperationException in Kafka: a mix is refused
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         "Not all brokers have rack information for replica rack aware assignment.")
    return _rack_aware(num_partitions, replication_factor, brokers, fixed_start_index, start_partition_id, rng)


def _replica_index(first: int, second_shift: int, j: int, n: int) -> int:
    shift = 1 + (second_shift + j) % (n - 1)
    return (first + shift) % n


def _rack_unaware(n_partitions, rf, broker_list, fixed_start, start_partition, rng):
    n = len(broker_list)
    start_index = fixed_start if fixed_start >= 0 else rng.randrange(n)
    current = max(0, start_partition)
    shift = fixed_start if fixed_start >= 0 else rng.randrange(n)
    out = {}
    for _ in range(n_partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start_index) % n
        out[current] = [broker_list[first]] + [broker_list[_replica_index(first, shift, j, n)]
                                               for j in range(rf - 1)]
        current += 1
    return out


def rack_alternated_broker_list(brokers: dict[int, str]) -> list[int]:
    """AdminUtils.getRackAlternatedBrokerList: one broker of each rack in turn (racks in name
    order, brokers of a rack by id)."""
    by_rack: dict[str, list[int]] = {}
    for b, rack in brokers.items():
        by_rack.setdefault(rack, []).append(b)
    iters = {rack: iter(sorted(ids)) for rack, ids in by_rack.items()}
    racks = sorted(iters)
    out: list[int] = []
    i = 0
    while len(out) < len(brokers):
        nxt = next(iters[racks[i]], None)
        if nxt is not None:
            out.append(nxt)
        i = (i + 1) % len(racks)
    return out


def _rack_aware(n_partitions, rf, brokers, fixed_start, start_partition, rng):
    num_racks = len(set(brokers.values()))
    arranged = rack_alternated_broker_list(brokers)
    n = len(arranged)
    start_index = fixed_start if fixed_start >= 0 else rng.randrange(n)
    current = max(0, start_partition)
    shift = fixed_start if fixed_start >= 0 else rng.randrange(n)
    out = {}
    for _ in range(n_partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start_index) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with = {brokers[leader]}
        brokers_with = {leader}
        k = 0
        for _j in range(rf - 1):
            while True:
                b = arranged[_replica_index(first, shift * num_racks, k, n)]
                rack = brokers[b]
                k += 1
                # skip a broker whose rack has a replica while a rack has none, or that has a
                # replica while a broker has none
                if (rack not in racks_with or len(racks_with) == num_racks) and \
                        (b not in brokers_with or len(brokers_with) == n):
                    replicas.append(b)
                    racks_with.add(rack)
                    brokers_with.add(b)
                    break
        out[current] = replicas
        current += 1
    return out
