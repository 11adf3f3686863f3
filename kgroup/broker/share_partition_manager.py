"""Share-partitions on this broker (Kafka's SharePartitionManager, DelayedShareFetch and the
ShareFetch/ShareAcknowledge halves of KafkaApis): share sessions, the share-partitions of every share
group fetched here, their durable state through the share coordinator (``broker.share_coordinator``,
the persister), acquisition lock timers, and long polling.

A share-partition is created on its first fetch from the state the share coordinator holds (the
group coordinator initialized it before assigning it); a start offset of -1 is resolved with the
group's share.auto.offset.reset against the log. Each change of its state is written back
(WriteShareGroupState): acquisitions too, so that after a crash a record that was acquired and not
acknowledged is delivered again with its delivery count incremented, while an acknowledged one is
never delivered again; an acknowledgement is answered once its write is durable.

Writes are group-committed: a change asks for a write of its share-partition (``_persist``), and
the writes asked for in one event-loop iteration go out at its end, one per share-partition with
its whole state as it is then; while a share-partition's write is on its way to disk, the changes
that follow wait for it and go out together in the next one. The share coordinator appends the
writes landing on one ``__share_group_state`` partition in that iteration as one batch, and one
fsync (the data path's group commit) covers them all.

ShareFetch (as Kafka's KafkaApis.handleShareFetchRequest): the acknowledgements it carries are
applied first, then, without waiting for their write, every partition of the session acquires from
its next fetch offset (the log's batches as stored, plus the AcquiredRecords ranges); the response
goes once both the fetch and the acknowledgements' durable write are done. When nothing was
acquired the fetch waits (long polling, up to max_wait_ms) for an append, a release, or
acknowledgements that move a share-partition's start offset (room for more records in flight, as
Kafka's maybeCompleteDelayedShareFetchRequest). The lock timers run on this manager's scheduler,
armed as one loop timer.
"""
from __future__ import annotations

import asyncio
import logging

from ..coordinator.timer import CoordinatorTimer, TimerQueue
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.records import iter_batches
from ..share.share_partition import SharePartition, delivery_complete_count
from ..share.share_session import ShareSessionCache
from ..storage.errors import OffsetOutOfRangeError
from . import group_configs
from .pending import PendingResponse

log = logging.getLogger("kgroup.share")


