"""Issue 17, finding 1: one CreateTopics request with a huge partition count (67,108,867: a bit
flip of 3) used to create partitions until descriptors ran out, save the topic anyway and leave
a data directory the broker could not restart on. As Kafka's controller (QuorumController
MAX_RECORDS_PER_USER_OP = 10,000 records per request: a TopicRecord, one PartitionRecord per
partition and the ConfigRecords), such a request fails as a whole with POLICY_VIOLATION, and a
topic is never saved before its partitions exist."""
import os
import resource

from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
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
    loaded again after a restart (it used to fail with "Too many open files")."""
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
