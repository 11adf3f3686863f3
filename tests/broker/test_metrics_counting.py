"""Request metrics count every request exactly and time one in SAMPLE_EVERY per API and version
(every one of the rare group membership and deletion requests), whichever path counts it: the server inline (metrics alone: ``recent`` counts of small ints,
settled by ``dispatch_sampled``) or the metrics request layer (fault injection on too). An
in-process broker's connection is handed frames directly (no socket), thousands of them, so the
``recent`` counters wrap many times; the counts are compared with the frames sent."""
import asyncio
import collections

import pytest

from kgroup.broker.broker import Broker
from kgroup.broker.config import BrokerConfig
from kgroup.broker.metrics import SAMPLE_EVERY, render
from kgroup.broker.server import KafkaConnection
from kgroup.protocol.api import ApiKey, encode_request
from kgroup.protocol.messages.delete_groups import DeleteGroupsRequest
from kgroup.protocol.messages.heartbeat import HeartbeatRequest
from kgroup.protocol.messages.leave_group import LeaveGroupRequest
from kgroup.protocol.messages.list_groups import ListGroupsRequest
from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
from kgroup.protocol.messages.produce import ProduceRequest
from kgroup.protocol.records import Record, build_batch


class Transport:
    def __init__(self):
        self.written = 0

    def write(self, data):
        self.written += 1

    def set_write_buffer_limits(self, high):
        pass

    def get_extra_info(self, name):
        return ("127.0.0.1", 1)

    def close(self):
        pass


def frame(body, version):
    return b"".join(encode_request(body, version, 1, "counting"))[4:]


def timed(n, every=SAMPLE_EVERY):
    """How many of n requests are timed: the 1st, (SAMPLE_EVERY + 1)th, (2 SAMPLE_EVERY + 1)th, ..."""
    return (n + every - 1) // every


T = OffsetCommitRequest.OffsetCommitRequestTopic
TPD = ProduceRequest.TopicProduceData
EVERY_ONE_TIMED = (ApiKey.LEAVE_GROUP, ApiKey.DELETE_GROUPS)
FRAMES = {
    # (api key, version): (frame, how many); unknown groups, so each is answered at once
    (ApiKey.HEARTBEAT, 4): (frame(HeartbeatRequest(group_id="nobody", generation_id=1, member_id="m"), 4), 3001),
    (ApiKey.HEARTBEAT, 0): (frame(HeartbeatRequest(group_id="nobody", generation_id=1, member_id="m"), 0), 257),
    (ApiKey.LIST_GROUPS, 4): (frame(ListGroupsRequest(states_filter=[]), 4), 9),
    # timelines watch LeaveGroup (every one goes through them); a rare, slow kind: every one timed
    (ApiKey.LEAVE_GROUP, 0): (frame(LeaveGroupRequest(group_id="nobody", member_id="m"), 0), 41),
    # a Produce is counted inline and timed one in SAMPLE_EVERY (the timelines' query reaches them
    # through broker.control_topics, nobody watches every Produce); acks=1: answered at its append
    (ApiKey.PRODUCE, 9): (frame(ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        TPD(name="t", partition_data=[TPD.PartitionProduceData(index=0, records=build_batch(
            [Record(key=b"k", value=b"v", timestamp=0)]))])]), 9), 70),
    # metrics see every DeleteGroups (its tombstones are deletions) and time every one
    (ApiKey.DELETE_GROUPS, 2): (frame(DeleteGroupsRequest(groups_names=["nobody"]), 2), 12),
    # a simple group's commit (no member): written, then answered after its fsync
    (ApiKey.OFFSET_COMMIT, 8): (frame(OffsetCommitRequest(
        group_id="simple", generation_id_or_member_epoch=-1, member_id="",
        topics=[T(name="t", partitions=[T.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=5, committed_metadata="")])]), 8), 100),
}


@pytest.mark.parametrize("faults", ["false", "true"])
def test_every_request_counted_one_in_sample_every_timed(tmp_path, faults):
    async def main():
        b = Broker(BrokerConfig.load(None, [
            "listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={tmp_path}", "metrics.listener=http://127.0.0.1:0",
            f"kgroup.fault.injection.enable={faults}"]))
        await b.start()
        try:
            assert (b.request_counts is b.metrics.recent) == (faults == "false")    # inline count, or a layer
            assert (b.request_hook is None) == (faults == "false")
            b.create_topic("t", 1, 1, {})
            conn = KafkaConnection(b)
            conn.connection_made(Transport())
            # interleaved, so every API's count moves between the others'
            queue = collections.deque((kv, f, n) for kv, (f, n) in FRAMES.items())
            sent = collections.Counter()
            while queue:
                kv, f, n = queue.popleft()
                for _ in range(min(n, 97)):
                    conn._handle_frame(f)
                sent[kv] += min(n, 97)
                if n > 97:
                    queue.append((kv, f, n - 97))
                while conn.slots:           # commits answered after their fsync
                    await asyncio.sleep(0)
            assert not conn.closed
            assert not b.metrics.watched[ApiKey.PRODUCE] and not b.metrics.watched[ApiKey.HEARTBEAT]
            stats = b.metrics.request_stats()
            assert {kv: s[0] for kv, s in stats.items()} == dict(sent)
            for kv, n in sent.items():
                observations = stats[kv][3]
                assert observations == (n if kv[0] in EVERY_ONE_TIMED else timed(n)), kv
                assert sum(stats[kv][1]) == observations
            assert b.metrics.coordinator.offset_commits == sent[(ApiKey.OFFSET_COMMIT, 8)]
            text = render(b.metrics.snapshot())
            assert 'kafka_network_requestmetrics_requests_total{request="Heartbeat",version="4"} 3001\n' in text
            assert ('kafka_network_requestmetrics_total_time_seconds_count{request="Heartbeat",version="4"} '
                    f'{timed(3001)}\n') in text
            assert "kafka_server_group_coordinator_metrics_offset_commit_count 100\n" in text
        finally:
            await b.stop()

    asyncio.run(main())
