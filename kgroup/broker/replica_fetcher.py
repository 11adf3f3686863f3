"""Followers fetching from their leaders (Kafka's ReplicaFetcherManager, AbstractFetcherThread and
ReplicaFetcherThread), one asyncio task per source broker instead of a thread.

A partition this broker follows is first *truncating*: the fetcher asks the leader
(OffsetForLeaderEpoch with this broker's replica id) for the end offset of the follower's latest
leader epoch and cuts the log where it diverges from the leader's (``truncation_offset``, Kafka's
getOffsetTruncationState; asked again for an older epoch when the follower does not know the
leader's). Then it *fetches*: Fetch requests with the replica id, the follower's log end offset
and last fetched epoch, and its current leader epoch; the leader's batches are appended as they
came (offsets, epochs and timestamps kept: ``PartitionLog.append_as_follower``, which also
rebuilds the idempotent and transactional producer state and the aborted transaction index from
them), the follower's high watermark follows the leader's, and a diverging epoch in the answer
(Fetch v12+) truncates again. A leader that answers with an error other than for its data (a
newer or older leader epoch, not the leader) leaves the partition waiting for the next state
from the controller, as Kafka's fetcher marks it failed; a lost connection is retried after
``replica.fetch.backoff.ms``.
"""
from __future__ import annotations

import asyncio
import logging

from ..client.connection import BrokerConnection
from ..client.errors import KafkaConnectionError, KafkaTimeoutError
from ..protocol.api import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages.fetch import FetchRequest
from ..protocol.messages.list_offsets import ListOffsetsRequest
from ..protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from ..protocol.records import RecordBatchError
from ..storage.errors import LogError
from ..storage.leader_epoch_cache import UNDEFINED_EPOCH
from .inter_broker import connect

log = logging.getLogger("kgroup.replica_fetcher")

TRUNCATING, FETCHING, FAILED = "truncating", "fetching", "failed"
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1


class FetchState:
    __slots__ = ("partition", "state", "leader_epoch", "delayed_until")

    def __init__(self, partition):
        self.partition = partition
        self.state = TRUNCATING
        self.leader_epoch = partition.leader_epoch
        self.delayed_until = 0.0        # loop time before which it is not asked for (a retriable error)


