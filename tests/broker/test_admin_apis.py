"""CreatePartitions, AlterConfigs, IncrementalAlterConfigs and DeleteRecords over raw sockets."""
import time
import uuid

from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.alter_configs import AlterConfigsRequest
from kgroup.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kgroup.protocol.messages.create_partitions import CreatePartitionsRequest
from kgroup.protocol.messages.delete_records import DeleteRecordsRequest
from kgroup.protocol.messages.describe_configs import DescribeConfigsRequest
from kgroup.protocol.messages.find_coordinator import FindCoordinatorRequest
from kgroup.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kgroup.protocol.messages.list_offsets import ListOffsetsRequest
from kgroup.protocol.messages.metadata import MetadataRequest
from tests.broker.test_topics import create
from tests.harness import BrokerProcess, RawClient

CPT = CreatePartitionsRequest.CreatePartitionsTopic
AR = AlterConfigsRequest.AlterConfigsResource
IR = IncrementalAlterConfigsRequest.AlterConfigsResource
DR = DescribeConfigsRequest.DescribeConfigsResource
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def partitions(c, name):
    md = c.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)]), 12)
    return [p.partition_index for p in md.topics[0].partitions]


def describe(c, rtype, name, keys=None, version=4):
    r = c.request(DescribeConfigsRequest(resources=[DR(resource_type=rtype, resource_name=name,
                                                       configuration_keys=keys)], include_synonyms=True), version)
    return {e.name: e for e in r.results[0].configs}


def create_partitions(c, topics, validate_only=False, version=3):
    req = CreatePartitionsRequest(topics=[CPT(name=n, count=k, assignments=a) for n, k, a in topics],
                                  timeout_ms=5000, validate_only=validate_only)
    return [(r.name, r.error_code, r.error_message) for r in c.request(req, version).results]


def test_create_partitions(tmp_path):
    b = BrokerProcess(tmp_path / "d").start()
    try:
        c = RawClient(b.port)
        assert create(c, "grow", 2).error_code == 0
        for v in range(4):
            assert create_partitions(c, [("grow", 2, None)], version=v)[0][1:] == (
                ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partition(s).")
        assert create_partitions(c, [("grow", 1, None)])[0][1:] == (
            ErrorCode.INVALID_PARTITIONS, "The topic grow currently has 2 partition(s); 1 would not be an increase.")
        assert create_partitions(c, [("nope", 3, None)])[0][1] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert create_partitions(c, [("grow", 3, None), ("grow", 4, None)])[0][1:] == (
            ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
        A = CPT.CreatePartitionsAssignment
        assert create_partitions(c, [("grow", 4, [A(broker_ids=[1])])])[0][1:] == (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.")
        assert create_partitions(c, [("grow", 3, [A(broker_ids=[7])])])[0][1:] == (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 7, but no such broker is registered.")
        assert create_partitions(c, [("grow", 5, None)], validate_only=True) == [("grow", 0, None)]
        assert partitions(c, "grow") == [0, 1]
        assert create_partitions(c, [("grow", 3, [A(broker_ids=[1])])]) == [("grow", 0, None)]
        assert create_partitions(c, [("grow", 5, None)], version=0) == [("grow", 0, None)]
        assert partitions(c, "grow") == [0, 1, 2, 3, 4]
        lo = c.request(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name="grow", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=4, timestamp=-1)])]), 7)
        assert lo.topics[0].partitions[0].error_code == 0   # the new partition's log exists
    finally:
        b.kill()
    b = BrokerProcess(tmp_path / "d").start()   # the count was persisted before the answer
    try:
        assert partitions(RawClient(b.port), "grow") == [0, 1, 2, 3, 4]
    finally:
        b.stop()


