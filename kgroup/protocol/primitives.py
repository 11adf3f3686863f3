"""Kafka's variable-length integers and other primitive helpers, shared by the message codec,
RecordBatch v2 and the consumer-protocol bytes.

Sans-IO: functions take a buffer (bytes/bytearray/memoryview) and a position and return
``(value, new_position)``; writers return ``bytes``. Small values (the common case) take a
one-byte fast path; only long varints loop.
"""
from __future__ import annotations

import struct

from .errors import ErrorCode, FixedCodeError

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")


class DecodeError(FixedCodeError, ValueError):
    """Bytes that do not form a valid message (truncated, bad length, overlong varint); a
    request that cannot be parsed is Kafka's InvalidRequestException."""
    code = ErrorCode.INVALID_REQUEST


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint (Kafka's UNSIGNED_VARINT), at most 5 bytes for 32-bit values
    and 10 for 64-bit ones."""
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        result = b & 0x7F
        shift = 7
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result, pos
            shift += 7
            if shift > 63:
                raise DecodeError("varint is too long")
    except IndexError:
        raise DecodeError("truncated varint") from None


def write_uvarint(n: int) -> bytes:
    if n < 0:
        raise ValueError(f"unsigned varint cannot hold {n}")
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_varint(buf, pos: int) -> tuple[int, int]:
    """Zig-zag signed varint (VARINT/VARLONG)."""
    n, pos = read_uvarint(buf, pos)
    return (n >> 1) ^ -(n & 1), pos


def write_varint(n: int) -> bytes:
    """Zig-zag encode a signed 64-bit value."""
    return write_uvarint((n << 1) ^ (n >> 63))


def uvarint_size(n: int) -> int:
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def varint_size(n: int) -> int:
    return uvarint_size((n << 1) ^ (n >> 63))
