"""RecordBatch v2 (magic 2): the on-wire and on-disk unit of Kafka data.

This module owns the batch header layout, CRC-32C, validation with Kafka's error meanings,
the in-place patches a leader makes on append (base offset, partition leader epoch,
LogAppendTime), building batches and decoding the records inside them.

Batches are served exactly as received: validation only reads, and the patches touch fixed
header fields (baseOffset and partitionLeaderEpoch lie outside the CRC; the max timestamp
and attributes do not, so changing them recomputes the CRC, as Kafka's
``DefaultRecordBatch.setMaxTimestamp`` does).

Error mapping (what Kafka 4.0 answers, see ``ByteBufferLogInputStream``,
``ProduceRequest.validateRecords`` and ``LogValidator``):

* ``CorruptRecordError`` -> CORRUPT_MESSAGE (2): bad CRC, a batch shorter than the v2 header,
  a magic outside 0..2.
* ``InvalidRecordError`` -> INVALID_RECORD (87): magic 0 or 1 (produce v3+ admits only magic 2;
  Kafka does not answer UNSUPPORTED_FOR_MESSAGE_FORMAT here), recordsCount inconsistent with
  lastOffsetDelta or with the records actually present, a malformed record, control batches or
  negative sequences from clients, keyless records on compacted topics.
* ``UnsupportedCompressionTypeError`` -> UNSUPPORTED_COMPRESSION_TYPE (76): zstd below Produce v7
  (raised by the produce handler).

All four codecs are dependencies (pyproject.toml), as Kafka ships its codec jars: gzip from the
standard library, snappy from cramjam (the engine python-snappy wraps), lz4 frames from
lz4, zstd from zstandard.
"""
from __future__ import annotations

import gzip
import os
import struct
import sys
import zlib
from dataclasses import dataclass
from enum import IntEnum
from typing import Iterator, NamedTuple, Sequence

import cramjam
import crcmod.predefined
import lz4.frame as lz4_frame
import zstandard

from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.primitives import (
    INT16,
    INT32,
    INT64,
    UINT32,
    DecodeError,
    read_varint,
    write_varint,
)

# --- layout -------------------------------------------------------------------------------

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
RECORD_BATCH_OVERHEAD = BATCH_HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted by batchLength
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
# Kafka's stream reader refuses sizes below the v0 record overhead before looking at magic.
_MIN_BATCH_LENGTH = 14

MAGIC_V2 = 2
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1
INT32_MAX = 2**31 - 1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

_ATTRS = INT16


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


_TIMESTAMP_TYPES = (TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME)


# --- errors -------------------------------------------------------------------------------


class RecordBatchError(KafkaError, ValueError):
    """Base of record validation failures, each a KafkaError with Kafka's code.
    ``record_errors`` lists ``(batch_index, message)`` for ProduceResponse v8+."""

    def __init__(self, message: str, record_errors: Sequence[tuple[int, str]] = ()):
        super().__init__(None, message)
        self.record_errors = list(record_errors)


class CorruptRecordError(RecordBatchError):
    code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(RecordBatchError):
    code = ErrorCode.INVALID_RECORD


class UnsupportedCompressionTypeError(RecordBatchError):
    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


# --- CRC-32C ------------------------------------------------------------------------------
#
# crcmod is the reference implementation (a table-driven C loop holding the GIL, a large share of
# the produce path's time: docs/benchmarks.md, "Data path"), so when the `crc32c` package is installed
# (SSE4.2 / ARMv8 CRC instructions, GIL released for large buffers) it is used instead, as
# Kafka itself uses the JVM's CRC32C intrinsic. It is
# checked against crcmod at import on Kafka's test vector and a batch-sized buffer, and tests
# compare the two on arbitrary inputs. KGROUP_CRC32C=crcmod forces crcmod.

crc32c_crcmod = crcmod.predefined.mkCrcFun("crc-32c")
crc32c_crcmod.__doc__ = "CRC-32C (Castagnoli) via crcmod, the reference implementation."


