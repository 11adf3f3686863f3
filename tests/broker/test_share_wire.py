"""Share groups over the wire against a broker process, without a client library: the share
coordinator's APIs (InitializeShareGroupState, Write, Read, ReadSummary, Delete) and their state
after a restart, and the share session errors of ShareFetch/ShareAcknowledge."""
from __future__ import annotations

import time

from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from kgroup.protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from kgroup.protocol.messages.metadata import MetadataRequest
from kgroup.protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from kgroup.protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest
from kgroup.protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from kgroup.protocol.messages.share_fetch import ShareFetchRequest
from kgroup.protocol.messages.write_share_group_state import WriteShareGroupStateRequest
from tests.harness import BrokerProcess, RawClient


def topic_id(c, name) -> bytes:
    T = CreateTopicsRequest.CreatableTopic
    c.request(CreateTopicsRequest(topics=[T(name=name, num_partitions=2, replication_factor=1)], timeout_ms=5000), 7)
    md = c.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)]), 12)
    return md.topics[0].topic_id


def parts(resp):
    return {(r.topic_id, p.partition): p for r in resp.results for p in r.partitions}


def once_loaded(send, timeout=30.0):
    """``send()``'s partitions once none answers COORDINATOR_LOAD_IN_PROGRESS: a restarted broker
    answers that, as Kafka's does, until it has read __share_group_state again."""
    deadline = time.monotonic() + timeout
    while True:
        got = parts(send())
        if all(p.error_code != E.COORDINATOR_LOAD_IN_PROGRESS for p in got.values()) or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def test_share_coordinator_apis_and_restart(tmp_path):
    b = BrokerProcess(tmp_path / "d").start()
    try:
        c = RawClient(b.port)
        t = topic_id(c, "t")
        Init = InitializeShareGroupStateRequest.InitializeStateData
        r = c.request(InitializeShareGroupStateRequest(group_id="g", topics=[Init(topic_id=t, partitions=[
            Init.PartitionData(partition=p, state_epoch=1, start_offset=-1) for p in (0, 1, 2)])]), 0)
        got = parts(r)
        assert (got[(t, 0)].error_code, got[(t, 1)].error_code, got[(t, 2)].error_code) == (
            0, 0, E.UNKNOWN_TOPIC_OR_PARTITION)
        W = WriteShareGroupStateRequest.WriteStateData
        P = W.PartitionData
        r = c.request(WriteShareGroupStateRequest(group_id="g", topics=[W(topic_id=t, partitions=[P(
            partition=0, state_epoch=1, leader_epoch=0, start_offset=5, delivery_complete_count=1,
            state_batches=[P.StateBatch(first_offset=5, last_offset=9, delivery_state=0, delivery_count=2)])])]), 1)
        assert parts(r)[(t, 0)].error_code == 0
        c.close()
        b.kill()
        b = BrokerProcess(tmp_path / "d").start()       # __share_group_state loaded again
        c = RawClient(b.port)
        R = ReadShareGroupStateRequest.ReadStateData
        r = once_loaded(lambda: c.request(ReadShareGroupStateRequest(group_id="g", topics=[R(topic_id=t, partitions=[
            R.PartitionData(partition=0, leader_epoch=1), R.PartitionData(partition=1, leader_epoch=1)])]), 0))
        p0 = r[(t, 0)]
        assert (p0.error_code, p0.state_epoch, p0.start_offset) == (0, 1, 5)
        assert [(x.first_offset, x.last_offset, x.delivery_state, x.delivery_count) for x in p0.state_batches] == [
            (5, 9, 0, 2)]
        assert (r[(t, 1)].error_code, r[(t, 1)].start_offset) == (0, -1)
        S = ReadShareGroupStateSummaryRequest.ReadStateSummaryData
        s = parts(c.request(ReadShareGroupStateSummaryRequest(group_id="g", topics=[S(topic_id=t, partitions=[
            S.PartitionData(partition=0, leader_epoch=0)])]), 1))[(t, 0)]
        assert (s.error_code, s.start_offset, s.delivery_complete_count, s.leader_epoch) == (0, 5, 1, 1)
        D = DeleteShareGroupStateRequest.DeleteStateData
        assert parts(c.request(DeleteShareGroupStateRequest(group_id="g", topics=[D(topic_id=t, partitions=[
            D.PartitionData(partition=0)])]), 0))[(t, 0)].error_code == 0
        r = parts(c.request(ReadShareGroupStateRequest(group_id="g", topics=[R(topic_id=t, partitions=[
            R.PartitionData(partition=0, leader_epoch=1)])]), 0))
        assert r[(t, 0)].error_code == E.INVALID_REQUEST
    finally:
        b.kill()


