"""The asyncio driver of the membership machine: Java's ConsumerCoordinator network side plus
its heartbeat thread, as one background task and a foreground step.

The background task ticks :class:`~kgroup.client.membership.GroupMembership` whenever a timer
is due or something happened, and sends what it asks for: heartbeats, FindCoordinator,
and the JoinGroup -> SyncGroup chain once started. Each request runs as its own task; its answer
goes back into the machine (``on_response`` / ``on_failure``) and the outputs are acted on at
once. The foreground step (:meth:`ConsumerCoordinator.poll`, called from the consumer's
``poll()``) is the only place a rebalance starts or completes, so the rebalance listener never
runs while the application is processing records. Coordinator requests go over a dedicated
connection to the coordinator node.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Awaitable, Callable, Mapping

from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from kgroup.protocol.schema import ZERO_UUID

from .assignors import ClusterMetadata, TopicPartition, get_assignor
from .connection import KafkaClient, now_ms
from .types import NAMES_MAX_VERSIONS
from .errors import KafkaConnectionError, KafkaTimeoutError, is_retriable
from .membership import GroupMembership
from .membership_consumer import ConsumerGroupMembership
from .membership_types import (CALLBACKS, CommitCompleted, CoordinatorDiscovered, CoordinatorLost, FetchMetadata,
                               GroupError, MembershipConfig, PendingRevocation, ResolveTopicIds,
                               SendRequest)
from .types import OffsetAndMetadata

log = logging.getLogger("kgroup.client.consumer_coordinator")

COORDINATOR_GROUP = "coordinator"  # connection group: the coordinator gets its own connection


async def maybe_await(value):
    if inspect.isawaitable(value):
        return await value
    return value


class ConsumerCoordinator:
    """Group membership, offset commits and committed-offset fetches for one consumer."""

    def __init__(self, client: KafkaClient, config, *,
                 offsets_to_commit: Callable[[], Mapping[TopicPartition, OffsetAndMetadata]],
                 on_rebalance_event: Callable[[object], Awaitable[None]], random=None,
                 machine: GroupMembership | None = None):
        self.client = client
        self.config = config
        self.group_id = config["group.id"]
        kw = {"random": random} if random is not None else {}
        self.machine: GroupMembership
        if machine is not None:  # a share group's membership (client/membership_share.py)
            self.machine = machine
        elif (membership := MembershipConfig.from_consumer_config(config)).group_protocol == "consumer":
            # KIP-848: the broker assigns
            self.machine = ConsumerGroupMembership(membership, offsets_to_commit=offsets_to_commit, **kw)
        else:
            assignors = [get_assignor(name) for name in config["partition.assignment.strategy"]]
            self.machine = GroupMembership(membership, assignors, offsets_to_commit=offsets_to_commit, **kw)
        self._on_rebalance_event = on_rebalance_event
        self._wakeup = asyncio.Event()
        self._progress = asyncio.Event()
        self._commits: dict[int, asyncio.Future] = {}
        self._errors: list[BaseException] = []
        self._tasks: set[asyncio.Task] = set()
        self._leave_tasks: set[asyncio.Task] = set()
        self._runner: asyncio.Task | None = None
        self._closed = False
        self.on_progress: Callable[[], None] | None = None  # the consumer's poll wakes up on it

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._runner is None:
            self._runner = asyncio.get_running_loop().create_task(self._run(), name=f"coordinator-{self.group_id}")

    async def _run(self) -> None:
        while not self._closed:
            try:
                outs = self.machine.poll(now_ms())
                if outs:
                    await self._dispatch(outs)
                    continue
                self._wakeup.clear()
                deadline = self.machine.next_deadline(now_ms())
                timeout = None if deadline is None else max(0, deadline - now_ms()) / 1000
                try:
                    await asyncio.wait_for(self._wakeup.wait(), timeout)
                except asyncio.TimeoutError:
                    pass
            except asyncio.CancelledError:
                raise
            except Exception:  # never let the heartbeat loop die silently
                log.exception("coordinator loop error")
                await asyncio.sleep(0.1)

    def wakeup(self) -> None:
        self._wakeup.set()
        self._progress.set()
        if self.on_progress is not None:
            self.on_progress()

    async def close(self, timeout_ms: int) -> None:
        """Revoke (callbacks), send LeaveGroup unless static, wait for it at most ``timeout_ms``."""
        deadline = now_ms() + timeout_ms
        try:
            if self.machine.fatal_error is None:
                try:  # callbacks first, with the generation intact (they may commit)
                    await self._dispatch(self.machine.on_leave_prepare(now_ms()), foreground=True)
                finally:
                    await self._dispatch(self.machine.maybe_leave_group(now_ms()))
            if self._leave_tasks:
                await asyncio.wait(self._leave_tasks, timeout=max(0, deadline - now_ms()) / 1000)
        finally:
            self._closed = True
            if self._runner is not None:
                self._runner.cancel()
            for t in list(self._tasks):
                t.cancel()
            for fut in self._commits.values():
                if not fut.done():
                    fut.set_exception(KafkaConnectionError("consumer closed"))

    # --- output handling ---------------------------------------------------------------------

    async def _dispatch(self, outs: list, foreground: bool = False) -> None:
        for o in outs:
            if isinstance(o, SendRequest):
                self._spawn(self._request(o), leave=_is_leave(o.request))
            elif isinstance(o, FetchMetadata):
                self._spawn(self._leader_metadata(o))
            elif isinstance(o, ResolveTopicIds):
                self._spawn(self._resolve_topic_ids(o))
            elif isinstance(o, CommitCompleted):
                fut = self._commits.pop(o.token, None)
                if fut is not None and not fut.done():
                    if o.error is None:
                        fut.set_result(o.offsets)
                    else:
                        fut.set_exception(o.error)
            elif isinstance(o, GroupError):
                self._errors.append(o.error)
            elif isinstance(o, CoordinatorLost):
                self.client.disconnect(o.node.node_id, COORDINATOR_GROUP, o.reason)
            elif isinstance(o, CoordinatorDiscovered):
                pass
            elif isinstance(o, CALLBACKS) or isinstance(o, PendingRevocation):
                await self._on_rebalance_event(o)
        self.wakeup()

    def _spawn(self, coro, leave: bool = False) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if leave:
            self._leave_tasks.add(task)
            task.add_done_callback(self._leave_tasks.discard)

    async def _request(self, o: SendRequest) -> None:
        try:
            if o.to_coordinator:
                node = self.machine.coordinator
                if node is None:
                    raise KafkaConnectionError("coordinator unknown")
                resp = await self.client.send(node.node_id, o.request, group=COORDINATOR_GROUP, node=node,
                                              timeout_ms=o.timeout_ms, min_version=o.min_version,
                                              max_version=o.max_version)
            else:
                resp = await self.client.send_any(o.request, timeout_ms=o.timeout_ms)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            outs = self.machine.on_failure(o.token, e, now_ms())
        else:
            if isinstance(self.machine, ConsumerGroupMembership):  # topic ids the cache already knows
                self.machine.on_topic_names(-1, self.client.topic_names, now_ms())
            outs = self.machine.on_response(o.token, resp, now_ms())
        await self._dispatch(outs)

    async def _leader_metadata(self, o: FetchMetadata) -> None:
        try:
            await self.client.refresh_metadata(o.topics)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            outs = self.machine.on_failure(o.token, e, now_ms())
        else:
            counts = {t: self.client.partition_count(t) for t in o.topics}
            cluster = ClusterMetadata({t: n for t, n in counts.items() if n})
            outs = self.machine.on_metadata(o.token, cluster, now_ms())
        await self._dispatch(outs)

    async def _resolve_topic_ids(self, o: ResolveTopicIds) -> None:
        try:
            await self.client.refresh_metadata(None if o.topics is None else list(o.topics))
        except asyncio.CancelledError:
            raise
        except Exception as e:
            outs = self.machine.on_failure(o.token, e, now_ms())
        else:
            outs = self.machine.on_topic_names(o.token, dict(self.client.topic_names), now_ms())
        await self._dispatch(outs)

    async def unsubscribe(self) -> None:
        try:
            await self._dispatch(self.machine.unsubscribe(now_ms()), foreground=True)
        finally:
            await self._dispatch(self.machine.maybe_leave_group(now_ms(), "the consumer unsubscribed from all topics"))

    def raise_errors(self) -> None:
        if self.machine.fatal_error is not None:
            raise self.machine.fatal_error
        if self._errors:
            error = self._errors.pop(0)
            raise error

    # --- foreground --------------------------------------------------------------------------

    async def poll(self, timeout_ms: int = 0) -> bool:
        """The application's poll: start or finish a rebalance if needed, run rebalance callbacks,
        auto-commit; then wait at most ``timeout_ms`` for the member to be stable (the consumer
        passes 0 and waits for records and group progress together, as Java's poll does with
        waitForJoinGroup=false). True when the member is stable."""
        deadline = now_ms() + timeout_ms
        self.start()
        while True:
            self.raise_errors()
            outs = self.machine.poll(now_ms(), foreground=True)
            if outs:
                await self._dispatch(outs, foreground=True)
                continue
            if not self.machine.group_managed or self.machine.is_stable():
                return True
            remaining = deadline - now_ms()
            if remaining <= 0:
                return False
            nxt = self.machine.next_deadline(now_ms(), foreground=True)
            wait = remaining if nxt is None else min(remaining, max(1, nxt - now_ms()))
            self._progress.clear()
            try:
                await asyncio.wait_for(self._progress.wait(), wait / 1000)
            except asyncio.TimeoutError:
                pass

    def time_to_next_poll(self) -> int | None:
        """How long the consumer may wait before the coordinator needs a foreground poll."""
        nxt = self.machine.next_deadline(now_ms(), foreground=True)
        return None if nxt is None else max(0, nxt - now_ms())

    async def commit(self, offsets: Mapping, timeout_ms: int) -> None:
        """commitSync: retries retriable failures (with backoff) until ``timeout_ms``."""
        deadline = now_ms() + timeout_ms
        attempts = 0
        while True:
            try:
                await asyncio.wait_for(self.commit_async(offsets), max(0, deadline - now_ms()) / 1000)
                return
            except asyncio.TimeoutError:
                raise KafkaTimeoutError(f"Timeout of {timeout_ms}ms expired before successfully committing offsets "
                                        f"{dict(offsets)}") from None
            except Exception as e:
                if not is_retriable(e) or now_ms() >= deadline:
                    raise
                backoff = self.machine._backoff.backoff(attempts)  # Java: retryBackoff.backoff(attempts++)
                attempts += 1
                await asyncio.sleep(min(backoff, max(0, deadline - now_ms())) / 1000)

    def commit_async(self, offsets: Mapping) -> asyncio.Future:
        """commitAsync: one attempt; the future resolves to the offsets or fails."""
        self.start()
        token, outs = self.machine.commit(offsets, now_ms())
        fut = asyncio.get_running_loop().create_future()
        self._commits[token] = fut
        fut.add_done_callback(lambda f: self.machine.cancel(token) if f.cancelled() else None)
        asyncio.get_running_loop().create_task(self._dispatch(outs))
        self.wakeup()
        return fut

    async def coordinator_request(self, body, timeout_ms: int, max_version: int | None = None):
        """Send a request to the group coordinator (OffsetFetch), finding it first and
        retrying on coordinator moves and retriable errors until ``timeout_ms``."""
        deadline = now_ms() + timeout_ms
        self.start()
        self.machine.want_coordinator()
        while True:
            node = self.machine.coordinator
            if node is None:
                self.raise_errors()
                self.wakeup()
                if now_ms() >= deadline:
                    raise KafkaTimeoutError("Timeout expired while waiting for the group coordinator")
                self._progress.clear()
                try:
                    await asyncio.wait_for(self._progress.wait(), min(0.1, max(0.001, (deadline - now_ms()) / 1000)))
                except asyncio.TimeoutError:
                    pass
                continue
            try:
                return await self.client.send(node.node_id, body, group=COORDINATOR_GROUP, node=node,
                                              max_version=max_version)
            except (KafkaConnectionError, KafkaTimeoutError) as e:
                await self._dispatch(self.machine.mark_coordinator_unknown(str(e)))
                if now_ms() >= deadline:
                    raise

    async def fetch_committed(self, partitions, timeout_ms: int) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """OffsetFetch (require_stable, as Java) for these partitions: by topic id (v10+) when the
        KIP-848 consumer knows every topic's id (Java's CommitRequestManager), else by name."""
        partitions = sorted(set(partitions))
        if not partitions:
            return {}
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        ids = self.machine.commit_topic_ids(by_topic)
        req = OffsetFetchRequest(
            group_id=self.group_id,
            topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=p) for t, p in by_topic.items()],
            groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=self.group_id, topics=[OffsetFetchRequest.OffsetFetchRequestTopics(
                    name=t, topic_id=ids[t] if ids else ZERO_UUID, partition_indexes=p) for t, p in by_topic.items()])],
            require_stable=True)
        names = {tid: t for t, tid in ids.items()} if ids else None
        deadline = now_ms() + timeout_ms
        attempts = 0
        while True:
            resp = await self.coordinator_request(req, max(0, deadline - now_ms()),
                                                  max_version=None if ids else NAMES_MAX_VERSIONS[req.API_KEY])
            error, offsets = parse_offset_fetch(resp, self.group_id, names)
            if error is None:
                return {tp: offsets.get(tp) for tp in partitions}
            if error.code in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
                await self._dispatch(self.machine.mark_coordinator_unknown(f"error response {error.code.name}"))
            if not error.code.retriable or now_ms() >= deadline:
                raise error
            await asyncio.sleep(self.machine._backoff.backoff(attempts) / 1000)
            attempts += 1


def _is_leave(request) -> bool:
    """LeaveGroup, or a Consumer/ShareGroupHeartbeat with a leave epoch (-1, -2): close() waits for it."""
    return (type(request).__name__ == "LeaveGroupRequest"
            or (type(request).__name__ in ("ConsumerGroupHeartbeatRequest", "ShareGroupHeartbeatRequest")
                and request.member_epoch < 0))


def parse_offset_fetch(resp, group_id: str, topic_names=None) -> tuple[KafkaError | None, dict]:
    """(group or partition error, {tp: OffsetAndMetadata or None}) from any OffsetFetch version
    (``topic_names``: topic id -> name, for v10+, which names topics by id only)."""
    if resp.groups:
        group = next((g for g in resp.groups if g.group_id == group_id), resp.groups[0])
        code, topics = group.error_code, group.topics
    else:
        code, topics = resp.error_code, resp.topics
    if code:
        return KafkaError(ErrorCode(code)), {}
    offsets: dict = {}
    for t in topics:
        name = t.name or (topic_names or {}).get(getattr(t, "topic_id", ZERO_UUID), "")
        for p in t.partitions:
            if p.error_code:
                err = ErrorCode(p.error_code)
                if err == ErrorCode.UNSTABLE_OFFSET_COMMIT:
                    return KafkaError(err, "There are unstable offsets for the requested topic partitions"), {}
                return KafkaError(err, f"Error fetching offset for {name}-{p.partition_index}: {err.name}"), {}
            tp = TopicPartition(name, p.partition_index)
            offsets[tp] = (OffsetAndMetadata(p.committed_offset, p.metadata or "",
                                             None if p.committed_leader_epoch < 0 else p.committed_leader_epoch)
                           if p.committed_offset >= 0 else None)
    return None, offsets
