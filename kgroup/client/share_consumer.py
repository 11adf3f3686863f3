"""The asyncio share consumer (KIP-932): Java's KafkaShareConsumer (ShareConsumerImpl,
ShareConsumeRequestManager, ShareFetchBuffer, ShareFetchCollector) on our connections, metadata
and group-coordinator driver.

Usage::

    async with ShareConsumer(bootstrap_servers="h:9092", group_id="jobs") as consumer:
        consumer.subscribe(["tasks"])
        while True:
            for record in await consumer.poll(1000):     # record.delivery_count: 1, 2, ...
                ...                                      # implicit mode: ACCEPTed by the next poll

Membership is :class:`~kgroup.client.membership_share.ShareGroupMembership` run by the same
background driver as the consumer's (ShareGroupHeartbeat at the broker's interval). Records come
through one share session per partition leader (:mod:`kgroup.client.share_fetcher`), with at most
one request in flight per node, as Java's ``nodesWithPendingRequests``:

* ``poll()`` first settles the previous poll's records: in ``implicit`` mode they are all
  ACCEPTed; in ``explicit`` mode each must have been acknowledged (else IllegalStateError). Then it
  returns buffered records (up to ``max.poll.records``, whole batches); the acknowledgements go in
  a ShareAcknowledge. With nothing buffered they ride on the next ShareFetch instead, which is
  sent to every leader of an assigned partition and long-polls up to ``fetch.max.wait.ms``.
  Fetching stops as soon as records arrive and starts again when the application polls with the
  buffer empty, so nothing is acquired (and locked) ahead of the application, as in Java
  (librdkafka's mock cluster relies on it: a ShareFetch sent while the member still holds
  unacknowledged records it delivered gets them again).
* ``commit_sync()`` / ``commit_async()`` send the acknowledgements made so far in a
  ShareAcknowledge to each node (after any fetch in flight there), with the results per partition;
  the acknowledgement commit callback sees every completed acknowledgement, called from
  ``poll``/``commit_*``/``close``.
* ``close()`` sends the pending acknowledgements with epoch -1, which ends each share session (the
  broker releases whatever else this member acquired), then leaves the group (epoch -1).
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Iterable, Mapping

from kgroup.protocol.api import ApiKey
from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.schema import ZERO_UUID

from .assignors import TopicPartition
from .config import ShareConsumerConfig
from .connection import KafkaClient, now_ms
from .consumer_coordinator import ConsumerCoordinator, maybe_await
from .errors import IllegalStateError, KafkaConnectionError, KafkaTimeoutError, UnsupportedVersionError
from .membership_share import ShareGroupMembership, share_membership_config
from .membership_types import PartitionsAssigned, PartitionsLost, PartitionsRevoked
from .share_fetcher import InFlightRecords, ShareCompletedFetch, ShareSessionHandler, TopicIdPartition
from .types import AcknowledgeType, ConsumerRecord

log = logging.getLogger("kgroup.client.share")

# partition errors after which the leader may have moved (Java's ShareFetchCollector.handleInitializeErrors)
_REFRESH_ERRORS = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
                   ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                   ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.LEADER_NOT_AVAILABLE}
# errors the application must see (a partition's, or the whole request's)
_SURFACED = {ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.CORRUPT_MESSAGE}

Acks = dict[TopicIdPartition, dict[int, int]]


class _AcknowledgeRequest:
    """Acknowledgements for one node from commit_sync / commit_async / close, with the future that
    gets ``{TopicPartition: error or None}``."""
    __slots__ = ("acks", "close", "future")

    def __init__(self, acks: Acks, close: bool, future: asyncio.Future):
        self.acks, self.close, self.future = acks, close, future


class _Node:
    __slots__ = ("handler", "busy", "queue", "retry_at")

    def __init__(self, handler: ShareSessionHandler):
        self.handler = handler
        self.busy = False                       # a ShareFetch or ShareAcknowledge is in flight
        self.queue: deque[_AcknowledgeRequest] = deque()
        self.retry_at = 0


class ShareConsumer:
    """An asyncio Kafka share consumer. Config keys are Java's (``"group.id"``,
    ``"share.acknowledgement.mode"``) or keyword arguments with underscores."""

    def __init__(self, config: Mapping | None = None, **configs):
        self.config = ShareConsumerConfig(config, **configs)
        self._client = KafkaClient(self.config)
        self._group_id: str = self.config["group.id"]
        self._explicit = self.config.explicit_acknowledgement
        self._kd = self.config["key.deserializer"]
        self._vd = self.config["value.deserializer"]
        self._machine = ShareGroupMembership(share_membership_config(self.config))
        self._coordinator = ConsumerCoordinator(self._client, self.config, offsets_to_commit=dict,
                                                on_rebalance_event=self._on_rebalance_event, machine=self._machine)
        self._coordinator.on_progress = self._wake
        self._topics: frozenset[str] = frozenset()
        self._assignment: set[TopicPartition] = set()
        self._nodes: dict[int, _Node] = {}
        self._buffer: deque[ShareCompletedFetch] = deque()
        self._decoded: dict = {}            # partition -> its last decoded batch (ShareCompletedFetch)
        self._current = InFlightRecords()
        self._fetch_acks: dict[int, Acks] = {}          # acknowledgements waiting for the next ShareFetch
        self._fetch_more = False
        self._completed: list[tuple[dict, BaseException | None]] = []
        self._ack_callback = None
        self._lock_timeout_ms: int | None = None
        self._event: asyncio.Event | None = None
        self._tasks: set[asyncio.Task] = set()
        self._pending_error: BaseException | None = None
        self._metadata_needed = True
        self._next_metadata_ms = 0
        self._polling = False
        self._closing = False
        self._closed = False

    async def __aenter__(self) -> "ShareConsumer":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    @property
    def member_id(self) -> str:
        """This member's id (chosen by the client, KIP-1082)."""
        return self._machine.member_id

    # --- subscription ----------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Subscribe to these topics (replacing the subscription); the member joins the share
        group at the next poll."""
        self._ensure_open()
        topics = [topics] if isinstance(topics, str) else list(topics)
        if not topics:
            raise ValueError("subscribe() needs topics; use unsubscribe() to leave")
        if any(not t or not t.strip() for t in topics):
            raise ValueError("Topic collection to subscribe to cannot contain null or empty topic")
        self._topics = frozenset(topics)
        self._machine.subscribe(self._topics)
        self._metadata_needed = True
        self._next_metadata_ms = 0
        log.info("Subscribed to topics: %s", ", ".join(sorted(self._topics)))

    async def unsubscribe(self) -> None:
        """Leave the share group (epoch -1); records not yet returned are released."""
        self._ensure_open()
        await self._coordinator.unsubscribe()
        self._topics = frozenset()
        self._assignment.clear()
        self._kick()

    def subscription(self) -> set[str]:
        return set(self._topics)

    def assignment(self) -> set[TopicPartition]:
        """The partitions the share group assigned this member (shared with other members)."""
        return set(self._assignment)

    # --- poll ------------------------------------------------------------------------------------

    async def poll(self, timeout_ms: int = 0) -> list[ConsumerRecord]:
        """Records acquired for this member, waiting up to ``timeout_ms`` for some. Each has its
        ``delivery_count``."""
        self._ensure_open()
        if self._polling:
            raise IllegalStateError("poll() is already running")
        self._polling = True
        try:
            return await self._poll(timeout_ms)
        finally:
            self._polling = False

    async def _poll(self, timeout_ms: int) -> list[ConsumerRecord]:
        if self._event is None:
            self._event = asyncio.Event()
        await self._handle_completed_acknowledgements()
        if not self._explicit:
            self._current.acknowledge_all(AcknowledgeType.ACCEPT)
        elif not self._current.all_acknowledged():
            raise IllegalStateError("All records must be acknowledged in explicit acknowledgement mode.")
        if not self._topics:
            raise IllegalStateError("Consumer is not subscribed to any topics.")
        acks = self._current.take_acknowledged()
        if len(self._current):              # RENEWed: the same records again, their locks renewed
            self._send_acknowledge_async(acks)
            return list(self._current.records)
        try:
            return await self._fetch_records(timeout_ms, acks)
        except BaseException:
            for node, by_tip in acks.items():   # not sent yet: they go with the next fetch
                self._add_fetch_acks(node, by_tip)
            raise

    async def _fetch_records(self, timeout_ms: int, acks: dict) -> list[ConsumerRecord]:
        """Buffered records, else fetch (``acks`` riding along), waiting up to ``timeout_ms``;
        ``acks`` is emptied once they are handed on."""
        deadline = now_ms() + timeout_ms
        ask_fetch = True
        while True:
            if self._pending_error is not None:
                err, self._pending_error = self._pending_error, None
                raise err
            await self._maybe_refresh_metadata()
            await self._coordinator.poll(0)     # joins / takes a new assignment; never blocks
            fetch = self._collect()
            if len(fetch):
                self._current = fetch
                self._send_acknowledge_async(acks)
                acks.clear()
                await self._handle_completed_acknowledgements()
                return list(fetch.records)
            gaps = fetch.take_acknowledged()    # only GAPs: acknowledge them like the rest
            if ask_fetch or gaps:
                for node, by_tip in list(acks.items()) + list(gaps.items()):
                    self._add_fetch_acks(node, by_tip)
                acks.clear()
                ask_fetch = False
                self._fetch_more = True     # ShareConsumeRequestManager.fetch()
            self._kick()
            remaining = deadline - now_ms()
            if remaining <= 0:
                await self._handle_completed_acknowledgements()
                return []
            wait = remaining
            nxt = self._coordinator.time_to_next_poll()
            if nxt is not None:
                wait = min(wait, max(1, nxt))
            if self._metadata_needed:
                wait = min(wait, max(1, self._next_metadata_ms - now_ms()))
            retry = [n.retry_at for n in self._nodes.values() if n.retry_at > now_ms()]
            if retry:
                wait = min(wait, max(1, min(retry) - now_ms()))
            self._event.clear()
            try:
                await asyncio.wait_for(self._event.wait(), wait / 1000)
            except asyncio.TimeoutError:
                pass

    def _wake(self) -> None:
        if self._event is not None:
            self._event.set()

    def _collect(self) -> InFlightRecords:
        """Java's ShareFetchCollector.collect: up to max.poll.records (whole batches) from the buffer."""
        fetch = InFlightRecords()
        remaining = self.config["max.poll.records"]
        while remaining > 0 and self._buffer:
            cf = self._buffer[0]
            if cf.tp not in self._assignment:
                self._buffer.popleft()
                self._release_buffered(cf)
                continue
            records, gaps = cf.take(remaining, self._kd, self._vd)
            fetch.add(cf, records, gaps)
            remaining -= len(records)
            if cf.consumed:
                self._buffer.popleft()
        return fetch

    def _release_buffered(self, cf: ShareCompletedFetch) -> None:
        """Records acquired but never returned (their partition went away): RELEASEd."""
        left = cf.remaining()
        if left:
            self._add_fetch_acks(cf.node_id, {cf.tip: {o: int(AcknowledgeType.RELEASE) for o in left}})
            self._fetch_more = True

    # --- acknowledgements ------------------------------------------------------------------------

    def acknowledge(self, record: ConsumerRecord, type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Explicit mode: how this record of the last poll was processed. Sent with the next
        poll or commit."""
        self.acknowledge_offset(record.topic, record.partition, record.offset, type)

    def acknowledge_offset(self, topic: str, partition: int, offset: int,
                           type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        self._ensure_open()
        if not self._explicit:
            raise IllegalStateError("Implicit acknowledgement of delivery is being used.")
        type = AcknowledgeType(type)
        tp = TopicPartition(topic, partition)
        if type == AcknowledgeType.RENEW:
            entry = self._current.partitions.get(tp)
            conn = self._client._conns.get(("default", entry[0])) if entry is not None else None
            if conn is not None and conn.broker_versions.get(ApiKey.SHARE_ACKNOWLEDGE, (0, 0))[1] < 2:
                raise UnsupportedVersionError("RENEW needs ShareAcknowledge v2 (KIP-1222), which the broker lacks")
        self._current.acknowledge(tp, offset, type)

    def set_acknowledgement_commit_callback(self, callback) -> None:
        """``callback(offsets: {TopicPartition: set of offsets}, exception or None)`` for every
        completed acknowledgement (plain function or coroutine), called from poll / commit / close;
        None removes it."""
        self._ensure_open()
        self._ack_callback = callback
        if callback is None:
            self._completed.clear()

    def acquisition_lock_timeout_ms(self) -> int | None:
        """How long the broker locks an acquired record (from its last ShareFetch answer)."""
        return self._lock_timeout_ms

    def _settle(self) -> dict[int, Acks]:
        if not self._explicit:
            self._current.acknowledge_all(AcknowledgeType.ACCEPT)
        return self._current.take_acknowledged()

    async def commit_sync(self, timeout_ms: int | None = None) -> dict[TopicPartition, BaseException | None]:
        """Send the acknowledgements made so far (implicit mode: every record of the last poll
        ACCEPTed) and wait for the brokers: ``{partition: None or the error}``."""
        self._ensure_open()
        await self._handle_completed_acknowledgements()
        futures = self._enqueue(self._settle(), close=False)
        if not futures:
            return {}
        timeout = (timeout_ms if timeout_ms is not None else self.config["default.api.timeout.ms"]) / 1000
        done, pending = await asyncio.wait(futures, timeout=timeout)
        result: dict = {}
        for f in done:
            result.update(f.result())
        await self._handle_completed_acknowledgements()
        if pending:
            raise KafkaTimeoutError(f"Timeout of {timeout_ms}ms expired before the acknowledgements were committed")
        return result

    def commit_async(self) -> asyncio.Future:
        """Like commit_sync without waiting: the results go to the acknowledgement commit callback
        (the returned future also gets them)."""
        self._ensure_open()
        futures = self._enqueue(self._settle(), close=False)
        return self._gather(futures)

    def _send_acknowledge_async(self, acks: dict[int, Acks]) -> None:
        if acks:
            self._enqueue(acks, close=False)

    @staticmethod
    def _gather(futures: list[asyncio.Future]) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        out = loop.create_future()
        if not futures:
            out.set_result({})
            return out
        left = [len(futures)]
        merged: dict = {}

        def one(f):
            if not f.cancelled() and f.exception() is None:
                merged.update(f.result())
            left[0] -= 1
            if left[0] == 0 and not out.done():
                out.set_result(merged)
        for f in futures:
            f.add_done_callback(one)
        return out

    def _enqueue(self, acks: dict[int, Acks], close: bool) -> list[asyncio.Future]:
        loop = asyncio.get_running_loop()
        futures = []
        for node_id, by_tip in acks.items():
            node = self._nodes.get(node_id)
            if node is None:        # never fetched there: nothing of it to acknowledge
                self._fail_acks(by_tip, KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER))
                continue
            fut = loop.create_future()
            node.queue.append(_AcknowledgeRequest(by_tip, close, fut))
            futures.append(fut)
        self._kick()
        return futures

    def _add_fetch_acks(self, node_id: int, by_tip: Acks) -> None:
        pending = self._fetch_acks.setdefault(node_id, {})
        for tip, acks in by_tip.items():
            pending.setdefault(tip, {}).update(acks)

    def _tp(self, tip: TopicIdPartition, node: _Node | None = None) -> TopicPartition | None:
        if node is not None and tip in node.handler.session:
            return node.handler.session[tip]
        name = self._client.topic_names.get(tip[0])
        return None if name is None else TopicPartition(name, tip[1])

    def _complete_acks(self, tip: TopicIdPartition, acks: dict[int, int], error: BaseException | None,
                       node: _Node | None = None) -> tuple[TopicPartition | None, BaseException | None]:
        tp = self._tp(tip, node)
        offsets = {o for o, t in acks.items() if t != 0}     # GAPs are the client's own
        if self._ack_callback is not None and tp is not None and offsets:
            self._completed.append(({tp: offsets}, error))
        if error is not None:
            log.debug("acknowledgement of %s %s failed: %r", tp, sorted(offsets), error)
        return tp, error

    def _fail_acks(self, by_tip: Acks, error: BaseException) -> dict:
        return dict(self._complete_acks(tip, a, error) for tip, a in by_tip.items())

    async def _handle_completed_acknowledgements(self) -> None:
        completed, self._completed = self._completed, []
        callback = self._ack_callback
        if callback is None:
            return
        for offsets, error in completed:
            try:
                await maybe_await(callback(offsets, error))
            except Exception:
                log.exception("Exception thrown by acknowledgement commit callback")

    # --- requests --------------------------------------------------------------------------------

    def _node(self, node_id: int) -> _Node:
        node = self._nodes.get(node_id)
        if node is None:
            node = self._nodes[node_id] = _Node(ShareSessionHandler(node_id, self._machine.member_id))
        return node

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _kick(self) -> None:
        """Send what can be sent: acknowledgements first, then a ShareFetch to every leader of an
        assigned partition with nothing in flight (Java's ShareConsumeRequestManager.poll)."""
        if self._closed:
            return
        for node in self._nodes.values():
            if not node.busy and node.queue:
                node.busy = True
                self._spawn(self._acknowledge(node, node.queue.popleft()))
        if not self._fetch_more or self._closing:
            return
        by_node: dict[int, list[tuple[TopicIdPartition, TopicPartition]]] = {}
        for tp in sorted(self._assignment):
            info = self._client.topics.get(tp.topic)
            leader = self._client.leader_for(tp.topic, tp.partition)
            if info is None or leader < 0 or info.topic_id == ZERO_UUID:
                self._metadata_needed = True
                continue
            by_node.setdefault(leader, []).append(((info.topic_id, tp.partition), tp))
        now = now_ms()
        for node_id in list(by_node) + [n for n in self._fetch_acks if n not in by_node] + \
                [n for n, st in self._nodes.items() if st.handler.session and n not in by_node]:
            node = self._node(node_id)
            if node.busy or now < node.retry_at:
                continue
            handler = node.handler
            handler.member_id = self._machine.member_id     # a pre-KIP-1082 coordinator may pick it
            waiting = self._fetch_acks.pop(node_id, {})
            for tip, tp in by_node.get(node_id, ()):
                acks = waiting.pop(tip, None)
                if acks and handler.is_new_session:     # an opening request cannot carry them
                    self._complete_acks(tip, acks, KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER), node)
                    acks = None
                handler.add_partition_to_fetch(tip, tp, acks)
            for tip, acks in waiting.items():
                if handler.is_new_session:
                    self._complete_acks(tip, acks, KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER), node)
                else:
                    handler.add_acknowledge_only(tip, acks)
            req, sent = handler.build_fetch(self._group_id, self.config)
            if not handler.session and not sent and not req.forgotten_topics_data:
                continue                # nothing to fetch, acknowledge or forget there
            node.busy = True
            self._spawn(self._share_fetch(node, req, sent))

    async def _share_fetch(self, node: _Node, req, acks: Acks) -> None:
        handler = node.handler
        try:
            conn = await self._client.connection(handler.node_id)
            resp = await conn.send(req, timeout_ms=self.config["request.timeout.ms"] + req.max_wait_ms)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            handler.handle_error(e)
            self._fail_acks(acks, e)
            self._metadata_needed = True
            node.retry_at = now_ms() + self.config["retry.backoff.ms"]
        else:
            try:
                self._on_share_fetch(node, resp, acks)
            except Exception as e:  # a broken answer must surface, not stop fetching silently
                log.exception("ShareFetch answer from node %s could not be handled", handler.node_id)
                self._pending_error = e
        finally:
            node.busy = False
            self._wake()
            self._kick()

    def _on_share_fetch(self, node: _Node, resp, acks: Acks) -> None:
        """Java's ShareConsumeRequestManager.handleShareFetchSuccess."""
        error = ErrorCode(resp.error_code)
        if not node.handler.handle_response(error):
            log.info("ShareFetch to node %s failed: %s %s", node.handler.node_id, error.name, resp.error_message or "")
            self._fail_acks(acks, KafkaError(error, resp.error_message))
            if error == ErrorCode.UNKNOWN_TOPIC_ID or error in _REFRESH_ERRORS:
                self._metadata_needed = True
            if error in _SURFACED:
                self._pending_error = KafkaError(error, resp.error_message)
            node.retry_at = now_ms() + self.config["retry.backoff.ms"]
            return
        if resp.acquisition_lock_timeout_ms > 0:
            self._lock_timeout_ms = resp.acquisition_lock_timeout_ms
        got = False
        for t in resp.responses:
            for p in t.partitions:
                tip = (t.topic_id, p.partition_index)
                mine = acks.pop(tip, None)
                if mine is not None:
                    code = ErrorCode(p.acknowledge_error_code)
                    self._complete_acks(tip, mine, KafkaError(code, p.acknowledge_error_message) if code else None,
                                        node)
                tp = self._tp(tip, node)
                perr = ErrorCode(p.error_code)
                if perr:
                    log.debug("ShareFetch of %s from node %s: %s", tp, node.handler.node_id, perr.name)
                    if perr in _REFRESH_ERRORS:
                        self._metadata_needed = True
                    elif perr in _SURFACED:
                        self._pending_error = KafkaError(perr, f"ShareFetch of {tp} failed: {perr.name}")
                    node.retry_at = now_ms() + self.config["retry.backoff.ms"]
                if p.acquired_records and tp is not None:
                    self._buffer.append(ShareCompletedFetch(node.handler.node_id, tp, tip, p.records,
                                                            p.acquired_records, self._decoded))
                    got = True
        for tip, mine in acks.items():      # the broker did not answer for them
            self._complete_acks(tip, mine, KafkaError(ErrorCode.INVALID_RECORD_STATE, "Invalid response"), node)
        if got:
            self._fetch_more = False

    async def _acknowledge(self, node: _Node, request: _AcknowledgeRequest) -> None:
        """One ShareAcknowledge (Java's AcknowledgeRequestState): its result per partition."""
        handler = node.handler
        result: dict = {}
        try:
            req = handler.build_acknowledge(self._group_id, request.acks, request.close)
            if req is None:     # no session there (it was reset): the broker released those records
                result = self._fail_acks(request.acks, KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER))
                return
            if not req.topics and not request.close:
                return
            try:
                conn = await self._client.connection(handler.node_id)
                resp = await conn.send(req)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                handler.handle_error(e)
                result = self._fail_acks(request.acks, e)
                return
            error = ErrorCode(resp.error_code)
            ok = handler.handle_response(error)
            if request.close:
                handler.reset()     # the session is over
            if not ok:
                result = self._fail_acks(request.acks, KafkaError(error, resp.error_message))
                if error in _SURFACED:
                    self._pending_error = KafkaError(error, resp.error_message)
                return
            if resp.acquisition_lock_timeout_ms > 0:
                self._lock_timeout_ms = resp.acquisition_lock_timeout_ms
            acks = dict(request.acks)
            for t in resp.responses:
                for p in t.partitions:
                    tip = (t.topic_id, p.partition_index)
                    mine = acks.pop(tip, None)
                    if mine is not None:
                        code = ErrorCode(p.error_code)
                        tp, err = self._complete_acks(tip, mine, KafkaError(code, p.error_message) if code else None,
                                                      node)
                        result[tp] = err
            for tip, mine in acks.items():
                tp, err = self._complete_acks(tip, mine, KafkaError(ErrorCode.INVALID_RECORD_STATE, "Invalid response"),
                                              node)
                result[tp] = err
        finally:
            if not request.future.done():
                request.future.set_result({tp: e for tp, e in result.items() if tp is not None})
            node.busy = False
            self._wake()
            self._kick()

    # --- metadata and rebalance events -------------------------------------------------------------

    async def _maybe_refresh_metadata(self) -> None:
        now = now_ms()
        stale = now - self._client.last_refresh_ms >= self.config["metadata.max.age.ms"]
        if not (self._metadata_needed or stale or self._client.last_refresh_ms < 0) or now < self._next_metadata_ms:
            return
        try:
            await self._client.refresh_metadata(set(self._topics) | {tp.topic for tp in self._assignment})
        except (KafkaConnectionError, KafkaTimeoutError) as e:
            log.debug("metadata refresh failed: %s", e)
            self._next_metadata_ms = now + self.config["retry.backoff.ms"]
            return
        self._metadata_needed = False
        self._next_metadata_ms = now + self.config["retry.backoff.ms"]

    async def _on_rebalance_event(self, event) -> None:
        """A share member takes its assignment as it comes: no listener, nothing to commit."""
        if isinstance(event, PartitionsAssigned):
            self._assignment = set(self._machine.assignment)
            self._metadata_needed = True
            log.info("Assigned partitions: %s", ", ".join(map(str, sorted(self._assignment))))
        elif isinstance(event, (PartitionsRevoked, PartitionsLost)):
            self._assignment.difference_update(event.partitions)
            for tp in event.partitions:
                self._decoded.pop(tp, None)
            for cf in [cf for cf in self._buffer if cf.tp in event.partitions]:
                self._buffer.remove(cf)
                self._release_buffered(cf)
        self._wake()

    # --- close -------------------------------------------------------------------------------------

    def _ensure_open(self) -> None:
        if self._closed:
            raise IllegalStateError("This consumer has already been closed.")

    async def close(self, timeout_ms: int = 30000) -> None:
        """Send the pending acknowledgements and end every share session (epoch -1: the brokers
        release what this member still holds, records of the last poll included in implicit
        mode), then leave the share group (epoch -1). Returns within ``timeout_ms``."""
        if self._closed or self._closing:
            return
        deadline = now_ms() + min(timeout_ms, self.config["request.timeout.ms"])
        try:
            acks = self._current.take_acknowledged()
            self._current = InFlightRecords()
            for node_id, by_tip in self._fetch_acks.items():
                for tip, a in by_tip.items():
                    acks.setdefault(node_id, {}).setdefault(tip, {}).update(a)
            self._fetch_acks = {}
            self._fetch_more = False
            self._closing = True
            for node_id, node in self._nodes.items():
                if not node.handler.is_new_session or node.busy:
                    acks.setdefault(node_id, {})
            futures = self._enqueue(acks, close=True)
            if futures:
                await asyncio.wait(futures, timeout=max(0.0, (deadline - now_ms()) / 1000))
            await self._handle_completed_acknowledgements()
            try:
                await asyncio.wait_for(self._coordinator.close(max(0, deadline - now_ms())),
                                       max(0.001, (deadline - now_ms()) / 1000))
            except Exception as e:
                log.warning("leaving the share group on close failed: %r", e)
        finally:
            self._closed = True
            for t in list(self._tasks):
                t.cancel()
            if self._coordinator._runner is not None:
                self._coordinator._runner.cancel()
            await self._client.close()
