"""kgroup.testing.rdkafka_mock: the consumer-group (KIP-848) settings MockCluster sets on
librdkafka's mock reach its ConsumerGroupHeartbeat answers and its session expiry."""
import time
import uuid

from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kgroup.testing.rdkafka_mock import MockCluster

from tests.harness import RawClient


def join(client: RawClient, group: str):
    # the mock wants a null regex only with null topic names, so a name list comes with ""
    return client.request(ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=uuid.uuid4().hex[:22], member_epoch=0, rebalance_timeout_ms=5000,
        subscribed_topic_names=["t"], subscribed_topic_regex="", topic_partitions=[]), 1)


def test_session_timeout_and_heartbeat_interval_reach_consumer_group_members():
    # one mock left at its defaults next to one configured, so the settings are what differs
    with MockCluster(topics={"t": 2}) as default, MockCluster(topics={"t": 2}) as tuned:
        tuned.set_group_consumer_heartbeat_interval_ms(200)
        tuned.set_group_consumer_session_timeout_ms(1000)
        clients = {name: RawClient(int(mc.bootstrap_servers.rsplit(":", 1)[1]))
                   for name, mc in (("default", default), ("tuned", tuned))}
        try:
            joined = {name: join(c, "g") for name, c in clients.items()}
            assert all(r.error_code == 0 for r in joined.values()), joined
            assert joined["tuned"].heartbeat_interval_ms == 200
            assert joined["default"].heartbeat_interval_ms != 200
            time.sleep(3)  # silent for longer than the tuned 1 s session, well within the default one
            again = {name: c.request(ConsumerGroupHeartbeatRequest(
                group_id="g", member_id=joined[name].member_id, member_epoch=joined[name].member_epoch), 1)
                for name, c in clients.items()}
            assert again["tuned"].error_code == E.UNKNOWN_MEMBER_ID, again["tuned"]
            assert again["default"].error_code == 0, again["default"]
        finally:
            for c in clients.values():
                c.close()
