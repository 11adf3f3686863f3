"""ShareCoordinatorShard: the durable state of the share-partitions kept in one ``__share_group_state``
partition (Kafka's ShareCoordinatorShard). Pure: the runtime (broker/share_coordinator_runtime.py)
loads, writes and answers; ``now_ms`` comes with every call.

State per share-partition (group id, topic id, partition), changed only by replaying records:
a snapshot (type 0) replaces the state, an update (type 1) merges its batches into it (the
combined batches, ``state_batches.combine``), a snapshot tombstone deletes it. A write is an update
record, or a new snapshot once ``share.coordinator.snapshot.update.records.per.snapshot`` updates
followed the last one, so a load replays at most that many updates per share-partition after its
snapshot. Per share-partition the highest leader epoch and state epoch seen fence older writers
(FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH).

Each handler serves one share-partition: the runtime splits a request by share-partition, as
Kafka's ShareCoordinatorService does, and each part goes to the partition that owns its key
(``share_state_partition``).
"""
from __future__ import annotations

import base64
from typing import Callable, Mapping

from ..coordinator.coordinator_records import CoordinatorLoadError, RecordDecodeError, UnknownRecordType
from ..java_compat import string_hash_code, utils_abs
from ..coordinator.result import Result, append_error_to_response_error, coordinator_api
from ..coordinator.timer import CoordinatorTimer, TimerQueue
from ..protocol.errors import ErrorCode
from ..protocol.messages.delete_share_group_state import DeleteShareGroupStateResponse
from ..protocol.messages.initialize_share_group_state import InitializeShareGroupStateResponse
from ..protocol.messages.read_share_group_state import ReadShareGroupStateResponse
from ..protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryResponse
from ..protocol.messages.write_share_group_state import WriteShareGroupStateResponse
from . import share_state_records as rec
from .config import ShareCoordinatorConfig
from .share_state_records import ShareGroupOffset
from .state_batches import StateBatch, combine

UNINITIALIZED_START_OFFSET = -1
UNINITIALIZED_DELIVERY_COMPLETE_COUNT = -1
DEFAULT_EPOCH = 0
UNINITIALIZED_EPOCH = -1
NO_TIMESTAMP = 0
COLD_SNAPSHOT_KEY = "share-coordinator-snapshot-cold-partitions"
NULL_TOPIC_ID = "The topic id cannot be null."
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
_ZERO_UUID = bytes(16)

Topics = Callable[[], Mapping[bytes, int]]     # topic id -> number of partitions (the metadata image)