def _accelerated_crc32c():
    """The `crc32c` package when installed, enabled and agreeing with crcmod; else None."""
    if os.environ.get("KGROUP_CRC32C", "").lower() == "crcmod":
        return None
    try:
        import crc32c as accelerated
    except ImportError:
        return None
    probe = bytes(range(256)) * 257  # crosses the package's 32 KiB GIL-release threshold
    for data in (b"123456789", probe, memoryview(probe)[3:], bytearray(probe[:1000])):
        if accelerated.crc32c(data) != crc32c_crcmod(data):  # pragma: no cover - a broken build
            return None
    return accelerated


_accelerated = _accelerated_crc32c()
if _accelerated is not None:
    crc32c = _accelerated.crc32c
    CRC32C_IMPLEMENTATION = "crc32c " + ("(hardware)" if _accelerated.hardware_based else "(software)")
else:
    crc32c = crc32c_crcmod
    CRC32C_IMPLEMENTATION = "crcmod"


def crcmod_uses_c_extension() -> bool:
    """True when crcmod runs its C extension; the pure-Python fallback is ~100x slower, so the
    broker refuses to start on it when crcmod is the implementation in use."""
    mod = sys.modules.get("crcmod.crcmod")
    if mod is not None and getattr(mod, "_usingExtension", False):
        return True
    try:
        import crcmod._crcfunext  # noqa: F401
    except ImportError:
        return False
    return True


def crc32c_is_fast() -> bool:
    """True when the CRC-32C in use is native code (the accelerator, or crcmod's C extension)."""
    return _accelerated is not None or crcmod_uses_c_extension()


# --- header -------------------------------------------------------------------------------


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the batch occupies (header included)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        return _TIMESTAMP_TYPES[(self.attributes & TIMESTAMP_TYPE_MASK) >> 3]   # no Enum call per batch

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        # KIP-534: with the flag set, baseTimestamp carries the delete horizon.
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap from Int.MAX to 0 (DefaultRecordBatch.incrementSequence)."""
    if sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


_tuple_new = tuple.__new__     # BatchHeader._make without its Python frame (the struct has its 13 fields)


def read_batch_header(buf, pos: int = 0) -> BatchHeader:
    return _tuple_new(BatchHeader, BATCH_HEADER.unpack_from(buf, pos))


def iter_batches(buf, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader, memoryview]]:
    """Yield ``(position, header, batch_view)`` for each complete batch in ``buf[pos:end]``.

    Stops silently at a partial trailing batch, as Kafka's ``ByteBufferLogInputStream`` does
    (callers compare the last position + size with ``end`` to see what was left). Raises
    ``CorruptRecordError`` for an impossible length or magic and ``InvalidRecordError`` for
    magic 0/1.
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if end is None:
        end = len(view)
    unpack_from = BATCH_HEADER.unpack_from
    new = _tuple_new
    while end - pos >= LOG_OVERHEAD:
        length = INT32.unpack_from(view, pos + LENGTH_OFFSET)[0]
        if length < _MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"Record size {length} is less than the minimum record overhead ({_MIN_BATCH_LENGTH})")
        if end - pos < MAGIC_OFFSET + 1:
            return
        magic = view[pos + MAGIC_OFFSET]
        if magic > 127:
            magic -= 256
        if magic != MAGIC_V2:
            if 0 <= magic < MAGIC_V2:
                raise InvalidRecordError(
                    "Produce requests with version 3 and above are only allowed to contain record batches "
                    f"with magic version 2 (found magic {magic})")
            raise CorruptRecordError(f"Invalid magic found in record: {magic}")
        size = length + LOG_OVERHEAD
        if end - pos < size:
            return
        if size < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch size {size} is smaller than the v2 batch header ({RECORD_BATCH_OVERHEAD})")
        yield pos, new(BatchHeader, unpack_from(view, pos)), view[pos:pos + size]
        pos += size


def compute_batch_crc(batch) -> int:
    view = batch if isinstance(batch, memoryview) else memoryview(batch)
    return crc32c(view[ATTRIBUTES_OFFSET:])


