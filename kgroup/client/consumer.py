"""The asyncio consumer: Java's KafkaConsumer (classic group protocol) on top of the membership
driver, a pipelined fetcher, and ListOffsets/OffsetFetch/OffsetCommit.

Usage::

    async with Consumer(bootstrap_servers="h:9092", group_id="g") as consumer:
        consumer.subscribe(["orders"], listener=MyListener())
        while True:
            for record in await consumer.poll(1000):
                ...

State per assigned partition (Java's SubscriptionState): the fetch position (None until it is
initialised from the committed offset, or reset with auto.offset.reset via ListOffsets), paused,
pending revocation. ``poll()`` (1) keeps metadata fresh, (2) runs the group coordinator's foreground
step — join/rejoin, rebalance callbacks, auto-commit — (3) initialises missing positions,
(4) returns buffered records (up to max.poll.records) and (5) before returning, sends the next
fetch to every node that has no fetch in flight, so the broker's answer is on its way while the
application processes the records (at most one fetch in flight per node; a partition with
buffered records is not fetched again until they are consumed).
"""
from __future__ import annotations

import asyncio
import logging
import re
from typing import Iterable, Mapping

from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.messages.list_offsets import ListOffsetsRequest

from .assignors import TopicPartition
from .config import ConsumerConfig
from .connection import KafkaClient, now_ms
from .consumer_coordinator import ConsumerCoordinator, maybe_await
from .errors import (IllegalStateError, KafkaConnectionError, KafkaTimeoutError, NoOffsetForPartitionError,
                     OffsetOutOfRangeError, UnsupportedVersionError)
from .fetcher import CompletedFetch, build_fetch, parse_fetch
from .membership_types import PartitionsAssigned, PartitionsLost, PartitionsRevoked, PendingRevocation
from .types import ConsumerRebalanceListener, ConsumerRecord, OffsetAndMetadata

log = logging.getLogger("kgroup.client.consumer")

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
_REFRESH_ERRORS = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                   ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR,
                   ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.LEADER_NOT_AVAILABLE,
                   ErrorCode.OFFSET_NOT_AVAILABLE}


class _PartitionState:
    __slots__ = ("position", "epoch", "paused", "pending_revocation", "reset", "high_watermark", "log_start")

    def __init__(self):
        self.position: int | None = None
        self.epoch: int | None = None
        self.paused = False
        self.pending_revocation = False
        self.reset: str | None = None  # "earliest" / "latest" requested by seek_to_* or a reset
        self.high_watermark = -1
        self.log_start = -1


