"""Connection and producer behaviour against a scripted in-process broker (asyncio server speaking
our codec): ApiVersions negotiation and its UNSUPPORTED_VERSION fallback, pipelining, request
timeouts, and the idempotent producer's retries (same sequence, order kept)."""
import asyncio
import struct

import pytest

from kgroup.client.connection import BrokerConnection, KafkaClient
from kgroup.client.config import ProducerConfig
from kgroup.client.errors import KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError
from kgroup.client.producer import Producer
from kgroup.protocol.api import API_BY_KEY, ApiKey, encode_response, parse_request, peek_key_version
from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.api_versions import ApiVersionsResponse
from kgroup.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kgroup.protocol.messages.init_producer_id import InitProducerIdResponse
from kgroup.protocol.messages.metadata import MetadataResponse
from kgroup.protocol.messages.produce import ProduceResponse
from kgroup.protocol.records import decode_records, read_batch_header


class FakeBroker:
    """Answers with ``handlers[api_key](header, body, version)``; None means no answer."""

    def __init__(self, handlers=None, versions=None):
        self.handlers = dict(handlers or {})
        self.versions = versions or {k: (api.request.VERSIONS[0], api.request.VERSIONS[1])
                                     for k, api in API_BY_KEY.items()}
        self.received = []
        self.handlers.setdefault(ApiKey.API_VERSIONS, self._api_versions)
        self.handlers.setdefault(ApiKey.METADATA, self._metadata)
        self.topics = {}

    async def start(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self):
        self.server.close()

    def _api_versions(self, header, body, version):
        return ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                                             for k, (lo, hi) in self.versions.items()])

    def _metadata(self, header, body, version):
        R = MetadataResponse
        return R(brokers=[R.MetadataResponseBroker(node_id=0, host="127.0.0.1", port=self.port)], controller_id=0,
                 cluster_id="fake", topics=[R.MetadataResponseTopic(name=t, partitions=[
                     R.MetadataResponsePartition(partition_index=p, leader_id=0, replica_nodes=[0], isr_nodes=[0])
                     for p in range(n)]) for t, n in self.topics.items()])

    async def _serve(self, reader, writer):
        """Read requests as they come (pipelining); answer them in order."""
        answers: asyncio.Queue = asyncio.Queue()

        async def write():
            while True:
                key, version, cid, task = await answers.get()
                resp = await task
                if resp is not None:
                    writer.writelines(encode_response(key, version, cid, resp))
                    await writer.drain()

        async def answer(resp):
            return await resp if asyncio.iscoroutine(resp) else resp

        writer_task = asyncio.ensure_future(write())
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                key, version = peek_key_version(frame)
                if key == ApiKey.API_VERSIONS and version > self.versions[ApiKey.API_VERSIONS][1]:
                    cid = struct.unpack_from(">i", frame, 4)[0]  # Kafka answers in v0 with its range
                    lo, hi = self.versions[ApiKey.API_VERSIONS]
                    resp = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[
                        ApiVersionsResponse.ApiVersion(api_key=18, min_version=lo, max_version=hi)])
                    answers.put_nowait((key, 0, cid, asyncio.ensure_future(answer(resp))))
                    continue
                header, body = parse_request(memoryview(frame))
                self.received.append((key, version, body))
                task = asyncio.ensure_future(answer(self.handlers[key](header, body, version)))
                answers.put_nowait((key, version, header.correlation_id, task))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer_task.cancel()


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_api_versions_fallback_and_version_choice():
    async def go():
        fake = await FakeBroker(versions={ApiKey.API_VERSIONS: (0, 2), ApiKey.FETCH: (4, 12),
                                          ApiKey.HEARTBEAT: (0, 4)}).start()
        conn = await BrokerConnection("127.0.0.1", fake.port, node_id=0, client_id="c").connect()
        # we asked v4, got UNSUPPORTED_VERSION in v0 format, retried at the broker's max (2)
        assert [(k, v) for k, v, _ in fake.received] == [(ApiKey.API_VERSIONS, 2)]
        assert conn.api_version(ApiKey.FETCH) == 12  # min(ours 17, theirs 12)
        assert conn.api_version(ApiKey.FETCH, max_version=9) == 9
        with pytest.raises(UnsupportedVersionError):
            conn.api_version(ApiKey.JOIN_GROUP)  # not offered by the broker
        conn.close()
        await fake.stop()
    run(go())