class RecordsSummary(NamedTuple):
    """What a validation walk over uncompressed records learned."""
    count: int      # type: ignore[assignment]  # a field named count shadows tuple.count, on purpose
    min_timestamp: int
    max_timestamp: int
    has_null_key: bool


def validate_batch(header: BatchHeader, batch, *, check_records: bool = False) -> RecordsSummary | None:
    """Kafka's ``ensureValid`` (size and CRC-32C, CORRUPT_MESSAGE) and, with
    ``check_records``, the consistency checks possible without decompression (INVALID_RECORD):
    recordsCount against lastOffsetDelta, and for uncompressed batches the records actually
    present. Returns the records summary when the records were walked."""
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(f"Invalid magic found in record: {header.magic}")
    if header.size < RECORD_BATCH_OVERHEAD or len(batch) != header.size:
        raise CorruptRecordError(
            f"Record batch is corrupt (declared size {header.size}, available {len(batch)})")
    computed = compute_batch_crc(batch)
    if computed != header.crc:
        raise CorruptRecordError(
            f"Record is corrupt (stored crc = {header.crc}, computed crc = {computed})")
    if not check_records:
        return None
    return check_batch_records(header, batch)


def check_batch_records(header: BatchHeader, batch) -> RecordsSummary | None:
    """The INVALID_RECORD half of ``validate_batch`` (no CRC): Kafka's LogValidator count and
    offset-range checks, plus ``scan_records`` for uncompressed batches."""
    count = header.records_count
    if header.last_offset_delta < 0:
        raise InvalidRecordError(
            f"Batch has an invalid offset range: [{header.base_offset}, {header.last_offset}]")
    if count <= 0:
        raise InvalidRecordError(f"Invalid reported count for record batch: {count}")
    if header.last_offset_delta + 1 != count:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [{header.base_offset}, {header.last_offset}] "
            f"and count of records {count}")
    if header.compression != Compression.NONE:
        return None
    return scan_records(header, batch)


_ZZ = bytes([(((z >> 1) ^ -(z & 1)) + 64) if z < 128 else 0 for z in range(256)])  # 1-byte zigzag -> value+64
_HIGH = bytes(range(128, 256))
_RUN_PROBE = 8


def _scan_run(data, pos, plen, stride, k):
    """Records pos, pos+stride, ... (k of them, each ``stride`` bytes with a ``plen``-byte length)
    checked with strided slices: (min ts delta, max ts delta, null key) or None when their layout
    is not the common one (1-byte timestamp delta and key length, one offset-delta width)."""
    last = pos + k * stride
    t = bytes(data[pos + plen + 1:last:stride])
    if not t.isascii():
        return None
    o = pos + plen + 2
    w = 1
    while data[o + w - 1] & 0x80:
        w += 1
    room = stride - (plen + 3 + w)
    if room < 0:
        return None
    for j in range(w - 1):
        if bytes(data[o + j:last:stride]).translate(None, _HIGH):
            return None
    if not bytes(data[o + w - 1:last:stride]).isascii():
        return None
    kb = bytes(data[o + w:last:stride])
    if not kb.isascii():
        return None
    kd = kb.translate(_ZZ)
    if max(kd) - 64 > room:
        return None
    td = t.translate(_ZZ)
    return min(td) - 64, max(td) - 64, min(kd) < 64


def _scan_one(data, end: int) -> tuple[int, bool] | None:
    """(timestamp delta, null key) of the one record filling a batch exactly, in the usual layout
    (a 1-2 byte length, 1-byte timestamp delta and key length); None for anything else, which
    ``scan_records`` then walks (and refuses) as it walks any batch."""
    pos = RECORD_BATCH_OVERHEAD
    try:
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:
            z = (b & 0x7F) | (data[pos + 1] << 7)
            length = (z >> 1) ^ -(z & 1)
            pos += 2
        else:
            return None
        if length < 0 or pos + length != end:
            return None
        b = data[pos + 1]           # after the attributes: the timestamp delta
        if b >= 0x80:
            return None
        p = pos + 2
        while data[p] & 0x80:       # the offset delta
            p += 1
        b = data[p + 1]             # the key length
        if b >= 0x80:
            return None
        key_len = (b >> 1) ^ -(b & 1)
        p += 2
    except IndexError:
        return None
    if p > end or (key_len >= 0 and p + key_len > end):
        return None
    return (data[pos + 1] >> 1) ^ -(data[pos + 1] & 1), key_len < 0