class Consumer:
    """An asyncio Kafka consumer. Config keys are Kafka's (``"group.id"``) or keyword arguments
    with underscores (``group_id=``)."""

    def __init__(self, *topics: str, config: Mapping | None = None,
                 listener: ConsumerRebalanceListener | None = None, **configs):
        self.config = ConsumerConfig(config, **configs)
        self._client = KafkaClient(self.config)
        self._group_id = self.config["group.id"]
        self._coordinator: ConsumerCoordinator | None = None
        self._kd = self.config["key.deserializer"]
        self._vd = self.config["value.deserializer"]
        self._mode: str | None = None  # "topics", "pattern" or "assigned"
        self._topics: set[str] = set()
        self._pattern: re.Pattern | None = None
        self._listener = listener or ConsumerRebalanceListener()
        self._assignment: dict[TopicPartition, _PartitionState] = {}
        self._buffered: dict[TopicPartition, CompletedFetch] = {}
        self._fetch_tasks: dict[int, asyncio.Task] = {}
        self._fetch_event: asyncio.Event | None = None
        self._metadata_needed = True
        self._next_metadata_ms = 0
        self._pending_error: BaseException | None = None
        self._closed = False
        self._closing = False
        self._polling = False
        if topics:
            self.subscribe(list(topics), listener=listener)

    async def __aenter__(self) -> "Consumer":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # --- subscription ------------------------------------------------------------------------

    def _group(self) -> ConsumerCoordinator:
        if self._group_id is None:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID,
                             "To use the group management or offset commit APIs, you must provide a valid "
                             "group.id in the consumer configuration.")
        if self._coordinator is None:
            self._coordinator = ConsumerCoordinator(self._client, self.config,
                                                    offsets_to_commit=self._all_consumed,
                                                    on_rebalance_event=self._on_rebalance_event)
            self._coordinator.on_progress = self._wake_poll
        return self._coordinator

    def subscribe(self, topics: Iterable[str] | None = None, pattern: str | re.Pattern | None = None,
                  listener: ConsumerRebalanceListener | None = None) -> None:
        """Subscribe to a list of topics or a regex (matched in full, like Java's
        ``Pattern.matcher(topic).matches()``) with group management."""
        self._ensure_open()
        if self._mode == "assigned":
            raise IllegalStateError("Subscription to topics, partitions and pattern are mutually exclusive")
        coordinator = self._group()
        if listener is not None:
            self._listener = listener
        if pattern is not None:
            self._mode, self._pattern = "pattern", re.compile(pattern) if isinstance(pattern, str) else pattern
            self._topics = set()
        else:
            topics = [topics] if isinstance(topics, str) else list(topics or [])
            if not topics:
                raise ValueError("subscribe() needs topics or a pattern; use unsubscribe() to leave")
            self._mode, self._pattern, self._topics = "topics", None, set(topics)
        coordinator.machine.subscribe(self._topics, self._pattern)
        self._metadata_needed = True
        self._next_metadata_ms = 0

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Manual assignment: no group membership (commits still go to group.id if set)."""
        self._ensure_open()
        if self._mode in ("topics", "pattern"):
            raise IllegalStateError("Subscription to topics, partitions and pattern are mutually exclusive")
        wanted = [TopicPartition(*tp) for tp in partitions]
        self._mode = "assigned" if wanted else None
        for tp in list(self._assignment):
            if tp not in wanted:
                self._drop(tp)
        for tp in wanted:
            self._assignment.setdefault(tp, _PartitionState())
        if self._group_id is not None and self.config["enable.auto.commit"]:
            self._group()  # manual assignment still auto-commits to group.id, as in Java
        self._metadata_needed = True
        self._next_metadata_ms = 0

    async def unsubscribe(self) -> None:
        if self._coordinator is not None and self._mode in ("topics", "pattern"):
            await self._coordinator.unsubscribe()
        for tp in list(self._assignment):
            self._drop(tp)
        self._mode, self._topics, self._pattern = None, set(), None

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def subscription(self) -> set[str]:
        return set(self._topics)

    def group_metadata(self):
        """Java's groupMetadata(): the group id, generation, member id and group instance id to
        pass to a transactional producer's ``send_offsets_to_transaction`` (KIP-447)."""
        from .transactions import ConsumerGroupMetadata
        self._ensure_open()
        self._group()  # raises INVALID_GROUP_ID without a group.id, as Java
        gen = self._coordinator.machine.generation
        return ConsumerGroupMetadata(self._group_id, gen.generation_id, gen.member_id,
                                     self.config["group.instance.id"])

    def group_stable(self) -> bool:
        """True when this member holds a settled assignment of its group (no rebalance under
        way); False without group management."""
        return self._coordinator is not None and self._coordinator.machine.is_stable()

    # --- poll --------------------------------------------------------------------------------

    async def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the assigned partitions, waiting up to ``timeout_ms`` for some."""
        self._ensure_open()
        if self._mode is None:
            raise IllegalStateError("Consumer is not subscribed to any topics or assigned any partitions")
        if self._polling:
            raise IllegalStateError("poll() is already running")
        self._polling = True
        try:
            return await self._poll(timeout_ms, max_records or self.config["max.poll.records"], self._collect)
        finally:
            self._polling = False

    async def poll_batch(self, timeout_ms: int = 0, max_records: int | None = None,
                         headers: bool = False) -> dict:
        """Like :meth:`poll`, but decoded in bulk: ``{TopicPartition: RecordColumns}``
        (:mod:`kgroup.protocol.record_columns`; ``.to_arrow()`` makes a pyarrow RecordBatch).
        Whole batches are taken, so a partition may return somewhat more than ``max_records``;
        keys and values stay bytes (no deserializers); ``headers`` decodes the headers too."""
        self._ensure_open()
        if self._mode is None:
            raise IllegalStateError("Consumer is not subscribed to any topics or assigned any partitions")
        if self._polling:
            raise IllegalStateError("poll() is already running")
        self._polling = True
        try:
            return await self._poll(timeout_ms, max_records or self.config["max.poll.records"],
                                    lambda n: self._collect_columns(n, headers))
        finally:
            self._polling = False

    async def _poll(self, timeout_ms: int, max_records: int, collect):
        if self._fetch_event is None:
            self._fetch_event = asyncio.Event()
        deadline = now_ms() + timeout_ms
        while True:
            if self._pending_error is not None:
                err, self._pending_error = self._pending_error, None
                raise err
            await self._maybe_refresh_metadata()
            if self._coordinator is not None:
                await self._coordinator.poll(0)  # never blocks: group progress wakes us below
            await self._update_fetch_positions(max(0, deadline - now_ms()))
            records = collect(max_records)
            self._send_fetches()
            if records:
                return records
            remaining = deadline - now_ms()
            if remaining <= 0:
                return records  # empty, of the collector's type
            wait = remaining
            if self._coordinator is not None:
                nxt = self._coordinator.time_to_next_poll()
                if nxt is not None:
                    wait = min(wait, max(1, nxt))
            if self._metadata_needed:
                wait = min(wait, max(1, self._next_metadata_ms - now_ms()))
            self._fetch_event.clear()
            try:
                await asyncio.wait_for(self._fetch_event.wait(), wait / 1000)
            except asyncio.TimeoutError:
                pass

    def _wake_poll(self) -> None:
        if self._fetch_event is not None:
            self._fetch_event.set()

    def _fetchable(self, tp: TopicPartition, st: _PartitionState) -> bool:
        return st.position is not None and not st.paused and not st.pending_revocation and tp not in self._buffered

    def _collect(self, max_records: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        for tp in list(self._buffered):
            st = self._assignment.get(tp)
            cf = self._buffered[tp]
            if st is None or st.pending_revocation:
                del self._buffered[tp]
                continue
            if st.paused:
                continue
            records = cf.take(max_records - len(out), self._kd, self._vd)
            if st.position is not None and cf.next_offset > st.position:
                st.position = cf.next_offset
                if cf.last_epoch is not None:
                    st.epoch = cf.last_epoch
            out.extend(records)
            if cf.exhausted:
                del self._buffered[tp]
            if len(out) >= max_records:
                break
        return out

    def _collect_columns(self, max_records: int, headers: bool) -> dict:
        out: dict = {}
        count = 0
        for tp in list(self._buffered):
            st = self._assignment.get(tp)
            cf = self._buffered[tp]
            if st is None or st.pending_revocation:
                del self._buffered[tp]
                continue
            if st.paused:
                continue
            cols = cf.take_columns(max_records - count, headers)
            if st.position is not None and cf.next_offset > st.position:
                st.position = cf.next_offset
                if cf.last_epoch is not None:
                    st.epoch = cf.last_epoch
            if cols is not None and len(cols):
                out[tp] = cols
                count += len(cols)
            if cf.exhausted:
                del self._buffered[tp]
            if count >= max_records:
                break
        return out

    def _send_fetches(self) -> None:
        by_node: dict[int, list] = {}
        for tp, st in self._assignment.items():
            if not self._fetchable(tp, st):
                continue
            leader = self._client.leader_for(tp.topic, tp.partition)
            if leader < 0 or leader not in self._client.nodes:
                self._metadata_needed = True
                continue
            if leader in self._fetch_tasks or self._client.in_backoff(leader):
                continue
            info = self._client.topics[tp.topic].partitions.get(tp.partition)
            epoch = info.leader_epoch if info is not None and info.leader_epoch >= 0 else -1
            by_node.setdefault(leader, []).append((tp, st.position, epoch))
        loop = asyncio.get_running_loop()
        for node, parts in by_node.items():
            self._fetch_tasks[node] = loop.create_task(self._fetch(node, parts))

    async def _fetch(self, node: int, parts: list) -> None:
        requested = {tp: offset for tp, offset, _ in parts}
        topic_ids = {t: info.topic_id for t, info in self._client.topics.items()}
        req, cap = build_fetch(parts, topic_ids, self.config, None)
        try:
            conn = await self._client.connection(node)
            resp = await conn.send(req, max_version=cap,
                                   timeout_ms=self.config["request.timeout.ms"] + self.config["fetch.max.wait.ms"])
            if resp.error_code:
                log.debug("fetch from node %s failed: %s", node, ErrorCode(resp.error_code).name)
                return
            read_committed = self.config["isolation.level"] == "read_committed"
            for cf in parse_fetch(resp, requested, self._client.topic_names, read_committed):
                self._handle_completed(cf)
        except (KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError) as e:
            log.debug("fetch from node %s failed: %s", node, e)
            self._metadata_needed = True
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a broken response must surface, not kill fetching silently
            log.exception("fetch from node %s failed", node)
            self._pending_error = e
        finally:
            self._fetch_tasks.pop(node, None)
            if self._fetch_event is not None:
                self._fetch_event.set()

    def _handle_completed(self, cf: CompletedFetch) -> None:
        st = self._assignment.get(cf.tp)
        if st is None or st.position != cf.fetch_offset or st.pending_revocation:
            return  # revoked, sought elsewhere, or being revoked since the fetch was sent
        err = cf.error
        if err == ErrorCode.NONE:
            st.high_watermark = cf.high_watermark
            st.log_start = cf.log_start_offset
            if cf.bytes:
                self._buffered[cf.tp] = cf
        elif err == ErrorCode.OFFSET_OUT_OF_RANGE:
            strategy = self.config["auto.offset.reset"]
            if strategy == "none":
                self._pending_error = OffsetOutOfRangeError({cf.tp: cf.fetch_offset})
            else:
                log.info("Fetch position %s is out of range for partition %s, resetting offset", cf.fetch_offset, cf.tp)
                st.position, st.reset = None, strategy
        elif err in _REFRESH_ERRORS:
            self._metadata_needed = True
        elif err == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            self._pending_error = KafkaError(err, f"Not authorized to access topics: [{cf.tp.topic}]")
        else:
            log.warning("Unexpected error code %s while fetching %s", err.name, cf.tp)

    # --- metadata and positions ----------------------------------------------------------------

    async def _maybe_refresh_metadata(self) -> None:
        now = now_ms()
        stale = now - self._client.last_refresh_ms >= self.config["metadata.max.age.ms"]
        if not (self._metadata_needed or stale or self._client.last_refresh_ms < 0) or now < self._next_metadata_ms:
            return
        topics: set[str] | None = set(self._topics) | {tp.topic for tp in self._assignment}
        if self._coordinator is not None:
            topics |= self._coordinator.machine.metadata_topics()
        if self._mode == "pattern":
            topics = None
        try:
            await self._client.refresh_metadata(topics, allow_auto_topic_creation=(
                self.config["allow.auto.create.topics"] and self._mode == "topics"))
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            log.debug("metadata refresh failed: %s", e)
            self._next_metadata_ms = now + self.config["retry.backoff.ms"]
            return
        self._metadata_needed = False
        self._next_metadata_ms = now + self.config["retry.backoff.ms"]
        if self._coordinator is not None and self._mode in ("topics", "pattern"):
            machine = self._coordinator.machine
            if self._mode == "pattern":
                matched = {t for t, info in self._client.topics.items() if self._pattern.fullmatch(t)
                           and not (info.is_internal and self.config["exclude.internal.topics"])}
                self._topics = matched
                machine.subscribe(matched, self._pattern)
            machine.update_metadata({t: self._client.partition_count(t) or 0 for t in machine.metadata_topics()})

    async def _update_fetch_positions(self, timeout_ms: int) -> None:
        missing = [tp for tp, st in self._assignment.items() if st.position is None and not st.pending_revocation]
        if not missing:
            return
        try:
            need_committed = [tp for tp in missing if self._assignment[tp].reset is None]
            if need_committed:
                if self._group_id is not None:
                    committed = await self._group().fetch_committed(need_committed, max(timeout_ms, 1))
                else:
                    committed = {}
                for tp in need_committed:
                    st = self._assignment.get(tp)
                    if st is None or st.position is not None:
                        continue
                    om = committed.get(tp)
                    if om is not None:
                        st.position, st.epoch = om.offset, om.leader_epoch
                    else:
                        st.reset = self.config["auto.offset.reset"]
            to_reset = {tp: self._assignment[tp].reset for tp in missing
                        if tp in self._assignment and self._assignment[tp].position is None}
            if not to_reset:
                return
            undefined = [tp for tp, s in to_reset.items() if s == "none"]
            if undefined:
                raise NoOffsetForPartitionError(undefined)
            found = await self._list_offsets({tp: EARLIEST_TIMESTAMP if s == "earliest" else LATEST_TIMESTAMP
                                              for tp, s in to_reset.items()}, max(timeout_ms, 1))
            for tp, (offset, _) in found.items():
                st = self._assignment.get(tp)
                if st is not None and st.position is None and offset >= 0:
                    st.position, st.reset, st.epoch = offset, None, None
        except KafkaTimeoutError:
            return

    async def _list_offsets(self, timestamps: dict[TopicPartition, int], timeout_ms: int) -> dict:
        """ListOffsets to each partition's leader: {tp: (offset, timestamp)}; retries leader moves."""
        deadline = now_ms() + timeout_ms
        result: dict = {}
        todo = dict(timestamps)
        while todo:
            by_node: dict[int, dict] = {}
            for tp, ts in todo.items():
                leader = self._client.leader_for(tp.topic, tp.partition)
                if leader < 0:
                    self._metadata_needed = True
                    continue
                by_node.setdefault(leader, {})[tp] = ts
            answers = await asyncio.gather(*(self._list_offsets_node(n, parts) for n, parts in by_node.items()),
                                           return_exceptions=True)
            retry = False
            for ans in answers:
                if isinstance(ans, BaseException):
                    if not isinstance(ans, (KafkaConnectionError, KafkaTimeoutError)) and getattr(ans, "code", None) \
                            not in _REFRESH_ERRORS:
                        raise ans
                    retry = True
                    continue
                for tp, value in ans.items():
                    if isinstance(value, ErrorCode):
                        if value not in _REFRESH_ERRORS:
                            raise KafkaError(value, f"ListOffsets failed for {tp}")
                        retry = True
                    else:
                        result[tp] = value
                        todo.pop(tp, None)
            if todo:
                if now_ms() >= deadline:
                    raise KafkaTimeoutError(f"Failed to get offsets by times in {timeout_ms}ms")
                if retry or by_node == {}:
                    self._metadata_needed = True
                    self._next_metadata_ms = 0
                    await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
                    await self._maybe_refresh_metadata()
        return result

    async def _list_offsets_node(self, node: int, parts: dict[TopicPartition, int]) -> dict:
        by_topic: dict[str, list] = {}
        for tp, ts in parts.items():
            by_topic.setdefault(tp.topic, []).append(ListOffsetsRequest.ListOffsetsPartition(
                partition_index=tp.partition, current_leader_epoch=-1, timestamp=ts))
        req = ListOffsetsRequest(replica_id=-1, isolation_level=1 if self.config["isolation.level"] == "read_committed"
                                 else 0, topics=[ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=p)
                                                 for t, p in by_topic.items()],
                                 timeout_ms=self.config["request.timeout.ms"])
        conn = await self._client.connection(node)
        version = conn.api_version(req.API_KEY)
        resp = await conn.send(req, version=version)
        out: dict = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code:
                    out[tp] = ErrorCode(p.error_code)
                else:
                    out[tp] = (p.offset, p.timestamp)
        return out

    # --- positions, seeking, pausing -----------------------------------------------------------

    def _state(self, tp: TopicPartition) -> _PartitionState:
        st = self._assignment.get(TopicPartition(*tp))
        if st is None:
            raise IllegalStateError(f"No current assignment for partition {TopicPartition(*tp)}")
        return st

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int | None = None) -> None:
        if offset < 0:
            raise ValueError("seek offset must not be negative")
        st = self._state(tp)
        self._buffered.pop(TopicPartition(*tp), None)
        st.position, st.reset, st.epoch = offset, None, leader_epoch

    def _seek_to(self, partitions, strategy: str) -> None:
        for tp in (partitions or list(self._assignment)):
            st = self._state(tp)
            self._buffered.pop(TopicPartition(*tp), None)
            st.position, st.reset = None, strategy

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._seek_to(partitions, "earliest")

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._seek_to(partitions, "latest")

    async def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int:
        """The offset of the next record to fetch, initialising it if needed (may block)."""
        st = self._state(tp)
        deadline = now_ms() + (timeout_ms or self.config["default.api.timeout.ms"])
        while st.position is None:
            if now_ms() >= deadline:
                raise KafkaTimeoutError(f"Timeout to determine the position of partition {tp}")
            await self._maybe_refresh_metadata()
            await self._update_fetch_positions(max(1, deadline - now_ms()))
            if st.position is None:
                await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)
        return st.position

    def pause(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._state(tp).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self._state(tp).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._assignment.items() if st.paused}

    def highwater(self, tp: TopicPartition) -> int | None:
        st = self._state(tp)
        return None if st.high_watermark < 0 else st.high_watermark

    async def beginning_offsets(self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None) -> dict:
        return await self._offsets_for(partitions, EARLIEST_TIMESTAMP, timeout_ms)

    async def end_offsets(self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None) -> dict:
        return await self._offsets_for(partitions, LATEST_TIMESTAMP, timeout_ms)

    async def _offsets_for(self, partitions, ts: int, timeout_ms) -> dict:
        parts = [TopicPartition(*tp) for tp in partitions]
        await self._client.refresh_metadata({tp.topic for tp in parts})
        found = await self._list_offsets({tp: ts for tp in parts}, timeout_ms or self.config["default.api.timeout.ms"])
        return {tp: found[tp][0] for tp in parts}

    async def topics(self) -> dict[str, set[int]]:
        await self._client.refresh_metadata(None)
        return {t: set(info.partitions) for t, info in self._client.topics.items()}

    async def partitions_for(self, topic: str) -> set[int] | None:
        await self._client.refresh_metadata([topic])
        info = self._client.topics.get(topic)
        return None if info is None else set(info.partitions)

    # --- commits ---------------------------------------------------------------------------------

    def _all_consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(st.position, "", st.epoch) for tp, st in self._assignment.items()
                if st.position is not None}

    async def commit(self, offsets: Mapping | None = None, timeout_ms: int | None = None) -> None:
        """commitSync: the consumed positions (or the given offsets), retrying until the timeout."""
        self._ensure_open()
        offsets = self._all_consumed() if offsets is None else offsets
        await self._group().commit(offsets, timeout_ms or self.config["default.api.timeout.ms"])

    def commit_async(self, offsets: Mapping | None = None, callback=None) -> asyncio.Future:
        """commitAsync: one attempt; ``callback(offsets, exception)`` runs on completion."""
        self._ensure_open()
        offsets = self._all_consumed() if offsets is None else dict(offsets)
        fut = self._group().commit_async(offsets)
        if callback is not None:
            fut.add_done_callback(lambda f: callback(offsets, None if f.cancelled() else f.exception()))
        return fut

    async def committed(self, partitions: Iterable[TopicPartition], timeout_ms: int | None = None) -> dict:
        parts = [TopicPartition(*tp) for tp in partitions]
        return await self._group().fetch_committed(parts, timeout_ms or self.config["default.api.timeout.ms"])

    # --- rebalance events --------------------------------------------------------------------------

    def _drop(self, tp: TopicPartition) -> None:
        self._assignment.pop(tp, None)
        self._buffered.pop(tp, None)

    async def _on_rebalance_event(self, event) -> None:
        if isinstance(event, PendingRevocation):
            for tp in event.partitions:
                st = self._assignment.get(tp)
                if st is not None:
                    st.pending_revocation = True
                self._buffered.pop(tp, None)
            return
        error = None
        try:
            if isinstance(event, PartitionsRevoked):
                log.info("Revoke previously assigned partitions %s", ", ".join(map(str, event.partitions)))
                await maybe_await(self._listener.on_partitions_revoked(list(event.partitions)))
            elif isinstance(event, PartitionsLost):
                log.info("Lost previously assigned partitions %s", ", ".join(map(str, event.partitions)))
                await maybe_await(self._listener.on_partitions_lost(list(event.partitions)))
        except Exception as e:
            log.exception("User provided listener failed")
            error = e
        if isinstance(event, (PartitionsRevoked, PartitionsLost)):
            for tp in event.partitions:
                self._drop(tp)
        elif isinstance(event, PartitionsAssigned):
            owned = self._coordinator.machine.assignment
            for tp in list(self._assignment):
                if tp not in owned:
                    self._drop(tp)
            for tp in sorted(owned):
                self._assignment.setdefault(tp, _PartitionState())
            self._metadata_needed = True
            log.info("Adding newly assigned partitions: %s", ", ".join(map(str, event.partitions)))
            try:
                await maybe_await(self._listener.on_partitions_assigned(list(event.partitions)))
            except Exception as e:
                log.exception("User provided listener failed")
                error = e
        if error is not None:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"User rebalance callback throws an error: {error!r}") \
                from error

    # --- close -------------------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")

    async def close(self, timeout_ms: int = 30000) -> None:
        """Commit (auto-commit), revoke, LeaveGroup (unless static); returns within ``timeout_ms``
        even if the brokers are gone."""
        if self._closed or self._closing:
            return
        self._closing = True  # listeners may still commit while the group is left
        deadline = now_ms() + timeout_ms
        try:
            if self._coordinator is not None:
                if self.config["enable.auto.commit"] and self._mode is not None and self._coordinator.machine.fatal_error is None:
                    try:
                        await asyncio.wait_for(self._coordinator.commit(self._all_consumed(), max(1, deadline - now_ms())),
                                               max(0.001, (deadline - now_ms()) / 1000))
                    except Exception as e:
                        log.warning("auto-commit on close failed: %r", e)
                try:
                    await asyncio.wait_for(self._coordinator.close(max(0, deadline - now_ms())),
                                           max(0.001, (deadline - now_ms()) / 1000))
                except Exception as e:
                    log.warning("leaving the group on close failed: %r", e)
        finally:
            self._closed = True
            for t in list(self._fetch_tasks.values()):
                t.cancel()
            if self._coordinator is not None and self._coordinator._runner is not None:
                self._coordinator._runner.cancel()
            await self._client.close()
