"""Loading one ``__consumer_offsets`` partition into its shard (Kafka's CoordinatorLoaderImpl).

Only the last record of each key is replayed, in log order. That is exactly the state a
compacted log gives, which the loader must give anyway (the log cleaner may compact the
partition at any time), so skipping overwritten records changes nothing while sparing their
decoding and replay: most of a long-lived offsets log is commits overwritten by later commits of
the same group, topic and partition. A partition holding transactional batches (and their
markers) is replayed record by record, as before, since there a record's effect depends on the
marker that follows it. The generator yields after every batch read and every 256 records
replayed: the runtime gives the event loop a turn there when its time slice is up.
"""
from __future__ import annotations

from ..protocol.records import decode_records

_REPLAYS_PER_STEP = 256


def load_steps(shard, plog, replay_transactional):
    """Replay ``plog`` into ``shard``, yielding between steps; ``replay_transactional(shard,
    header, batch)`` replays a transactional batch or marker (TxnOffsetCommit's pending offsets).
    Raises what ``shard.replay`` raises (CoordinatorLoadError for a record that does not decode)."""
    latest: dict = {}           # key -> (offset, value) of its last record
    for header, batch in plog.iter_batches():
        if header.is_transactional or header.is_control:
            yield from _replay_all(shard, plog, replay_transactional)
            return
        for r in decode_records(batch, header):
            if r.key is not None:
                latest[r.key] = (r.offset, r.value)
        yield
    replay = shard.replay
    for n, (key, (offset, value)) in enumerate(sorted(latest.items(), key=_offset_of), 1):
        replay(key, value, offset)
        if n % _REPLAYS_PER_STEP == 0:
            yield


def _offset_of(item):
    return item[1][0]


def _replay_all(shard, plog, replay_transactional):
    for header, batch in plog.iter_batches():
        if header.is_transactional:
            replay_transactional(shard, header, batch)
        elif not header.is_control:
            for r in decode_records(batch, header):
                if r.key is not None:
                    shard.replay(r.key, r.value, r.offset)
        yield