def test_requests_are_pipelined_and_matched_by_correlation_id():
    gate = asyncio.Event()

    async def go():
        async def heartbeat(header, body, version):
            if body.member_id == "first":
                await gate.wait()  # hold the first answer until all three requests arrived
            return HeartbeatResponse(error_code=len(body.member_id))
        fake = await FakeBroker({ApiKey.HEARTBEAT: heartbeat}).start()
        conn = await BrokerConnection("127.0.0.1", fake.port, node_id=0, client_id="c").connect()
        tasks = [asyncio.ensure_future(conn.send(HeartbeatRequest(group_id="g", member_id=m)))
                 for m in ("first", "second!", "third!!!")]
        while len(fake.received) < 4:
            await asyncio.sleep(0.01)
        assert conn.in_flight == 3
        gate.set()
        assert [r.error_code for r in await asyncio.gather(*tasks)] == [5, 7, 8]
        conn.close()
        await fake.stop()
    run(go())


def test_request_timeout_closes_the_connection():
    async def go():
        fake = await FakeBroker({ApiKey.HEARTBEAT: lambda h, b, v: None}).start()
        conn = await BrokerConnection("127.0.0.1", fake.port, node_id=0, client_id="c",
                                      request_timeout_ms=200).connect()
        other = asyncio.ensure_future(conn.send(HeartbeatRequest(group_id="g"), timeout_ms=5000))
        with pytest.raises(KafkaTimeoutError):
            await conn.send(HeartbeatRequest(group_id="g"))
        assert conn.closed
        with pytest.raises(KafkaConnectionError):
            await other
        with pytest.raises(KafkaConnectionError):
            await conn.send(HeartbeatRequest(group_id="g"))
        await fake.stop()
    run(go())


def test_least_loaded_node_prefers_idle_connections():
    async def go():
        fake = await FakeBroker({ApiKey.HEARTBEAT: lambda h, b, v: None}).start()
        client = KafkaClient(ProducerConfig(bootstrap_servers=f"127.0.0.1:{fake.port}"))
        await client.refresh_metadata([])
        assert list(client.nodes) == [0] and client.least_loaded_node() == 0
        await client.close()
        await fake.stop()
    run(go())


class SequencedLog:
    """A partition log checking idempotent sequences like a broker, with scripted failures."""

    def __init__(self, failures, hold_first_for=0):
        self.failures = list(failures)  # error codes for the next produce requests (0: normal)
        self.expected = {}
        self.log = []
        self.attempts = []
        self.hold = hold_first_for  # answer the first request only once this many more arrived
        self.requests = 0

    async def produce(self, header, body, version):
        self.requests += 1
        fail = self.failures.pop(0) if self.failures else 0  # decided in arrival order
        for td in body.topic_data:
            for pd in td.partition_data:
                h = read_batch_header(bytes(pd.records))
                self.attempts.append((pd.index, h.producer_id, h.base_sequence, h.records_count))
        if self.requests == 1 and self.hold:
            for _ in range(200):
                if self.requests > self.hold:
                    break
                await asyncio.sleep(0.005)
        P = ProduceResponse
        responses = []
        for td in body.topic_data:
            parts = []
            for pd in td.partition_data:
                batch = bytes(pd.records)
                h = read_batch_header(batch)
                key = (td.name, pd.index)
                exp = self.expected.get(key, 0)
                code, base = 0, -1
                if fail:
                    code = fail
                elif h.base_sequence < exp:
                    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER
                elif h.base_sequence > exp:
                    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
                else:
                    base = len(self.log)
                    self.log += [r.value for r in decode_records(batch)]
                    self.expected[key] = exp + h.records_count
                parts.append(P.PartitionProduceResponse(index=pd.index, error_code=code, base_offset=base))
            responses.append(P.TopicProduceResponse(name=td.name, partition_responses=parts))
        return P(responses=responses)


def _producer_broker(log):
    fake = FakeBroker({ApiKey.PRODUCE: log.produce,
                       ApiKey.INIT_PRODUCER_ID: lambda h, b, v: InitProducerIdResponse(producer_id=42, producer_epoch=0)})
    fake.topics["t"] = 1
    return fake