def scan_records(header: BatchHeader, batch) -> RecordsSummary:
    if header.compression != Compression.NONE:
        raise ValueError("scan_records needs an uncompressed batch")
    data = batch if isinstance(batch, (bytes, memoryview)) else bytes(batch)
    pos = RECORD_BATCH_OVERHEAD
    end = len(data)
    base_ts = header.base_timestamp
    count = header.records_count
    if count == 1:      # a coordinator record, a marker, a one-record produce
        one = _scan_one(data, end)
        if one is not None:
            ts = base_ts + one[0]
            return RecordsSummary(1, ts, ts, one[1])
    min_delta = max_delta = 0
    null_key = False
    n = 0
    cooldown = 0  # records to parse one by one before looking for a run again
    try:
        while pos < end:
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                plen = 1
            elif data[pos + 1] < 0x80:
                z = (b & 0x7F) | (data[pos + 1] << 7)
                length = (z >> 1) ^ -(z & 1)
                plen = 2
            else:
                length, p2 = read_varint(data, pos)
                plen = p2 - pos
            stride = plen + length
            if cooldown:
                cooldown -= 1
            elif plen <= 2 and length > 0 and pos + _RUN_PROBE * stride <= end:
                probe = bytes(data[pos:pos + _RUN_PROBE * stride:stride])
                if probe == probe[:1] * _RUN_PROBE:
                    s1 = bytes(data[pos:end - (end - pos) % stride:stride])
                    k = len(s1) - len(s1.lstrip(s1[:1]))
                    if plen == 2:
                        s2 = bytes(data[pos + 1:pos + k * stride:stride])
                        k = min(k, len(s2) - len(s2.lstrip(s2[:1])))
                    if k >= _RUN_PROBE:
                        got = _scan_run(data, pos, plen, stride, k)
                        if got is not None:
                            lo, hi, nk = got
                            if min_delta is None:
                                min_delta, max_delta = lo, hi
                            else:
                                min_delta, max_delta = min(min_delta, lo), max(max_delta, hi)
                            null_key = null_key or nk
                            n += k
                            pos += k * stride
                            continue
                        cooldown = k  # an unusual layout: this run one by one
                    else:
                        cooldown = 32
                else:
                    cooldown = 32
            pos += plen
            rec_end = pos + length
            if length < 0 or rec_end > end:
                raise InvalidRecordError(f"Invalid record size {length} at record {n}")
            p = pos + 1
            b = data[p]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                ts_delta, p = read_varint(data, p)
            while data[p] & 0x80:
                p += 1
            p += 1
            b = data[p]
            if b < 0x80:
                key_len = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                key_len, p = read_varint(data, p)
            if p > rec_end:
                raise InvalidRecordError(f"Found invalid record structure at record {n}")
            if key_len < 0:
                null_key = True
            elif p + key_len > rec_end:
                raise InvalidRecordError(f"Found invalid record structure at record {n}")
            if n == 0:
                min_delta = max_delta = ts_delta
            elif ts_delta < min_delta:
                min_delta = ts_delta
            elif ts_delta > max_delta:
                max_delta = ts_delta
            pos = rec_end
            n += 1
    except (IndexError, DecodeError):
        raise InvalidRecordError(f"Found invalid record structure at record {n}") from None
    if n != count:
        raise InvalidRecordError(
            f"Batch declares {count} records but {n} were found (incorrect declared batch size)")
    if n == 0:
        return RecordsSummary(0, NO_TIMESTAMP, NO_TIMESTAMP, False)
    return RecordsSummary(n, base_ts + min_delta, base_ts + max_delta, null_key)


# --- in-place patches ---------------------------------------------------------------------