def test_alter_configs_topic(tmp_path):
    b = BrokerProcess(tmp_path / "d").start()
    try:
        c = RawClient(b.port)
        assert create(c, "t", configs={"retention.ms": "1000", "segment.bytes": "100000"}).error_code == 0
        C = AR.AlterableConfig
        # legacy AlterConfigs replaces the whole set: segment.bytes returns to its default
        r = c.request(AlterConfigsRequest(resources=[AR(resource_type=2, resource_name="t", configs=[
            C(name="retention.ms", value="5000"), C(name="cleanup.policy", value="compact,delete")])],
            validate_only=False), 2).responses[0]
        assert (r.error_code, r.resource_name) == (0, "t")
        cfg = describe(c, 2, "t")
        assert (cfg["retention.ms"].value, cfg["retention.ms"].config_source) == ("5000", 1)
        assert (cfg["segment.bytes"].value, cfg["segment.bytes"].config_source) == ("1073741824", 5)
        assert cfg["cleanup.policy"].value == "compact,delete"
        for v in (0, 1):
            r = c.request(AlterConfigsRequest(resources=[AR(resource_type=2, resource_name="t", configs=[
                C(name="min.cleanable.dirty.ratio", value="7")])], validate_only=False), v).responses[0]
            assert r.error_code == ErrorCode.INVALID_CONFIG and "no more than 1" in r.error_message
        r = c.request(AlterConfigsRequest(resources=[AR(resource_type=2, resource_name="missing", configs=[])],
                                          validate_only=False), 2).responses[0]
        assert (r.error_code, r.error_message) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                   "The topic 'missing' does not exist.")
        r = c.request(AlterConfigsRequest(resources=[AR(resource_type=2, resource_name="t", configs=[
            C(name="retention.ms", value="9")])], validate_only=True), 2).responses[0]
        assert r.error_code == 0 and describe(c, 2, "t")["retention.ms"].value == "5000"
    finally:
        b.kill()
    b = BrokerProcess(tmp_path / "d").start()
    try:
        assert describe(RawClient(b.port), 2, "t")["retention.ms"].value == "5000"
    finally:
        b.stop()