def test_share_session_errors(tmp_path):
    b = BrokerProcess(tmp_path / "d").start()
    try:
        c = RawClient(b.port)
        t = topic_id(c, "t")
        F = ShareFetchRequest.FetchTopic

        def fetch(epoch, member="m", acks=False):
            B = F.FetchPartition.AcknowledgementBatch
            return c.request(ShareFetchRequest(group_id="g", member_id=member, share_session_epoch=epoch, max_wait_ms=0,
                                               min_bytes=1, max_bytes=1 << 20, max_records=10, batch_size=10,
                                               topics=[F(topic_id=t, partitions=[F.FetchPartition(
                                                   partition_index=0, acknowledgement_batches=[
                                                       B(first_offset=0, last_offset=0, acknowledge_types=[1])]
                                                   if acks else [])])], forgotten_topics_data=[]), 1)
        assert fetch(1).error_code == E.SHARE_SESSION_NOT_FOUND
        assert fetch(0, acks=True).error_code == E.INVALID_REQUEST
        r = fetch(0)
        assert r.error_code == 0
        # the share-partition was never initialized by the group coordinator: the partition says so
        assert r.responses[0].partitions[0].error_code == E.INVALID_REQUEST
        assert fetch(2).error_code == E.INVALID_SHARE_SESSION_EPOCH
        assert fetch(1).error_code == 0
        ack = c.request(ShareAcknowledgeRequest(group_id="g", member_id="m", share_session_epoch=0, topics=[]), 1)
        assert ack.error_code == E.INVALID_SHARE_SESSION_EPOCH
        ack = c.request(ShareAcknowledgeRequest(group_id="g", member_id="m", share_session_epoch=-1, topics=[]), 1)
        assert ack.error_code == 0
        assert fetch(2).error_code == E.SHARE_SESSION_NOT_FOUND        # closed by the final epoch
    finally:
        b.kill()


def test_api_versions_lists_the_share_feature_and_apis(tmp_path):
    from kgroup.protocol.messages.api_versions import ApiVersionsRequest
    b = BrokerProcess(tmp_path / "d").start()
    try:
        c = RawClient(b.port)
        r = c.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 4)
        assert ("share.version", 0, 1) in [(f.name, f.min_version, f.max_version) for f in r.supported_features]
        assert ("share.version", 1) in [(f.name, f.max_version_level) for f in r.finalized_features]
        keys = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        assert (keys[76], keys[77], keys[78], keys[79], keys[85], keys[87]) == ((1, 1), (1, 1), (1, 2), (1, 2),
                                                                                (0, 1), (0, 1))
        r3 = c.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        assert "share.version" not in [f.name for f in r3.supported_features]       # lowest level 0: from v4
        assert "share.version" in [f.name for f in r3.finalized_features]
        # share.version 0 turns share groups off, as Kafka does
        from kgroup.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
        from kgroup.protocol.messages.update_features import UpdateFeaturesRequest
        U = UpdateFeaturesRequest.FeatureUpdateKey
        r = c.request(UpdateFeaturesRequest(feature_updates=[U(feature="share.version", max_version_level=0,
                                                               upgrade_type=2, allow_downgrade=True)]), 1)
        assert r.error_code == 0
        hb = ShareGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0, subscribed_topic_names=["t"])
        assert c.request(hb, 1).error_code == E.UNSUPPORTED_VERSION
    finally:
        b.kill()
