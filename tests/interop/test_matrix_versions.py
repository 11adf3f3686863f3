"""Matrix: the API versions each client negotiates with kgroup. Each client runs a short
session through a recording proxy (the broker advertises the proxy, so every connection after
bootstrap goes through it too): produce 30 records, consume them in a group with commits, leave,
and one admin call. Every request's (API key, version) must lie in the broker's advertised range
(a client picking a version the broker does not serve would have its connection closed), and
ApiVersions must be among them. The versions are recorded in the junit report (property
``api_versions``) for scripts/compat_matrix.py's README table, with the client software name and
version the client sent in ApiVersions v3+ (KIP-511), if any."""
import json
import subprocess

import pytest

from kgroup.broker.handlers import advertised
from kgroup.protocol.api import API_BY_KEY
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from tests.conftest import ROOT
from tests.harness import BrokerProcess, RawClient
from tests.interop.test_matrix_harness import (
    BROKER_OVERRIDES, CONSUMER_PROTOCOL_CLIENTS, DRIVER_JS, GROUP_CLIENTS, Members, RecordingProxy, check_result,
    kcat_bin, node_bin, produce, run_per_client, tag, wait_until)

pytestmark = [pytest.mark.interop, pytest.mark.matrix]

PARTITIONS = 2
CLIENTS = GROUP_CLIENTS + CONSUMER_PROTOCOL_CLIENTS
RANGES = {k: (lo, hi) for k, lo, hi in advertised()}


def api_name(key: int) -> str:
    return API_BY_KEY[key].request.__name__[:-len("Request")] if key in API_BY_KEY else f"api{key}"


def summarize(negotiated: dict) -> str:
    """'ApiVersions v3, Metadata v12, ...' in API key order; several versions as 'v0,1'."""
    return ", ".join(f"{api_name(k)} v{','.join(map(str, sorted(vs)))}" for k, vs in sorted(negotiated.items()))


def out_of_range(negotiated: dict) -> list:
    return [(api_name(k), v, RANGES.get(k)) for k, vs in negotiated.items() for v in vs
            if k not in RANGES or not RANGES[k][0] <= v <= RANGES[k][1]]


def _admin_call(client, bootstrap, group, topic):
    if client == "kgroup.consumer":
        from kgroup.client.sync import KafkaAdmin
        with KafkaAdmin(bootstrap_servers=bootstrap) as a:
            assert not a.describe_consumer_groups([group])[group].error.value
            a.list_group_offsets(group)
        return
    client = client.removesuffix(".consumer")  # confluent-kafka's admin describes with ConsumerGroupDescribe
    if client == "kafka-python":
        from kafka.admin import KafkaAdminClient
        a = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
        try:
            a.describe_groups([group])
            a.list_group_offsets({group: None})
        finally:
            a.close()
    elif client == "aiokafka":
        import asyncio

        from aiokafka.admin import AIOKafkaAdminClient

        async def run():
            a = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await a.start()
            try:
                await a.describe_consumer_groups([group])
                await a.list_consumer_group_offsets(group)
            finally:
                await a.close()
        asyncio.run(run())
    elif client == "confluent-kafka":
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka.admin import AdminClient
        a = AdminClient({"bootstrap.servers": bootstrap})
        a.describe_consumer_groups([group], request_timeout=10)[group].result(10)
        a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    elif client == "kcat":
        subprocess.run([kcat_bin(), "-b", bootstrap, "-L"], check=True, capture_output=True, timeout=60)
    elif client == "kafkajs":
        conf = {"role": "admin", "bootstrap": bootstrap, "group": group, "topics": [topic], "log_level": "WARN"}
        subprocess.run([node_bin(), DRIVER_JS, json.dumps(conf)], cwd=ROOT, check=True, capture_output=True,
                       timeout=60)


def _session(client, tmp_path):
    proxy = RecordingProxy()
    broker = BrokerProcess(tmp_path / f"data-{client}", BROKER_OVERRIDES + [proxy.advertised_listener()]).start()
    proxy.start(broker.port)
    members = Members()
    topic = group = f"versions-{client}"
    try:
        c = RawClient(broker.port)
        CT = CreateTopicsRequest.CreatableTopic
        c.request(CreateTopicsRequest(topics=[CT(name=topic, num_partitions=PARTITIONS, replication_factor=1)]), 5)
        c.close()
        produce(client, proxy.bootstrap, topic, [(f"k{i}", f"v{i}", None) for i in range(30)])
        m = members.start(client, proxy.bootstrap, group, [topic], log_dir=str(tmp_path))
        wait_until(lambda: len({r[3] for r in m.records()}) >= 30, 40, lambda: f"30 records: {m.describe()}")
        if client == "kcat":
            import time
            time.sleep(1.0)  # an auto-commit round
        m.stop()
        _admin_call(client, proxy.bootstrap, group, topic)
        negotiated = proxy.negotiated()
        assert 18 in negotiated, "the client never sent ApiVersions"
        bad = out_of_range(negotiated)
        assert not bad, f"versions outside the advertised ranges: {bad}"
        # KIP-848: ConsumerGroupHeartbeat, and the admin's ConsumerGroupDescribe; else JoinGroup + SyncGroup
        group_apis = (68, 69) if client.endswith(".consumer") else (11, 14)
        for needed in (0, 1, 3, 8, 9, 10) + group_apis:  # produce, fetch, metadata, commits, group
            assert needed in negotiated, f"{api_name(needed)} never used: {summarize(negotiated)}"
        software = sorted({f"{n}/{v}" for n, v in proxy.software.values()})
        return {"versions": summarize(negotiated), "software": software}
    except AssertionError as e:
        raise AssertionError(f"{e}\n{members.describe()}") from e
    finally:
        members.close()
        proxy.close()
        broker.stop()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("matrix-versions")
    return run_per_client(_session, CLIENTS, tmp)


@pytest.mark.parametrize("client", CLIENTS)
def test_negotiated_api_versions_are_served(results, client, record_property):
    tag(record_property, client, "api-versions")
    value = check_result(results, client)
    record_property("api_versions", value["versions"])
    record_property("client_software", ", ".join(value["software"]))