class SharePartitionManager:
    def __init__(self, broker):
        self.broker = broker
        self.now_ms = broker.clock.now_ms      # the broker's clock (time travel moves it)
        cfg = broker.group_coordinator.config
        self.config = cfg
        self.sessions = ShareSessionCache(cfg.share_max_share_sessions)
        self.scheduler = TimerQueue()
        self.timer = CoordinatorTimer(self.scheduler)
        self.partitions: dict[tuple, SharePartition] = {}
        self._loading: dict[tuple, list[PendingResponse]] = {}
        self._armed = None
        self._next_writes: dict[SharePartition, list[PendingResponse]] = {}   # waiting for the next write
        self._writing: set[SharePartition] = set()      # a write on its way to disk
        self._writes_scheduled = False

    # -- group settings -----------------------------------------------------------------------------
    def _group_setting(self, group_id: str, name: str, default):
        v = (self.broker.group_coordinator.group_configs.get(group_id) or {}).get(name)
        return default if v is None else v

    def lock_duration_ms(self, group_id: str) -> int:
        return self._group_setting(group_id, "share.record.lock.duration.ms", self.config.share_record_lock_duration_ms)

    # -- share-partitions -------------------------------------------------------------------------------
    def share_partition(self, group_id: str, topic_id: bytes, partition: int) -> PendingResponse:
        """The share-partition, initialized from its durable state (a PendingResponse answered with
        the SharePartition, or an ErrorCode)."""
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        token = PendingResponse()
        if sp is not None:
            token.answer(sp)
            return token
        waiting = self._loading.get(key)
        if waiting is not None:         # being read: one more to answer (a PendingResponse has one listener)
            waiting.append(token)
            return token
        self._loading[key] = [token]
        read = self.broker.share_coordinator.read(group_id, topic_id, partition, leader_epoch=0)
        read.listen(lambda answered: self._loaded_all(key, answered))
        return token

    def _loaded_all(self, key, answered) -> None:
        tokens = self._loading.pop(key, [])
        first = PendingResponse()
        self._loaded(key, first, answered)
        for token in tokens:
            token.answer(first.response)

    def _loaded(self, key, token: PendingResponse, answered) -> None:
        if answered.error is not None:
            token.answer(ErrorCode.UNKNOWN_SERVER_ERROR)
            return
        r = answered.response.results[0].partitions[0]
        if r.error_code:
            token.answer(ErrorCode(r.error_code))
            return
        group_id, topic_id, partition = key
        topic = self.broker.metadata.by_id(topic_id)
        plog = self.broker.data_path.log(topic.name, partition) if topic is not None else None
        if plog is None:
            token.answer(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return
        sp = SharePartition(group_id, topic_id, partition,
                            delivery_count_limit=self._group_setting(group_id, "share.delivery.count.limit",
                                                                     self.config.share_delivery_count_limit),
                            max_record_locks=self._group_setting(group_id, "share.partition.max.record.locks",
                                                                 self.config.share_partition_max_record_locks),
                            lock_duration_ms=self.lock_duration_ms(group_id), timer=self.timer)
        sp.initialize(r.state_epoch, r.start_offset, [(b.first_offset, b.last_offset, b.delivery_state,
                                                       b.delivery_count) for b in r.state_batches],
                      self._reset_offset(group_id, plog))
        sp.on_released = lambda name=topic.name, p=partition: self.broker.data_path.appended(name, p)
        self.partitions[key] = sp
        if r.start_offset < 0:
            self._persist(sp)       # the resolved start offset, so a restart starts there too
        token.answer(sp)

    def _reset_offset(self, group_id: str, plog) -> int:
        """share.auto.offset.reset: latest (the default), earliest, or by_duration."""
        value = self._group_setting(group_id, "share.auto.offset.reset", "latest")
        kind, duration = group_configs.parse_auto_offset_reset(value)
        if kind == "earliest":
            return plog.log_start_offset
        if kind == "by_duration":
            found = plog.offset_for_timestamp(self.now_ms() - duration)
            return plog.log_end_offset if found is None else found.offset
        return plog.high_watermark

    def _read_committed(self, group_id: str) -> bool:
        return self._group_setting(group_id, "share.isolation.level", "read_uncommitted") == "read_committed"

    def _persist(self, sp: SharePartition) -> PendingResponse:
        """A durable write of ``sp``'s state as it is now (or later): answered with the
        WriteShareGroupState answer once on disk."""
        token = PendingResponse()
        waiting = self._next_writes.get(sp)
        if waiting is None:
            waiting = self._next_writes[sp] = []
        waiting.append(token)
        if not self._writes_scheduled and sp not in self._writing:
            self._writes_scheduled = True
            asyncio.get_running_loop().call_soon(self._write_all)
        return token

    def _write_all(self) -> None:
        """The writes asked for since the last round, one per share-partition (those with a write
        in flight wait for it)."""
        self._writes_scheduled = False
        for sp in [sp for sp in self._next_writes if sp not in self._writing]:
            self._write(sp, self._next_writes.pop(sp))

    def _write(self, sp: SharePartition, tokens: list) -> None:
        self._writing.add(sp)
        batches = sp.state_batches()
        w = self.broker.share_coordinator.write(sp.group_id, sp.topic_id, sp.partition, sp.state_epoch, 0,
                                                sp.start_offset, batches, delivery_complete_count(batches),
                                                hold=True)
        w.listen(lambda answered: self._written(sp, tokens, answered))

    def _written(self, sp: SharePartition, tokens: list, answered) -> None:
        self._writing.discard(sp)
        for token in tokens:
            token.answer(answered.response) if answered.error is None else token.fail(answered.error)
        waiting = self._next_writes.pop(sp, None)
        if waiting:
            self._write(sp, waiting)

    # -- acquire -------------------------------------------------------------------------------------------
    def acquire(self, sp: SharePartition, member_id: str, max_records: int, max_bytes: int,
                whole_batches: bool = True):
        """(records bytes, AcquiredRecords ranges) for ``member_id`` from ``sp``'s next fetch offset;
        ``whole_batches``: the request's ShareAcquireMode is BATCH_OPTIMIZED (0, the default)."""
        if not sp.can_acquire():
            return b"", []
        topic = self.broker.metadata.by_id(sp.topic_id)
        plog = self.broker.data_path.log(topic.name, sp.partition) if topic is not None else None
        if plog is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        offset = sp.next_fetch_offset()
        if offset < plog.log_start_offset:
            # retention or DeleteRecords removed them: the share-partition moves on
            sp.acquire(member_id, [], 0, self.now_ms())
            offset = max(offset, plog.log_start_offset)
        read_committed = self._read_committed(sp.group_id)
        limit = plog.last_stable_offset if read_committed else plog.high_watermark
        if offset >= limit:
            return b"", []
        # Nothing past the end offset + what may still be acquired can be acquired: the read
        # stops at the batch holding that offset rather than at max_bytes of the log.
        room = max(0, min(max_records, sp.max_record_locks - sp.in_flight()))
        try:
            got = plog.read(offset, max_bytes, min_one_batch=True, max_offset=min(limit, sp.end_offset + room))
        except OffsetOutOfRangeError:
            return b"", []
        records = got.records
        if not len(records):
            return b"", []
        ranges, archive, positions = [], [], []
        aborted: dict = {}
        if read_committed:
            for a in plog.collect_aborted_transactions(offset, limit):
                aborted.setdefault(a.producer_id, []).append(a.first_offset)
        for pos, h, _view in iter_batches(records):
            if h.is_control or (h.is_transactional and any(f <= h.base_offset for f in aborted.get(h.producer_id, ()))):
                archive.append((h.base_offset, h.last_offset))
            ranges.append((h.base_offset, h.last_offset))
            positions.append(pos)
        now = self.timer.now = self.now_ms()
        acquired = sp.acquire(member_id, ranges, max_records, now, limit, archive_ranges=archive,
                              whole_batches=whole_batches)
        self._arm()
        if not acquired:
            return b"", []
        # Only the batches holding acquired records go back (Kafka's maybeSliceFetchRecords).
        first, last = acquired[0][0], acquired[-1][1]
        i = 0
        while ranges[i][1] < first:
            i += 1
        j = i
        while j + 1 < len(ranges) and ranges[j + 1][0] <= last:
            j += 1
        return bytes(records[positions[i]:positions[j + 1] if j + 1 < len(ranges) else len(records)]), acquired

    # -- sessions -------------------------------------------------------------------------------------------
    def release_session(self, group_id: str, member_id: str, partitions) -> list[PendingResponse]:
        """A session closed or was replaced: what the member holds in its partitions is released."""
        writes = []
        for topic_id, p in partitions:
            sp = self.partitions.get((group_id, topic_id, p))
            if sp is not None and sp.release_member(member_id):
                writes.append(self._persist(sp))
        return writes

    def on_member_left(self, group_id: str, member_id: str) -> None:
        """The member left the share group or was fenced: its session goes, its records are released."""
        session = self.sessions.close(group_id, member_id)
        if session is not None:
            self.release_session(group_id, member_id, list(session.partitions))

    def forget_group(self, group_id: str) -> None:
        """The group was deleted: its share-partitions go (a new group of that name starts over)."""
        for key in [k for k in self.partitions if k[0] == group_id]:
            sp = self.partitions.pop(key)
            sp.on_released = None
            sp.clear()

    def on_connection_closed(self, connection) -> None:
        """Kafka's ShareSessionCache connection listener: a closed connection's sessions go."""
        for s in self.sessions.sessions_of_connection(connection):
            self.sessions.close(s.group_id, s.member_id)
            self.release_session(s.group_id, s.member_id, list(s.partitions))

    # -- acknowledgements ------------------------------------------------------------------------------------
    def acknowledge(self, group_id: str, member_id: str, topic_id: bytes, partition: int, batches) -> PendingResponse:
        """Apply acknowledgement batches; answered with the ErrorCode once the state is durable."""
        out = PendingResponse()

        def on_partition(answered):
            sp = answered.response
            if isinstance(sp, ErrorCode):
                out.answer(sp)
                return
            self.timer.now = self.now_ms()
            full = sp.in_flight() >= sp.max_record_locks
            try:
                sp.acknowledge(member_id, [(b.first_offset, b.last_offset, b.acknowledge_types) for b in batches])
            except KafkaError as e:
                out.answer(e.code)
                return
            self._arm()
            if full and sp.in_flight() < sp.max_record_locks and sp.on_released is not None:
                sp.on_released()        # room for more records in flight: parked fetches may acquire
            if not sp.dirty:
                out.answer(ErrorCode.NONE)
                return
            self._persist(sp).listen(lambda w: out.answer(_write_error(w)))
        self.share_partition(group_id, topic_id, partition).listen(on_partition)
        return out

    # -- lock timers --------------------------------------------------------------------------------------------
    def _arm(self) -> None:
        deadline = self.scheduler.next_deadline()
        if deadline is None:
            return
        if self._armed is not None:
            if self._armed[0] <= deadline:
                return
            self._armed[1].cancel()
        loop = asyncio.get_running_loop()
        handle = loop.call_later(max(0.0, (deadline - self.now_ms() + 1) / 1000.0), self._fire)
        self._armed = (deadline, handle)

    def _fire(self) -> None:
        self._armed = None
        self._poll_locks(self.now_ms())
        self._arm()

    def _poll_locks(self, now: int) -> None:
        self.timer.now = now
        for _key, op in self.timer.pop_expired(now):
            op(None)
        for sp in list(self.partitions.values()):
            if sp.dirty:
                self._persist(sp)

    def fire_due_timers(self, rearm: bool = True) -> int | None:
        """The acquisition locks due now (the clock may have jumped) expire; with ``rearm`` the
        loop timer is armed again from the clock's time. Returns the earliest lock deadline left
        (time travel steps through them, as through the coordinator runtimes' timers)."""
        now = self.now_ms()
        deadline = self.scheduler.next_deadline()
        if deadline is not None and deadline <= now:
            self._poll_locks(now)
        if rearm:
            if self._armed is not None:
                self._armed[1].cancel()
                self._armed = None
            self._arm()
        return self.scheduler.next_deadline()

    def reset(self) -> None:
        """Forget every share-partition and share session (the broker is being reset; their
        durable state goes with ``__share_group_state``)."""
        if self._armed is not None:
            self._armed[1].cancel()
            self._armed = None
        for sp in self.partitions.values():
            sp.on_released = None
        self.partitions.clear()
        self._next_writes.clear()
        self._writing.clear()
        self._loading.clear()
        self.sessions = ShareSessionCache(self.config.share_max_share_sessions)
        self.scheduler = TimerQueue()
        self.timer = CoordinatorTimer(self.scheduler)

    def close(self) -> None:
        if self._armed is not None:
            self._armed[1].cancel()
            self._armed = None


def _write_error(answered) -> ErrorCode:
    if answered.error is not None:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    r = answered.response.results[0].partitions[0]
    return ErrorCode(r.error_code)
