"""The sans-IO half of the share consumer (KIP-932): Java's ShareSessionHandler, Acknowledgements,
ShareCompletedFetch and ShareFetch, without sockets or clocks.

:class:`ShareSessionHandler` is one share session with one broker (the leader of the partitions
fetched there): epoch 0 opens it, each answered request moves the epoch on, a request names the
partitions added to the session and the ones to forget (ForgottenTopicsData), -1 closes it. A
session the broker does not know (SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
SHARE_SESSION_LIMIT_REACHED) or a failed request starts a new one with epoch 0 - the broker then
releases what the old one held, so acknowledgements cannot ride on an epoch-0 request.

:class:`ShareCompletedFetch` is one partition's answer: the record batches as stored plus the
AcquiredRecords ranges (with delivery counts) that are this member's; records outside the ranges
are skipped, acquired offsets with no data record (control records, compacted away) are
acknowledged as GAP by the client, as Java's ShareCompletedFetch does.

:class:`InFlightRecords` is what the last poll returned and how each record was acknowledged;
:func:`acknowledgement_batches` turns ``{offset: type}`` into the protocol's batches.
"""
from __future__ import annotations

import logging
from bisect import bisect_left
from operator import attrgetter
from typing import Iterable

from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from kgroup.protocol.messages.share_fetch import ShareFetchRequest
from kgroup.protocol.records import decode_records, iter_batches

from .assignors import TopicPartition
from .errors import IllegalStateError
from .types import AcknowledgeType, ConsumerRecord

log = logging.getLogger("kgroup.client.share")

GAP = 0                 # the acknowledge type of an acquired offset with no record
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
ACQUIRE_MODES = {"batch_optimized": 0, "record_limit": 1}
SESSION_ERRORS = (ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                  ErrorCode.SHARE_SESSION_LIMIT_REACHED)

TopicIdPartition = tuple[bytes, int]     # (topic id, partition): how share requests name a partition


_offset = attrgetter("offset")


def next_epoch(epoch: int) -> int:
    """ShareRequestMetadata.nextEpoch: wraps to 1, never back to 0."""
    return 1 if epoch >= 2**31 - 1 else epoch + 1


def acknowledgement_batches(acks: dict[int, int]) -> list[tuple[int, int, list[int]]]:
    """``{offset: type}`` as ``(first, last, [type])`` runs of consecutive offsets of one type."""
    out: list[list] = []
    for offset in sorted(acks):
        t = acks[offset]
        if out and out[-1][1] == offset - 1 and out[-1][2] == t:
            out[-1][1] = offset
        else:
            out.append([offset, offset, t])
    return [(first, last, [t]) for first, last, t in out]


