"""One CreateTopics request with a huge partition count (67,108,867: a bit flip of 3) must not
create partitions until descriptors run out, nor save the topic, nor leave a data directory the
broker cannot restart on. As Kafka's controller (QuorumController
MAX_RECORDS_PER_USER_OP = 10,000 records per request: a TopicRecord, one PartitionRecord per
partition and the ConfigRecords), such a request fails as a whole with POLICY_VIOLATION, and a
topic is never saved before its partitions exist."""
import os
import resource
import time

from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.delete_topics import DeleteTopicsRequest
from kgroup.protocol.messages.metadata import MetadataRequest
from tests.harness import BrokerProcess, RawClient

CT = CreateTopicsRequest.CreatableTopic
CFG = CT.CreatableTopicConfig
MESSAGE = "Unable to perform excessively large batch operation."


def create(c, *topics, validate_only=False):
    r = c.request(CreateTopicsRequest(topics=list(topics), timeout_ms=30000, validate_only=validate_only), 7)
    return {t.name: (t.error_code, t.error_message) for t in r.topics}


def topic_names(c):
    return {t.name for t in c.request(MetadataRequest(topics=None), 12).topics}


def test_a_request_over_the_controllers_record_cap_fails_as_a_whole(tmp_path):
    data = tmp_path / "d"
    b = BrokerProcess(data).start()
    try:
        c = RawClient(b.port)
        got = create(c, CT(name="small", num_partitions=1, replication_factor=1),
                     CT(name="flipped", num_partitions=67_108_867, replication_factor=1))
        assert got == {"small": (ErrorCode.POLICY_VIOLATION, MESSAGE), "flipped": (ErrorCode.POLICY_VIOLATION, MESSAGE)}
        # summed over the request: 2 x (1 + 5,000) > 10,000; configs count too
        assert create(c, CT(name="a", num_partitions=5000, replication_factor=1),
                      CT(name="b", num_partitions=5000, replication_factor=1))["a"][0] == ErrorCode.POLICY_VIOLATION
        assert create(c, CT(name="a", num_partitions=9999, replication_factor=1,
                            configs=[CFG(name="retention.ms", value="1000")]),
                      validate_only=True)["a"][0] == ErrorCode.POLICY_VIOLATION
        assert create(c, CT(name="a", num_partitions=9999, replication_factor=1),
                      validate_only=True)["a"] == (0, None)        # exactly 10,000 records: allowed
        assert not {"small", "flipped", "a", "b"} & topic_names(c)
        assert not [d for d in os.listdir(data) if d.startswith(("flipped-", "small-"))]
    finally:
        b.stop()
    b = BrokerProcess(data).start()          # and the broker restarts on that directory
    b.stop()


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_a_topic_whose_partitions_cannot_be_created_is_not_saved(tmp_path):
    """A creation failing half-way (a file where partition 300's directory must go): an error,
    the partitions made so far removed, nothing saved, and the broker goes on and restarts."""
    data = tmp_path / "d"
    b = BrokerProcess(data).start()
    try:
        (data / "wide-300").write_text("in the way")
        c = RawClient(b.port)
        code, _ = create(c, CT(name="wide", num_partitions=400, replication_factor=1))["wide"]
        assert code == ErrorCode.UNKNOWN_SERVER_ERROR
        assert "wide" not in topic_names(c)
        assert [d for d in os.listdir(data) if d.startswith("wide-")] == ["wide-300"]
        assert create(c, CT(name="narrow", num_partitions=2, replication_factor=1))["narrow"] == (0, None)
    finally:
        b.stop()
    b = BrokerProcess(data).start()
    try:
        assert "narrow" in topic_names(RawClient(b.port))
    finally:
        b.stop()


