"""Fetch requests and their answers: Java's Fetcher/FetchCollector without fetch sessions.

:func:`build_fetch` makes one sessionless FetchRequest (session id 0, epoch -1, i.e. a full
fetch) per node for the partitions that node leads. :func:`parse_fetch` turns the response into
one :class:`CompletedFetch` per partition. :class:`CompletedFetch` decodes lazily, batch by
batch, so ``max.poll.records`` can stop in the middle and resume at the next poll: control
batches are skipped, records before the fetch offset (the head of a compressed batch) are
dropped, and with ``isolation.level=read_committed`` batches of aborted transactions are
filtered out using the response's aborted-transaction list, as Java's CompletedFetch does.
"""
from __future__ import annotations

import heapq
from typing import Iterator

from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.fetch import FetchRequest
from kgroup.protocol.records import CONTROL_ABORT, control_record_type, decode_records, iter_batches
from kgroup.protocol.schema import ZERO_UUID

from .assignors import TopicPartition
from .types import ConsumerRecord

FETCH_TOPIC_ID_VERSION = 13  # Fetch v13+ names topics by id


def build_fetch(partitions: list[tuple[TopicPartition, int, int]], topic_ids: dict[str, bytes], config,
                version_cap: int | None) -> tuple[FetchRequest, int | None]:
    """``partitions``: (tp, fetch offset, current leader epoch or -1). Returns the request and
    the highest usable version (topic ids present for all topics -> no cap, else v12)."""
    by_topic: dict[str, list] = {}
    for tp, offset, epoch in partitions:
        by_topic.setdefault(tp.topic, []).append(FetchRequest.FetchPartition(
            partition=tp.partition, current_leader_epoch=epoch, fetch_offset=offset, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=config["max.partition.fetch.bytes"]))
    use_ids = all(topic_ids.get(t, ZERO_UUID) != ZERO_UUID for t in by_topic)
    req = FetchRequest(
        replica_id=-1, max_wait_ms=config["fetch.max.wait.ms"], min_bytes=config["fetch.min.bytes"],
        max_bytes=config["fetch.max.bytes"],
        isolation_level=1 if config["isolation.level"] == "read_committed" else 0,
        session_id=0, session_epoch=-1,
        topics=[FetchRequest.FetchTopic(topic=t, topic_id=topic_ids.get(t, ZERO_UUID), partitions=ps)
                for t, ps in by_topic.items()],
        forgotten_topics_data=[], rack_id=config["client.rack"])
    cap = version_cap if use_ids else min(version_cap or 12, FETCH_TOPIC_ID_VERSION - 1)
    return req, cap


