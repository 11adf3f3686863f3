"""GroupCoordinatorShard: the pure, deterministic group coordinator (classic and KIP-848 consumer
groups, committed offsets) of one ``__consumer_offsets`` partition. This is the entry point the
broker runtime drives.

Life cycle
    shard = GroupCoordinatorShard(partition, config, scheduler, uuid_factory)
    for offset, (key, value) in log:  shard.replay(key, value, offset)    # load
    result = shard.on_loaded(now_ms); <commit it like any result>          # timers start
    ... handlers / poll_timers / commit / abort ...
    responses = shard.on_unloaded(now_ms)                                  # resignation

Every handler is ``handle_xxx(request, version, now_ms, token, ...) -> Result``; ``token`` is
opaque (the runtime's handle on the request's connection) and comes back paired with the
response. See ``result.py`` for the write/commit/abort protocol. Until ``on_loaded`` the handlers
answer COORDINATOR_LOAD_IN_PROGRESS (Heartbeat answers NONE, as Kafka does while loading).

Multi-group requests (DescribeGroups, DeleteGroups, OffsetFetch v8+) are answered for every
group they name: the runtime splits them by owning shard first (``GroupRuntime.execute_split``)
and concatenates the per-shard answers; ListGroups goes to every shard (``merge_list_groups``).

Service-level checks done here, as Kafka's GroupCoordinatorService/KafkaApis do them: empty
group id -> INVALID_GROUP_ID (OffsetCommit/OffsetFetch/Describe/Delete accept "" for backward
compatibility, as Kafka does), session timeout outside [group.min.session.timeout.ms,
group.max.session.timeout.ms] -> INVALID_SESSION_TIMEOUT, JoinGroup v0 rebalance timeout =
session timeout, SyncGroup v5+ without protocol type/name -> INCONSISTENT_GROUP_PROTOCOL,
LeaveGroup v0-2 turned into a one-member batch.
"""
from __future__ import annotations

import copy
import uuid
from typing import Any

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse
from ..protocol.messages.describe_groups import DescribeGroupsResponse
from ..protocol.messages.heartbeat import HeartbeatResponse
from ..protocol.messages.list_groups import ListGroupsResponse
from ..protocol.messages.offset_delete import OffsetDeleteResponse
from . import coordinator_records as rec
from .classic_group import ClassicGroup, live_view, record_view
from .group import Group, GroupType
from .config import GroupCoordinatorConfig
from .consumer_group import group as consumer_group
from .consumer_group import consumer_group_records
from .consumer_group.manager import ConsumerGroupManager, heartbeat_error
from .share_group import group as share_group
from .share_group import share_group_records
from .share_group.manager import DeleteOffsetsPlan, ShareGroupManager
from ..protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsResponse
from ..protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsResponse
from ..protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsResponse
from .share_group.manager import heartbeat_error as share_heartbeat_error
from .share_group.manager import validate_heartbeat as validate_share_heartbeat
from ..protocol.messages.share_group_describe import ShareGroupDescribeResponse
from .group_metadata_manager import GroupMetadataManager
from .offset_metadata_manager import OffsetMetadataManager
from .responses import (FetchGroup, delete_groups_response, describe_error_group, join_response,
                        leave_response, offset_commit_error_response, offset_fetch_response,
                        sync_response)
from .responses import txn_offset_commit_error_response
from .result import Result, append_error_to_response_error, coordinator_api
from .timer import EXPIRE_GROUP_METADATA_KEY, CoordinatorTimer, TimerQueue

LOADING = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def _validate_group_id(error_response):
    """A request validation: an empty group id is answered ``error_response(req, version)``."""
    def validate(req, version, config):
        return None if req.group_id else error_response(req, version)
    return validate


def _validate_join(req, version, config):
    # GroupCoordinatorService.joinGroup: the group id, then the session timeout's bounds
    if not req.group_id:
        return join_response(version, ErrorCode.INVALID_GROUP_ID, member_id=req.member_id)
    if not (config.min_session_timeout_ms <= req.session_timeout_ms <= config.max_session_timeout_ms):
        return join_response(version, ErrorCode.INVALID_SESSION_TIMEOUT, member_id=req.member_id)
    return None


