"""OffsetFetch in a cluster reads at the coordinator partition's high watermark: with the
followers of a group's ``__consumer_offsets`` partition stopped (SIGSTOP, still in the ISR), a
commit appended by the coordinator is not replicated, so an OffsetFetch without require_stable
still answers the previous offset and one with require_stable waits; once the followers resume and
fetch it, both answer the new offset. The requests go straight to the coordinator, so no client
waits on a stopped broker."""
import os
import threading
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kgroup.coordinator import group_partition
from kgroup.protocol.messages.find_coordinator import FindCoordinatorRequest
from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from kgroup.testing.cluster import KafkaCluster
from tests.harness import RawClient

pytestmark = pytest.mark.interop

GROUP = "reader"
TOPIC = "orders"


def commit(port: int, offset: int) -> int:
    """A simple (group-less) OffsetCommit of orders-0; its partition error."""
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    client = RawClient(port)
    client.sock.settimeout(90)
    try:
        r = client.request(OffsetCommitRequest(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", topics=[
            T(name=TOPIC, partitions=[T.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])]), 8)
    finally:
        client.close()
    return r.topics[0].partitions[0].error_code


def fetch(port: int, require_stable: bool = False) -> tuple[int, int]:
    """(committed offset of orders-0, error) as the coordinator answers OffsetFetch v7."""
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    client = RawClient(port)
    client.sock.settimeout(90)
    try:
        r = client.request(OffsetFetchRequest(group_id=GROUP, require_stable=require_stable,
                                              topics=[T(name=TOPIC, partition_indexes=[0])]), 7)
    finally:
        client.close()
    p = r.topics[0].partitions[0]
    return p.committed_offset, p.error_code or r.error_code


def test_offset_fetch_answers_only_replicated_commits(tmp_path):
    # The ISR must not shrink while the followers are stopped (that would move the high
    # watermark): their ZooKeeper sessions and the replica lag time outlast the pause, and the
    # commit's own answer waits for the ISR longer than that too.
    with KafkaCluster(3, tmp_path, {"zookeeper.session.timeout.ms": 30000, "replica.lag.time.max.ms": 60000,
                                    "offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 3,
                                    "offsets.commit.timeout.ms": 60000}) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
        partition = group_partition(GROUP, 1)

        def coordinator_ready():     # the first FindCoordinator creates __consumer_offsets
            client = RawClient(c.broker(min(c.brokers)).port)
            try:
                found = client.request(FindCoordinatorRequest(key=GROUP), 2)
            finally:
                client.close()
            s = c.partition_state("__consumer_offsets", partition)
            return found.error_code == 0 and s is not None and len(s.isr) == 3
        c.wait_for(coordinator_ready, 60, interval=0.2, what="__consumer_offsets with its three replicas in sync")
        state = c.partition_state("__consumer_offsets", partition)
        port = c.broker(state.leader).port
        c.wait_for(lambda: fetch(port)[1] == 0, 60, what="the coordinator loaded")
        assert commit(port, 5) == 0
        assert fetch(port) == (5, 0)
        followers = [n for n in state.isr if n != state.leader]
        log_dir = os.path.join(c.broker(state.leader).data_dir, f"__consumer_offsets-{partition}")
        before = _log_bytes(log_dir)
        for n in followers:
            c.pause(n)
        committed: list = []
        stable: list = []
        committing = threading.Thread(target=lambda: committed.append(commit(port, 9)))
        stable_fetch = threading.Thread(target=lambda: stable.append(fetch(port, require_stable=True)))
        try:
            committing.start()
            # the commit's record is in the coordinator's log; its answer waits for the ISR
            c.wait_for(lambda: _log_bytes(log_dir) > before, 30, what="the commit appended on the leader")
            assert fetch(port) == (5, 0)            # not replicated: the previous offset
            stable_fetch.start()
            time.sleep(0.5)
            assert fetch(port) == (5, 0)
            assert not committed, "the commit was acknowledged before its ISR had it"
            assert not stable, "a require_stable fetch answered before the commit was in the ISR"
            assert c.partition_state("__consumer_offsets", partition).isr == state.isr
        finally:
            for n in followers:
                c.resume(n)
        committing.join(60)
        stable_fetch.join(60)
        assert committed == [0]
        assert stable == [(9, 0)]
        assert fetch(port) == (9, 0)


def _log_bytes(log_dir) -> int:
    return sum(os.path.getsize(os.path.join(log_dir, f)) for f in os.listdir(log_dir) if f.endswith(".log"))