def share_partition_key(group_id: str, topic_id: bytes, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: group:topicId:partition, the topic id as
    Uuid.toString (URL-safe base64 without padding)."""
    return f"{group_id}:{base64.urlsafe_b64encode(topic_id).decode().rstrip('=')}:{partition}"


def share_state_partition(group_id: str, topic_id: bytes, partition: int, num_partitions: int) -> int:
    """Kafka's ShareCoordinatorService.partitionFor: abs(hashCode(key)) % partitions."""
    return utils_abs(string_hash_code(share_partition_key(group_id, topic_id, partition))) % num_partitions


def _one(req, topics_field: str = "topics"):
    """(group id, topic id, partition data) of a request naming one share-partition."""
    topic = getattr(req, topics_field)[0]
    return req.group_id, topic.topic_id, topic.partitions[0]


# -- answers: one share-partition, in each API's form ---------------------------------------------------

def write_answer(topic_id, partition, error=ErrorCode.NONE, message=None):
    R = WriteShareGroupStateResponse.WriteStateResult
    return WriteShareGroupStateResponse(results=[R(topic_id=topic_id, partitions=[R.PartitionResult(
        partition=partition, error_code=int(error), error_message=message)])])


def delete_answer(topic_id, partition, error=ErrorCode.NONE, message=None):
    R = DeleteShareGroupStateResponse.DeleteStateResult
    return DeleteShareGroupStateResponse(results=[R(topic_id=topic_id, partitions=[R.PartitionResult(
        partition=partition, error_code=int(error), error_message=message)])])


def initialize_answer(topic_id, partition, error=ErrorCode.NONE, message=None):
    R = InitializeShareGroupStateResponse.InitializeStateResult
    return InitializeShareGroupStateResponse(results=[R(topic_id=topic_id, partitions=[R.PartitionResult(
        partition=partition, error_code=int(error), error_message=message)])])


def read_answer(topic_id, partition, error=ErrorCode.NONE, message=None, state_epoch=0, start_offset=0,
                batches=()):
    R = ReadShareGroupStateResponse.ReadStateResult
    P = R.PartitionResult
    return ReadShareGroupStateResponse(results=[R(topic_id=topic_id, partitions=[P(
        partition=partition, error_code=int(error), error_message=message, state_epoch=state_epoch,
        start_offset=start_offset, state_batches=[P.StateBatch(first_offset=b[0], last_offset=b[1],
                                                              delivery_state=b[2], delivery_count=b[3])
                                                 for b in batches])])])


def summary_answer(topic_id, partition, error=ErrorCode.NONE, message=None, state_epoch=0, leader_epoch=0,
                   start_offset=0, delivery_complete_count=-1):
    R = ReadShareGroupStateSummaryResponse.ReadStateSummaryResult
    return ReadShareGroupStateSummaryResponse(results=[R(topic_id=topic_id, partitions=[R.PartitionResult(
        partition=partition, error_code=int(error), error_message=message, state_epoch=state_epoch,
        leader_epoch=leader_epoch, start_offset=start_offset, delivery_complete_count=delivery_complete_count)])])


def _error_form(answer, what: str):
    """The whole request answered ``code`` (loading, not hosted): Kafka's service answers
    "Unable to <what>: <the exception's message>"."""
    def form(req, version, code):
        _, topic_id, pd = _one(req)
        return answer(topic_id, pd.partition, code, f"Unable to {what}: {ErrorCode(code).message}")
    return form


class ShareCoordinatorShard:
    def __init__(self, partition: int = 0, config: ShareCoordinatorConfig | None = None, scheduler=None,
                 topics: Topics | None = None):
        self.partition = partition
        self.config = config or ShareCoordinatorConfig()
        self.scheduler = scheduler if scheduler is not None else TimerQueue()
        self.timer = CoordinatorTimer(self.scheduler)
        self.topics: Topics = topics or (dict)
        self.state: dict[tuple, ShareGroupOffset] = {}
        self.leader_epochs: dict[tuple, int] = {}
        self.state_epochs: dict[tuple, int] = {}
        self.snapshot_update_count: dict[tuple, int] = {}
        self.is_loaded = False
        self.skipped_records = 0

    # == loading and replay ========================================================================
    def replay(self, key: bytes, value: bytes | None, offset=None) -> None:
        try:
            record = rec.decode_record(key, value)
        except UnknownRecordType:
            self.skipped_records += 1
            return
        except RecordDecodeError as e:
            raise CoordinatorLoadError(self.partition, offset, e) from None
        self._apply(record)

    def replay_transactional(self, producer_id, key, value, offset=None) -> None:
        self.replay(key, value, offset)

    def replay_end_transaction_marker(self, producer_id, committed, offset=None) -> None:
        """The share coordinator writes no transactions."""

    def _apply(self, record) -> None:
        k, v = record.key_struct, record.value_struct
        key = (k.group_id, k.topic_id, k.partition)
        if record.record_type == rec.SHARE_SNAPSHOT:
            if v is None:
                for m in (self.state, self.leader_epochs, self.state_epochs, self.snapshot_update_count):
                    m.pop(key, None)
                return
            self._max(self.leader_epochs, key, v.leader_epoch)
            self._max(self.state_epochs, key, v.state_epoch)
            self.state[key] = ShareGroupOffset(v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset,
                                               v.delivery_complete_count, _batches(v.state_batches),
                                               v.create_timestamp, v.write_timestamp)
            if self.snapshot_update_count.get(key, 0) >= self.config.snapshot_update_records_per_snapshot:
                self.snapshot_update_count[key] = 0
        else:
            self._max(self.leader_epochs, key, v.leader_epoch)
            current = self.state.get(key)
            if current is None:
                self.state[key] = ShareGroupOffset(v.snapshot_epoch, UNINITIALIZED_EPOCH, v.leader_epoch,
                                                   v.start_offset, v.delivery_complete_count,
                                                   _batches(v.state_batches), NO_TIMESTAMP, NO_TIMESTAMP)
            else:
                start = current.start_offset if v.start_offset == -1 else v.start_offset
                self.state[key] = current._replace(
                    start_offset=start, delivery_complete_count=v.delivery_complete_count,
                    leader_epoch=current.leader_epoch if v.leader_epoch == -1 else v.leader_epoch,
                    state_batches=tuple(combine(current.state_batches, _batches(v.state_batches), start)))
            self.snapshot_update_count[key] = self.snapshot_update_count.get(key, 0) + 1

    @staticmethod
    def _max(m: dict, key, epoch: int) -> None:
        if epoch > m.get(key, epoch - 1):
            m[key] = epoch

    def on_loaded(self, now_ms: int) -> Result:
        res = self._begin(now_ms)
        self.is_loaded = True
        self._schedule_cold_snapshot()
        return res

    def on_unloaded(self, now_ms: int) -> list:
        self._begin(now_ms)
        self.is_loaded = False
        self.timer.cancel(COLD_SNAPSHOT_KEY)
        return []

    def commit(self, result: Result, producer_id: int | None = None, now_ms: int | None = None) -> list:
        now = self.timer.now = result.now_ms if now_ms is None else now_ms
        for record in result.records:
            self._apply(record)
        return result.committed(now)

    def abort(self, result: Result, error=ErrorCode.KAFKA_STORAGE_ERROR, now_ms: int | None = None) -> list:
        now = self.timer.now = result.now_ms if now_ms is None else now_ms
        return result.aborted(append_error_to_response_error(error), now)

    def poll_timers(self, now_ms: int):
        for _key, op in self.timer.pop_expired(now_ms):
            res = self._begin(now_ms)
            op(res)
            yield res

    def next_deadline(self) -> int | None:
        return self.scheduler.next_deadline()

    def _begin(self, now_ms: int) -> Result:
        self.timer.now = now_ms
        return Result(now_ms)

    def _schedule_cold_snapshot(self) -> None:
        self.timer.schedule(COLD_SNAPSHOT_KEY, self.config.cold_partition_snapshot_interval_ms,
                            self._snapshot_cold_partitions)

    def _snapshot_cold_partitions(self, res: Result) -> None:
        """Kafka's snapshotColdPartitions: a share-partition not snapshotted for
        share.coordinator.cold.partition.snapshot.interval.ms gets a fresh snapshot, so the log
        before it can be cleaned."""
        now = res.now_ms
        if not all(o.create_timestamp != o.write_timestamp for o in self.state.values()):
            for (g, t, p), o in sorted(self.state.items()):
                if now - o.write_timestamp >= self.config.cold_partition_snapshot_interval_ms:
                    res.add_record(rec.snapshot_record(g, t, p, o._replace(snapshot_epoch=o.snapshot_epoch + 1,
                                                                           write_timestamp=now)))
        self._schedule_cold_snapshot()

    # == checks shared by the handlers (Kafka's maybeGet*Error) ==========================================
    def _topic_error(self, topic_id, partition) -> ErrorCode | None:
        n = self.topics().get(topic_id)
        if n is None or n <= partition:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return None

    @staticmethod
    def _id_error(topic_id, partition) -> str | None:
        if topic_id is None or topic_id == _ZERO_UUID:
            return NULL_TOPIC_ID
        if partition < 0:
            return NEGATIVE_PARTITION_ID
        return None

    # == InitializeShareGroupState ====================================================================
    @coordinator_api(error=_error_form(initialize_answer, "initialize share group state"))
    def handle_initialize_share_group_state(self, req, version, now_ms, token) -> Result:
        res = self._begin(now_ms)
        group_id, topic_id, pd = _one(req)
        key = (group_id, topic_id, pd.partition)
        message = self._id_error(topic_id, pd.partition)
        if message is not None:
            res.reply(token, initialize_answer(topic_id, pd.partition, ErrorCode.INVALID_REQUEST, message))
            return res
        if pd.state_epoch != -1 and self.state_epochs.get(key, pd.state_epoch) > pd.state_epoch:
            res.reply(token, initialize_answer(topic_id, pd.partition, ErrorCode.FENCED_STATE_EPOCH,
                                               ErrorCode.FENCED_STATE_EPOCH.message))
            return res
        error = self._topic_error(topic_id, pd.partition)
        if error is not None:
            res.reply(token, initialize_answer(topic_id, pd.partition, error, error.message))
            return res
        current = self.state.get(key)
        snapshot_epoch = current.snapshot_epoch + 1 if current is not None else DEFAULT_EPOCH
        complete = UNINITIALIZED_DELIVERY_COMPLETE_COUNT if pd.start_offset == UNINITIALIZED_START_OFFSET else 0
        res.add_record(rec.snapshot_record(group_id, topic_id, pd.partition, ShareGroupOffset(
            snapshot_epoch, pd.state_epoch, UNINITIALIZED_EPOCH, pd.start_offset, complete, (), now_ms, now_ms)))
        res.reply(token, initialize_answer(topic_id, pd.partition),
                  lambda e: initialize_answer(topic_id, pd.partition, e, e.message))
        return res

    # == WriteShareGroupState =========================================================================
    @coordinator_api(error=_error_form(write_answer, "write share group state"))
    def handle_write_share_group_state(self, req, version, now_ms, token) -> Result:
        res = self._begin(now_ms)
        group_id, topic_id, pd = _one(req)
        key = (group_id, topic_id, pd.partition)
        message = self._id_error(topic_id, pd.partition)
        if message is None and key not in self.state:
            message = WRITE_UNINITIALIZED
        if message is not None:
            res.reply(token, write_answer(topic_id, pd.partition, ErrorCode.INVALID_REQUEST, message))
            return res
        for epoch, seen, code in ((pd.leader_epoch, self.leader_epochs, ErrorCode.FENCED_LEADER_EPOCH),
                                  (pd.state_epoch, self.state_epochs, ErrorCode.FENCED_STATE_EPOCH)):
            if epoch != -1 and seen.get(key, epoch) > epoch:
                res.reply(token, write_answer(topic_id, pd.partition, code, code.message))
                return res
        error = self._topic_error(topic_id, pd.partition)
        if error is not None:
            res.reply(token, write_answer(topic_id, pd.partition, error, error.message))
            return res
        res.add_record(self._state_record(key, pd, now_ms, update_leader_epoch=False,
                                          delivery_complete_count=pd.delivery_complete_count if version >= 1 else -1))
        res.reply(token, write_answer(topic_id, pd.partition), lambda e: write_answer(topic_id, pd.partition, e,
                                                                                       e.message))
        return res

    def _state_record(self, key, pd, now_ms: int, update_leader_epoch: bool, delivery_complete_count: int,
                      batches=None):
        """Kafka's generateShareStateRecord: an update, or a new snapshot when enough updates
        followed the last one."""
        group_id, topic_id, partition = key
        current = self.state[key]
        leader_epoch = current.leader_epoch
        if update_leader_epoch and pd.leader_epoch != -1:
            leader_epoch = pd.leader_epoch
        new = [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
               for b in (pd.state_batches if batches is None else batches)]
        if self.snapshot_update_count.get(key, 0) >= self.config.snapshot_update_records_per_snapshot:
            start = current.start_offset if pd.start_offset == -1 else pd.start_offset
            return rec.snapshot_record(group_id, topic_id, partition, ShareGroupOffset(
                current.snapshot_epoch + 1, current.state_epoch, leader_epoch, start, delivery_complete_count,
                tuple(combine(current.state_batches, new, start)), now_ms, now_ms))
        return rec.update_record(group_id, topic_id, partition, ShareGroupOffset(
            current.snapshot_epoch, UNINITIALIZED_EPOCH, leader_epoch, pd.start_offset, delivery_complete_count,
            tuple(combine((), new, pd.start_offset)), NO_TIMESTAMP, NO_TIMESTAMP))

    # == ReadShareGroupState ==========================================================================
    @coordinator_api(error=_error_form(read_answer, "read share group state"))
    def handle_read_share_group_state(self, req, version, now_ms, token) -> Result:
        """Kafka's readStateAndMaybeUpdateLeaderEpoch: a read with a newer leader epoch records
        it (an update with no batches), fencing the previous leader's writes."""
        res = self._begin(now_ms)
        group_id, topic_id, pd = _one(req)
        key = (group_id, topic_id, pd.partition)
        message = self._id_error(topic_id, pd.partition)
        if message is None and key not in self.state:
            message = READ_UNINITIALIZED
        if message is not None:
            res.reply(token, read_answer(topic_id, pd.partition, ErrorCode.INVALID_REQUEST, message))
            return res
        if pd.leader_epoch != -1 and self.leader_epochs.get(key, pd.leader_epoch) > pd.leader_epoch:
            e = ErrorCode.FENCED_LEADER_EPOCH
            res.reply(token, read_answer(topic_id, pd.partition, e, e.message))
            return res
        error = self._topic_error(topic_id, pd.partition)
        if error is not None:
            res.reply(token, read_answer(topic_id, pd.partition, error, error.message))
            return res
        o = self.state[key]
        answer = read_answer(topic_id, pd.partition, state_epoch=o.state_epoch, start_offset=o.start_offset,
                             batches=o.state_batches)
        if pd.leader_epoch != -1 and self.leader_epochs.get(key) != pd.leader_epoch:
            write = _LeaderEpochWrite(pd.partition, pd.leader_epoch, o.start_offset)
            res.add_record(self._state_record(key, write, now_ms, update_leader_epoch=True,
                                              delivery_complete_count=o.delivery_complete_count, batches=()))
            res.reply(token, answer, lambda e: read_answer(topic_id, pd.partition, e, e.message))
        else:
            res.reply(token, answer)
        return res

    # == ReadShareGroupStateSummary ===================================================================
    @coordinator_api(error=_error_form(summary_answer, "read share group state summary"))
    def handle_read_share_group_state_summary(self, req, version, now_ms, token) -> Result:
        res = self._begin(now_ms)
        group_id, topic_id, pd = _one(req)
        message = self._id_error(topic_id, pd.partition)
        if message is not None:
            res.reply(token, summary_answer(topic_id, pd.partition, ErrorCode.INVALID_REQUEST, message))
            return res
        error = self._topic_error(topic_id, pd.partition)
        if error is not None:
            res.reply(token, summary_answer(topic_id, pd.partition, error, error.message))
            return res
        o = self.state.get((group_id, topic_id, pd.partition))
        if o is None:
            res.reply(token, summary_answer(topic_id, pd.partition, start_offset=UNINITIALIZED_START_OFFSET,
                                            delivery_complete_count=UNINITIALIZED_DELIVERY_COMPLETE_COUNT,
                                            leader_epoch=0, state_epoch=0))
        else:
            res.reply(token, summary_answer(topic_id, pd.partition, state_epoch=o.state_epoch,
                                            leader_epoch=o.leader_epoch, start_offset=o.start_offset,
                                            delivery_complete_count=o.delivery_complete_count))
        return res

    # == DeleteShareGroupState ========================================================================
    @coordinator_api(error=_error_form(delete_answer, "delete share group state"))
    def handle_delete_share_group_state(self, req, version, now_ms, token) -> Result:
        res = self._begin(now_ms)
        group_id, topic_id, pd = _one(req)
        message = self._id_error(topic_id, pd.partition)
        if message is not None:
            res.reply(token, delete_answer(topic_id, pd.partition, ErrorCode.INVALID_REQUEST, message))
            return res
        error = self._topic_error(topic_id, pd.partition)
        if error is not None:
            res.reply(token, delete_answer(topic_id, pd.partition, error, error.message))
            return res
        if (group_id, topic_id, pd.partition) in self.state:
            res.add_record(rec.tombstone(group_id, topic_id, pd.partition))
        res.reply(token, delete_answer(topic_id, pd.partition),
                  lambda e: delete_answer(topic_id, pd.partition, e, e.message))
        return res

    def handle_topics_deleted(self, topic_ids, now_ms, token) -> Result:
        """Kafka's maybeCleanupShareState: the state of deleted topics' share-partitions goes."""
        res = self._begin(now_ms)
        for g, t, p in sorted(k for k in self.state if k[1] in topic_ids):
            res.add_record(rec.tombstone(g, t, p))
        res.reply(token, None)
        return res

    # == views for tests ==============================================================================
    def durable_state(self) -> dict:
        return {"state": {(g, t.hex(), p): tuple(o) for (g, t, p), o in sorted(self.state.items())},
                "leader_epochs": dict(sorted(self.leader_epochs.items())),
                "state_epochs": dict(sorted(self.state_epochs.items())),
                "snapshot_update_count": dict(sorted(self.snapshot_update_count.items()))}


class _LeaderEpochWrite:
    """The write a read with a new leader epoch makes (no batches, the current start offset)."""

    __slots__ = ("partition", "leader_epoch", "start_offset", "state_batches")

    def __init__(self, partition, leader_epoch, start_offset):
        self.partition, self.leader_epoch, self.start_offset, self.state_batches = (
            partition, leader_epoch, start_offset, ())


def _batches(state_batches) -> tuple:
    return tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in state_batches)