def _validate_sync(req, version, config):
    # KafkaApis checks the v5 mandatory protocol type/name before the coordinator sees the group id
    if version >= 5 and (req.protocol_type is None or req.protocol_name is None):
        return sync_response(version, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    if not req.group_id:
        return sync_response(version, ErrorCode.INVALID_GROUP_ID)
    return None


def _fetch_wanted(req, version) -> list:
    """OffsetFetch's groups, version-neutral: (group id, [(topic, [partitions])] or None, member
    id, member epoch)."""
    if version >= 8:
        return [(g.group_id, None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics],
                 getattr(g, "member_id", None), getattr(g, "member_epoch", -1)) for g in req.groups]
    return [(req.group_id, None if req.topics is None else
             [(t.name, list(t.partition_indexes)) for t in req.topics], None, -1)]


def alter_share_offsets_error(code, message=None):
    """Kafka's AlterShareGroupOffsetsRequest.getErrorResponseData."""
    code = ErrorCode(code)
    return AlterShareGroupOffsetsResponse(error_code=int(code), error_message=message or code.message)


def delete_share_offsets_error(code, message=None):
    """Kafka's DeleteShareGroupOffsetsRequest.getErrorDeleteResponseData."""
    code = ErrorCode(code)
    return DeleteShareGroupOffsetsResponse(error_code=int(code), error_message=message or code.message)


def _default_uuid() -> str:
    return str(uuid.uuid4())