class ReplicaFetcher:
    """The fetcher of the partitions one source broker leads."""

    def __init__(self, manager: "ReplicaFetcherManager", source_id: int):
        self.manager = manager
        self.rm = manager.rm
        self.source_id = source_id
        self.partitions: dict[tuple[str, int], FetchState] = {}
        self.connection: BrokerConnection | None = None
        self.task: asyncio.Task | None = None
        self.wakeup = asyncio.Event()
        self.closing = False
        config = self.rm.broker.config
        self.max_wait_ms = config["replica.fetch.wait.max.ms"]
        self.min_bytes = config["replica.fetch.min.bytes"]
        self.max_bytes = config["replica.fetch.response.max.bytes"]
        self.partition_max_bytes = config["replica.fetch.max.bytes"]
        self.backoff_s = config["replica.fetch.backoff.ms"] / 1000.0
        self.timeout_ms = config["replica.socket.timeout.ms"]

    def add(self, partition) -> None:
        self.partitions[partition.tp] = FetchState(partition)
        self.wakeup.set()
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    def remove(self, tp) -> None:
        self.partitions.pop(tp, None)

    async def close(self) -> None:
        # also checked by the loop: asyncio.wait_for (Python 3.11) swallows a cancellation that
        # arrives with the response it waited for, and the loop would go on
        self.closing = True
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):
                pass
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    # -- the loop -------------------------------------------------------------------------------
    def _ready(self, state: str) -> dict:
        now = asyncio.get_running_loop().time()
        return {tp: fs for tp, fs in self.partitions.items() if fs.state == state and fs.delayed_until <= now}

    async def _run(self) -> None:
        while not self.closing:
            if not any(s.state != FAILED for s in self.partitions.values()):
                self.wakeup.clear()
                await self.wakeup.wait()
                continue
            try:
                conn = await self._connect()
                truncating = self._ready(TRUNCATING)
                if truncating:
                    await self._truncate(conn, truncating)
                fetching = self._ready(FETCHING)
                if fetching:
                    await self._fetch(conn, fetching)
                else:
                    await asyncio.sleep(self.backoff_s if not truncating else 0)
            except asyncio.CancelledError:
                raise
            except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
                log.info("fetcher of broker %d from broker %d: %s", self.rm.broker_id, self.source_id, e)
                if self.connection is not None:
                    self.connection.close()
                    self.connection = None
                await asyncio.sleep(self.backoff_s)
            except Exception:
                log.exception("fetcher of broker %d from broker %d failed", self.rm.broker_id, self.source_id)
                await asyncio.sleep(self.backoff_s)

    async def _connect(self) -> BrokerConnection:
        conn = self.connection
        if conn is not None and not conn.closed:
            return conn
        conn = await connect(self.rm, self.source_id, f"broker-{self.rm.broker_id}-fetcher-0",
                             self.timeout_ms + self.max_wait_ms)
        self.connection = conn
        return conn

    def _current(self, tp, fs: FetchState) -> bool:
        """The partition is still followed from this source at the same epoch."""
        p = fs.partition
        return (self.partitions.get(tp) is fs and self.rm.partitions.get(tp) is p
                and p.leader == self.source_id and p.leader_epoch == fs.leader_epoch)

    # -- truncation -----------------------------------------------------------------------------
    async def _truncate(self, conn: BrokerConnection, asked: dict) -> None:
        """OffsetForLeaderEpoch for each truncating partition's latest epoch, then truncate."""
        from .replica_manager import truncation_offset
        empty = [tp for tp, fs in asked.items() if fs.partition.log.leader_epoch_cache.latest_epoch < 0]
        for tp in empty:    # nothing epoch-stamped here: fetch from the log end
            asked.pop(tp).state = FETCHING
        if not asked:
            return
        T = OffsetForLeaderEpochRequest
        by_topic: dict[str, list] = {}
        for (topic, p), fs in asked.items():
            by_topic.setdefault(topic, []).append(T.OffsetForLeaderPartition(
                partition=p, current_leader_epoch=fs.leader_epoch,
                leader_epoch=fs.partition.log.leader_epoch_cache.latest_epoch))
        req = T(replica_id=self.rm.broker_id, topics=[T.OffsetForLeaderTopic(topic=t, partitions=ps)
                                                      for t, ps in by_topic.items()])
        resp = await conn.send(req)
        for t in resp.topics:
            for r in t.partitions:
                tp = (t.topic, r.partition)
                fs = asked.get(tp)
                if fs is None or not self._current(tp, fs):
                    continue
                if r.error_code:
                    self._on_partition_error(tp, fs, ErrorCode(r.error_code))
                    continue
                plog = fs.partition.log
                offset, done = truncation_offset(r.leader_epoch, r.end_offset, plog.leader_epoch_cache,
                                                 plog.log_end_offset, plog.high_watermark)
                self._truncate_to(fs, offset)
                if done:
                    fs.state = FETCHING

    def _truncate_to(self, fs: FetchState, offset: int) -> None:
        plog = fs.partition.log
        if offset < plog.log_end_offset:
            log.info("truncating %s-%d from %d to %d (leader %d, epoch %d)", fs.partition.topic,
                     fs.partition.partition, plog.log_end_offset, offset, self.source_id, fs.leader_epoch)
            plog.truncate_to(offset)

    # -- fetching -------------------------------------------------------------------------------
    async def _fetch(self, conn: BrokerConnection, fetching: dict) -> None:
        by_id = all(fs.partition.topic_id and any(fs.partition.topic_id) for fs in fetching.values())
        version = conn.api_version(ApiKey.FETCH, None if by_id else 12)
        R = FetchRequest
        topics: dict[str, R.FetchTopic] = {}
        for (topic, p), fs in fetching.items():
            plog = fs.partition.log
            ft = topics.get(topic)
            if ft is None:
                ft = topics[topic] = R.FetchTopic(topic=topic, topic_id=fs.partition.topic_id, partitions=[])
            last_epoch = plog.leader_epoch_cache.latest_epoch
            ft.partitions.append(R.FetchPartition(
                partition=p, current_leader_epoch=fs.leader_epoch, fetch_offset=plog.log_end_offset,
                last_fetched_epoch=last_epoch if last_epoch >= 0 else UNDEFINED_EPOCH,
                log_start_offset=plog.log_start_offset, partition_max_bytes=self.partition_max_bytes))
        req = R(replica_id=self.rm.broker_id,
                replica_state=R.ReplicaState(replica_id=self.rm.broker_id, replica_epoch=-1),
                max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes, max_bytes=self.max_bytes,
                isolation_level=0, session_id=0, session_epoch=-1, topics=list(topics.values()),
                forgotten_topics_data=[], rack_id="")
        resp = await conn.send(req, version=version)
        if resp.error_code:
            raise KafkaConnectionError(f"Fetch from broker {self.source_id}: {ErrorCode(resp.error_code).name}")
        names = {fs.partition.topic_id: tp[0] for tp, fs in fetching.items()}
        for t in resp.responses:
            topic = t.topic if version < 13 else names.get(t.topic_id)
            for pd in t.partitions:
                tp = (topic, pd.partition_index)
                fs = fetching.get(tp)
                if fs is None or not self._current(tp, fs):
                    continue
                try:
                    await self._process(conn, tp, fs, pd)
                except (LogError, RecordBatchError) as e:
                    log.error("cannot append to %s-%d from broker %d: %s; the partition waits for a new state",
                              tp[0], tp[1], self.source_id, e)
                    fs.state = FAILED

    async def _process(self, conn, tp, fs: FetchState, pd) -> None:
        from .replica_manager import truncation_offset
        plog = fs.partition.log
        error = pd.error_code
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._handle_out_of_range(conn, tp, fs)
            return
        if error:
            self._on_partition_error(tp, fs, ErrorCode(error))
            return
        diverging = pd.diverging_epoch
        if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
            offset, done = truncation_offset(diverging.epoch, diverging.end_offset, plog.leader_epoch_cache,
                                             plog.log_end_offset, plog.high_watermark)
            self._truncate_to(fs, offset)
            if not done:
                fs.state = TRUNCATING
            return
        records = pd.records
        appended = False
        if records is not None and len(records):
            before = plog.log_end_offset
            plog.append_as_follower(records)
            appended = plog.log_end_offset != before
        # ReplicaFetcherThread.processPartitionData: the follower's high watermark is the
        # leader's, up to what it has; its log start follows the leader's
        old_hw = plog.high_watermark
        new_hw = plog.set_high_watermark(pd.high_watermark)
        if plog.log_start_offset < pd.log_start_offset <= new_hw:
            plog.delete_records_before(pd.log_start_offset)
        if appended or new_hw != old_hw:
            self.rm.high_watermark_moved(tp)

    async def _handle_out_of_range(self, conn, tp, fs: FetchState) -> None:
        """AbstractFetcherThread.handleOutOfRangeError: a follower ahead of the leader truncates
        to the leader's end; one behind the leader's start starts over there."""
        L = ListOffsetsRequest
        plog = fs.partition.log

        async def leader_offset(timestamp: int) -> int | None:
            req = L(replica_id=self.rm.broker_id, isolation_level=0, topics=[L.ListOffsetsTopic(
                name=tp[0], partitions=[L.ListOffsetsPartition(partition_index=tp[1], current_leader_epoch=fs.leader_epoch,
                                                               timestamp=timestamp)])])
            resp = await conn.send(req)
            pr = resp.topics[0].partitions[0]
            if pr.error_code:
                self._on_partition_error(tp, fs, ErrorCode(pr.error_code))
                return None
            return pr.offset
        leader_end = await leader_offset(LATEST_TIMESTAMP)
        if leader_end is None or not self._current(tp, fs):
            return
        if leader_end < plog.log_end_offset:
            self._truncate_to(fs, leader_end)
            return
        leader_start = await leader_offset(EARLIEST_TIMESTAMP)
        if leader_start is None or not self._current(tp, fs):
            return
        if leader_start > plog.log_end_offset:
            log.info("%s-%d starts over at the leader's log start %d", tp[0], tp[1], leader_start)
            plog.truncate_fully_and_start_at(leader_start)

    def _on_partition_error(self, tp, fs: FetchState, error: ErrorCode) -> None:
        """AbstractFetcherThread: a fenced epoch waits for the next state from the controller;
        anything else (the leader not knowing the topic, the partition or the epoch yet, not
        leading it yet) is asked again after replica.fetch.backoff.ms."""
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            log.info("fetching %s-%d from broker %d: %s; waiting for a new state", tp[0], tp[1],
                     self.source_id, error.name)
            fs.state = FAILED
            return
        log.info("fetching %s-%d from broker %d: %s; retrying", tp[0], tp[1], self.source_id, error.name)
        fs.delayed_until = asyncio.get_running_loop().time() + self.backoff_s


class ReplicaFetcherManager:
    """The fetchers of this broker, one per source broker (num.replica.fetchers = 1)."""

    def __init__(self, rm):
        self.rm = rm
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._source_of: dict[tuple[str, int], int] = {}

    def add_partition(self, partition) -> None:
        self.remove_partition(partition.tp)
        fetcher = self.fetchers.get(partition.leader)
        if fetcher is None:
            fetcher = self.fetchers[partition.leader] = ReplicaFetcher(self, partition.leader)
        fetcher.add(partition)
        self._source_of[partition.tp] = partition.leader

    def remove_partition(self, tp) -> None:
        source = self._source_of.pop(tp, None)
        if source is not None:
            fetcher = self.fetchers.get(source)
            if fetcher is not None:
                fetcher.remove(tp)

    def fetch_state(self, tp) -> str | None:
        source = self._source_of.get(tp)
        fs = self.fetchers[source].partitions.get(tp) if source is not None else None
        return fs.state if fs is not None else None

    async def close(self) -> None:
        for fetcher in list(self.fetchers.values()):
            await fetcher.close()
        self.fetchers.clear()