def test_idempotent_retry_keeps_sequence_and_order():
    log = SequencedLog([ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_LEADER_OR_FOLLOWER])

    async def go():
        fake = await _producer_broker(log).start()
        async with Producer(bootstrap_servers=f"127.0.0.1:{fake.port}", linger_ms=0, retry_backoff_ms=10) as p:
            metas = await asyncio.gather(*[await p.send("t", f"r{i}".encode(), partition=0) for i in range(3)])
        await fake.stop()
        return metas
    metas = run(go())
    assert log.log == [b"r0", b"r1", b"r2"]
    assert [m.offset for m in metas] == [0, 1, 2]
    assert all(pid == 42 for _, pid, _, _ in log.attempts)
    assert [seq for _, _, seq, _ in log.attempts[:3]] == [0, 0, 0]  # re-sent twice with the same sequence
    assert sum(n for _, _, _, n in log.attempts[2:]) == 3  # then everything exactly once


def test_out_of_order_behind_a_retried_batch_is_retried_in_order():
    # request 1 (seq 0) fails NOT_LEADER; request 2 (seq 1) was already in flight and gets OUT_OF_ORDER
    log = SequencedLog([ErrorCode.NOT_LEADER_OR_FOLLOWER], hold_first_for=1)

    async def go():
        fake = await _producer_broker(log).start()
        async with Producer(bootstrap_servers=f"127.0.0.1:{fake.port}", linger_ms=0, batch_size=1,
                            retry_backoff_ms=10) as p:
            f0 = await p.send("t", b"a", partition=0)
            f1 = await p.send("t", b"b", partition=0)
            metas = await asyncio.gather(f0, f1)
        await fake.stop()
        return metas
    metas = run(go())
    assert log.log == [b"a", b"b"] and [m.offset for m in metas] == [0, 1]
    assert [seq for _, _, seq, _ in log.attempts] == [0, 1, 0, 1]  # both in flight, both re-sent in order


def test_duplicate_sequence_is_success():
    log = SequencedLog([])

    async def go():
        fake = await _producer_broker(log).start()
        log.expected[("t", 0)] = 5  # the broker already has sequences 0-4 (an earlier attempt landed)
        async with Producer(bootstrap_servers=f"127.0.0.1:{fake.port}", linger_ms=0) as p:
            meta = await (await p.send("t", b"x", partition=0))
        await fake.stop()
        return meta
    assert run(go()).offset == -1


def test_non_retriable_error_fails_the_future():
    log = SequencedLog([ErrorCode.INVALID_RECORD])

    async def go():
        fake = await _producer_broker(log).start()
        async with Producer(bootstrap_servers=f"127.0.0.1:{fake.port}", linger_ms=0) as p:
            fut = await p.send("t", b"x", partition=0)
            with pytest.raises(Exception) as info:
                await fut
        await fake.stop()
        return info.value
    assert run(go()).code == ErrorCode.INVALID_RECORD



def test_consumer_sends_the_next_fetch_before_returning_records():
    from kgroup.client.consumer import Consumer
    from kgroup.client.types import TopicPartition
    from kgroup.protocol.messages.fetch import FetchResponse
    from kgroup.protocol.records import Record, build_batch
    fetches = []

    async def fetch(header, body, version):
        part = body.topics[0].partitions[0]
        fetches.append(part.fetch_offset)
        F = FetchResponse
        records = None
        if part.fetch_offset == 0:
            records = build_batch([Record(b"k", f"v{i}".encode(), (), 1000 + i) for i in range(3)])
        else:
            await asyncio.sleep(body.max_wait_ms / 1000)
        return F(responses=[F.FetchableTopicResponse(topic=body.topics[0].topic, topic_id=body.topics[0].topic_id,
                 partitions=[F.PartitionData(partition_index=0, high_watermark=3, records=records)])])

    async def go():
        fake = FakeBroker({ApiKey.FETCH: fetch})
        fake.topics["t"] = 1
        await fake.start()
        async with Consumer(bootstrap_servers=f"127.0.0.1:{fake.port}", fetch_max_wait_ms=300) as c:
            tp = TopicPartition("t", 0)
            c.assign([tp])
            c.seek(tp, 0)
            records = await c.poll(2000)
            assert [r.value for r in records] == [b"v0", b"v1", b"v2"]
            await asyncio.sleep(0.05)  # the application "processes" the records...
            assert fetches == [0, 3]  # ...while the next fetch is already at the broker
            assert c.highwater(tp) == 3
        await fake.stop()
    run(go())
