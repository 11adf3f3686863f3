"""Committed offsets of one shard: OffsetCommit, OffsetFetch, OffsetDelete, deletion with the
group, KIP-211 expiry, and the replay of OffsetCommit records.

Mirrors Kafka's OffsetMetadataManager, transactional offsets included: a TxnOffsetCommit's
records (written in its producer's transactional batch) are pending per producer id until that
producer's COMMIT marker on this partition makes them committed (or its ABORT drops them); while
pending, OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for the partition.
The offsets store changes only in ``replay*``; handlers validate and produce records.

Reads at the last committed offset: a record is committed once the partition's high watermark
passes it (in a cluster, once the ISR has it). OffsetFetch without ``require_stable`` answers what
the committed records say, as Kafka's reads its TimelineHashMaps at ``lastCommittedOffset``; so
each write at a log offset not yet committed keeps an undo entry (what the partition's offset was
before it), dropped once the committed offset passes it.
"""
from __future__ import annotations

from typing import Callable, Mapping, NamedTuple

from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages.offset_commit import OffsetCommitResponse
from ..protocol.messages.offset_delete import OffsetDeleteResponse
from ..protocol.messages.txn_offset_commit import TxnOffsetCommitResponse
from ..java_compat import utf16_length
from . import coordinator_records as rec
from .classic_group import ClassicGroup
from .classic_group import ClassicGroupState as S
from .group import Group
from .responses import FetchGroup

INVALID_OFFSET = -1
NO_METADATA = ""
ALL_COMMITTED = 1 << 63      # the committed offset of a shard never told one: every record is committed
_COMMITTED = object()        # no write at or above the offset read at


class CommittedOffset(NamedTuple):   # immutable; a tuple is the cheapest to build per commit
    """A group's committed offset of one partition as the coordinator keeps it (the coordinator's
    OffsetAndMetadata in Kafka; named apart from the client's public OffsetAndMetadata)."""
    committed_offset: int
    leader_epoch: int            # -1: none
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None

    @classmethod
    def from_record(cls, value) -> "CommittedOffset":
        return cls(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp,
                   None if value.expire_timestamp == -1 else value.expire_timestamp)