class ShareSessionHandler:
    """One share session with one node (Java's ShareSessionHandler). Per request: add what to
    fetch (:meth:`add_partition_to_fetch`) and acknowledge (:meth:`add_acknowledge_only`), build
    it, then feed back its outcome (:meth:`handle_response` / :meth:`handle_error`)."""

    def __init__(self, node_id: int, member_id: str):
        self.node_id = node_id
        self.member_id = member_id
        self.epoch = INITIAL_EPOCH
        self.session: dict[TopicIdPartition, TopicPartition] = {}
        self._next: dict[TopicIdPartition, TopicPartition] = {}
        self._acks: dict[TopicIdPartition, dict[int, int]] = {}

    @property
    def is_new_session(self) -> bool:
        return self.epoch == INITIAL_EPOCH

    def add_partition_to_fetch(self, tip: TopicIdPartition, tp: TopicPartition, acks: dict | None = None) -> None:
        self._next[tip] = tp
        if acks:
            self._acks[tip] = acks

    def add_acknowledge_only(self, tip: TopicIdPartition, acks: dict) -> None:
        self._acks[tip] = acks

    def build_fetch(self, group_id: str, config, can_skip: bool = False):
        """The next ShareFetch and the acknowledgements it carries (``{tip: {offset: type}}``),
        or ``(None, {})`` when ``can_skip`` and it would change nothing."""
        added: list[TopicIdPartition] = []
        removed: list[TopicIdPartition] = []
        if self.is_new_session:
            self.session = dict(self._next)
            added = list(self.session)
        else:
            for tip in list(self.session):
                if tip not in self._next:
                    del self.session[tip]
                    removed.append(tip)
            for tip, tp in self._next.items():
                if tip not in self.session:
                    self.session[tip] = tp
                    added.append(tip)
        acks, self._acks, self._next = self._acks, {}, {}
        if can_skip and not added and not removed and not acks:
            return None, {}
        renew = any(AcknowledgeType.RENEW in a.values() for a in acks.values())
        quiet = renew or can_skip   # acknowledgements / session changes only: acquire nothing, wait for nothing
        by_topic: dict[bytes, dict[int, list]] = {}
        for tip in added:
            by_topic.setdefault(tip[0], {}).setdefault(tip[1], [])
        for tip, a in acks.items():
            by_topic.setdefault(tip[0], {})[tip[1]] = [
                ShareFetchRequest.FetchTopic.FetchPartition.AcknowledgementBatch(
                    first_offset=f, last_offset=last, acknowledge_types=types)
                for f, last, types in acknowledgement_batches(a)]
        forgotten: dict[bytes, list[int]] = {}
        for topic_id, p in removed:
            forgotten.setdefault(topic_id, []).append(p)
        max_records = config["max.poll.records"]
        req = ShareFetchRequest(
            group_id=group_id, member_id=self.member_id, share_session_epoch=self.epoch,
            max_wait_ms=0 if quiet else config["fetch.max.wait.ms"],
            min_bytes=0 if quiet else config["fetch.min.bytes"],
            max_bytes=0 if quiet else config["fetch.max.bytes"],
            max_records=0 if quiet else max_records, batch_size=0 if quiet else max_records,
            share_acquire_mode=ACQUIRE_MODES[config["share.acquire.mode"]], is_renew_ack=renew,
            topics=[ShareFetchRequest.FetchTopic(topic_id=t, partitions=[
                ShareFetchRequest.FetchTopic.FetchPartition(
                    partition_index=p, partition_max_bytes=config["max.partition.fetch.bytes"],
                    acknowledgement_batches=b) for p, b in parts.items()]) for t, parts in by_topic.items()],
            forgotten_topics_data=[ShareFetchRequest.ForgottenTopic(topic_id=t, partitions=ps)
                                   for t, ps in forgotten.items()])
        return req, acks

    def build_acknowledge(self, group_id: str, acks: dict[TopicIdPartition, dict[int, int]], close: bool = False):
        """A ShareAcknowledge on this session (epoch -1 when ``close``: the session ends after it),
        or None on a new session (which a ShareAcknowledge cannot open)."""
        if self.is_new_session:
            return None
        by_topic: dict[bytes, list] = {}
        for (topic_id, p), a in acks.items():
            by_topic.setdefault(topic_id, []).append(ShareAcknowledgeRequest.AcknowledgeTopic.AcknowledgePartition(
                partition_index=p, acknowledgement_batches=[
                    ShareAcknowledgeRequest.AcknowledgeTopic.AcknowledgePartition.AcknowledgementBatch(
                        first_offset=f, last_offset=last, acknowledge_types=types)
                    for f, last, types in acknowledgement_batches(a)]))
        renew = any(AcknowledgeType.RENEW in a.values() for a in acks.values())
        return ShareAcknowledgeRequest(
            group_id=group_id, member_id=self.member_id,
            share_session_epoch=FINAL_EPOCH if close else self.epoch, is_renew_ack=renew,
            topics=[ShareAcknowledgeRequest.AcknowledgeTopic(topic_id=t, partitions=ps) for t, ps in by_topic.items()])

    def handle_response(self, error: ErrorCode) -> bool:
        """The answer's top-level error: False when the request failed (a session error starts a
        new session next time)."""
        if error in SESSION_ERRORS:
            log.info("Node %s could not use the share session at epoch %s: %s; opening a new one",
                     self.node_id, self.epoch, error.name)
            self.reset()
            return False
        self.epoch = next_epoch(self.epoch)
        return error == ErrorCode.NONE

    def handle_error(self, error: BaseException) -> None:
        """The request was not answered: the next one opens a new session (the broker replaces the
        old one, releasing its records)."""
        log.info("Share request to node %s at epoch %s failed: %r", self.node_id, self.epoch, error)
        self.reset()

    def reset(self) -> None:
        self.epoch = INITIAL_EPOCH
        self.session = {}


