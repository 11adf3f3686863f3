"""Time travel (kgroup/broker/test_control.py): ``advance_time`` fires every coordinator timer
that falls due, at its own deadline, and nothing before it — through real clients where one is
involved (confluent-kafka consumers in classic and consumer-protocol groups, a transactional
producer), and on the logs (retention, segment rolling, producer-id expiry)."""
import threading
import time

import pytest

from kgroup.testing.broker import KafkaBroker

pytestmark = pytest.mark.interop


class PollingConsumer:
    """A confluent-kafka consumer polling on a thread, as an application's would (its client
    keeps heartbeating throughout)."""

    def __init__(self, broker, group, topic, **conf):
        from confluent_kafka import Consumer
        self.consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                                  "auto.offset.reset": "earliest", "client.id": conf.pop("client.id", "c1"),
                                  **conf})
        self.consumer.subscribe([topic])
        self.records = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            m = self.consumer.poll(0.05)
            if m is not None and not m.error():
                self.records.append(m)

    def close(self):
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


def advance_and_look(b: KafkaBroker, seconds: float, group: str):
    """Advance the clock and read the group in the same event-loop turn: no client request can
    come in between (a rejoin would hide the expiry)."""
    def run(broker):
        tc = broker.test_control
        return tc.advance_time(int(seconds * 1000)), tc.group(group)
    return b.call(run)


def test_a_classic_member_still_heartbeating_is_expired_by_advancing_past_its_session_timeout(kafka_broker):
    b = kafka_broker
    b.create_topic("t", 2)
    c = PollingConsumer(b, "g", "t", **{"session.timeout.ms": 45000, "heartbeat.interval.ms": 1000})
    try:
        g = b.wait_for_group("g", "Stable", members=1, timeout=20)
        member = g["members"][0]["member_id"]
        started = time.monotonic()
        # not early: heartbeats came within the last second or so, the deadline is >= 44 s away
        _, g = advance_and_look(b, 40, "g")
        assert g["state"] == "Stable" and [m["member_id"] for m in g["members"]] == [member]
        # one jump past the session timeout: expired although the client still heartbeats
        travel, g = advance_and_look(b, 46, "g")
        assert travel["deadlines"] >= 1
        assert g["members"] == [] and g["state"] == "Empty", g
        expired = [e for e in b.timeline("g") if e["event"] == "member-expired"]
        assert expired and expired[-1]["member_id"] == member, b.timeline("g")
        # the client finds out at its next heartbeat and joins again, as after a real expiry
        g = b.wait_for_group("g", "Stable", members=1, timeout=20)
        assert g["members"][0]["member_id"] != member
        assert time.monotonic() - started < 20       # instead of the 45 s session timeout
    finally:
        c.close()


def test_a_consumer_protocol_member_is_fenced_by_advancing_past_its_session_timeout(kafka_broker):
    b = kafka_broker
    b.create_topic("t", 2)
    c = PollingConsumer(b, "g", "t", **{"group.protocol": "consumer"})
    try:
        g = b.wait_for_group("g", "Stable", members=1, type="consumer", timeout=20)
        epoch = g["generation"]
        _, g = advance_and_look(b, 30, "g")        # group.consumer.session.timeout.ms: 45 s
        assert len(g["members"]) == 1 and g["generation"] == epoch
        _, g = advance_and_look(b, 46, "g")
        assert g["members"] == [] and g["generation"] == epoch + 1, g
        g = b.wait_for_group("g", "Stable", members=1, type="consumer", timeout=20)
        assert g["generation"] >= epoch + 2
        assert g["members"][0]["assignment"] == {"t": [0, 1]}
    finally:
        c.close()