class OffsetMetadataManager:
    def __init__(self, config, timer, groups: dict[str, Group], group_metadata_manager, topics=None):
        self.config = config
        self.timer = timer
        self.groups = groups        # the shard's one group map: each group validates for itself
        # creates the "simple" classic group an offset commit without a group needs, and keeps
        # classic members' sessions alive on commit
        self.group_metadata_manager = group_metadata_manager
        # the broker's topic image (name -> TopicMetadata): a per-partition commit check names the
        # topic by id, as Kafka resolves it from its metadata image
        self.topics: Callable[[], Mapping] = topics or dict
        self.offsets: dict[str, dict[str, dict[int, CommittedOffset]]] = {}
        # Transactional offsets not settled yet: producer id -> {(group, topic, partition):
        # [offset, superseded]}; ``superseded`` when a regular commit of that partition was
        # replayed after it (the newer record wins at the COMMIT marker, as Kafka compares
        # record offsets). And (group, topic, partition) -> producer ids holding one.
        self.pending_transactional_offsets: dict[int, dict[tuple, list]] = {}
        self.open_transactions: dict[tuple, set[int]] = {}
        # The log offset of the records being replayed (set by the shard: the record's offset at
        # load, the appended batch's last offset on commit), and the partition's last committed
        # offset (its high watermark, told by the runtime; a record at or above it is not
        # committed yet).
        self.replay_offset = -1
        self.last_committed_offset = ALL_COMMITTED
        # What a read at the committed offset sees instead of ``offsets``: group -> {(topic,
        # partition): [(log offset of an uncommitted write, the CommittedOffset before it or None)]},
        # oldest first. Not durable state (a replay of the same log, all committed, has none), so the
        # live-equals-replayed comparison leaves it out: it only says which writes are not
        # replicated yet, and empties as the high watermark passes them.
        self.uncommitted: dict[str, dict[tuple[str, int], list[tuple[int, CommittedOffset | None]]]] = {}

    @property
    def now(self) -> int:
        return self.timer.now

    # == replay ==================================================================================
    def replay_offset_commit(self, group_id: str, topic: str, partition: int, value) -> None:
        if self.open_transactions:
            if value is not None:
                self._supersede_pending(group_id, topic, partition)
            else:
                self._drop_pending(group_id, topic, partition)
        if value is not None:
            # A consumer that commits without group management gets a "simple" (empty) group.
            if group_id not in self.groups:
                self.group_metadata_manager.ensure_simple_group(group_id)
            stored = self.offsets.setdefault(group_id, {}).setdefault(topic, {})
            if self.replay_offset >= self.last_committed_offset:
                self._note_uncommitted(group_id, topic, partition, stored.get(partition))
            stored[partition] = CommittedOffset.from_record(value)
            return
        topics = self.offsets.get(group_id)
        if topics is None:
            return
        parts = topics.get(topic)
        if parts is None:
            return
        previous = parts.pop(partition, None)
        if previous is not None and self.replay_offset >= self.last_committed_offset:
            self._note_uncommitted(group_id, topic, partition, previous)
        if not parts:
            del topics[topic]
        if not topics:
            del self.offsets[group_id]

    # == transactional offsets (TxnOffsetCommit) ================================================
    def replay_transactional_offset_commit(self, producer_id: int, group_id: str, topic: str, partition: int,
                                           value) -> None:
        """An offset commit record in a transactional batch of ``producer_id``: pending. A
        tombstone deletes at once, as a regular one (Kafka's replay ignores the producer id then)."""
        if value is None:
            self.replay_offset_commit(group_id, topic, partition, None)
            return
        if group_id not in self.groups:
            self.group_metadata_manager.ensure_simple_group(group_id)
        tp = (group_id, topic, partition)
        self.pending_transactional_offsets.setdefault(producer_id, {})[tp] = [CommittedOffset.from_record(value),
                                                                              False]
        self.open_transactions.setdefault(tp, set()).add(producer_id)

    def replay_end_transaction_marker(self, producer_id: int, committed: bool) -> None:
        """The producer's COMMIT/ABORT marker on this partition: its pending offsets become the
        committed ones (unless a regular commit replayed after them is newer) or vanish."""
        pending = self.pending_transactional_offsets.pop(producer_id, None)
        if not pending:
            return
        for tp, (offset, superseded) in pending.items():
            holders = self.open_transactions.get(tp)
            if holders is not None:
                holders.discard(producer_id)
                if not holders:
                    del self.open_transactions[tp]
            if committed and not superseded:
                group_id, topic, partition = tp
                if group_id not in self.groups:
                    self.group_metadata_manager.ensure_simple_group(group_id)
                parts = self.offsets.setdefault(group_id, {}).setdefault(topic, {})
                if self.replay_offset >= self.last_committed_offset:
                    self._note_uncommitted(group_id, topic, partition, parts.get(partition))
                parts[partition] = offset

    # == reads at the last committed offset =======================================================
    def _note_uncommitted(self, group_id: str, topic: str, partition: int,
                          previous: CommittedOffset | None) -> None:
        """The record being replayed changes the partition's offset above the committed offset:
        a read at the committed offset still sees ``previous``."""
        self.uncommitted.setdefault(group_id, {}).setdefault((topic, partition), []).append(
            (self.replay_offset, previous))

    def update_last_committed_offset(self, offset: int) -> None:
        """The partition's records below ``offset`` are committed (its high watermark moved):
        their undo entries go (Kafka's CoordinatorShard.updateLastCommittedOffset, which drops the
        timeline snapshots below it)."""
        self.last_committed_offset = offset
        if not self.uncommitted:
            return
        for group_id in list(self.uncommitted):
            changes = self.uncommitted[group_id]
            for tp in list(changes):
                entries = changes[tp]
                n = 0
                while n < len(entries) and entries[n][0] < offset:
                    n += 1
                if n == len(entries):
                    del changes[tp]
                elif n:
                    del entries[:n]
            if not changes:
                del self.uncommitted[group_id]

    def _committed_view(self, group_id: str, stored: dict, committed_offset: int) -> dict:
        """The group's offsets as the records below ``committed_offset`` left them: ``stored``
        (the latest) with each partition changed by a later write set back to what it was
        before the oldest such write."""
        changes = self.uncommitted.get(group_id)
        if not changes:
            return stored
        view = {t: dict(parts) for t, parts in stored.items()}
        for (topic, partition), entries in changes.items():
            # what it was before the oldest write at or above the committed offset
            previous = next((before for log_offset, before in entries if log_offset >= committed_offset), _COMMITTED)
            if previous is _COMMITTED:
                continue        # every write to it is committed
            if previous is None:
                parts = view.get(topic)
                if parts is not None:
                    parts.pop(partition, None)
                    if not parts:
                        del view[topic]
            else:
                view.setdefault(topic, {})[partition] = previous
        return view

    def _supersede_pending(self, group_id, topic, partition) -> None:
        """A regular commit is newer than the pending offsets of this partition: it wins at the
        COMMIT marker (Kafka compares the records' offsets)."""
        tp = (group_id, topic, partition)
        for pid in self.open_transactions.get(tp, ()):
            self.pending_transactional_offsets[pid][tp][1] = True

    def _drop_pending(self, group_id, topic, partition) -> None:
        """A tombstone removes the pending offsets of this partition too, so no later COMMIT
        marker brings back an offset deleted with its topic, by OffsetDelete or by DeleteGroups
        (Kafka's replay of a tombstone, KAFKA-14505)."""
        tp = (group_id, topic, partition)
        for pid in self.open_transactions.pop(tp, ()):
            pending = self.pending_transactional_offsets[pid]
            del pending[tp]
            if not pending:
                del self.pending_transactional_offsets[pid]

    def has_pending_transactional_offsets(self, group_id, topic, partition) -> bool:
        return (group_id, topic, partition) in self.open_transactions

    def _pending_partitions(self, group_id: str) -> list[tuple[str, int]]:
        """(topic, partition)s of the group with a transactional offset pending."""
        return [(t, p) for g, t, p in self.open_transactions if g == group_id]

    def commit_transactional_offsets(self, req, version, res):
        """TxnOffsetCommit: validates like Kafka's validateTransactionalOffsetCommit and adds
        one record per accepted partition (the runtime writes them in the producer's
        transactional batch). Raises KafkaError for a request-level error."""
        group = self.groups.get(req.group_id)
        generation = req.generation_id if version >= 3 else -1
        member_id = req.member_id if version >= 3 else ""
        instance_id = req.group_instance_id if version >= 3 else None
        if group is None:
            if generation >= 0:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
        else:
            try:
                validator = group.validate_offset_commit(member_id, instance_id, generation, True, version)
                if validator is not None:
                    # every partition is checked before any is written (Kafka's exception
                    # leaves the whole request unwritten); a topic the image does not have cannot
                    # be checked: ILLEGAL_GENERATION
                    image = self.topics()
                    for topic in req.topics:
                        meta = image.get(topic.name)
                        if meta is None:
                            raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
                        for p in topic.partitions:
                            validator(topic.name, meta.topic_id, p.partition_index)
            except KafkaError as e:
                if e.code == ErrorCode.STALE_MEMBER_EPOCH:     # TxnOffsetCommit has no such error
                    raise KafkaError(ErrorCode.ILLEGAL_GENERATION) from None
                raise
        now = self.timer.now
        T = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
        P = T.TxnOffsetCommitResponsePartition
        topics = []
        max_metadata = self.config.offset_metadata_max_bytes
        for topic in req.topics:
            parts = []
            for p in topic.partitions:
                metadata = p.committed_metadata
                if metadata and 2 * len(metadata) > max_metadata and utf16_length(metadata) > max_metadata:
                    parts.append(P(partition_index=p.partition_index,
                                   error_code=int(ErrorCode.OFFSET_METADATA_TOO_LARGE)))
                    continue
                parts.append(P(partition_index=p.partition_index, error_code=0))
                epoch = p.committed_leader_epoch if version >= 2 else -1
                res.add_record(rec.offset_commit_record(
                    req.group_id, topic.name, p.partition_index, p.committed_offset,
                    epoch if epoch >= 0 else -1, NO_METADATA if metadata is None else metadata, now, None))
            topics.append(T(name=topic.name, partitions=parts))
        return TxnOffsetCommitResponse(topics=topics)

    def offset(self, group_id, topic, partition) -> CommittedOffset | None:
        return self.offsets.get(group_id, {}).get(topic, {}).get(partition)

    # == OffsetCommit =============================================================================
    def commit_offsets(self, req, version, res) -> OffsetCommitResponse:
        """Returns the response and adds one record per accepted partition to ``res``.
        Raises KafkaError for a request-level error (every partition gets it)."""
        group = self.groups.get(req.group_id)
        generation = req.generation_id_or_member_epoch
        if group is None:
            if generation >= 0:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND if version >= 9 else ErrorCode.ILLEGAL_GENERATION)
            # generation -1 on an unknown group: a simple/admin commit; replay creates the group.
        else:
            validator = group.validate_offset_commit(req.member_id, req.group_instance_id, generation, False,
                                                     version)
            if validator is not None:
                # each partition the request writes (metadata within bounds), before any is written
                max_metadata = self.config.offset_metadata_max_bytes
                image = self.topics()
                for topic in req.topics:
                    meta = image.get(topic.name)
                    for p in topic.partitions:
                        metadata = p.committed_metadata
                        if not (metadata and 2 * len(metadata) > max_metadata
                                and utf16_length(metadata) > max_metadata):
                            validator(topic.name, None if meta is None else meta.topic_id, p.partition_index)
            # the classic protocol's commits keep the member's session alive (Kafka does the same
            # type check in OffsetMetadataManager.validateOffsetCommit)
            if isinstance(group, ClassicGroup) and group.state in (S.STABLE, S.PREPARING_REBALANCE):
                member = group.members.get(req.member_id)
                if member is not None:
                    self.group_metadata_manager.reschedule_heartbeat(group, member)

        now = self.timer.now
        expire = None if req.retention_time_ms == -1 else now + req.retention_time_ms
        T = OffsetCommitResponse.OffsetCommitResponseTopic
        P = T.OffsetCommitResponsePartition
        topics = []
        max_metadata = self.config.offset_metadata_max_bytes   # in UTF-16 units, as Java counts
        for topic in req.topics:
            parts = []
            for p in topic.partitions:
                metadata = p.committed_metadata
                if metadata and 2 * len(metadata) > max_metadata and utf16_length(metadata) > max_metadata:
                    parts.append(P(partition_index=p.partition_index,
                                   error_code=int(ErrorCode.OFFSET_METADATA_TOO_LARGE)))
                    continue
                parts.append(P(partition_index=p.partition_index, error_code=0))
                res.add_record(rec.offset_commit_record(
                    req.group_id, topic.name, p.partition_index, p.committed_offset,
                    p.committed_leader_epoch if p.committed_leader_epoch >= 0 else -1,
                    NO_METADATA if metadata is None else metadata,
                    now, expire))
            topics.append(T(name=topic.name, partitions=parts))
        return OffsetCommitResponse(topics=topics)

    # == OffsetFetch ==============================================================================
    def fetch_offsets(self, group_id: str, topics, require_stable: bool,
                      member_id: str | None = None, member_epoch: int = -1,
                      committed_offset: int | None = None) -> FetchGroup:
        """``topics``: list of (name, [partitions]) or None for every committed offset.
        An unknown (or Dead) group has no offsets: -1 per requested partition, or no topics.
        OffsetFetch v9 names the member and its epoch, checked for a consumer-protocol group.
        ``committed_offset``: read what the records below it say (Kafka's ``lastCommittedOffset``
        of a read operation); None reads the latest state (a stable fetch, answered once
        everything written is committed)."""
        group = self.groups.get(group_id)
        known = group is not None
        if group is None and committed_offset is not None and group_id in self.uncommitted:
            # deleted (or expired) by records not committed yet: the committed state still has
            # its offsets
            known = True
        elif group is not None:
            try:
                group.validate_offset_fetch(member_id, member_epoch)
            except KafkaError as e:
                if e.code != ErrorCode.GROUP_ID_NOT_FOUND:
                    return FetchGroup(group_id, error=e.code, requested=topics)
                known = False       # a Dead group: no offsets (Kafka's failAllPartitions)
        stored = self.offsets.get(group_id, {}) if known else {}
        if committed_offset is not None and self.uncommitted:
            stored = self._committed_view(group_id, stored, committed_offset)
        out = []
        if topics is None:
            for name, parts in stored.items():
                out.append((name, [(p, o.committed_offset, o.leader_epoch, o.metadata, ErrorCode.NONE)
                                   for p, o in parts.items()]))
        else:
            for name, partitions in topics:
                parts = stored.get(name, {})
                row = []
                for p in partitions:
                    o = parts.get(p)
                    if o is None:
                        row.append((p, INVALID_OFFSET, -1, NO_METADATA, ErrorCode.NONE))
                    else:
                        row.append((p, o.committed_offset, o.leader_epoch, o.metadata, ErrorCode.NONE))
                out.append((name, row))
        if require_stable and self.open_transactions and known:
            out = self._unstable(group_id, out)
        return FetchGroup(group_id, out, requested=topics)

    def _unstable(self, group_id, out):
        """KIP-447: a partition with transactional offsets pending answers UNSTABLE_OFFSET_COMMIT
        (the consumer retries until the transaction ends) instead of an offset."""
        pending = self.open_transactions
        return [(name, [(p, INVALID_OFFSET, -1, NO_METADATA, ErrorCode.UNSTABLE_OFFSET_COMMIT)
                        if (group_id, name, p) in pending else (p, *rest) for p, *rest in row])
                for name, row in out]

    # == OffsetDelete =============================================================================
    def delete_offsets(self, req, res) -> OffsetDeleteResponse:
        group = self.groups.get(req.group_id)
        if group is None:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
        group.validate_offset_delete()
        T = OffsetDeleteResponse.OffsetDeleteResponseTopic
        P = T.OffsetDeleteResponsePartition
        topics = []
        for topic in req.topics:
            if group.is_subscribed_to_topic(topic.name):
                parts = [P(partition_index=p.partition_index, error_code=int(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
                         for p in topic.partitions]
            else:
                parts = []
                for p in topic.partitions:
                    parts.append(P(partition_index=p.partition_index, error_code=0))
                    # a tombstone also when only a transactional offset is pending (Kafka)
                    if self.offset(req.group_id, topic.name, p.partition_index) is not None or \
                            self.has_pending_transactional_offsets(req.group_id, topic.name, p.partition_index):
                        res.add_record(rec.offset_commit_tombstone(req.group_id, topic.name, p.partition_index))
            topics.append(T(name=topic.name, partitions=parts))
        return OffsetDeleteResponse(topics=topics)

    def on_partitions_deleted(self, topic_partitions, res) -> int:
        """Tombstones for every group's offsets of the given (topic, partition)s, committed or
        pending in an open transaction (Kafka: one per store holding it, duplicates included)."""
        wanted: dict[str, set[int]] = {}
        for topic, partition in topic_partitions:
            wanted.setdefault(topic, set()).add(partition)
        n = 0
        for group_id, by_topic in self.offsets.items():
            for topic, parts in by_topic.items():
                gone = wanted.get(topic)
                if gone:
                    for partition in parts:
                        if partition in gone:
                            res.add_record(rec.offset_commit_tombstone(group_id, topic, partition))
                            n += 1
        for pending in self.pending_transactional_offsets.values():
            for group_id, topic, partition in pending:
                if partition in wanted.get(topic, ()):
                    res.add_record(rec.offset_commit_tombstone(group_id, topic, partition))
                    n += 1
        return n

    def delete_all_offsets(self, group_id: str, res) -> int:
        n = 0
        for topic, parts in self.offsets.get(group_id, {}).items():
            for partition in parts:
                res.add_record(rec.offset_commit_tombstone(group_id, topic, partition))
                n += 1
        # pending transactional offsets too; one tombstone per partition is enough (Kafka)
        for topic, partition in self._pending_partitions(group_id):
            if self.offset(group_id, topic, partition) is None:
                res.add_record(rec.offset_commit_tombstone(group_id, topic, partition))
                n += 1
        return n

    # == expiry (KIP-211) =========================================================================
    def cleanup_expired_offsets(self, group_id: str, res) -> bool:
        """Tombstone the group's expired offsets. True when no offsets remain afterwards."""
        by_topic = self.offsets.get(group_id)
        if not by_topic:
            return True
        group = self.groups[group_id]
        base = group.offset_expiration_condition()
        if base is None:
            return False
        now, retention = self.now, self.config.offsets_retention_ms
        all_expired = True
        for topic, parts in by_topic.items():
            if group.is_subscribed_to_topic(topic):
                all_expired = False
                continue
            for partition, o in parts.items():
                if o.expire_timestamp_ms is not None:
                    expired = now >= o.expire_timestamp_ms
                else:
                    expired = now - base(o) >= retention
                # not while a transactional offset of the partition is pending (Kafka)
                if expired and not self.has_pending_transactional_offsets(group_id, topic, partition):
                    res.add_record(rec.offset_commit_tombstone(group_id, topic, partition))
                else:
                    all_expired = False
        # a group with an open transaction stays
        return all_expired and not self._pending_partitions(group_id)
