"""Loading one ``__consumer_offsets`` partition into its shard (Kafka's CoordinatorLoaderImpl).

Only the last record of each key is replayed, in log order. That is exactly the state a
compacted log gives, which the loader must give anyway (the log cleaner may compact the
partition at any time), so skipping overwritten records changes nothing while sparing their
decoding and replay: most of a long-lived offsets log is commits overwritten by later commits of
the same group, topic and partition. A partition holding transactional batches (and their
markers) is replayed record by record, since there a record's effect depends on the
marker that follows it. The generator yields after every batch read and every 256 records
replayed: the runtime gives the event loop a turn there when its time slice is up.

The log is read as Kafka's CoordinatorLoaderImpl reads it: ``offsets.load.buffer.size`` bytes
at a time (``transaction.state.log.load.buffer.size`` for ``__transaction_state``; default
5 MiB), whole batches, at least one; a batch larger than the buffer is read whole (Kafka grows
its buffer to it, with a WARNING). So the log bytes held at once are bounded by the larger of
the buffer and the largest batch, whatever the partition's size.
"""
from __future__ import annotations

import logging

from ..protocol.records import ControlRecordType, control_record_type, decode_records, iter_batches

log = logging.getLogger("kgroup.coordinator_loader")
_REPLAYS_PER_STEP = 256
DEFAULT_LOAD_BUFFER_SIZE = 5 * 1024 * 1024


def read_batches(plog, buffer_size: int = DEFAULT_LOAD_BUFFER_SIZE):
    """``(header, batch)`` of every batch from the log start to the log end as the load began,
    read ``buffer_size`` bytes at a time (one larger batch alone)."""
    offset, end = plog.log_start_offset, plog.log_end_offset
    warned = False
    while offset < end:
        records = plog.read(offset, buffer_size, min_one_batch=True).records
        if not len(records):
            return
        if len(records) > buffer_size and not warned:
            warned = True
            log.warning("Loaded metadata from %s with buffer larger (%d bytes) than configured buffer "
                        "size (%d bytes)", plog.directory, len(records), buffer_size)
        for _, header, batch in iter_batches(records):
            yield header, batch
            offset = header.next_offset


def load_steps(shard, plog, buffer_size: int = DEFAULT_LOAD_BUFFER_SIZE):
    """Replay ``plog`` into ``shard``, yielding between steps. Raises what ``shard.replay``
    raises (CoordinatorLoadError for a record that does not decode)."""
    latest: dict = {}           # key -> (offset, value) of its last record
    # The records at or above the high watermark (not committed yet) are replayed one by one,
    # after the rest, so a shard reading at the committed offset learns what each one replaced.
    committed = plog.high_watermark
    tail: list = []
    for header, batch in read_batches(plog, buffer_size):
        if header.is_transactional or header.is_control:
            yield from _replay_all(shard, plog, buffer_size)
            return
        for r in decode_records(batch, header):
            if r.key is not None:
                if r.offset < committed:
                    latest[r.key] = (r.offset, r.value)
                else:
                    tail.append((r.key, (r.offset, r.value)))
        yield
    replay = shard.replay
    for n, (key, (offset, value)) in enumerate(sorted(latest.items(), key=_offset_of), 1):
        replay(key, value, offset)
        if n % _REPLAYS_PER_STEP == 0:
            yield
    for key, (offset, value) in tail:
        replay(key, value, offset)


def _offset_of(item):
    return item[1][0]


def replay_transactional(shard, header, batch) -> None:
    """A transactional batch holds pending records of its producer (TxnOffsetCommit's offsets),
    or is the producer's COMMIT/ABORT marker."""
    records = decode_records(batch, header)
    if header.is_control:
        for r in records:
            kind = control_record_type(r.key)
            if kind in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                shard.replay_end_transaction_marker(header.producer_id, kind == ControlRecordType.COMMIT, r.offset)
        return
    for r in records:
        if r.key is not None:
            shard.replay_transactional(header.producer_id, r.key, r.value, r.offset)


def _replay_all(shard, plog, buffer_size):
    for header, batch in read_batches(plog, buffer_size):
        if header.is_transactional:
            replay_transactional(shard, header, batch)
        elif not header.is_control:
            for r in decode_records(batch, header):
                if r.key is not None:
                    shard.replay(r.key, r.value, r.offset)
        yield