def test_incremental_alter_configs(broker):
    c = RawClient(broker.port)
    assert create(c, "t", configs={"retention.ms": "1000"}).error_code == 0
    C = IR.AlterableConfig

    def alter(ops, name="t", rtype=2, version=1, validate_only=False):
        r = c.request(IncrementalAlterConfigsRequest(resources=[IR(resource_type=rtype, resource_name=name, configs=[
            C(name=k, config_operation=op, value=v) for k, op, v in ops])], validate_only=validate_only), version)
        return r.responses[0].error_code, r.responses[0].error_message

    assert alter([("segment.ms", SET, "60000"), ("retention.ms", DELETE, None)]) == (0, None)
    cfg = describe(c, 2, "t")
    assert cfg["segment.ms"].value == "60000" and cfg["retention.ms"].config_source == 5
    assert alter([("cleanup.policy", APPEND, "compact")], version=0) == (0, None)
    assert describe(c, 2, "t")["cleanup.policy"].value == "delete,compact"
    assert alter([("cleanup.policy", SUBTRACT, "delete")]) == (0, None)
    assert describe(c, 2, "t")["cleanup.policy"].value == "compact"
    assert alter([("retention.ms", APPEND, "1")]) == (
        ErrorCode.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST.")
    assert alter([("no.such.config", SET, "1")]) == (ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such.config")
    # all of a resource's changes or none
    assert alter([("segment.ms", SET, "1"), ("retention.ms", SET, "x")])[0] == ErrorCode.INVALID_CONFIG
    assert describe(c, 2, "t")["segment.ms"].value == "60000"
    assert alter([("segment.ms", SET, "1"), ("segment.ms", DELETE, None)])[0] == ErrorCode.INVALID_REQUEST


def test_dynamic_broker_configs(tmp_path):
    b = BrokerProcess(tmp_path / "d", ["log.retention.hours=10"]).start()
    try:
        c = RawClient(b.port)
        C = IR.AlterableConfig
        assert create(c, "t").error_code == 0
        before = describe(c, 4, "1", ["log.cleaner.min.cleanable.ratio", "num.partitions"])
        assert before["log.cleaner.min.cleanable.ratio"].read_only is False
        assert before["num.partitions"].read_only is True
        r = c.request(IncrementalAlterConfigsRequest(resources=[IR(resource_type=4, resource_name="", configs=[
            C(name="log.cleaner.min.cleanable.ratio", config_operation=SET, value="0.1"),
            C(name="log.retention.ms", config_operation=SET, value="7200000")])], validate_only=False), 1)
        assert r.responses[0].error_code == 0, r.responses[0].error_message
        r = c.request(IncrementalAlterConfigsRequest(resources=[IR(resource_type=4, resource_name="1", configs=[
            C(name="log.cleaner.min.cleanable.ratio", config_operation=SET, value="0.3")])], validate_only=False), 1)
        assert r.responses[0].error_code == 0
        brk = describe(c, 4, "1", ["log.cleaner.min.cleanable.ratio", "log.retention.ms"])
        e = brk["log.cleaner.min.cleanable.ratio"]
        assert (e.value, e.config_source) == ("0.3", 2)
        assert [(s.value, s.source) for s in e.synonyms] == [("0.3", 2), ("0.1", 3), ("0.5", 5)]
        assert (brk["log.retention.ms"].value, brk["log.retention.ms"].config_source) == ("7200000", 3)
        topic = describe(c, 2, "t", ["min.cleanable.dirty.ratio", "retention.ms"])
        assert (topic["min.cleanable.dirty.ratio"].value, topic["min.cleanable.dirty.ratio"].config_source) == ("0.3", 2)
        assert (topic["retention.ms"].value, topic["retention.ms"].config_source) == ("7200000", 3)
        r = c.request(IncrementalAlterConfigsRequest(resources=[IR(resource_type=4, resource_name="", configs=[
            C(name="num.partitions", config_operation=SET, value="3")])], validate_only=False), 1).responses[0]
        assert r.error_code == ErrorCode.INVALID_REQUEST and "Cannot update these configs dynamically" in r.error_message
        r = c.request(IncrementalAlterConfigsRequest(resources=[IR(resource_type=4, resource_name="", configs=[
            C(name="log.cleaner.min.cleanable.ratio", config_operation=SET, value="3")])], validate_only=False), 1)
        assert r.responses[0].error_code == ErrorCode.INVALID_CONFIG
        r = c.request(IncrementalAlterConfigsRequest(resources=[IR(resource_type=4, resource_name="9", configs=[])],
                                                     validate_only=False), 1)
        assert r.responses[0].error_code == ErrorCode.INVALID_REQUEST
    finally:
        b.kill()
    b = BrokerProcess(tmp_path / "d", ["log.retention.hours=10"]).start()   # persisted
    try:
        brk = describe(RawClient(b.port), 4, "1", ["log.cleaner.min.cleanable.ratio"])
        assert brk["log.cleaner.min.cleanable.ratio"].value == "0.3"
    finally:
        b.stop()


def test_delete_records(broker):
    from tests.broker.test_data_path import batch, produce
    c = RawClient(broker.port)
    assert create(c, "d", 2).error_code == 0
    assert create(c, "compacted", 1, configs={"cleanup.policy": "compact"}).error_code == 0
    for _i in range(5):
        assert produce(c, "d", batch(2)).error_code == 0
    T, P = DeleteRecordsRequest.DeleteRecordsTopic, DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition

    def delete(topic, parts, version=2):
        r = c.request(DeleteRecordsRequest(topics=[T(name=topic, partitions=[P(partition_index=p, offset=o)
                                                                           for p, o in parts])], timeout_ms=5000), version)
        return [(p.partition_index, p.low_watermark, p.error_code) for p in r.topics[0].partitions]

    assert delete("d", [(0, 4), (1, 0), (5, 0)], version=0) == [
        (0, 4, 0), (1, 0, 0), (5, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert delete("d", [(0, 11)]) == [(0, -1, ErrorCode.OFFSET_OUT_OF_RANGE)]
    assert delete("d", [(0, -1)]) == [(0, 10, 0)]
    assert delete("nope", [(0, 1)]) == [(0, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert delete("compacted", [(0, 0)]) == [(0, -1, ErrorCode.POLICY_VIOLATION)]
    # internal topics: refused before the cleanup policy is looked at (ReplicaManager.deleteRecordsOnLocalLog)
    c.request(FindCoordinatorRequest(key="g", key_type=0), 1)          # creates __consumer_offsets
    c.request(FindCoordinatorRequest(key="tx", key_type=1), 1)         # creates __transaction_state
    assert delete("__consumer_offsets", [(0, -1)]) == [(0, -1, ErrorCode.INVALID_TOPIC_EXCEPTION)]
    assert delete("__transaction_state", [(0, 0)]) == [(0, -1, ErrorCode.INVALID_TOPIC_EXCEPTION)]
    lo = c.request(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name="d", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-2)])]), 7)
    assert lo.topics[0].partitions[0].offset == 10


def test_min_insync_replicas_refuses_acks_all(broker):
    """A topic asking for 2 in-sync replicas on this one-node cluster: acks=-1 gets
    NOT_ENOUGH_REPLICAS (as a single Kafka broker answers), acks=1 is written."""
    from tests.broker.test_data_path import batch, produce
    c = RawClient(broker.port)
    assert create(c, "isr", 1, configs={"min.insync.replicas": "2"}).error_code == 0
    r = produce(c, "isr", batch(1), acks=-1)
    assert r.error_code == ErrorCode.NOT_ENOUGH_REPLICAS and "min.isr requirement of 2" in r.error_message
    assert produce(c, "isr", batch(1), acks=1).error_code == 0
    IC = IR.AlterableConfig
    c.request(IncrementalAlterConfigsRequest(resources=[IR(resource_type=2, resource_name="isr", configs=[
        IC(name="min.insync.replicas", config_operation=DELETE, value=None)])], validate_only=False), 1)
    assert produce(c, "isr", batch(1), acks=-1).error_code == 0


def test_topic_compression_type_recompresses(broker):
    """compression.type=zstd on the topic: an uncompressed client batch is stored (and fetched)
    as zstd; altered back to producer, batches are kept as sent."""
    from kgroup.protocol.records import Compression, iter_batches
    from tests.broker.test_data_path import batch, fetch, produce
    c = RawClient(broker.port)
    assert create(c, "z", 1, configs={"compression.type": "zstd"}).error_code == 0
    assert produce(c, "z", batch(5)).error_code == 0
    IC = IR.AlterableConfig
    c.request(IncrementalAlterConfigsRequest(resources=[IR(resource_type=2, resource_name="z", configs=[
        IC(name="compression.type", config_operation=DELETE, value=None)])], validate_only=False), 1)
    assert produce(c, "z", batch(5)).error_code == 0
    pd = fetch(c, "z", 0)
    codecs = [h.compression for _, h, _ in iter_batches(memoryview(pd.records))]
    assert codecs == [Compression.ZSTD, Compression.NONE]


def test_group_configs(tmp_path):
    """DescribeConfigs / IncrementalAlterConfigs / AlterConfigs on a GROUP (Kafka 4.0 GroupConfig)."""
    b = BrokerProcess(tmp_path / "d").start()
    try:
        c = RawClient(b.port)
        cfg = describe(c, 32, "g")     # any group id: the broker defaults
        assert {k: (e.value, e.config_source, e.config_type) for k, e in cfg.items()} == {
            "consumer.session.timeout.ms": ("45000", 5, 3), "consumer.heartbeat.interval.ms": ("5000", 5, 3),
            "share.session.timeout.ms": ("45000", 5, 3), "share.heartbeat.interval.ms": ("5000", 5, 3),
            "share.record.lock.duration.ms": ("30000", 5, 3), "share.delivery.count.limit": ("5", 5, 3),
            "share.partition.max.record.locks": ("2000", 5, 3), "share.auto.offset.reset": ("latest", 5, 2),
            "share.isolation.level": ("read_uncommitted", 5, 2), "share.renew.acknowledge.enable": ("true", 5, 1)}
        C = IR.AlterableConfig

        def alter(ops, name="g"):
            r = c.request(IncrementalAlterConfigsRequest(resources=[IR(resource_type=32, resource_name=name, configs=[
                C(name=k, config_operation=op, value=v) for k, op, v in ops])], validate_only=False), 1)
            return r.responses[0].error_code, r.responses[0].error_message

        assert alter([("consumer.session.timeout.ms", SET, "50000"), ("consumer.heartbeat.interval.ms", SET, "8000")]) \
            == (0, None)
        cfg = describe(c, 32, "g")
        assert (cfg["consumer.session.timeout.ms"].value, cfg["consumer.session.timeout.ms"].config_source) == ("50000", 8)
        assert describe(c, 32, "other")["consumer.session.timeout.ms"].value == "45000"
        assert alter([("consumer.session.timeout.ms", SET, "70000")]) == (
            ErrorCode.INVALID_CONFIG,
            "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms")
        assert alter([("consumer.heartbeat.interval.ms", SET, "1000")]) == (
            ErrorCode.INVALID_CONFIG,
            "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms")
        assert alter([("share.session.timeout.ms", SET, "1")]) == (
            ErrorCode.INVALID_CONFIG, "share.session.timeout.ms must be greater than or equal to "
                                      "group.share.min.session.timeout.ms")
        assert alter([("share.auto.offset.reset", SET, "earliest"), ("share.isolation.level", SET, "read_committed")]) \
            == (0, None)
        cfg = describe(c, 32, "g")
        assert (cfg["share.auto.offset.reset"].value, cfg["share.auto.offset.reset"].config_source) == ("earliest", 8)
        assert alter([("streams.session.timeout.ms", SET, "1")]) == (
            ErrorCode.INVALID_CONFIG, "Unknown group config name: streams.session.timeout.ms")
        assert alter([("consumer.session.timeout.ms", APPEND, "1")])[0] == ErrorCode.INVALID_CONFIG
        assert alter([("consumer.session.timeout.ms", SET, "1")], name="")[0] == ErrorCode.INVALID_REQUEST
        r = c.request(DescribeConfigsRequest(resources=[DR(resource_type=32, resource_name="", configuration_keys=None)]), 4)
        assert (r.results[0].error_code, r.results[0].error_message) == (ErrorCode.INVALID_REQUEST,
                                                                         "Group name must not be empty")
        # legacy AlterConfigs replaces the group's set: the heartbeat interval returns to its default
        AC = AR.AlterableConfig
        r = c.request(AlterConfigsRequest(resources=[AR(resource_type=32, resource_name="g", configs=[
            AC(name="consumer.session.timeout.ms", value="55000")])], validate_only=False), 2).responses[0]
        assert r.error_code == 0
        cfg = describe(c, 32, "g")
        assert (cfg["consumer.heartbeat.interval.ms"].value, cfg["consumer.heartbeat.interval.ms"].config_source) == (
            "5000", 5)
    finally:
        b.kill()
    b = BrokerProcess(tmp_path / "d").start()      # persisted
    try:
        assert describe(RawClient(b.port), 32, "g")["consumer.session.timeout.ms"].value == "55000"
    finally:
        b.stop()


def test_group_configs_apply_to_consumer_groups(tmp_path):
    """A group's consumer.heartbeat.interval.ms set by IncrementalAlterConfigs is what its
    ConsumerGroupHeartbeats answer (Kafka's GroupConfigManager), from the next heartbeat on and
    after a restart; other groups keep the broker's."""
    C = IR.AlterableConfig

    def alter(c, group, op, value=None, validate_only=False):
        r = c.request(IncrementalAlterConfigsRequest(resources=[IR(resource_type=32, resource_name=group, configs=[
            C(name="consumer.heartbeat.interval.ms", config_operation=op, value=value)])],
            validate_only=validate_only), 1)
        assert r.responses[0].error_code == 0, r

    def heartbeat(c, group, member_id, epoch):
        """ConsumerGroupHeartbeat (a join at epoch 0) once the coordinator has loaded."""
        deadline = time.monotonic() + 20
        while True:
            join = epoch == 0
            r = c.request(ConsumerGroupHeartbeatRequest(
                group_id=group, member_id=member_id, member_epoch=epoch, rebalance_timeout_ms=30000 if join else -1,
                subscribed_topic_names=["t"] if join else None, topic_partitions=[] if join else None), 1)
            if r.error_code not in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE) \
                    or time.monotonic() > deadline:
                assert r.error_code == 0, r
                return r
            time.sleep(0.1)

    b = BrokerProcess(tmp_path / "d").start()
    try:
        c = RawClient(b.port)
        assert create(c, "t", 2).error_code == 0
        c.request(FindCoordinatorRequest(key="cg", key_type=0), 1)
        alter(c, "cg", SET, "8000")
        member = str(uuid.uuid4())
        r = heartbeat(c, "cg", member, 0)
        assert r.heartbeat_interval_ms == 8000
        assert heartbeat(c, "other", str(uuid.uuid4()), 0).heartbeat_interval_ms == 5000
        alter(c, "cg", SET, "9000", validate_only=True)
        assert heartbeat(c, "cg", member, r.member_epoch).heartbeat_interval_ms == 8000
        alter(c, "cg", DELETE)
        assert heartbeat(c, "cg", member, r.member_epoch).heartbeat_interval_ms == 5000
        alter(c, "cg", SET, "6000")
        assert heartbeat(c, "cg", member, r.member_epoch).heartbeat_interval_ms == 6000
    finally:
        b.kill()
    b = BrokerProcess(tmp_path / "d").start()      # the shards get the persisted configs at start
    try:
        c = RawClient(b.port)
        assert heartbeat(c, "cg", str(uuid.uuid4()), 0).heartbeat_interval_ms == 6000
    finally:
        b.stop()
