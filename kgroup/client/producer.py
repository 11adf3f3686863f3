"""The asyncio producer: Java's KafkaProducer (RecordAccumulator + Sender + idempotence +
transactions).

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

Transactions (``transactional.id``, KIP-98): ``init_transactions()`` finds the transaction
coordinator (FindCoordinator key type 1) and gets the producer id/epoch for the transactional id
(fencing older instances); between ``begin_transaction()`` and ``commit_transaction()`` /
``abort_transaction()`` every partition is added with AddPartitionsToTxn before its first batch
is sent, and ``send_offsets_to_transaction()`` adds the consumer group (AddOffsetsToTxn) and
commits its offsets through the group coordinator (TxnOffsetCommit, with the consumer's
generation and member id, KIP-447). The state machine and error classification live in
:mod:`kgroup.client.transactions`.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import random
from typing import Mapping

from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kgroup.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kgroup.protocol.messages.end_txn import EndTxnRequest
from kgroup.protocol.messages.find_coordinator import FindCoordinatorRequest
from kgroup.protocol.messages.init_producer_id import InitProducerIdRequest
from kgroup.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kgroup.protocol.messages.produce import ProduceRequest
from kgroup.protocol.primitives import DecodeError, varint_size
from kgroup.protocol.records import Compression, Record, build_batch, frame_batch
from kgroup.protocol.schema import ZERO_UUID

from .assignors import TopicPartition
from .config import ProducerConfig
from .connection import KafkaClient, now_ms, wall_ms
from .errors import (CommitFailedError, IllegalStateError, KafkaConnectionError, KafkaTimeoutError,
                     RecordTooLargeError, UnsupportedVersionError, is_retriable)
from .membership_types import ExponentialBackoff
from .partitioner import BuiltInPartitioner, partition_for_key
from .transactions import (COORDINATOR_KEY_GROUP, COORDINATOR_KEY_TRANSACTION, TRANSACTIONAL_MAX_VERSIONS,
                           TV1_MAX_VERSIONS, TV2_MIN_VERSIONS,
                           ConsumerGroupMetadata, Outcome, State, TransactionAbortableError,
                           TransactionManager)
from .types import NAMES_MAX_VERSIONS, NodeInfo, OffsetAndMetadata, RecordMetadata

log = logging.getLogger("kgroup.client.producer")

_COMPRESSION = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
                "lz4": Compression.LZ4, "zstd": Compression.ZSTD}
BATCH_OVERHEAD = 61
MAX_IN_FLIGHT_PER_PARTITION = 5
COORDINATOR_GROUP = "coordinator"  # connection group: coordinators get their own connections


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


class _BulkBatch(_Batch):
    """A batch of records encoded in bulk (:meth:`Producer.send_columns`): the record bodies are
    ready, only the header (producer id, sequence) is written when it is sent; one future."""
    __slots__ = ("body", "base_timestamp", "max_timestamp")

    def __init__(self, tp: TopicPartition, now: int, body, count: int, base_timestamp: int, max_timestamp: int,
                 future: asyncio.Future):
        super().__init__(tp, now)
        self.records = range(count)  # only its length is used: sequence numbers, logs
        self.body = body
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.futures = [(future, -1, -1)]
        self.size = BATCH_OVERHEAD + len(body)
        self.closed = True

    def complete(self, base_offset: int, log_append_time: int) -> None:
        fut = self.futures[0][0]
        if not fut.done():
            fut.set_result(RecordMetadata(self.tp.topic, self.tp.partition, base_offset,
                                          log_append_time if log_append_time >= 0 else self.max_timestamp, -1, -1))


def _invalid_timestamp(timestamp_ms: int):
    """ProducerRecord's own check: a record's timestamp is never negative (null means now)."""
    raise ValueError(f"Invalid timestamp: {timestamp_ms}. Timestamp should always be non-negative or null.")


class Producer:
    """An asyncio Kafka producer. Config keys are Kafka's or keyword arguments with underscores."""

    def __init__(self, config: Mapping | None = None, **configs):
        self.config = ProducerConfig(config, **configs)
        tid = self.config["transactional.id"]
        self._txn = None if tid is None else TransactionManager(tid, self.config["transaction.timeout.ms"])
        self._client = KafkaClient(self.config, max_versions=None if tid is None else TRANSACTIONAL_MAX_VERSIONS)
        self._coordinators: dict[tuple[int, str], NodeInfo] = {}
        self._txn_lock = asyncio.Lock()
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
        if timestamp_ms is not None and timestamp_ms < 0:
            _invalid_timestamp(timestamp_ms)
        if self._closed or self._closing:
            raise IllegalStateError("Cannot perform operation after producer has been closed")
        if self._txn is not None:
            self._txn.check_send()
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
        if self._txn is not None:
            self._txn.check_send()  # again: the metadata wait may have outlived the transaction
            if tp not in self._txn.partitions_in_transaction:
                if self._txn.transaction_v2:
                    self._txn.partitions_added([tp])    # the broker adds it with the first batch
                else:
                    self._txn.maybe_add_partition(tp)
                    self._wakeup.set()
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

    async def send_columns(self, topic: str, values, keys=None, *, partitions=None, timestamps=None
                           ) -> list[asyncio.Future]:
        """Append many records at once from Arrow ``binary`` arrays (``keys`` may be None or hold
        nulls; no headers, no serializers): partitioned in bulk (murmur2 of the key, as ``send``;
        ``partitions``, an int array with nulls, overrides; keyless records go to one sticky
        partition per call), cut into batches of up to ``batch.size`` per partition and encoded in
        bulk (:func:`record_columns.encode_records`). Returns one future per batch, resolving to
        the RecordMetadata of its first record (offset = the batch's base offset)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        from kgroup.protocol.record_columns import encode_records

        from .partitioner import partitions_for_keys
        if timestamps is not None:
            negative = np.asarray(timestamps, np.int64) < 0
            if negative.any():
                _invalid_timestamp(int(np.asarray(timestamps, np.int64)[negative][0]))
        if self._closed or self._closing:
            raise IllegalStateError("Cannot perform operation after producer has been closed")
        if self._txn is not None:
            self._txn.check_send()
        self._start()
        n = len(values)
        if n == 0:
            return []
        num_partitions = await self._wait_on_metadata(topic, self.config["max.block.ms"])
        part = np.full(n, -1, np.int64)
        if keys is not None and not self.config["partitioner.ignore.keys"]:
            keyed = keys.is_valid().to_numpy(zero_copy_only=False)
            if keyed.all():
                part = partitions_for_keys(keys, num_partitions)
            elif keyed.any():
                rows = np.nonzero(keyed)[0]
                part[rows] = partitions_for_keys(keys.take(pa.array(rows)), num_partitions)
        if partitions is not None:
            given = partitions.is_valid().to_numpy(zero_copy_only=False)
            if given.any():
                chosen = pc.fill_null(partitions, -1).to_numpy(zero_copy_only=False).astype(np.int64)
                bad = given & ((chosen < 0) | (chosen >= num_partitions))
                if bad.any():
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                     f"Invalid partition given with record: {int(chosen[bad][0])} is not in the "
                                     f"range [0...{num_partitions}].")
                part = np.where(given, chosen, part)
        if (part < 0).any():
            available = self._client.available_partitions(topic)
            pool = list(available) or list(range(num_partitions))
            part[part < 0] = random.choice(pool)
        now = wall_ms()
        ts = np.full(n, now, np.int64) if timestamps is None else np.asarray(timestamps, np.int64)
        if keys is None:
            keys = pa.nulls(n, pa.binary())
        klen = pc.binary_length(keys).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        vlen = pc.binary_length(values).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        sizes = klen + vlen + 12  # encoded size, near enough to cut batches at batch.size
        if int(sizes.max()) + BATCH_OVERHEAD > self.config["max.request.size"]:
            raise RecordTooLargeError(f"The message is {int(sizes.max()) + BATCH_OVERHEAD} bytes when serialized "
                                      f"which is larger than {self.config['max.request.size']}, which is the value "
                                      "of the max.request.size configuration.")
        limit = max(self.config["batch.size"] - BATCH_OVERHEAD, 1)
        loop = asyncio.get_running_loop()
        order = np.argsort(part, kind="stable")
        bounds = np.searchsorted(part[order], np.arange(num_partitions + 1))
        futures = []
        for p in range(num_partitions):
            rows = order[bounds[p]:bounds[p + 1]]
            if not len(rows):
                continue
            tp = TopicPartition(topic, p)
            if self._txn is not None and tp not in self._txn.partitions_in_transaction:
                self._txn.maybe_add_partition(tp)
            ends = np.cumsum(sizes[rows])
            cuts = [0]
            while cuts[-1] < len(rows):  # batches of up to batch.size (at least one record each)
                base = ends[cuts[-1] - 1] if cuts[-1] else 0
                cuts.append(max(cuts[-1] + 1, int(np.searchsorted(ends, base + limit, side="right"))))
            idx = pa.array(rows)
            pk, pv = keys.take(idx), values.take(idx)
            pts = ts[rows]
            dq = self._queues.setdefault(tp, collections.deque())
            for lo, hi in zip(cuts, cuts[1:]):
                bts = pts[lo:hi]
                body = encode_records(pk.slice(lo, hi - lo), pv.slice(lo, hi - lo), bts, int(bts[0]))
                fut = loop.create_future()
                dq.append(_BulkBatch(tp, now_ms(), body, hi - lo, int(bts[0]), int(bts.max()), fut))
                futures.append(fut)
        self._wakeup.set()
        return futures

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
            if topic in self._client.unauthorized_topics:     # Java: TopicAuthorizationException, at once
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, f"Not authorized to access topics: [{topic}]")
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
                if self._txn is None and self._idempotent and self._producer_id < 0 and any(self._queues.values()):
                    await self._init_producer_id()
                    continue
                if self._txn is not None and self._txn.new_partitions:
                    await self._add_partitions_to_txn()
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
                err = KafkaTimeoutError(f"Expiring {len(b.records)} record(s) for {tp}: {now - b.created_ms} ms "
                                        "has passed since batch creation")
                b.fail(err)
                if self._txn is not None:
                    self._transactional_batch_failed(b, err)

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
            except DecodeError:
                raise               # an unreadable response is not the broker's error code
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
            if self._txn is not None and tp not in self._txn.partitions_in_transaction:
                continue  # AddPartitionsToTxn first
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
        if batch.built is None and isinstance(batch, _BulkBatch):
            batch.built = frame_batch(batch.body, len(batch.records), base_offset=0,
                                      base_timestamp=batch.base_timestamp, max_timestamp=batch.max_timestamp,
                                      last_offset_delta=len(batch.records) - 1, producer_id=batch.producer_id,
                                      producer_epoch=batch.producer_epoch,
                                      base_sequence=-1 if batch.base_sequence is None else batch.base_sequence,
                                      compression=self._compression, is_transactional=self._txn is not None)
        if batch.built is None:
            batch.built = build_batch(batch.records, producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                                      base_sequence=-1 if batch.base_sequence is None else batch.base_sequence,
                                      compression=self._compression, is_transactional=self._txn is not None)

    async def _produce(self, node: int, batches: list[_Batch]) -> None:
        self._inflight_node[node] += 1
        for b in batches:
            self._inflight_tp[b.tp] += 1
            self._inflight_batches.add(b)
        by_topic: dict[str, list] = {}
        for b in batches:
            by_topic.setdefault(b.tp.topic, []).append(ProduceRequest.PartitionProduceData(index=b.tp.partition,
                                                                                           records=b.built))
        # Produce v13 names topics by id (Java's Sender, from its metadata); by name below it
        topics = self._client.topics
        ids = {t: info.topic_id if (info := topics.get(t)) is not None else ZERO_UUID for t in by_topic}
        use_ids = ZERO_UUID not in ids.values()
        req = ProduceRequest(transactional_id=None if self._txn is None else self._txn.transactional_id,
                             acks=self._acks, timeout_ms=self.config["request.timeout.ms"],
                             topic_data=[ProduceRequest.TopicProduceData(name=t, topic_id=ids[t], partition_data=p)
                                         for t, p in by_topic.items()])
        versions = self._txn_versions(0)
        if not use_ids:
            versions["max_version"] = min(versions.get("max_version", NAMES_MAX_VERSIONS[0]), NAMES_MAX_VERSIONS[0])
        try:
            if self._acks == 0:
                await self._client.send(node, req, expect_response=False, **versions)
                for b in batches:
                    b.complete(-1, -1)
                return
            resp = await self._client.send(node, req, timeout_ms=self.config["request.timeout.ms"], **versions)
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
        names = {tid: t for t, tid in ids.items()}
        by_tp = {TopicPartition(t.name or names.get(t.topic_id, ""), p.index): p
                 for t in resp.responses for p in t.partition_responses}
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
        if self._txn is not None:
            # the transaction cannot commit without this batch: abortable (fenced: fatal); its
            # sequence number is lost, so the epoch is bumped after the abort (KIP-360)
            self._transactional_batch_failed(batch, error)
            return
        if self._idempotent and batch.base_sequence is not None:
            log.info("Resetting the producer id after a failed batch on %s: %s", batch.tp, error)
            self._producer_id = -1

    def _transactional_batch_failed(self, batch: _Batch, error: BaseException) -> None:
        """A batch of the transaction failed for good: the transaction cannot commit without it
        (abortable; fenced: fatal). If it had a sequence number, that number is lost, so the
        epoch is bumped after the abort (KIP-360) to restart the sequences."""
        code = getattr(error, "code", None)
        if not isinstance(code, ErrorCode):
            code = ErrorCode.REQUEST_TIMED_OUT if isinstance(error, (KafkaTimeoutError, KafkaConnectionError)) \
                else ErrorCode.UNKNOWN_SERVER_ERROR
        self._txn.on_error("Produce", code, str(error))
        if batch.base_sequence is not None:
            self._epoch_bump_required = True

    _closed_hard = False
    _epoch_bump_required = False

    # --- transactions ----------------------------------------------------------------------------

    def _transactions(self) -> TransactionManager:
        if self._txn is None:
            raise IllegalStateError("Transactional method invoked on a non-transactional producer.")
        if self._closed or self._closing:
            raise IllegalStateError("Cannot perform operation after producer has been closed")
        return self._txn

    def _deadline(self, timeout_ms: int | None) -> int:
        return now_ms() + (self.config["max.block.ms"] if timeout_ms is None else timeout_ms)

    async def _coordinator(self, key: str, key_type: int, deadline: int) -> NodeInfo:
        """The coordinator of a transactional id (key type 1) or a group (0), looked up once and
        again after NOT_COORDINATOR or a lost connection."""
        node = self._coordinators.get((key_type, key))
        attempts = 0
        while node is None:
            req = FindCoordinatorRequest(key=key, key_type=key_type, coordinator_keys=[key])
            try:
                resp = await self._client.send_any(req)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                log.debug("FindCoordinator failed: %s", e)
            else:
                c = resp.coordinators[0] if resp.coordinators else resp
                outcome = self._txn.on_error("FindCoordinator", ErrorCode(c.error_code), c.error_message)
                if outcome == Outcome.OK:
                    node = self._coordinators[(key_type, key)] = NodeInfo(c.node_id, c.host, c.port)
                    break
                self._raise_txn_error(outcome, "FindCoordinator")
            if now_ms() >= deadline:
                raise KafkaTimeoutError(f"Timeout expired while finding the coordinator of {key!r}")
            await asyncio.sleep(min(self._backoff.backoff(attempts), max(1, deadline - now_ms())) / 1000)
            attempts += 1
        return node

    def _raise_txn_error(self, outcome: Outcome, api: str) -> None:
        if outcome == Outcome.FATAL:
            raise self._txn.last_error
        if outcome == Outcome.ABORTABLE:
            err = self._txn.last_error
            if api == "TxnOffsetCommit" and err.code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                raise CommitFailedError("Transaction offset Commit failed due to consumer group metadata mismatch: "
                                        f"{err.code.name}", err.code)
            raise TransactionAbortableError(err.code, str(err))

    def _txn_versions(self, api_key: int) -> dict:
        """The version bounds of a transactional request: transaction version 2's versions only
        when it is on, never when it is off."""
        if self._txn is None:
            return {}
        if self._txn.transaction_v2:
            return {"min_version": TV2_MIN_VERSIONS[api_key]} if api_key in TV2_MIN_VERSIONS else {}
        return {"max_version": TV1_MAX_VERSIONS[api_key]} if api_key in TV1_MAX_VERSIONS else {}

    async def _refresh_transaction_version(self, deadline: int) -> None:
        """Java's TransactionManager: transaction version 2 when the transaction coordinator's
        broker finalizes transaction.version >= 2 (read from its ApiVersions answer)."""
        txn = self._txn
        node = await self._coordinator(txn.transactional_id, COORDINATOR_KEY_TRANSACTION, deadline)
        conn = await self._client.connection(node.node_id, COORDINATOR_GROUP, node)
        txn.transaction_v2 = conn.finalized_features.get("transaction.version", 0) >= 2

    async def _txn_call(self, api: str, request, key: str, key_type: int, deadline: int, error_of):
        """Send a transactional request to the coordinator of ``key`` until it succeeds: retry
        retriable answers, look the coordinator up again on NOT_COORDINATOR, raise abortable
        and fatal ones (the transaction manager records them)."""
        # one transactional request at a time, in order, as Java's TransactionManager queues
        # them: concurrent ones would only earn CONCURRENT_TRANSACTIONS from the coordinator
        async with self._txn_lock:
            return await self._txn_call_locked(api, request, key, key_type, deadline, error_of)

    async def _txn_call_locked(self, api: str, request, key: str, key_type: int, deadline: int, error_of):
        attempts = 0
        while True:
            node = await self._coordinator(key, key_type, deadline)
            try:
                resp = await self._client.send(node.node_id, request, group=COORDINATOR_GROUP, node=node,
                                               **self._txn_versions(request.API_KEY))
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                log.debug("%s to the coordinator %s failed: %s", api, node, e)
                self._coordinators.pop((key_type, key), None)
            else:
                error = error_of(resp)
                outcome = self._txn.on_error(api, error)
                if outcome == Outcome.OK:
                    return resp
                self._raise_txn_error(outcome, api)
                log.debug("%s answered %s: %s", api, error.name, outcome.value)
                if outcome == Outcome.LOOKUP:
                    self._coordinators.pop((key_type, key), None)
            if now_ms() >= deadline:
                raise KafkaTimeoutError(f"Timeout expired while awaiting {api}")
            await asyncio.sleep(min(self._backoff.backoff(attempts), max(1, deadline - now_ms())) / 1000)
            attempts += 1

    async def _init_transactional_id(self, deadline: int, bump: bool = False) -> None:
        txn = self._txn
        # KIP-360: re-initialising with our current id/epoch bumps the epoch without fencing us
        req = InitProducerIdRequest(transactional_id=txn.transactional_id,
                                    transaction_timeout_ms=txn.transaction_timeout_ms,
                                    producer_id=self._producer_id if bump else -1,
                                    producer_epoch=self._producer_epoch if bump else -1)
        resp = await self._txn_call("InitProducerId", req, txn.transactional_id, COORDINATOR_KEY_TRANSACTION,
                                    deadline, lambda r: ErrorCode(r.error_code))
        self._producer_id, self._producer_epoch = resp.producer_id, resp.producer_epoch
        self._next_seq.clear()
        self._epoch_bump_required = False
        log.info("[TransactionalId %s] ProducerId set to %s with epoch %s", txn.transactional_id,
                 resp.producer_id, resp.producer_epoch)

    async def init_transactions(self, timeout_ms: int | None = None) -> None:
        """Get the producer id and epoch of ``transactional.id``: fences any older producer with
        the same id and completes (aborts) a transaction it left open. Call once, first."""
        txn = self._transactions()
        txn.begin_init()
        self._start()
        deadline = self._deadline(timeout_ms)
        await self._init_transactional_id(deadline)
        await self._refresh_transaction_version(deadline)
        txn.init_done()

    def begin_transaction(self) -> None:
        self._transactions().begin_transaction()

    async def send_offsets_to_transaction(self, offsets: Mapping, consumer_group_metadata,
                                          timeout_ms: int | None = None) -> None:
        """Commit the consumer's offsets as part of the transaction: they become visible to
        the group only if the transaction commits. ``consumer_group_metadata`` is the
        consumer's ``group_metadata()`` (a bare group id skips the KIP-447 fencing)."""
        txn = self._transactions()
        txn.check_send_offsets()
        meta = consumer_group_metadata
        if isinstance(meta, str):
            meta = ConsumerGroupMetadata(meta)
        deadline = self._deadline(timeout_ms)
        if not txn.transaction_v2:      # TV2: TxnOffsetCommit v5 adds the group's partition itself
            await self._txn_call("AddOffsetsToTxn", AddOffsetsToTxnRequest(
                transactional_id=txn.transactional_id, producer_id=self._producer_id,
                producer_epoch=self._producer_epoch, group_id=meta.group_id),
                txn.transactional_id, COORDINATOR_KEY_TRANSACTION, deadline, lambda r: ErrorCode(r.error_code))
        txn.offsets_added = True
        by_topic: dict[str, list] = {}
        for tp, om in offsets.items():
            tp = TopicPartition(*tp)
            if not isinstance(om, OffsetAndMetadata):
                om = OffsetAndMetadata(int(om))
            by_topic.setdefault(tp.topic, []).append(TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=om.offset,
                committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                committed_metadata=om.metadata or ""))
        req = TxnOffsetCommitRequest(
            transactional_id=txn.transactional_id, group_id=meta.group_id, producer_id=self._producer_id,
            producer_epoch=self._producer_epoch, generation_id=meta.generation_id, member_id=meta.member_id,
            group_instance_id=meta.group_instance_id,
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()])

        def first_error(resp) -> ErrorCode:
            codes = [ErrorCode(p.error_code) for t in resp.topics for p in t.partitions if p.error_code]
            return codes[0] if codes else ErrorCode.NONE
        await self._txn_call("TxnOffsetCommit", req, meta.group_id, COORDINATOR_KEY_GROUP, deadline, first_error)

    async def _add_partitions_to_txn(self) -> None:
        """Sender step: AddPartitionsToTxn for the partitions new to the transaction, so their
        batches may be sent; on an abortable or fatal answer their batches fail."""
        txn = self._txn
        parts = sorted(txn.new_partitions)
        by_topic: dict[str, list[int]] = {}
        for tp in parts:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        req = AddPartitionsToTxnRequest(
            transactions=[], v3_and_below_transactional_id=txn.transactional_id,
            v3_and_below_producer_id=self._producer_id, v3_and_below_producer_epoch=self._producer_epoch,
            v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                 for t, ps in by_topic.items()])

        def worst_error(resp) -> ErrorCode:
            codes = [ErrorCode(p.partition_error_code) for t in resp.results_by_topic_v3_and_below
                     for p in t.results_by_partition if p.partition_error_code]
            real = [c for c in codes if c != ErrorCode.OPERATION_NOT_ATTEMPTED]
            return (real or codes or [ErrorCode.NONE])[0]
        try:
            await self._txn_call("AddPartitionsToTxn", req, txn.transactional_id, COORDINATOR_KEY_TRANSACTION,
                                 now_ms() + self.config["delivery.timeout.ms"], worst_error)
        except DecodeError:
            raise                   # an unreadable response is not the broker's error code
        except (KafkaError, KafkaTimeoutError) as e:
            if isinstance(e, KafkaTimeoutError):
                txn.abortable_error(KafkaError(ErrorCode.REQUEST_TIMED_OUT, str(e)))
            for tp in parts:
                for b in self._queues.pop(tp, ()):
                    b.fail(e)
            txn.new_partitions.difference_update(parts)
            return
        log.debug("Added partitions %s to transaction", parts)
        txn.partitions_added(parts)

    async def _end_txn(self, committed: bool, deadline: int) -> None:
        txn = self._txn
        resp = await self._txn_call("EndTxn", EndTxnRequest(transactional_id=txn.transactional_id,
                                                            producer_id=self._producer_id,
                                                            producer_epoch=self._producer_epoch, committed=committed),
                                    txn.transactional_id, COORDINATOR_KEY_TRANSACTION, deadline,
                                    lambda r: ErrorCode(r.error_code))
        if txn.transaction_v2:
            # KIP-890 part 2: every transaction ends with the epoch bumped (a new id once
            # exhausted); the next one starts its sequences again, and needs no other bump
            self._producer_id, self._producer_epoch = resp.producer_id, resp.producer_epoch
            self._next_seq.clear()
            self._epoch_bump_required = False

    async def commit_transaction(self, timeout_ms: int | None = None) -> None:
        """Flush, then commit (EndTxn): the records and offsets of the transaction become
        visible together. Raises TransactionAbortableError if a send failed (then abort)."""
        txn = self._transactions()
        txn.begin_commit()
        deadline = self._deadline(timeout_ms)
        await self.flush(max(0, deadline - now_ms()))
        if txn.state == State.ABORTABLE_ERROR:
            txn.begin_commit()  # raises the abortable error
        if txn.transaction_started:
            await self._end_txn(True, deadline)
        await self._refresh_transaction_version(deadline)
        txn.complete()

    async def abort_transaction(self, timeout_ms: int | None = None) -> None:
        """Abort (EndTxn): records not yet sent are dropped (their futures fail), records sent
        are aborted by the markers, offsets sent with the transaction are discarded."""
        txn = self._transactions()
        txn.begin_abort()
        deadline = self._deadline(timeout_ms)
        aborted = TransactionAbortableError(ErrorCode.TRANSACTION_ABORTABLE,
                                            "Failing batch since transaction was aborted")
        for _tp, dq in self._queues.items():
            kept = [b for b in dq if b.base_sequence is not None]  # retries keep the sequence order
            for b in dq:
                if b.base_sequence is None:
                    b.fail(aborted)
            dq.clear()
            dq.extend(kept)
        txn.new_partitions.clear()
        await self.flush(max(0, deadline - now_ms()))
        if txn.transaction_started:
            await self._end_txn(False, deadline)
        if self._epoch_bump_required:
            await self._init_transactional_id(deadline, bump=True)
        await self._refresh_transaction_version(deadline)
        txn.complete()

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