def patch_base_offset(batch, base_offset: int, pos: int = 0) -> None:
    """Offsets are assigned by rewriting baseOffset, which lies outside the CRC."""
    INT64.pack_into(batch, pos + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(batch, epoch: int, pos: int = 0) -> None:
    INT32.pack_into(batch, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(batch, timestamp_type: int, max_timestamp: int, pos: int = 0) -> bool:
    """Kafka's ``setMaxTimestamp``: rewrite the timestamp-type bit and maxTimestamp and
    recompute the CRC; a no-op (returns False) when both already match."""
    attrs = _ATTRS.unpack_from(batch, pos + ATTRIBUTES_OFFSET)[0]
    current = INT64.unpack_from(batch, pos + MAX_TIMESTAMP_OFFSET)[0]
    current_type = (attrs & TIMESTAMP_TYPE_MASK) >> 3
    if current_type == timestamp_type and current == max_timestamp:
        return False
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
    else:
        attrs &= ~TIMESTAMP_TYPE_MASK
    _ATTRS.pack_into(batch, pos + ATTRIBUTES_OFFSET, attrs)
    INT64.pack_into(batch, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    size = INT32.unpack_from(batch, pos + LENGTH_OFFSET)[0] + LOG_OVERHEAD
    view = memoryview(batch)
    UINT32.pack_into(batch, pos + CRC_OFFSET, crc32c(view[pos + ATTRIBUTES_OFFSET:pos + size]))
    return True


# --- compression --------------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def _zstd_decompress(data: bytes) -> bytes:
    # decompressobj copes with frames that omit the content size (Kafka's zstd-jni does).
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def _zstd_compress(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(data)    # Kafka's default zstd level


def compress(codec: int, data: bytes) -> bytes:
    if codec == Compression.NONE:
        return data
    if codec == Compression.GZIP:
        # Kafka's default gzip level is Deflater.DEFAULT_COMPRESSION (6); mtime 0 keeps builds stable.
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == Compression.SNAPPY:
        # Kafka writes xerial-framed snappy (snappy-java's SnappyOutputStream).
        parts = [_XERIAL_HEADER]
        for i in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[i:i + _XERIAL_BLOCK]))
            parts.append(INT32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec == Compression.LZ4:
        return lz4_frame.compress(data, block_size=lz4_frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                  content_checksum=False)
    if codec == Compression.ZSTD:
        return _zstd_compress(data)
    raise CorruptRecordError(f"Unknown compression type id: {codec}")


def decompress(codec: int, data) -> bytes:
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        try:
            return gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise InvalidRecordError(f"Failed to decompress gzip records: {e}") from None
    try:
        if codec == Compression.SNAPPY:
            data = bytes(data)
            if data[:8] != _XERIAL_MAGIC:
                return bytes(cramjam.snappy.decompress_raw(data))
            out = []
            pos = 16
            while pos < len(data):
                n = INT32.unpack_from(data, pos)[0]
                pos += 4
                out.append(bytes(cramjam.snappy.decompress_raw(data[pos:pos + n])))
                pos += n
            return b"".join(out)
        if codec == Compression.LZ4:
            return lz4_frame.decompress(bytes(data))
        if codec == Compression.ZSTD:
            return _zstd_decompress(bytes(data))
    except RecordBatchError:
        raise
    except Exception as e:  # codec libraries raise their own error types
        raise InvalidRecordError(f"Failed to decompress {Compression(codec).name} records: {e}") from None
    raise CorruptRecordError(f"Unknown compression type id: {codec}")


# --- records ------------------------------------------------------------------------------


@dataclass(slots=True)
class Record:
    """One record. For ``build_batch`` ``offset`` < 0 means "next in the batch" and
    ``timestamp`` is absolute; ``decode_records`` fills both absolutely."""
    key: bytes | None = None
    value: bytes | None = None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int = NO_TIMESTAMP
    offset: int = -1


# zig-zag varints for small values are looked up, not computed: lengths and deltas of most
# records (coordinator records, small messages) fall in this range.
_SMALL_MIN, _SMALL_MAX = -64, 1024
_SMALL_VARINTS = [write_varint(i) for i in range(_SMALL_MIN, _SMALL_MAX)]


def _varint(n: int) -> bytes:
    if _SMALL_MIN <= n < _SMALL_MAX:
        return _SMALL_VARINTS[n - _SMALL_MIN]
    return write_varint(n)


_NULL = _varint(-1)


def _put_bytes(body: bytearray, data) -> None:
    """A record field of varint-length bytes, -1 for null."""
    if data is None:
        body += _NULL
    else:
        body += _varint(len(data))
        body += data


def _encode_record(out: bytearray, offset_delta: int, ts_delta: int, key, value, headers) -> None:
    # Runs once per record: the common header-less record is built without helper calls.
    if headers or key is None or value is None or not (
            0 <= offset_delta < _SMALL_MAX and _SMALL_MIN <= ts_delta < _SMALL_MAX
            and len(key) < _SMALL_MAX and len(value) < _SMALL_MAX):
        body = bytearray(b"\x00")  # attributes: unused in v2
        body += _varint(ts_delta)
        body += _varint(offset_delta)
        _put_bytes(body, key)
        _put_bytes(body, value)
        body += _varint(len(headers))
        for hkey, hvalue in headers:
            _put_bytes(body, hkey.encode("utf-8") if isinstance(hkey, str) else bytes(hkey))
            _put_bytes(body, hvalue)
    else:
        v = _SMALL_VARINTS
        small = b"".join((b"\x00", v[ts_delta - _SMALL_MIN], v[offset_delta - _SMALL_MIN],
                          v[len(key) - _SMALL_MIN], key, v[len(value) - _SMALL_MIN], value, b"\x00"))
        out += _varint(len(small))
        out += small
        return
    out += _varint(len(body))
    out += body


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    compression: int = Compression.NONE,
    timestamp_type: int = TimestampType.CREATE_TIME,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Encode one RecordBatch v2.

    ``max_timestamp`` overrides the computed maximum (LogAppendTime batches carry the append
    time there; empty batches carry the original batch's). ``last_offset_delta`` keeps the
    original offset range when records were removed (the log cleaner does that), and
    ``delete_horizon_ms`` sets the KIP-534 flag, with baseTimestamp holding the horizon.
    """
    body = bytearray()
    if records:
        first_ts = records[0].timestamp
        base_ts = delete_horizon_ms if delete_horizon_ms is not None else first_ts
        max_ts = NO_TIMESTAMP
        delta = -1
        for i, rec in enumerate(records):
            delta = rec.offset - base_offset if rec.offset >= 0 else i
            ts = rec.timestamp
            if ts > max_ts:
                max_ts = ts
            _encode_record(body, delta, ts - base_ts, rec.key, rec.value, rec.headers)
        if last_offset_delta is None:
            last_offset_delta = delta
    else:
        base_ts = delete_horizon_ms if delete_horizon_ms is not None else (
            max_timestamp if max_timestamp is not None else NO_TIMESTAMP)
        max_ts = NO_TIMESTAMP
        if last_offset_delta is None:
            last_offset_delta = 0
    if max_timestamp is not None:
        max_ts = max_timestamp
    return frame_batch(body, len(records), base_offset=base_offset, base_timestamp=base_ts, max_timestamp=max_ts,
                       last_offset_delta=last_offset_delta, producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=base_sequence, compression=compression, timestamp_type=timestamp_type,
                       is_transactional=is_transactional, is_control=is_control,
                       partition_leader_epoch=partition_leader_epoch, has_delete_horizon=delete_horizon_ms is not None)


def frame_batch(body, count: int, *, base_offset: int, base_timestamp: int, max_timestamp: int,
                last_offset_delta: int, producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                base_sequence: int = NO_SEQUENCE, compression: int = Compression.NONE,
                timestamp_type: int = TimestampType.CREATE_TIME, is_transactional: bool = False,
                is_control: bool = False, partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                has_delete_horizon: bool = False) -> bytes:
    """A RecordBatch v2 around ``body``, the encoded (uncompressed) records: compression, the
    header and its CRC-32C. ``build_batch`` and bulk encoders both end here."""
    base_ts, max_ts = base_timestamp, max_timestamp
    payload = body if compression == Compression.NONE else compress(compression, bytes(body))
    attributes = compression & COMPRESSION_MASK
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if has_delete_horizon:
        attributes |= DELETE_HORIZON_MASK
    out = bytearray(RECORD_BATCH_OVERHEAD)
    out += payload
    BATCH_HEADER.pack_into(
        out, 0, base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch, MAGIC_V2, 0,
        attributes, last_offset_delta, base_ts, max_ts, producer_id, producer_epoch,
        base_sequence, count)
    UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def decode_records(batch, header: BatchHeader | None = None) -> list[Record]:
    """All records of one batch with absolute offsets and timestamps (LogAppendTime batches
    give every record the batch's maxTimestamp, as Kafka does). Decompresses as needed."""
    if header is None:
        header = read_batch_header(batch)
    view = batch if isinstance(batch, memoryview) else memoryview(batch)
    if header.compression == Compression.NONE:
        data = bytes(view[RECORD_BATCH_OVERHEAD:header.size])
    else:
        data = decompress(header.compression, view[RECORD_BATCH_OVERHEAD:header.size])
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else None
    count = header.records_count
    out: list[Record] = []
    append = out.append
    pos = 0
    end = len(data)
    i = 0
    try:
        for i in range(count):
            length, pos = read_varint(data, pos)
            rec_end = pos + length
            if length < 0 or rec_end > end:
                raise InvalidRecordError(f"Invalid record size {length} at record {i}")
            pos += 1  # attributes
            b = data[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                ts_delta, pos = read_varint(data, pos)
            b = data[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                off_delta, pos = read_varint(data, pos)
            klen, pos = read_varint(data, pos)
            if klen < 0:
                key = None
            else:
                key = data[pos:pos + klen]
                pos += klen
            vlen, pos = read_varint(data, pos)
            if vlen < 0:
                value = None
            else:
                value = data[pos:pos + vlen]
                pos += vlen
            nheaders, pos = read_varint(data, pos)
            if nheaders < 0:
                raise InvalidRecordError(f"Found invalid number of record headers {nheaders}")
            headers = []
            for _ in range(nheaders):
                hklen, pos = read_varint(data, pos)
                if hklen < 0:
                    raise InvalidRecordError(f"Invalid negative header key size {hklen}")
                hkey = data[pos:pos + hklen].decode("utf-8")
                pos += hklen
                hvlen, pos = read_varint(data, pos)
                if hvlen < 0:
                    hvalue = None
                else:
                    hvalue = data[pos:pos + hvlen]
                    pos += hvlen
                headers.append((hkey, hvalue))
            if pos != rec_end:
                raise InvalidRecordError(
                    f"Invalid record size: expected to read {length} bytes in record payload, "
                    f"but instead read {length - (rec_end - pos)}")
            append(Record(key, value, headers,
                          log_append if log_append is not None else base_ts + ts_delta,
                          base_offset + off_delta))
    except (IndexError, DecodeError, UnicodeDecodeError):
        raise InvalidRecordError(f"Found invalid record structure at record {i}") from None
    if pos != end:
        raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")
    return out


# Control records (transaction markers): key = version int16 + type int16 (0 abort, 1 commit);
# value = version int16 + coordinatorEpoch int32.
CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


class ControlRecordType(IntEnum):
    """Kafka's ControlRecordType: the int16 after the version in a control record's key. Only
    ABORT and COMMIT end transactions; LEADER_CHANGE and the later types are KRaft's (a broker
    never sees them; ``control_record_type`` returns any type as its number)."""
    ABORT = CONTROL_ABORT
    COMMIT = CONTROL_COMMIT
    LEADER_CHANGE = 2


class EndTransactionMarker(NamedTuple):
    control_type: int
    coordinator_epoch: int


def end_transaction_marker_record(control_type: int, coordinator_epoch: int, timestamp: int) -> Record:
    return Record(_CONTROL_KEY.pack(0, control_type), _MARKER_VALUE.pack(0, coordinator_epoch), (), timestamp)


def read_end_transaction_marker(record: Record) -> EndTransactionMarker:
    if record.key is None or len(record.key) < 4 or record.value is None or len(record.value) < 6:
        raise InvalidRecordError("Invalid end transaction marker record")
    _, control_type = _CONTROL_KEY.unpack_from(record.key)
    _, coordinator_epoch = _MARKER_VALUE.unpack_from(record.value)
    return EndTransactionMarker(control_type, coordinator_epoch)


def build_end_txn_marker_batch(producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int,
                               timestamp: int, *, base_offset: int = 0,
                               partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """The control batch that ends a transaction on one partition (Kafka's
    MemoryRecords.withEndTransactionMarker): transactional + control attribute bits, the
    producer's id and epoch, no sequence, one record whose key is the ControlRecordType and
    whose value is the EndTransactionMarker. Its layout is fixed (what ``build_batch`` makes of
    ``end_transaction_marker_record``), so it is packed in one go: a coordinator writes one per
    partition of every transaction."""
    out = bytearray(_MARKER_BATCH_SIZE)
    BATCH_HEADER.pack_into(out, 0, base_offset, _MARKER_BATCH_SIZE - LOG_OVERHEAD, partition_leader_epoch,
                           MAGIC_V2, 0, _MARKER_ATTRIBUTES, 0, timestamp, timestamp, producer_id,
                           producer_epoch, NO_SEQUENCE, 1)
    _MARKER_RECORD.pack_into(out, RECORD_BATCH_OVERHEAD, _MARKER_RECORD_PREFIX, 0,
                             CONTROL_COMMIT if committed else CONTROL_ABORT, 12, 0, coordinator_epoch, 0)
    UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


# The one record of an end-transaction marker batch: length 16 (zigzag 0x20), attributes 0,
# timestamp and offset deltas 0, key length 4 (zigzag 8), the key (version 0, control type), value
# length 6 (zigzag 12), the value (version 0, coordinator epoch), no headers.
_MARKER_RECORD = struct.Struct(">5shhbhib")
_MARKER_RECORD_PREFIX = b"\x20\x00\x00\x00\x08"
_MARKER_BATCH_SIZE = RECORD_BATCH_OVERHEAD + _MARKER_RECORD.size
_MARKER_ATTRIBUTES = TRANSACTIONAL_MASK | CONTROL_MASK


def read_end_txn_marker_fields(batch, header: BatchHeader) -> tuple[int, int, int] | None:
    """(control type, coordinator epoch, timestamp) of a marker batch in the layout
    ``build_end_txn_marker_batch`` writes (every Kafka client and broker writes that one), or
    None for any other layout (then decode its records)."""
    if header.batch_length != _MARKER_BATCH_SIZE - LOG_OVERHEAD or header.records_count != 1 \
            or header.attributes & COMPRESSION_MASK:
        return None
    prefix, version, control_type, value_len, value_version, coordinator_epoch, headers = \
        _MARKER_RECORD.unpack_from(batch, RECORD_BATCH_OVERHEAD)
    if prefix != _MARKER_RECORD_PREFIX or value_len != 12 or headers != 0 or version < 0:
        return None
    timestamp = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_MASK else header.base_timestamp
    return control_type, coordinator_epoch, timestamp


def control_record_type(key) -> int:
    """ControlRecordType.parse: the type in a control record's key (unknown types are returned
    as they are; a key shorter than version + type is invalid)."""
    if key is None or len(key) < 4:
        raise InvalidRecordError("Invalid value size found for control record key")
    version, kind = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise InvalidRecordError(f"Invalid version found for control record: {version}")
    return kind


def read_end_txn_marker_batch(batch, header: BatchHeader | None = None) -> EndTransactionMarker | None:
    """The EndTransactionMarker of a COMMIT/ABORT control batch; None for any other batch
    (data, another control type, or a marker the cleaner emptied)."""
    if header is None:
        header = read_batch_header(batch)
    if not header.is_control or header.records_count == 0:
        return None
    records = decode_records(batch, header)
    if not records or control_record_type(records[0].key) not in (CONTROL_ABORT, CONTROL_COMMIT):
        return None
    return read_end_transaction_marker(records[0])