class GroupCoordinatorShard:
    def __init__(self, partition: int = 0, config: GroupCoordinatorConfig | None = None,
                 scheduler=None, uuid_factory=None, topics=None, topics_version=None, group_configs=None):
        self.partition = partition
        self.config = config or GroupCoordinatorConfig()
        self.scheduler = scheduler if scheduler is not None else TimerQueue()
        self.timer = CoordinatorTimer(self.scheduler)
        uuids = uuid_factory or _default_uuid
        # ONE map of every group of the partition, whatever its type (Kafka's GroupMetadataManager.groups);
        # each manager acts on it for its protocol
        self.groups: dict[str, Group] = {}
        self.group_metadata_manager = GroupMetadataManager(self.config, self.timer, uuids, self.groups)
        self.offset_metadata_manager = OffsetMetadataManager(self.config, self.timer, self.groups,
                                                             self.group_metadata_manager, topics)
        # ``topics()`` is the broker's topic metadata image (name -> TopicMetadata), ``topics_version()``
        # the version of the image that last brought new topics (regex resolution); ``group_configs``
        # the groups' GROUP config overrides (config.GroupConfigs), configuration kept current by the runtime
        self.consumer_group_manager = ConsumerGroupManager(self.config, self.timer, uuids, self.groups,
                                                           self.group_metadata_manager, topics, topics_version,
                                                           group_configs)
        # online migration between the two protocols (KIP-848), and classic members inside
        # consumer groups
        self.migration = self.consumer_group_manager.migration
        # share groups (KIP-932)
        self.share_group_manager = ShareGroupManager(self.config, self.timer, self.groups, topics, group_configs)
        self.is_loaded = False
        self.skipped_records = 0

    # == loading =================================================================================
    def replay(self, key: bytes, value: bytes | None, offset=None) -> None:
        """Apply one record read from the log (load time). Unknown record types are skipped;
        a record that does not decode raises CoordinatorLoadError naming partition and offset."""
        try:
            record = rec.decode_record(key, value)
        except rec.UnknownRecordType:
            try:
                record = consumer_group_records.decode_record(key, value)
            except rec.UnknownRecordType:
                try:
                    record = share_group_records.decode_record(key, value)
                except rec.UnknownRecordType:
                    self.skipped_records += 1
                    return
                except rec.RecordDecodeError as e:
                    raise rec.CoordinatorLoadError(self.partition, offset, e) from None
            except rec.RecordDecodeError as e:
                raise rec.CoordinatorLoadError(self.partition, offset, e) from None
        except rec.RecordDecodeError as e:
            raise rec.CoordinatorLoadError(self.partition, offset, e) from None
        if offset is not None:
            self.offset_metadata_manager.replay_offset = offset
        self._apply(record)

    def _apply(self, record: rec.CoordinatorRecord) -> None:
        """The only mutator of durable state; used at load time and on commit."""
        if record.record_type in consumer_group_records.RECORD_TYPES:
            self._apply_consumer_group(record)
        elif record.record_type in share_group_records.RECORD_TYPES:
            share_group.replay(self.groups, record, self.timer.now)
        elif record.record_type == rec.GROUP_METADATA:
            self.group_metadata_manager.replay_group_metadata(record.key_struct.group, record.value_struct)
        else:
            k = record.key_struct
            self.offset_metadata_manager.replay_offset_commit(k.group, k.topic, k.partition, record.value_struct)

    def _apply_consumer_group(self, record) -> None:
        consumer_group.replay(self.groups, record)

    def replay_transactional(self, producer_id: int, key: bytes, value: bytes | None, offset=None) -> None:
        """A record of a transactional batch of ``producer_id`` (TxnOffsetCommit's offsets):
        pending until the producer's marker; other record types never come transactional."""
        try:
            record = rec.decode_record(key, value)
        except rec.UnknownRecordType:
            self.skipped_records += 1
            return
        except rec.RecordDecodeError as e:
            raise rec.CoordinatorLoadError(self.partition, offset, e) from None
        if offset is not None:
            self.offset_metadata_manager.replay_offset = offset
        self._apply_transactional(producer_id, record)

    def _apply_transactional(self, producer_id: int, record: rec.CoordinatorRecord) -> None:
        if record.record_type == rec.GROUP_METADATA:
            self._apply(record)
        else:
            k = record.key_struct
            self.offset_metadata_manager.replay_transactional_offset_commit(
                producer_id, k.group, k.topic, k.partition, record.value_struct)

    def replay_end_transaction_marker(self, producer_id: int, committed: bool, offset=None) -> None:
        """A COMMIT/ABORT control record of ``producer_id`` on this partition (at load and when
        the transaction coordinator's marker is written): its pending offsets settle."""
        if offset is not None:
            self.offset_metadata_manager.replay_offset = offset
        self.offset_metadata_manager.replay_end_transaction_marker(producer_id, committed)

    # == the partition's log offsets (Kafka's CoordinatorShard.updateLastWrittenOffset /
    # updateLastCommittedOffset) ====================================================================
    def update_last_written_offset(self, offset: int) -> None:
        """The records ``commit`` replays next were appended up to ``offset`` (the runtime says it
        after the append): at or above the committed offset, reads at that offset do not see them."""
        self.offset_metadata_manager.replay_offset = offset

    def update_last_committed_offset(self, offset: int) -> None:
        """The partition's records below ``offset`` are committed (its high watermark)."""
        self.offset_metadata_manager.update_last_committed_offset(offset)

    @property
    def last_committed_offset(self) -> int:
        return self.offset_metadata_manager.last_committed_offset

    def on_loaded(self, now_ms: int) -> Result:
        res = self._begin(now_ms)
        self.is_loaded = True
        self.group_metadata_manager.on_loaded(res)
        self.consumer_group_manager.on_loaded()
        self.share_group_manager.on_loaded()
        # topics may have changed while the partition was not loaded (Kafka compares images too)
        self.consumer_group_manager.on_topics_changed(res)
        self._schedule_expiration()
        return res

    def on_unloaded(self, now_ms: int) -> list:
        """The partition moves away (or the broker stops serving it): every group's timers stop,
        parked requests are answered NOT_COORDINATOR, and the groups are dropped (Kafka's
        GroupMetadataManager.onUnloaded)."""
        res = self._begin(now_ms)
        self.is_loaded = False
        self.timer.cancel(EXPIRE_GROUP_METADATA_KEY)
        for group in self.groups.values():
            group.cancel_timers(self.timer)
        self.group_metadata_manager.on_unloaded(res)
        self.groups.clear()
        return res.responses

    # == write protocol ==========================================================================
    def commit(self, result: Result, producer_id: int | None = None, now_ms: int | None = None) -> list:
        """The records of ``result`` are in the log: replay them, run post-write steps, and
        return every (token, response) to send. With ``producer_id`` the records were written in
        that producer's transactional batch (TxnOffsetCommit): Kafka replays a record with its
        producer id, so its offsets stay pending until the producer's marker."""
        now = self.timer.now = result.now_ms if now_ms is None else now_ms
        if producer_id is None:
            for record in result.records:
                self._apply(record)
        else:
            for record in result.records:
                self._apply_transactional(producer_id, record)
        return result.committed(now)

    def abort(self, result: Result, error=ErrorCode.KAFKA_STORAGE_ERROR, now_ms: int | None = None) -> list:
        """Appending ``result.records`` failed with ``error``: nothing durable changes; return
        the responses to send, failures mapped as Kafka maps append errors."""
        now = self.timer.now = result.now_ms if now_ms is None else now_ms
        mapped = append_error_to_response_error(error)
        return result.aborted(mapped, now)

    # == timers ==================================================================================
    def poll_timers(self, now_ms: int):
        """Run the timers due at ``now_ms``, earliest first, one Result each: the runtime writes
        and replays each before the next runs, so every expiry sees the state the previous one
        left (as Kafka schedules each expired timer as its own write operation)."""
        for key, op in self.timer.pop_expired(now_ms):
            res = self._begin(now_ms)
            res.timer_key = key
            op(res)
            yield res

    def next_deadline(self) -> int | None:
        nd = getattr(self.scheduler, "next_deadline", None)
        return nd() if nd else None

    def _schedule_expiration(self) -> None:
        self.timer.schedule(EXPIRE_GROUP_METADATA_KEY, self.config.offsets_retention_check_interval_ms,
                            self._cleanup_group_metadata)

    def _cleanup_group_metadata(self, res: Result) -> None:
        """Expire offsets (KIP-211); an empty group left without offsets is deleted, whatever its
        type (Kafka's GroupCoordinatorShard.cleanupGroupMetadata)."""
        for group_id, group in list(self.groups.items()):
            if group.should_expire() and self.offset_metadata_manager.cleanup_expired_offsets(group_id, res):
                if group.is_empty():
                    group.create_group_tombstone_records(res.records)
                    group.cancel_timers(self.timer)
        self._schedule_expiration()

    def _begin(self, now_ms: int) -> Result:
        self.timer.now = now_ms
        return Result(now_ms)

    # == membership APIs =========================================================================
    # Each handler declares its API's error form and the request checks Kafka's
    # GroupCoordinatorService makes before the runtime: the runtime answers with them when the
    # partition is loading or not hosted here (``result.gate``), so no handler checks that itself.
    @coordinator_api(error=lambda req, version, e: join_response(version, e), validate=_validate_join)
    def handle_join_group(self, req, version, now_ms, token, client_id="", client_host="") -> Result:
        res = self._begin(now_ms)
        if version == 0 and req.rebalance_timeout_ms != req.session_timeout_ms:
            req = copy.copy(req)
            req.rebalance_timeout_ms = req.session_timeout_ms
        consumer_group = self.consumer_group_manager.consumer_group(req.group_id)
        if consumer_group is not None:
            if consumer_group.members:
                # a classic member joins a consumer group with members (KIP-848 online migration)
                self.migration.join(consumer_group, req, version, token, client_id, client_host, res)
                return res
            # an empty consumer group becomes a classic one (Kafka converts it the same way)
            self.consumer_group_manager.delete_group(consumer_group, res)
        self.group_metadata_manager.join_group(req, version, token, client_id, client_host, res)
        return res

    @coordinator_api(error=lambda req, version, e: sync_response(version, e), validate=_validate_sync)
    def handle_sync_group(self, req, version, now_ms, token) -> Result:
        res = self._begin(now_ms)
        consumer_group = self.consumer_group_manager.consumer_group(req.group_id)
        if consumer_group is None:
            self.group_metadata_manager.sync_group(req, version, token, res)
        elif consumer_group.members:
            self.migration.sync(consumer_group, req, version, token, res)
        else:
            res.reply(token, sync_response(version, ErrorCode.UNKNOWN_MEMBER_ID))
        return res

    # Kafka: "the group is still loading, so blindly respond" NONE to a Heartbeat
    @coordinator_api(error=lambda req, version, e: HeartbeatResponse(error_code=0 if e == LOADING else int(e)),
                     validate=_validate_group_id(lambda req, version: HeartbeatResponse(
                         error_code=int(ErrorCode.INVALID_GROUP_ID))))
    def handle_heartbeat(self, req, version, now_ms, token) -> Result:
        res = self._begin(now_ms)
        consumer_group = self.consumer_group_manager.consumer_group(req.group_id)
        if consumer_group is not None:
            error = self.migration.heartbeat(consumer_group, req)
        else:
            error = self.group_metadata_manager.heartbeat(req)
        res.reply(token, HeartbeatResponse(error_code=int(error)))
        return res

    @coordinator_api(error=lambda req, version, e: leave_response(version, e),
                     validate=_validate_group_id(lambda req, version: leave_response(version, ErrorCode.INVALID_GROUP_ID)))
    def handle_leave_group(self, req, version, now_ms, token) -> Result:
        res = self._begin(now_ms)
        if version <= 2:
            members = [(req.member_id, None, None)]
        else:
            members = [(m.member_id, m.group_instance_id, m.reason) for m in req.members]
        consumer_group = self.consumer_group_manager.consumer_group(req.group_id)
        if consumer_group is not None:
            top, out = ErrorCode.NONE, self.migration.leave(consumer_group, members, res)
        else:
            top, out = self.group_metadata_manager.leave_group(req.group_id, members, res)
        res.reply(token, leave_response(version, top, out), lambda e: leave_response(version, e))
        return res

    # == offsets =================================================================================
    @coordinator_api(error=lambda req, version, e: offset_commit_error_response(req, e))
    def handle_offset_commit(self, req, version, now_ms, token) -> Result:
        res = self._begin(now_ms)
        try:
            response = self.offset_metadata_manager.commit_offsets(req, version, res)
        except KafkaError as e:
            res.reply(token, offset_commit_error_response(req, e.code))
            return res
        res.reply(token, response, lambda e: offset_commit_error_response(req, e))
        return res

    @coordinator_api(error=lambda req, version, e: txn_offset_commit_error_response(req, e),
                     validate=_validate_group_id(lambda req, version: txn_offset_commit_error_response(
                         req, ErrorCode.INVALID_GROUP_ID)))
    def handle_txn_offset_commit(self, req, version, now_ms, token) -> Result:
        """TxnOffsetCommit (28): pending offsets of the request's producer (the runtime writes
        the records in its transactional batch and commits with ``commit(result, producer_id)``)."""
        res = self._begin(now_ms)
        try:
            response = self.offset_metadata_manager.commit_transactional_offsets(req, version, res)
        except KafkaError as e:
            res.reply(token, txn_offset_commit_error_response(req, e.code))
            return res
        res.reply(token, response, lambda e: txn_offset_commit_error_response(req, e))
        return res

    @coordinator_api(error=lambda req, version, e: offset_fetch_response(
        version, [FetchGroup(g, error=e, requested=topics) for g, topics, _, _ in _fetch_wanted(req, version)]))
    def handle_offset_fetch(self, req, version, now_ms, token) -> Result:
        """Kafka's GroupCoordinatorService.fetchOffsets: without ``require_stable`` a read at the
        partition's last committed offset (only replicated commits); with it, the latest state,
        answered once everything the partition has written is committed (a write operation
        with no records, ``Result.wait_committed``)."""
        res = self._begin(now_ms)
        omm = self.offset_metadata_manager
        stable = req.require_stable
        committed = None if stable else omm.last_committed_offset
        wanted = _fetch_wanted(req, version)
        groups = [omm.fetch_offsets(group_id, topics, stable, member_id, member_epoch, committed)
                  for group_id, topics, member_id, member_epoch in wanted]
        if stable:
            res.wait_committed = True
            res.reply(token, offset_fetch_response(version, groups), on_failure=lambda e: offset_fetch_response(
                version, [FetchGroup(g, error=e, requested=topics) for g, topics, _, _ in wanted]))
        else:
            res.reply(token, offset_fetch_response(version, groups))
        return res

    @coordinator_api(error=lambda req, version, e: OffsetDeleteResponse(error_code=int(e)),
                     validate=_validate_group_id(lambda req, version: OffsetDeleteResponse(
                         error_code=int(ErrorCode.INVALID_GROUP_ID))))
    def handle_offset_delete(self, req, version, now_ms, token) -> Result:
        res = self._begin(now_ms)
        try:
            response = self.offset_metadata_manager.delete_offsets(req, res)
        except KafkaError as e:
            res.reply(token, OffsetDeleteResponse(error_code=int(e.code)))
            return res
        res.reply(token, response, lambda e: OffsetDeleteResponse(error_code=int(e)))
        return res

    def handle_partitions_deleted(self, topic_partitions, now_ms, token) -> Result:
        """Deleted topics' partitions lose every group's committed offsets, by tombstones
        (OffsetMetadataManager.onPartitionsDeleted), so a recreated topic starts with none."""
        res = self._begin(now_ms)
        res.reply(token, self.offset_metadata_manager.on_partitions_deleted(topic_partitions, res))
        return res

    # == group administration ====================================================================
    @coordinator_api(error=lambda req, version, e: DescribeGroupsResponse(
        groups=[describe_error_group(g, e) for g in req.groups]))
    def handle_describe_groups(self, req, version, now_ms, token) -> Result:
        res = self._begin(now_ms)
        groups = [self.group_metadata_manager.describe_group(g) for g in req.groups]
        res.reply(token, DescribeGroupsResponse(groups=groups))
        return res

    @coordinator_api(error=lambda req, version, e: ListGroupsResponse(error_code=int(e)))
    def handle_list_groups(self, req, version, now_ms, token) -> Result:
        res = self._begin(now_ms)
        states, types = req.states_filter if version >= 4 else [], req.types_filter if version >= 5 else []
        res.reply(token, ListGroupsResponse(groups=self.list_groups(states, types)))
        return res

    @coordinator_api(error=lambda req, version, e: delete_groups_response([(g, e) for g in req.groups_names]))
    def handle_delete_groups(self, req, version, now_ms, token) -> Result:
        res = self._begin(now_ms)
        results = []
        for group_id in req.groups_names:
            group = self.groups.get(group_id)
            try:
                if group is None:
                    raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
                group.validate_delete_group()
            except KafkaError as e:
                results.append((group_id, e.code))
                continue
            # offsets first, then the group's own records (Kafka's GroupCoordinatorShard.deleteGroups)
            self.offset_metadata_manager.delete_all_offsets(group_id, res)
            group.create_group_tombstone_records(res.records)
            group.cancel_timers(self.timer)
            results.append((group_id, ErrorCode.NONE))
        res.reply(token, delete_groups_response(results),
                  lambda e: delete_groups_response([(g, e) for g in req.groups_names]))
        return res

    # == the consumer group protocol (KIP-848) =====================================================
    @coordinator_api(error=lambda req, version, e: heartbeat_error(e))
    def handle_consumer_group_heartbeat(self, req, version, now_ms, token, client_id="", client_host="") -> Result:
        res = self._begin(now_ms)
        try:
            response = self.consumer_group_manager.heartbeat(req, version, res, client_id, client_host)
        except KafkaError as e:
            del res.records[:]          # a refused request writes nothing
            res.reply(token, heartbeat_error(e.code, str(e)))  # as Kafka: no member id
            return res
        res.reply(token, response, lambda e: heartbeat_error(e))
        return res

    @coordinator_api(error=lambda req, version, e: ConsumerGroupDescribeResponse(groups=[
        ConsumerGroupDescribeResponse.DescribedGroup(
            error_code=int(e if group_id else ErrorCode.INVALID_GROUP_ID), group_id=group_id)
        for group_id in req.group_ids]))
    def handle_consumer_group_describe(self, req, version, now_ms, token) -> Result:
        res = self._begin(now_ms)
        groups = []
        for group_id in req.group_ids:
            if not group_id:
                groups.append(ConsumerGroupDescribeResponse.DescribedGroup(
                    error_code=int(ErrorCode.INVALID_GROUP_ID), group_id=group_id))
            else:
                groups.append(self.consumer_group_manager.describe(group_id))
        res.reply(token, ConsumerGroupDescribeResponse(groups=groups))
        return res

    # == share groups (KIP-932) ======================================================================
    @coordinator_api(error=lambda req, version, e: share_heartbeat_error(e), validate=validate_share_heartbeat)
    def handle_share_group_heartbeat(self, req, version, now_ms, token, client_id="", client_host="") -> Result:
        res = self._begin(now_ms)
        try:
            response = self.share_group_manager.heartbeat(req, res, client_id, client_host)
        except KafkaError as e:
            del res.records[:]          # a refused request writes nothing
            res.reply(token, share_heartbeat_error(e.code, str(e)))
            return res
        res.reply(token, response, lambda e: share_heartbeat_error(e))
        return res

    @coordinator_api(error=lambda req, version, e: ShareGroupDescribeResponse(groups=[
        ShareGroupDescribeResponse.DescribedGroup(error_code=int(e), group_id=group_id)
        for group_id in req.group_ids]))
    def handle_share_group_describe(self, req, version, now_ms, token) -> Result:
        res = self._begin(now_ms)
        res.reply(token, ShareGroupDescribeResponse(groups=[self.share_group_manager.describe(g)
                                                            for g in req.group_ids]))
        return res

    @coordinator_api(error=lambda req, version, e: None)
    def handle_initialize_share_group_state(self, req, version, now_ms, token) -> Result:
        """The share coordinator answered an initialization the heartbeat queued
        (``share_group_manager.drain_initializations``; ``req`` a ShareStateInitialized): its
        topic id -> partitions move to initialized, or back out of initializing when it failed
        (Kafka's initializeShareGroupState / uninitializeShareGroupState)."""
        res = self._begin(now_ms)
        if req.succeeded:
            self.share_group_manager.initialize_share_group_state(req.group_id, req.topics, res)
        else:
            self.share_group_manager.uninitialize_share_group_state(req.group_id, req.topics, res)
        res.reply(token, None)
        return res

    # -- share group administration (Kafka's GroupCoordinatorShard share paths); the service chains
    # them with the share coordinator (broker/share_group_service.py) ------------------------------
    @coordinator_api(error=lambda req, version, e: DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup(
        group_id=req.group_id, error_code=int(e), error_message=ErrorCode(e).message))
    def handle_share_group_initialized_partitions(self, req, version, now_ms, token) -> Result:
        """Kafka's initializedShareGroupPartitions (a read; ``req`` a DescribeShareGroupOffsets group):
        topic id -> the partitions whose state the share coordinator holds."""
        res = self._begin(now_ms)
        res.reply(token, self.share_group_manager.initialized_partitions(req.group_id))
        return res

    @coordinator_api(error=lambda req, version, e: alter_share_offsets_error(e),
                     validate=_validate_group_id(lambda req, version: alter_share_offsets_error(
                         ErrorCode.INVALID_GROUP_ID)))
    def handle_alter_share_group_offsets(self, req, version, now_ms, token) -> Result:
        """Kafka's alterShareGroupOffsets: answers an ``AlterOffsets`` (the answer so far and the
        initialization the service asks of the share coordinator), or the error response."""
        res = self._begin(now_ms)
        try:
            plan = self.share_group_manager.alter_offsets(req.group_id, req.topics, res)
        except KafkaError as e:
            del res.records[:]
            res.reply(token, alter_share_offsets_error(e.code, str(e)))
            return res
        res.reply(token, plan, lambda e: alter_share_offsets_error(e))
        return res

    @coordinator_api(error=lambda req, version, e: DeleteOffsetsPlan(int(e), ErrorCode(e).message),
                     validate=_validate_group_id(lambda req, version: DeleteOffsetsPlan(
                         int(ErrorCode.INVALID_GROUP_ID), ErrorCode.INVALID_GROUP_ID.message)))
    def handle_initiate_delete_share_group_offsets(self, req, version, now_ms, token) -> Result:
        """Kafka's initiateDeleteShareGroupOffsets: answers a ``DeleteOffsetsPlan``."""
        res = self._begin(now_ms)
        plan = self.share_group_manager.initiate_delete_offsets(req.group_id, [t.topic_name for t in req.topics], res)
        res.reply(token, plan, lambda e: DeleteOffsetsPlan(int(e), ErrorCode(e).message))
        return res

    @coordinator_api(error=lambda req, version, e: delete_share_offsets_error(e))
    def handle_complete_delete_share_group_offsets(self, req, version, now_ms, token) -> Result:
        """Kafka's completeDeleteShareGroupOffsets (``req`` a ShareOffsetsDeleted): the final answer."""
        res = self._begin(now_ms)
        response = self.share_group_manager.complete_delete_offsets(req.group_id, req.deleted, req.error_topics, res)
        res.reply(token, response, lambda e: delete_share_offsets_error(e))
        return res

    @coordinator_api(error=lambda req, version, e: {g: (None, ErrorCode(e)) for g in req.groups_names})
    def handle_share_group_delete_requests(self, req, version, now_ms, token) -> Result:
        """Kafka's sharePartitionDeleteRequests (``req`` a DeleteGroups request): group id ->
        (topic id -> partitions for the share coordinator to delete, error) for its share groups."""
        res = self._begin(now_ms)
        out = self.share_group_manager.delete_group_requests(req.groups_names, res)
        res.reply(token, out, lambda e: {g: (None, ErrorCode(e)) for g in req.groups_names})
        return res

    def handle_topics_changed(self, now_ms) -> Result:
        """The broker created or deleted topics or added partitions: consumer groups whose
        subscribed topics changed get a new group epoch."""
        res = self._begin(now_ms)
        self.consumer_group_manager.on_topics_changed(res)
        self.share_group_manager.on_topics_changed()
        return res

    def list_groups(self, states_filter, types_filter) -> list:
        """ListGroups over every group, whatever its type (Kafka's GroupMetadataManager.listGroups):
        filters are case-insensitive; an unknown type matches nothing."""
        states = {s.strip().lower() for s in states_filter}
        types = {GroupType.parse(t) for t in types_filter}
        return [g.as_listed_group() for g in self.groups.values()
                if (not states or g.is_in_states(states)) and (not types or g.type in types)]

    # == views for tests and operators ===========================================================
    def durable_state(self) -> dict:
        """What the log says: offsets and each group's last GroupMetadata image."""
        offsets = {g: {t: {p: (o.committed_offset, o.leader_epoch, o.metadata, o.commit_timestamp_ms,
                               o.expire_timestamp_ms) for p, o in parts.items()}
                       for t, parts in topics.items()}
                   for g, topics in self.offset_metadata_manager.offsets.items()}
        groups = {g: record_view(group.record) for g, group in self.groups.items()
                  if isinstance(group, ClassicGroup)}
        consumer_groups = {g: group.durable_view() for g, group in self.groups.items()
                           if isinstance(group, consumer_group.ConsumerGroup)}
        state: dict[str, Any] = {"offsets": offsets, "groups": groups, "consumer_groups": consumer_groups}
        share_groups = {g: group.durable_view() for g, group in self.groups.items()
                        if isinstance(group, share_group.ShareGroup)}
        if share_groups:
            state["share_groups"] = share_groups
        pending = self.offset_metadata_manager.pending_transactional_offsets
        if pending:
            state["pending_transactional_offsets"] = {
                pid: {tp: (tuple(o), superseded) for tp, (o, superseded) in parts.items()}
                for pid, parts in pending.items()}
        return state

    def settled_group_views(self) -> dict:
        """In-memory groups that are Stable or Empty and written at least once, as record views;
        for those, memory must equal the durable image."""
        out = {}
        for g, group in self.groups.items():
            if isinstance(group, ClassicGroup) and group.record is not None:
                view = live_view(group)
                if view is not None:
                    out[g] = view
        return out


def merge_list_groups(responses) -> ListGroupsResponse:
    """ListGroups across shards, as Kafka combines them: the groups of every shard, or, if a
    shard failed (e.g. still loading), only that error. (A shard this broker does not lead is
    left out by the runtime, like Kafka's NOT_COORDINATOR.)"""
    merged = ListGroupsResponse()
    for r in responses:
        if r.error_code:
            return ListGroupsResponse(error_code=r.error_code)
        merged.groups.extend(r.groups)
    return merged
