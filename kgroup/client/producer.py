"""The asyncio producer: Java's KafkaProducer (RecordAccumulator + Sender + idempotence), without
transactions.

``await producer.send(topic, value, key=...)`` partitions the record (murmur2 of the key, or the
sticky partition for keyless records), appends it to the open batch of that partition and returns
a future resolving to :class:`RecordMetadata` (partition, offset, timestamp). The sender task
sends a partition's head batch once it is full (``batch.size``), ``linger.ms`` old, being
flushed, or a retry whose backoff elapsed; batches for the same leader travel in one
ProduceRequest (one batch per partition, at most ``max.in.flight.requests.per.connection``
requests in flight per broker).

Idempotence (on by default, as in Java 3.0+): an InitProducerId first, then every batch carries
the producer id/epoch and a per-partition base sequence assigned when the batch is first sent.
A retried batch keeps its sequence and is re-sent only when nothing else of its partition is in
flight, so the broker sees sequences in order; batches behind it that failed with
OUT_OF_ORDER_SEQUENCE_NUMBER are retried too. A batch that fails for good resets the producer id
(new InitProducerId, sequences from 0), as the Java client bumps its epoch. DUPLICATE_SEQUENCE_NUMBER
means the broker already has the batch: success.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import random
from typing import Mapping

from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.messages.init_producer_id import InitProducerIdRequest
from kgroup.protocol.messages.produce import ProduceRequest
from kgroup.protocol.primitives import varint_size
from kgroup.protocol.records import Compression, Record, build_batch

from .assignors import TopicPartition
from .config import ProducerConfig
from .connection import KafkaClient, now_ms, wall_ms
from .errors import (IllegalStateError, KafkaConnectionError, KafkaTimeoutError, RecordTooLargeError,
                     UnsupportedVersionError, is_retriable)
from .membership_types import ExponentialBackoff
from .partitioner import BuiltInPartitioner, partition_for_key
from .types import RecordMetadata

log = logging.getLogger("kgroup.client.producer")

_COMPRESSION = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
                "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
BATCH_OVERHEAD = 61
MAX_IN_FLIGHT_PER_PARTITION = 5


def record_size(key: bytes | None, value: bytes | None, headers) -> int:
    """DefaultRecord.sizeInBytes with zero deltas (an upper-bound-ish estimate)."""
    body = 1 + 1 + 1
    body += varint_size(-1 if key is None else len(key)) + (len(key) if key else 0)
    body += varint_size(-1 if value is None else len(value)) + (len(value) if value else 0)
    body += varint_size(len(headers))
    for k, v in headers:
        kb = k.encode() if isinstance(k, str) else k
        body += varint_size(len(kb)) + len(kb) + varint_size(-1 if v is None else len(v)) + (len(v) if v else 0)
    return body + varint_size(body)


class _Batch:
    __slots__ = ("tp", "records", "futures", "size", "created_ms", "base_sequence", "producer_id",
                 "producer_epoch", "attempts", "retry_at", "built", "closed")

    def __init__(self, tp: TopicPartition, now: int):
        self.tp = tp
        self.records: list[Record] = []
        self.futures: list[tuple[asyncio.Future, int, int]] = []
        self.size = BATCH_OVERHEAD
        self.created_ms = now
        self.base_sequence: int | None = None
        self.producer_id = -1
        self.producer_epoch = -1
        self.attempts = 0
        self.retry_at = 0
        self.built: bytes | None = None
        self.closed = False  # drained at least once: no more appends

    def complete(self, base_offset: int, log_append_time: int) -> None:
        for i, (fut, ksize, vsize) in enumerate(self.futures):
            if not fut.done():
                rec = self.records[i]
                ts = log_append_time if log_append_time >= 0 else rec.timestamp
                fut.set_result(RecordMetadata(self.tp.topic, self.tp.partition,
                                              base_offset + i if base_offset >= 0 else -1, ts, ksize, vsize))

    def fail(self, error: BaseException) -> None:
        for fut, _, _ in self.futures:
            if not fut.done():
                fut.set_exception(error)


class Producer:
    """An asyncio Kafka producer. Config keys are Kafka's or keyword arguments with underscores."""

    def __init__(self, config: Mapping | None = None, **configs):
        self.config = ProducerConfig(config, **configs)
        self._client = KafkaClient(self.config)
        self._acks = self.config.acks_value
        self._idempotent = self.config["enable.idempotence"]
        self._compression = _COMPRESSION[self.config["compression.type"]]
        self._ks = self.config["key.serializer"]
        self._vs = self.config["value.serializer"]
        self._queues: dict[TopicPartition, collections.deque[_Batch]] = {}
        self._partitioners: dict[str, BuiltInPartitioner] = {}
        self._inflight_node: dict[int, int] = collections.Counter()
        self._inflight_tp: dict[TopicPartition, int] = collections.Counter()
        self._inflight_batches: set[_Batch] = set()
        self._next_seq: dict[TopicPartition, int] = collections.Counter()
        self._producer_id = -1
        self._producer_epoch = -1
        self._backoff = ExponentialBackoff(self.config["retry.backoff.ms"], 2, self.config["retry.backoff.max.ms"],
                                           0.2, random.random)
        self._wakeup: asyncio.Event | None = None
        self._sender: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self._flushing = 0
        self._metadata_needed = False
        self._closed = False
        self._closing = False

    async def __aenter__(self) -> "Producer":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # --- send --------------------------------------------------------------------------------

    async def send(self, topic: str, value=None, key=None, *, partition: int | None = None,
                   timestamp_ms: int | None = None, headers=None) -> asyncio.Future:
        """Append a record; the returned future resolves to its RecordMetadata."""
        if self._closed or self._closing:
            raise IllegalStateError("Cannot perform operation after producer has been closed")
        self._start()
        key_bytes = self._ks(key) if self._ks is not None and key is not None else key
        value_bytes = self._vs(value) if self._vs is not None and value is not None else value
        headers = [(k, v) for k, v in (headers or [])]
        num_partitions = await self._wait_on_metadata(topic, self.config["max.block.ms"])
        size = record_size(key_bytes, value_bytes, headers)
        if size + BATCH_OVERHEAD > self.config["max.request.size"]:
            raise RecordTooLargeError(f"The message is {size + BATCH_OVERHEAD} bytes when serialized which is larger "
                                      f"than {self.config['max.request.size']}, which is the value of the "
                                      "max.request.size configuration.")
        sticky = None
        available = self._client.available_partitions(topic)
        if partition is None:
            if key_bytes is not None and not self.config["partitioner.ignore.keys"]:
                partition = partition_for_key(key_bytes, num_partitions)
            else:
                part = self._partitioners.get(topic)
                if part is None:
                    part = self._partitioners[topic] = BuiltInPartitioner(topic, self.config["batch.size"])
                sticky = part.peek(available, num_partitions)
                partition = sticky.partition
        elif not 0 <= partition < num_partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"Invalid partition given with record: {partition} is not in the range [0...{num_partitions}].")
        tp = TopicPartition(topic, partition)
        fut = asyncio.get_running_loop().create_future()
        ts = wall_ms() if timestamp_ms is None else timestamp_ms
        dq = self._queues.setdefault(tp, collections.deque())
        batch = dq[-1] if dq else None
        if batch is None or batch.closed or (batch.records and batch.size + size > self.config["batch.size"]):
            batch = _Batch(tp, now_ms())
            dq.append(batch)
            self._wakeup.set()  # the sender re-arms its linger timer
        batch.records.append(Record(key_bytes, value_bytes, headers, ts))
        batch.futures.append((fut, -1 if key_bytes is None else len(key_bytes),
                              -1 if value_bytes is None else len(value_bytes)))
        batch.size += size
        if sticky is not None:
            part = self._partitioners[topic]
            if self.config["partitioner.adaptive.partitioning.enable"] and \
                    sticky.produced_bytes + size >= self.config["batch.size"]:
                # about to switch: weight partitions by their queue length (KIP-794)
                part.update_load_stats([len(self._queues.get(TopicPartition(topic, p), ())) for p in available],
                                       available, num_partitions)
            full = batch.size >= self.config["batch.size"]
            part.update(sticky, size, available, num_partitions, enable_switch=full)
        if len(dq) > 1 or batch.size >= self.config["batch.size"] or self.config["linger.ms"] == 0:
            self._wakeup.set()
        return fut

    async def send_and_wait(self, topic: str, value=None, key=None, **kw) -> RecordMetadata:
        return await (await self.send(topic, value, key, **kw))

    async def _wait_on_metadata(self, topic: str, max_block_ms: int) -> int:
        info = self._client.topics.get(topic)
        if info is not None and info.partitions:
            return len(info.partitions)
        deadline = now_ms() + max_block_ms
        attempts = 0
        while True:
            try:
                await self._client.refresh_metadata(set(self._client.topics) | {topic}, allow_auto_topic_creation=True)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                log.debug("metadata refresh failed: %s", e)
            info = self._client.topics.get(topic)
            if info is not None and info.partitions:
                return len(info.partitions)
            if now_ms() >= deadline:
                raise KafkaTimeoutError(f"Topic {topic} not present in metadata after {max_block_ms} ms.")
            await asyncio.sleep(min(self._backoff.backoff(attempts), max(1, deadline - now_ms())) / 1000)
            attempts += 1

    async def partitions_for(self, topic: str) -> set[int]:
        await self._wait_on_metadata(topic, self.config["max.block.ms"])
        return set(self._client.topics[topic].partitions)

    # --- sender ------------------------------------------------------------------------------

    def _start(self) -> None:
        if self._sender is None:
            self._wakeup = asyncio.Event()
            self._sender = asyncio.get_running_loop().create_task(self._run(), name="producer-sender")

    def _pending_batches(self) -> list[_Batch]:
        return [b for dq in self._queues.values() for b in dq] + list(self._inflight_batches)

    async def _run(self) -> None:
        while True:
            try:
                if self._closed and not self._pending_batches():
                    return
                now = now_ms()
                self._expire(now)
                if self._metadata_needed:
                    self._metadata_needed = False
                    try:
                        await self._client.refresh_metadata(set(self._client.topics))
                    except (KafkaConnectionError, KafkaTimeoutError) as e:
                        log.debug("metadata refresh failed: %s", e)
                if self._idempotent and self._producer_id < 0 and any(self._queues.values()):
                    await self._init_producer_id()
                    continue
                for node, batches in self._drain(now).items():
                    self._spawn(self._produce(node, batches))
                self._wakeup.clear()
                await self._sleep(self._next_wakeup(now_ms()))
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("producer sender error")
                await asyncio.sleep(0.1)

    async def _sleep(self, delay_ms: int | None) -> None:
        try:
            await asyncio.wait_for(self._wakeup.wait(), None if delay_ms is None else delay_ms / 1000)
        except asyncio.TimeoutError:
            pass

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _next_wakeup(self, now: int) -> int | None:
        times = []
        linger = self.config["linger.ms"]
        for dq in self._queues.values():
            if dq:
                b = dq[0]
                times.append(b.retry_at if b.attempts else b.created_ms + linger)
                times.append(b.created_ms + self.config["delivery.timeout.ms"])
        if self._metadata_needed:
            times.append(now + self.config["retry.backoff.ms"])
        return None if not times else max(1, min(times) - now)

    def _expire(self, now: int) -> None:
        timeout = self.config["delivery.timeout.ms"]
        for tp, dq in self._queues.items():
            while dq and now - dq[0].created_ms >= timeout:
                b = dq.popleft()
                b.fail(KafkaTimeoutError(f"Expiring {len(b.records)} record(s) for {tp}: {now - b.created_ms} ms "
                                         "has passed since batch creation"))

    async def _init_producer_id(self) -> None:
        attempts = 0
        while not self._closed or self._pending_batches():
            req = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                        producer_id=-1, producer_epoch=-1)
            try:
                resp = await self._client.send_any(req)
                error = ErrorCode(resp.error_code)
                if error == ErrorCode.NONE:
                    self._producer_id, self._producer_epoch = resp.producer_id, resp.producer_epoch
                    self._next_seq.clear()
                    log.info("ProducerId set to %s with epoch %s", resp.producer_id, resp.producer_epoch)
                    return
                if not error.retriable:
                    raise KafkaError(error, "InitProducerId failed")
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                log.debug("InitProducerId failed: %s", e)
            except (KafkaError, UnsupportedVersionError) as e:
                for b in self._pending_batches():
                    b.fail(e)
                self._queues.clear()
                return
            await asyncio.sleep(self._backoff.backoff(attempts) / 1000)
            attempts += 1

    def _drain(self, now: int) -> dict[int, list[_Batch]]:
        out: dict[int, list[_Batch]] = {}
        sizes: dict[int, int] = {}
        linger = self.config["linger.ms"]
        max_in_flight = self.config["max.in.flight.requests.per.connection"]
        for tp, dq in self._queues.items():
            if not dq:
                continue
            batch = dq[0]
            if batch.attempts and batch.retry_at > now:
                continue
            ready = (len(dq) > 1 or batch.size >= self.config["batch.size"] or now - batch.created_ms >= linger
                     or self._flushing or self._closed or batch.attempts)
            if not ready:
                continue
            leader = self._client.leader_for(tp.topic, tp.partition)
            if leader < 0 or leader not in self._client.nodes:
                self._metadata_needed = True
                continue
            if self._inflight_node[leader] >= max_in_flight or self._client.in_backoff(leader):
                continue
            if self._idempotent:
                if self._inflight_tp[tp] >= MAX_IN_FLIGHT_PER_PARTITION:
                    continue
                if batch.base_sequence is not None and self._inflight_tp[tp] > 0:
                    continue  # a retry goes alone, once everything before it is answered
            if sizes.get(leader, 0) and sizes[leader] + batch.size > self.config["max.request.size"]:
                continue
            dq.popleft()
            self._prepare(batch)
            out.setdefault(leader, []).append(batch)
            sizes[leader] = sizes.get(leader, 0) + batch.size
        return out

    def _prepare(self, batch: _Batch) -> None:
        batch.closed = True
        if self._idempotent and (batch.base_sequence is None or batch.producer_id != self._producer_id):
            batch.base_sequence = self._next_seq[batch.tp]
            self._next_seq[batch.tp] = (batch.base_sequence + len(batch.records)) & 0x7FFFFFFF
            batch.producer_id, batch.producer_epoch = self._producer_id, self._producer_epoch
            batch.built = None
        if batch.built is None:
            batch.built = build_batch(batch.records, producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                                      base_sequence=-1 if batch.base_sequence is None else batch.base_sequence,
                                      compression=self._compression)

    async def _produce(self, node: int, batches: list[_Batch]) -> None:
        self._inflight_node[node] += 1
        for b in batches:
            self._inflight_tp[b.tp] += 1
            self._inflight_batches.add(b)
        by_topic: dict[str, list] = {}
        for b in batches:
            by_topic.setdefault(b.tp.topic, []).append(ProduceRequest.PartitionProduceData(index=b.tp.partition,
                                                                                           records=b.built))
        req = ProduceRequest(transactional_id=None, acks=self._acks, timeout_ms=self.config["request.timeout.ms"],
                             topic_data=[ProduceRequest.TopicProduceData(name=t, partition_data=p)
                                         for t, p in by_topic.items()])
        try:
            if self._acks == 0:
                await self._client.send(node, req, expect_response=False)
                for b in batches:
                    b.complete(-1, -1)
                return
            resp = await self._client.send(node, req, timeout_ms=self.config["request.timeout.ms"])
        except (KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError) as e:
            for b in batches:
                self._retry_or_fail(b, e)
            return
        finally:
            self._inflight_node[node] -= 1
            for b in batches:
                self._inflight_tp[b.tp] -= 1
                self._inflight_batches.discard(b)
            self._wakeup.set()
        by_tp = {TopicPartition(t.name, p.index): p for t in resp.responses for p in t.partition_responses}
        for b in batches:
            p = by_tp.get(b.tp)
            if p is None:
                self._retry_or_fail(b, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no response for {b.tp}"))
                continue
            error = ErrorCode(p.error_code)
            if error in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                b.complete(p.base_offset, p.log_append_time_ms)
            elif error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and self._earlier_retry(b):
                self._retry_or_fail(b, KafkaError(error), force=True)
            else:
                self._retry_or_fail(b, KafkaError(error, p.error_message or None))

    def _earlier_retry(self, batch: _Batch) -> bool:
        """Is an earlier batch of the same partition being retried (so this one must follow)?"""
        dq = self._queues.get(batch.tp)
        return bool(dq) and any(b.attempts and b.base_sequence is not None and
                                b.producer_id == batch.producer_id and b.base_sequence < batch.base_sequence
                                for b in dq)

    def _retry_or_fail(self, batch: _Batch, error: BaseException, force: bool = False) -> None:
        now = now_ms()
        if getattr(error, "code", None) in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                            ErrorCode.LEADER_NOT_AVAILABLE) or isinstance(error, KafkaConnectionError):
            self._metadata_needed = True
        if ((force or is_retriable(error)) and batch.attempts < self.config["retries"]
                and now - batch.created_ms < self.config["delivery.timeout.ms"] and not self._closed_hard):
            batch.attempts += 1
            batch.retry_at = now + self._backoff.backoff(batch.attempts - 1)
            dq = self._queues.setdefault(batch.tp, collections.deque())
            # keep the partition's batches in sequence order
            i = 0
            while i < len(dq) and dq[i].base_sequence is not None and batch.base_sequence is not None \
                    and dq[i].base_sequence < batch.base_sequence:
                i += 1
            dq.insert(i, batch)
            log.warning("Got error produce response on %s, retrying (attempt %s): %s", batch.tp, batch.attempts, error)
            return
        batch.fail(error)
        if self._idempotent and batch.base_sequence is not None:
            log.info("Resetting the producer id after a failed batch on %s: %s", batch.tp, error)
            self._producer_id = -1

    _closed_hard = False

    # --- flush and close -----------------------------------------------------------------------

    async def flush(self, timeout_ms: int | None = None) -> None:
        """Send everything now and wait until every record sent so far is acknowledged or failed."""
        futures = [f for b in self._pending_batches() for f, _, _ in b.futures]
        if not futures:
            return
        self._flushing += 1
        self._wakeup.set()
        try:
            done = asyncio.gather(*futures, return_exceptions=True)
            await asyncio.wait_for(done, None if timeout_ms is None else timeout_ms / 1000)
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(f"Failed to flush accumulated records within {timeout_ms}ms") from None
        finally:
            self._flushing -= 1

    async def close(self, timeout_ms: int | None = None) -> None:
        """Flush (within ``timeout_ms``, default: forever, like Java) then stop; records still
        pending after the timeout fail."""
        if self._closed:
            return
        self._closing = True
        try:
            if self._sender is not None:
                await self.flush(timeout_ms)
        except KafkaTimeoutError:
            log.warning("close timed out with records still pending")
        finally:
            self._closed = True
            self._closed_hard = True
            for b in self._pending_batches():
                b.fail(KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "Producer is closed forcefully."))
            self._queues.clear()
            if self._sender is not None:
                self._sender.cancel()
            for t in list(self._tasks):
                t.cancel()
            await self._client.close()
