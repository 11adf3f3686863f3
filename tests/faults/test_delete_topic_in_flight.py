"""Over the wire: a topic deleted while other requests wait for the same group-commit fsync
fails none of them (an acks=-1 produce to another topic whose records were written is
acknowledged; a DeleteGroups in flight keeps its connection). Each round, on four connections sent at once:
an acks=-1 produce to the doomed topic followed (pipelined) by its DeleteTopics, an acks=-1
produce to another topic, a DeleteGroups of a group with offsets, and an OffsetCommit. Every
unrelated request is answered without error, its connection stays open, and what was
acknowledged is in the log after a restart; the doomed produce is written or answered
UNKNOWN_TOPIC_OR_PARTITION, never KAFKA_STORAGE_ERROR, and nothing logs a failed flush."""
import time

from kgroup.protocol.api import parse_response
from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.delete_groups import DeleteGroupsRequest
from kgroup.protocol.messages.delete_topics import DeleteTopicsRequest
from kgroup.protocol.messages.produce import ProduceRequest
from kgroup.protocol.records import Record, build_batch
from tests.broker.test_data_path import produce_request
from tests.faults.test_disk_faults import commit, committed, values_in
from tests.harness import BrokerProcess, RawClient

CT = CreateTopicsRequest.CreatableTopic
ROUNDS = 40


def batch(value):
    return build_batch([Record(value=value, timestamp=int(time.time() * 1000))])


def answer(c, request_type, version):
    return parse_response(request_type.API_KEY, version, c.recv_frame())[1]


def test_deleting_a_topic_fails_no_unrelated_request_in_flight(tmp_path):
    data = tmp_path / "d"
    b = BrokerProcess(data).start()
    acknowledged = []
    try:
        admin = RawClient(b.port)
        r = admin.request(CreateTopicsRequest(topics=[CT(name="keep", num_partitions=1, replication_factor=1)]), 7)
        assert r.topics[0].error_code == 0
        doomed_conn, keep_conn, groups_conn, commit_conn = (RawClient(b.port) for _ in range(4))
        for n in range(ROUNDS):
            doomed = f"doomed-{n}"
            r = admin.request(CreateTopicsRequest(topics=[CT(name=doomed, num_partitions=1, replication_factor=1)]), 7)
            assert r.topics[0].error_code == 0
            assert commit(admin, f"gone-{n}", "keep", n) == 0          # a group DeleteGroups deletes
            assert commit(admin, f"on-doomed-{n}", doomed, 1) == 0     # offsets the deletion tombstones
            # all sent before any is answered: their appends share one group commit
            keep_conn.send(produce_request("keep", batch(b"keep-%d" % n)), 9)
            groups_conn.send(DeleteGroupsRequest(groups_names=[f"gone-{n}"]), 2)
            commit_conn.send(commit_request(n), 8)
            doomed_conn.send(produce_request(doomed, batch(b"doomed")), 9)
            doomed_conn.send(DeleteTopicsRequest(topic_names=[doomed], timeout_ms=5000), 4)
            p = answer(keep_conn, ProduceRequest, 9).responses[0].partition_responses[0]
            assert p.error_code == 0, f"round {n}: the produce to another topic failed: {p}"
            acknowledged.append(b"keep-%d" % n)
            g = answer(groups_conn, DeleteGroupsRequest, 2)
            assert [(x.group_id, x.error_code) for x in g.results] == [(f"gone-{n}", 0)], f"round {n}: {g}"
            o = answer(commit_conn, type(commit_request(n)), 8)
            assert o.topics[0].partitions[0].error_code == 0, f"round {n}: {o}"
            # its own fate: written, or refused as a partition no longer hosted, as Kafka answers
            # it; never a storage error, which reads as a failing disk
            p = answer(doomed_conn, ProduceRequest, 9).responses[0].partition_responses[0]
            assert p.error_code in (0, E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER), f"round {n}: {p}"
            d = answer(doomed_conn, DeleteTopicsRequest, 4)
            assert d.responses[0].error_code == 0
        assert values_in(admin, "keep") == acknowledged
        assert committed(admin, "steady", "keep") == ROUNDS - 1
        assert "Traceback" not in b.log_text()
        assert " failed: log " not in b.log_text()      # no "flush of ... failed: log ... is closed"
    finally:
        b.stop()
    b = BrokerProcess(data).start()
    try:
        c = RawClient(b.port)
        assert values_in(c, "keep") == acknowledged
        deadline = time.monotonic() + 30
        while True:
            try:
                assert committed(c, "steady", "keep") == ROUNDS - 1
                break
            except AssertionError:          # __consumer_offsets still loading
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        b.stop()


def commit_request(n):
    from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
    OT = OffsetCommitRequest.OffsetCommitRequestTopic
    return OffsetCommitRequest(group_id="steady", generation_id_or_member_epoch=-1, member_id="", retention_time_ms=-1,
                               topics=[OT(name="keep", partitions=[OT.OffsetCommitRequestPartition(
                                   partition_index=0, committed_offset=n, committed_leader_epoch=-1,
                                   committed_metadata="")])])