@pytest.mark.kafka_broker_config(group_initial_rebalance_delay_ms=3000)
def test_the_initial_rebalance_delay_is_skipped_by_advancing(kafka_broker):
    b = kafka_broker
    b.create_topic("t")
    c = PollingConsumer(b, "g", "t")
    try:
        b.wait_for_group("g", "PreparingRebalance", members=1, timeout=10)
        _, g = advance_and_look(b, 1, "g")
        assert g["state"] == "PreparingRebalance"           # not early
        started = time.monotonic()
        b.advance_time(2.5)
        b.wait_for_group("g", "Stable", members=1, timeout=2.5)
        assert time.monotonic() - started < 2.5
    finally:
        c.close()


def test_a_transaction_is_aborted_by_advancing_past_its_timeout(kafka_broker):
    from confluent_kafka import KafkaException, Producer
    b = kafka_broker
    b.create_topic("t")
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": "tx",
                  "transaction.timeout.ms": 60000})
    p.init_transactions(10)
    p.begin_transaction()
    p.produce("t", b"v")
    p.flush(10)
    t = b.wait_for_transaction("tx", "Ongoing")
    assert t["partitions"] == ["t-0"]
    # not early: the abort comes at the first check (every 10 s) after the 60 s timeout
    b.advance_time(55)
    assert b.transactions()[0]["state"] == "Ongoing"
    b.advance_time(20)
    t = b.wait_for_transaction("tx", "CompleteAbort", timeout=5)
    assert t["producer_epoch"] >= 1                     # the epoch was bumped by the abort
    with pytest.raises(KafkaException):
        p.commit_transaction(10)


def test_an_idle_transactional_id_expires_by_advancing_past_its_expiration(kafka_broker):
    """transactional.id.expiration.ms (7 days): a transactional id whose last transaction
    completed is removed at the first check (every hour) past it, and not before."""
    from confluent_kafka import Producer
    b = kafka_broker
    b.create_topic("t")
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": "idle-tx"})
    p.init_transactions(10)
    p.begin_transaction()
    p.produce("t", b"v")
    p.commit_transaction(10)
    b.wait_for_transaction("idle-tx", "CompleteCommit")
    p.flush(1)
    del p
    b.advance_time(7 * 86400 - 60)
    assert [t["transactional_id"] for t in b.transactions()] == ["idle-tx"]
    b.advance_time(3600 + 120)
    assert b.transactions() == []


def test_offsets_retention_and_group_expiry(kafka_broker):
    b = kafka_broker
    b.create_topic("t")
    b.produce("t", ["a", "b"])
    b.consume("t", 2, group="g")
    assert b.group("g")["offsets"] == {"t": {"0": 2}}
    b.advance_time(6 * 86400)                   # offsets.retention.minutes: 7 days
    assert b.group("g")["offsets"] == {"t": {"0": 2}}
    travel = b.advance_time(86400 + 600)        # ... and the check every 10 minutes
    assert travel["deadlines"] >= 1
    assert b.group("g") is None


@pytest.mark.kafka_broker_config(log_retention_check_interval_ms=3600000)
def test_retention_deletes_segments_and_segment_ms_rolls(kafka_broker):
    b = kafka_broker
    # Kafka rolls by segment.ms on the records' timestamps: LogAppendTime ones are the broker's
    b.create_topic("t", configs={"retention.ms": "3600000", "segment.ms": "60000",
                                 "message.timestamp.type": "LogAppendTime"})
    b.produce("t", ["a", "b"])
    plog = b.broker.data_path.log("t", 0)
    assert len(plog.segments) == 1
    b.advance_time(30)
    b.produce("t", ["c"])
    assert len(plog.segments) == 1              # not early
    b.advance_time(31)                          # segment.ms: the next append rolls
    b.produce("t", ["d"])
    assert [s.base_offset for s in plog.segments] == [0, 3]
    b.advance_time(30 * 60)
    assert b.topics()[0]["partitions"][0]["log_start_offset"] == 0     # not early
    # the first segment's newest record is an hour old, the second's not yet
    travel = b.advance_time(1782)
    assert travel["segments_deleted"] == 1
    assert b.topics()[0]["partitions"][0]["log_start_offset"] == 3


