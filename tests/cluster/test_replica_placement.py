"""Replica placement against cases computed by Kafka's AdminUtils.assignReplicasToBrokers (its
AdminRackAwareTest and ReplicaAssignmentTest expectations), and its invariants for any cluster."""
import random

import pytest
from hypothesis import given, settings, strategies as st

from kgroup.cluster.replica_placement import assign_replicas_to_brokers, rack_alternated_broker_list
from kgroup.protocol.errors import ErrorCode, KafkaError


def test_rack_unaware_matches_kafka():
    brokers = {b: None for b in range(5)}
    assert assign_replicas_to_brokers(brokers, 10, 3, 0, -1) == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_rack_alternated_list_matches_kafka():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 5, 4, 2]
    del racks[5]
    assert rack_alternated_broker_list(racks) == [0, 3, 1, 4, 2]


def test_rack_aware_matches_kafka():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert assign_replicas_to_brokers(racks, 7, 3, 0, 0) == {
        0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0], 5: [2, 0, 3], 6: [0, 4, 2]}


def test_added_partitions_numbered_after_the_existing_ones():
    # Kafka's walk restarts its shift at fixedStartIndex: partitions 6-9 added to a topic do
    # not get the replicas they would have had at creation (5 wrapped the list there)
    brokers = {b: None for b in range(5)}
    assert assign_replicas_to_brokers(brokers, 4, 3, 0, 6) == {6: [1, 2, 3], 7: [2, 3, 4], 8: [3, 4, 0], 9: [4, 0, 1]}


@pytest.mark.parametrize("n, rf, code", [(0, 1, ErrorCode.INVALID_PARTITIONS), (3, 0, ErrorCode.INVALID_REPLICATION_FACTOR),
                                         (3, 4, ErrorCode.INVALID_REPLICATION_FACTOR)])
def test_refused(n, rf, code):
    with pytest.raises(KafkaError) as e:
        assign_replicas_to_brokers({1: None, 2: None, 3: None}, n, rf)
    assert e.value.code == code


def test_some_brokers_without_rack_refused():
    with pytest.raises(KafkaError, match="rack information"):
        assign_replicas_to_brokers({1: "a", 2: None, 3: "b"}, 3, 2)


@settings(max_examples=200, deadline=None)
@given(n_brokers=st.integers(1, 9), n_racks=st.integers(0, 4), n_partitions=st.integers(1, 40),
       rf=st.integers(1, 9), seed=st.integers(0, 2**32))
def test_invariants(n_brokers, n_racks, n_partitions, rf, seed):
    rf = min(rf, n_brokers)
    brokers = {b + 1: (f"r{b % n_racks}" if n_racks else None) for b in range(n_brokers)}
    out = assign_replicas_to_brokers(brokers, n_partitions, rf, rng=random.Random(seed))
    assert sorted(out) == list(range(n_partitions))
    for replicas in out.values():
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(brokers)
        if n_racks:     # spread over as many racks as the replicas allow
            assert len({brokers[r] for r in replicas}) == min(rf, len(set(brokers.values())))
    # leaders spread evenly: no broker leads more than one partition more than another
    if n_racks == 0:
        leads = [sum(1 for r in out.values() if r[0] == b) for b in brokers]
        assert max(leads) - min(leads) <= 1
