"""A topic's compression.type other than "producer": client batches are stored in that codec
(Kafka's LogValidator recompresses), records, timestamps and producer fields unchanged."""
from __future__ import annotations

import pytest

from kgroup.protocol.records import Compression, Record, build_batch, decode_records
from kgroup.storage import LogConfig, PartitionLog
from tests.storage.helpers import T0


def stored(plog):
    return [(h.compression, h.producer_id, h.base_sequence, [(r.offset, r.key, r.value, r.timestamp)
                                                              for r in decode_records(b, h)])
            for h, b in plog.iter_batches()]


@pytest.mark.parametrize("topic_codec,codec", [("gzip", Compression.GZIP), ("zstd", Compression.ZSTD),
                                               ("uncompressed", Compression.NONE), ("lz4", Compression.LZ4)])
def test_client_batches_take_the_topic_codec(tmp_path, clock, topic_codec, codec):
    plog = PartitionLog(str(tmp_path / "t-0"), LogConfig(compression_type=topic_codec), clock=clock)
    recs = [Record(b"k%d" % i, b"value %d " % i * 20, (), T0 + i) for i in range(50)]
    plog.append(build_batch(recs, compression=Compression.SNAPPY, producer_id=7, producer_epoch=0, base_sequence=0))
    plog.append(build_batch(recs[:3], compression=codec, producer_id=7, producer_epoch=0, base_sequence=50))
    (c1, pid1, seq1, rs1), (c2, pid2, seq2, rs2) = stored(plog)
    assert (c1, pid1, seq1) == (codec, 7, 0) and (c2, seq2) == (codec, 50)
    assert [(k, v, ts) for _, k, v, ts in rs1] == [(r.key, r.value, r.timestamp) for r in recs]
    assert [o for o, *_ in rs1 + rs2] == list(range(53))
    # a retried batch is still recognised as a duplicate after recompression
    again = plog.append(build_batch(recs[:3], compression=Compression.SNAPPY, producer_id=7, producer_epoch=0,
                                    base_sequence=50))
    assert again.duplicate and again.base_offset == 50


def test_producer_keeps_what_the_client_sent(tmp_path, clock):
    plog = PartitionLog(str(tmp_path / "t-0"), LogConfig(), clock=clock)
    raw = build_batch([Record(b"k", b"v", (), T0)], compression=Compression.LZ4)
    plog.append(raw)
    (h, b), = plog.iter_batches()
    assert h.compression == Compression.LZ4 and bytes(b)[17:] == raw[17:]   # CRC and body as received