class ShareCompletedFetch:
    """One partition's ShareFetch answer, decoded lazily batch by batch."""

    def __init__(self, node_id: int, tp: TopicPartition, tip: TopicIdPartition, records, acquired,
                 decoded: dict | None = None):
        self.node_id = node_id
        # The broker answers the batches as stored: a big batch comes back with every ShareFetch
        # that acquires a slice of it. ``decoded`` keeps the last decoded batch per partition
        # (the consumer's), so each is decoded once, not once per fetch.
        self._decoded = decoded
        self.tp = tp
        self.tip = tip
        self._records = records
        ranges = sorted((a.first_offset, a.last_offset, a.delivery_count) for a in acquired)
        self._acquired: list[tuple[int, int]] = []
        seen: set[int] = set()
        for first, last, count in ranges:
            for o in range(first, last + 1):
                if o not in seen:       # overlapping ranges would be a broker bug: deliver once
                    seen.add(o)
                    self._acquired.append((o, count))
        self._next = 0                  # index into _acquired
        self._batches = None
        self.consumed = not self._acquired

    def take(self, max_records: int, key_deserializer=None, value_deserializer=None
             ) -> tuple[list[ConsumerRecord], list[int]]:
        """Records of whole batches until at least ``max_records`` (Java returns the rest of a
        batch it started), and the acquired offsets found to have no record (GAPs)."""
        out: list[ConsumerRecord] = []
        gaps: list[int] = []
        acquired = self._acquired
        if self.consumed:
            return out, gaps
        if self._batches is None:
            self._batches = iter_batches(self._records) if self._records else iter(())
        topic, partition = self.tp
        while len(out) < max_records and self._next < len(acquired):
            try:
                _, header, batch = next(self._batches)
            except StopIteration:
                break
            if header.last_offset < acquired[self._next][0]:
                continue                # nothing of ours in this batch
            if header.is_control:
                continue                # its offsets, if acquired, become GAPs below
            epoch = header.partition_leader_epoch
            epoch = None if epoch < 0 else epoch
            tstype = int(header.timestamp_type)
            decoded = self._decode(header, batch)
            start = bisect_left(decoded, acquired[self._next][0], key=_offset)
            for i in range(start, len(decoded)):
                rec = decoded[i]
                o = rec.offset
                while self._next < len(acquired) and acquired[self._next][0] < o:
                    gaps.append(acquired[self._next][0])
                    self._next += 1
                if self._next >= len(acquired):
                    break
                if acquired[self._next][0] != o:
                    continue            # not acquired by us
                key, value = rec.key, rec.value
                if key_deserializer is not None and key is not None:
                    key = key_deserializer(key)
                if value_deserializer is not None and value is not None:
                    value = value_deserializer(value)
                out.append(ConsumerRecord(topic, partition, o, rec.timestamp, tstype, key, value, list(rec.headers),
                                          epoch, acquired[self._next][1]))
                self._next += 1
            # offsets of this batch that were acquired but had no record (compacted away)
            while self._next < len(acquired) and acquired[self._next][0] <= header.last_offset:
                gaps.append(acquired[self._next][0])
                self._next += 1
        if len(out) < max_records:
            # the batches ran out: whatever is still acquired has no record
            gaps.extend(o for o, _ in acquired[self._next:])
            self._next = len(acquired)
        if self._next >= len(acquired):
            self.consumed = True
        return out, gaps

    def _decode(self, header, batch) -> list:
        cache = self._decoded
        if cache is None:
            return decode_records(batch, header)
        key = (header.base_offset, header.batch_length, header.crc)
        hit = cache.get(self.tp)
        if hit is not None and hit[0] == key:
            return hit[1]
        records = decode_records(batch, header)
        cache[self.tp] = (key, records)
        return records

    def remaining(self) -> list[int]:
        """The acquired offsets not yet returned (to release when the partition goes away)."""
        return [o for o, _ in self._acquired[self._next:]]


class InFlightRecords:
    """The records the last poll returned (Java's ShareFetch): per partition, the node they came
    from, and each offset's acknowledgement (None until acknowledged)."""

    def __init__(self):
        self.partitions: dict[TopicPartition, tuple[int, TopicIdPartition, dict[int, int | None]]] = {}
        self.records: list[ConsumerRecord] = []

    def add(self, cf: ShareCompletedFetch, records: list[ConsumerRecord], gaps: Iterable[int]) -> None:
        entry = self.partitions.get(cf.tp)
        if entry is None:
            entry = self.partitions[cf.tp] = (cf.node_id, cf.tip, {})
        offsets = entry[2]
        for r in records:
            offsets[r.offset] = None
        for o in gaps:
            offsets[o] = GAP
        self.records.extend(records)

    def __len__(self) -> int:
        return len(self.records)

    def acknowledge(self, tp: TopicPartition, offset: int, type_: int) -> None:
        entry = self.partitions.get(tp)
        if entry is None or offset not in entry[2] or entry[2][offset] == GAP:
            raise IllegalStateError(f"The record cannot be acknowledged: offset {offset} of {tp} is not in flight")
        if entry[2][offset] is not None and entry[2][offset] != AcknowledgeType.RENEW:
            raise IllegalStateError(f"The record at offset {offset} of {tp} has already been acknowledged")
        entry[2][offset] = int(type_)

    def acknowledge_all(self, type_: int) -> None:
        for _, _, offsets in self.partitions.values():
            for o, t in offsets.items():
                if t is None:
                    offsets[o] = int(type_)

    def all_acknowledged(self) -> bool:
        return all(t is not None for _, _, offsets in self.partitions.values() for t in offsets.values())

    def take_acknowledged(self) -> dict[int, dict[TopicIdPartition, dict[int, int]]]:
        """``{node: {tip: {offset: type}}}`` of every acknowledgement made, removed from here
        (RENEWed records stay in flight, unacknowledged again)."""
        out: dict[int, dict[TopicIdPartition, dict[int, int]]] = {}
        for tp, (node, tip, offsets) in list(self.partitions.items()):
            done = {o: t for o, t in offsets.items() if t is not None}
            if not done:
                continue
            out.setdefault(node, {}).setdefault(tip, {}).update(done)
            for o, t in done.items():
                if t == AcknowledgeType.RENEW:
                    offsets[o] = None
                else:
                    del offsets[o]
            if not offsets:
                del self.partitions[tp]
        if not self.partitions:
            self.records = []
        else:
            self.records = [r for r in self.records
                            if r.offset in self.partitions.get(TopicPartition(r.topic, r.partition), (0, 0, {}))[2]]
        return out