class CompletedFetch:
    """One partition's answer to one fetch."""

    def __init__(self, tp: TopicPartition, fetch_offset: int, error: ErrorCode, high_watermark: int,
                 records, aborted: list | None, read_committed: bool, log_start_offset: int = -1):
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.error = error
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.next_offset = fetch_offset
        self.last_epoch: int | None = None
        self._records = records
        self._read_committed = read_committed
        self._aborted_heap = [(a.first_offset, a.producer_id) for a in (aborted or [])]
        heapq.heapify(self._aborted_heap)
        self._aborted_producers: set[int] = set()
        self._iter: Iterator | None = None
        self._buffer: list = []
        self.bytes = 0 if records is None else len(records)

    @property
    def exhausted(self) -> bool:
        return self._iter is False and not self._buffer

    def _kept_batches(self):
        """The data batches a reader gets: past the position, not control, not aborted."""
        if self._records is None or len(self._records) == 0:
            return
        for _, header, batch in iter_batches(self._records):
            if header.next_offset <= self.next_offset:
                continue  # entirely before the position
            if self._read_committed and header.has_producer_id:
                # Java's CompletedFetch: a producer's transaction is aborted from the first offset
                # the broker lists for it up to its ABORT marker
                heap = self._aborted_heap
                while heap and heap[0][0] <= header.last_offset:
                    self._aborted_producers.add(heapq.heappop(heap)[1])
                if header.is_control:
                    for rec in decode_records(batch, header):
                        if control_record_type(rec.key) == CONTROL_ABORT:
                            self._aborted_producers.discard(header.producer_id)
                    self.next_offset = max(self.next_offset, header.next_offset)
                    continue
                if header.is_transactional and header.producer_id in self._aborted_producers:
                    self.next_offset = max(self.next_offset, header.next_offset)
                    continue
            if header.is_control:
                self.next_offset = max(self.next_offset, header.next_offset)
                continue
            yield header, batch

    def _batches(self):
        for header, batch in self._kept_batches():
            epoch = header.partition_leader_epoch
            tstype = int(header.timestamp_type)
            records = [r for r in decode_records(batch, header) if r.offset >= self.next_offset]
            yield header, epoch, tstype, records

    def take_columns(self, max_records: int, headers: bool = False):
        """The next whole batches, at least one, until they hold ``max_records`` records, decoded
        in bulk (:func:`record_columns.decode_batches`) with records before the position dropped;
        advances ``next_offset`` past the batches taken. None when nothing is left. Not to be
        mixed with :meth:`take` on the same fetch."""
        from kgroup.protocol.record_columns import decode_batches
        if self._iter is None:
            self._iter = self._kept_batches()
        if self._iter is False:
            return None
        position = self.next_offset  # the walk below moves next_offset past control batches
        taken = []
        count = 0
        while count < max_records:
            try:
                header, batch = next(self._iter)
            except StopIteration:
                self._iter = False
                break
            taken.append((header, batch))
            count += header.records_count
        if not taken:
            return None
        cols = decode_batches(taken, headers=headers)
        if len(cols) and cols.offset[0] < position:
            cols = cols.take(cols.offset >= position)
        last = taken[-1][0]
        self.next_offset = max(self.next_offset, last.next_offset)
        epoch = last.partition_leader_epoch
        self.last_epoch = None if epoch < 0 else epoch
        return cols

    def take(self, max_records: int, key_deserializer=None, value_deserializer=None) -> list[ConsumerRecord]:
        """Up to ``max_records`` records, advancing ``next_offset``."""
        out: list[ConsumerRecord] = []
        topic, partition = self.tp
        while len(out) < max_records:
            if not self._buffer:
                if self._iter is None:
                    self._iter = self._batches()
                if self._iter is False:
                    break
                try:
                    header, epoch, tstype, records = next(self._iter)
                except StopIteration:
                    self._iter = False
                    break
                self._buffer = [(r, epoch, tstype) for r in records]
                self._buffer.reverse()
                if not records:  # a batch with nothing left for us (compacted away)
                    self.next_offset = max(self.next_offset, header.next_offset)
                continue
            rec, epoch, tstype = self._buffer.pop()
            key, value = rec.key, rec.value
            if key_deserializer is not None and key is not None:
                key = key_deserializer(key)
            if value_deserializer is not None and value is not None:
                value = value_deserializer(value)
            out.append(ConsumerRecord(topic, partition, rec.offset, rec.timestamp, tstype, key, value,
                                      list(rec.headers), None if epoch < 0 else epoch))
            self.next_offset = rec.offset + 1
            self.last_epoch = None if epoch < 0 else epoch
        return out

    def drain(self) -> None:
        self._iter = False
        self._buffer = []


def parse_fetch(resp, requested: dict[TopicPartition, int], topic_names: dict[bytes, str],
                read_committed: bool) -> list[CompletedFetch]:
    out = []
    for t in resp.responses:
        name = t.topic if t.topic else topic_names.get(t.topic_id)
        if name is None:
            continue
        for p in t.partitions:
            tp = TopicPartition(name, p.partition_index)
            offset = requested.get(tp)
            if offset is None:
                continue
            out.append(CompletedFetch(tp, offset, ErrorCode(p.error_code), p.high_watermark, p.records,
                                      p.aborted_transactions, read_committed, p.log_start_offset))
    return out