def test_partitions_do_not_hold_a_descriptor_each(tmp_path):
    """3 files per partition, 3,000 partitions, a 600-descriptor limit: the log manager keeps
    at most its budget open (broker/connections.py's reserve), so the topic is created, used and
    loaded again after a restart (no "Too many open files")."""
    data = tmp_path / "d"

    def low_nofile():
        resource.setrlimit(resource.RLIMIT_NOFILE, (600, 600))
    b = BrokerProcess(data, preexec_fn=low_nofile).start()
    try:
        c = RawClient(b.port)
        assert create(c, CT(name="wide", num_partitions=3000, replication_factor=1))["wide"] == (0, None)
        assert fds(b.proc.pid) < 600
        assert produce(c, "wide", 2999, b"last") == 0
    finally:
        b.stop()
    b = BrokerProcess(data, preexec_fn=low_nofile).start()
    try:
        c = RawClient(b.port)
        wide = [t for t in c.request(MetadataRequest(topics=None), 12).topics if t.name == "wide"]
        assert len(wide[0].partitions) == 3000 and fds(b.proc.pid) < 600
        assert produce(c, "wide", 0, b"first") == 0
    finally:
        b.stop()


def produce(c, topic, partition, value):
    from kgroup.protocol.messages.produce import ProduceRequest
    from kgroup.protocol.records import Record, build_batch
    TPD = ProduceRequest.TopicProduceData
    r = c.request(ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[TPD(name=topic, partition_data=[
        TPD.PartitionProduceData(index=partition, records=build_batch([Record(key=None, value=value, timestamp=1)]))])]), 9)
    return r.responses[0].partition_responses[0].error_code


def test_a_creation_cut_short_leaves_no_topic_and_no_partitions(tmp_path):
    """A CreateTopics of 9,999 partitions under way when the broker stops or is SIGKILLed. A
    stop lets requests in flight finish for up to 10 s: the creation either completes (every
    partition) or is undone (none). After a SIGKILL, the logs of the topic never saved are
    removed at the next start, as Kafka removes stray logs. Either way the name can then be
    created again."""
    data = tmp_path / "d"

    def partition_dirs():
        return [d for d in os.listdir(data) if d.startswith("cut-")]
    for stop in ("sigterm", "sigkill"):
        b = BrokerProcess(data).start()
        c = RawClient(b.port)
        c.send(CreateTopicsRequest(topics=[CT(name="cut", num_partitions=9999, replication_factor=1)],
                                   timeout_ms=60_000, validate_only=False), 7)
        deadline = time.monotonic() + 30
        while len(partition_dirs()) < 300:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        if stop == "sigterm":
            b.stop()
        else:
            b.kill()
        mark = len(b.log_text())
        b.start()
        try:
            c = RawClient(b.port)
            if stop == "sigterm" and "cut" in topic_names(c):       # finished while stopping
                assert len(partition_dirs()) == 9999
                c.request(DeleteTopicsRequest(topic_names=["cut"], timeout_ms=5000), 4)
            else:
                if stop == "sigkill":
                    assert "its topic was never created" in b.log_text(mark)
                assert "cut" not in topic_names(c)
            assert not partition_dirs()
            assert create(c, CT(name="cut", num_partitions=2, replication_factor=1))["cut"] == (0, None)
            assert sorted(partition_dirs()) == ["cut-0", "cut-1"]
            c.request(DeleteTopicsRequest(topic_names=["cut"], timeout_ms=5000), 4)
        finally:
            b.stop()


def test_a_stop_undoes_a_creation_under_way(tmp_path):
    """In process, where the stop does not wait for it: the creation's generator is closed, its
    partitions removed and its name released; the answer never comes (its connection is gone)."""
    import asyncio
    from kgroup.broker.broker import Broker
    from kgroup.broker.config import BrokerConfig
    from kgroup.broker.pending import PendingResponse

    async def main():
        b = Broker(BrokerConfig.load(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0"]))
        await b.start()
        pending = b.run_in_slices(b.create_topic_steps("cut", 5000, 1, {}))
        assert isinstance(pending, PendingResponse) and "cut" in b.metadata.creating
        deadline = time.monotonic() + 30
        while len([d for d in os.listdir(tmp_path) if d.startswith("cut-")]) < 200:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        await b.stop()
        assert not pending.answered
        assert "cut" not in b.metadata.topics and "cut" not in b.metadata.creating
        assert not [d for d in os.listdir(tmp_path) if d.startswith("cut-")]
    asyncio.run(main())