@pytest.mark.kafka_broker_config(producer_id_expiration_ms=60000)
def test_idle_producer_ids_expire(kafka_broker):
    from confluent_kafka import Producer
    b = kafka_broker
    b.create_topic("t")
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "enable.idempotence": True})
    p.produce("t", b"v")
    p.flush(10)
    plog = b.broker.data_path.log("t", 0)
    assert len(b.call(lambda broker: plog.producer_state.producers)) == 1
    assert b.advance_time(50)["producers_expired"] == 0
    assert b.advance_time(11)["producers_expired"] == 1
    assert b.call(lambda broker: dict(plog.producer_state.producers)) == {}


@pytest.mark.kafka_broker_config(producer_id_expiration_ms=60000, producer_id_expiration_check_interval_ms=500)
def test_the_broker_removes_expired_producer_ids_every_check_interval(kafka_broker):
    from confluent_kafka import Producer
    b = kafka_broker
    b.create_topic("t")
    p = Producer({"bootstrap.servers": b.bootstrap_servers, "enable.idempotence": True})
    p.produce("t", b"v")
    p.flush(10)
    plog = b.broker.data_path.log("t", 0)
    time.sleep(1.2)                             # checks ran: not expired before its time
    assert len(b.call(lambda broker: plog.producer_state.producers)) == 1
    b.call(lambda broker: broker.clock.advance(61000))     # the clock alone: no check run by it
    deadline = time.monotonic() + 10
    while b.call(lambda broker: len(plog.producer_state.producers)) and time.monotonic() < deadline:
        time.sleep(0.1)                         # the broker's housekeeping (every second) removes it
    assert b.call(lambda broker: dict(plog.producer_state.producers)) == {}


def test_the_clock_is_per_broker(tmp_path):
    with KafkaBroker(tmp_path / "a") as a, KafkaBroker(tmp_path / "b") as b:
        a.advance_time(3600)
        assert a.clock()["offset_ms"] >= 3599_000
        assert b.clock()["offset_ms"] == 0
        assert "time travel" in a.log_tail() and "time travel" not in b.log_tail()     # a log each


def _share_setup(b, topic, n, group="sg", **configs):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    from confluent_kafka.admin import AdminClient
    b.create_topic(topic, 1)
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    r = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET)
        for k, v in {"share.auto.offset.reset": "earliest", **configs}.items()])
    for f in admin.incremental_alter_configs([r]).values():
        f.result(10)
    p = Producer({"bootstrap.servers": b.bootstrap_servers})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, partition=0)
    assert p.flush(10) == 0


def _share_poll(c, want, timeout):
    got, deadline = [], time.time() + timeout
    while time.time() < deadline and len(got) < want:
        for m in list(c.poll(0.5)):
            assert m.error() is None, m.error()
            got.append((m.offset(), m.delivery_count()))
    return got


@pytest.mark.kafka_broker_config(group_share_heartbeat_interval_ms=500, group_share_min_heartbeat_interval_ms=500)
def test_a_share_record_lock_expires_by_advancing_past_its_duration(kafka_broker):
    """A share consumer acquires records and never acknowledges them: advancing the clock past
    ``share.record.lock.duration.ms`` (30 s) makes them available again, delivered a second time
    to another consumer; advancing less does not."""
    from confluent_kafka import ShareConsumer
    b = kafka_broker
    _share_setup(b, "sq", 3)
    holder = ShareConsumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "sg",
                            "share.acknowledgement.mode": "explicit"})
    holder.subscribe(["sq"])
    other = None
    try:
        assert sorted(o for o, _ in _share_poll(holder, 3, 30)) == [0, 1, 2]
        other = ShareConsumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "sg"})
        other.subscribe(["sq"])
        b.advance_time(20)                      # not yet: still locked by the holder
        assert _share_poll(other, 1, 4) == []
        b.advance_time(11)                      # past the 30 s lock
        again = _share_poll(other, 3, 20)
        assert sorted(again) == [(0, 2), (1, 2), (2, 2)]
    finally:
        holder.close()
        if other is not None:
            other.close()
