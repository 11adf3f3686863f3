"""The ``__consumer_offsets`` records (Kafka's CoordinatorRecord): key/value framing, builders and the
loader's decoder. The log's RecordBatch format they travel in is ``kgroup.protocol.records``.

A record key is ``int16 record type`` followed by the key struct; a value is ``int16 version``
followed by the value struct at that version; a null value is a tombstone (Kafka's
CoordinatorRecordSerde). Record types here: 0 legacy offset commit, 1 offset commit, 2 group
metadata; the KIP-848 ones (3-8, 16) are decoded by consumer_group/consumer_group_records.py,
and the loader skips any type neither knows (CoordinatorLoaderImpl logs and ignores
UnknownRecordType).

What Kafka writes, and so what we write:
- OffsetCommitKey with record type 1;
- OffsetCommitValue v3 (offset, leader epoch, metadata, commit timestamp), or v1 (offset,
  metadata, commit timestamp, expire timestamp) when the commit carried a retention time;
- GroupMetadataKey with record type 2; GroupMetadataValue v3.
"""
from __future__ import annotations

import struct
from typing import Any, NamedTuple

from ..protocol.errors import ErrorCode, FixedCodeError
from ..protocol.offsets_records import (CLASSIC_RECORD_TYPES, RECORD_SCHEMAS, GroupMetadataKey,
                                        GroupMetadataValue, OffsetCommitKey, OffsetCommitValue)
from ..protocol.primitives import DecodeError

LEGACY_OFFSET_COMMIT = 0
OFFSET_COMMIT = 1
GROUP_METADATA = 2
GROUP_METADATA_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE = 1

_H = struct.Struct(">h")


class UnknownRecordType(FixedCodeError):
    """A key whose record type this coordinator does not know; the loader skips the record
    (never an answer: no code fits)."""
    code = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, record_type: int):
        super().__init__(f"unknown record type {record_type}")
        self.record_type = record_type


class RecordDecodeError(FixedCodeError):
    """A record that cannot be decoded; loading must fail rather than drop state."""
    code = ErrorCode.CORRUPT_MESSAGE


class CoordinatorLoadError(FixedCodeError):
    """Loading a ``__consumer_offsets`` partition failed on a record that cannot be decoded;
    names the partition and offset."""
    code = ErrorCode.CORRUPT_MESSAGE

    def __init__(self, partition: int, offset, cause: Exception):
        super().__init__(f"Deserializing record at offset {offset} of __consumer_offsets-{partition} "
                         f"failed due to: {cause}")
        self.partition = partition
        self.offset = offset
        self.cause = cause


class CoordinatorRecord(NamedTuple):
    """One record to append: the bytes Kafka writes plus the decoded form (for live replay)."""

    key: bytes
    value: bytes | None
    record_type: int
    key_struct: Any             # a generated message class of offsets_records (its fields vary)
    value_struct: Any | None


_commit_keys: dict[tuple[str, str, int], tuple[bytes, object]] = {}


def _offset_commit_key(group: str, topic: str, partition: int) -> tuple[bytes, object]:
    """(key bytes, key struct) of an offset commit; the same few keys are written over and over,
    so they are encoded once (a bounded cache; the structs are never mutated)."""
    k = (group, topic, partition)
    hit = _commit_keys.get(k)
    if hit is None:
        if len(_commit_keys) >= 65536:
            _commit_keys.clear()
        key = OffsetCommitKey(group=group, topic=topic, partition=partition)
        hit = _commit_keys[k] = (key.to_versioned_bytes(OFFSET_COMMIT), key)
    return hit


def offset_commit_record(group: str, topic: str, partition: int, offset: int, leader_epoch: int,
                         metadata: str, commit_timestamp_ms: int,
                         expire_timestamp_ms: int | None) -> CoordinatorRecord:
    hit = _commit_keys.get((group, topic, partition))     # the cache hit inline: once per commit
    key_bytes, key = hit if hit is not None else _offset_commit_key(group, topic, partition)
    version = (OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE if expire_timestamp_ms is not None
               else OFFSET_COMMIT_VALUE_VERSION)
    value = OffsetCommitValue(offset=offset, leader_epoch=leader_epoch, metadata=metadata,
                              commit_timestamp=commit_timestamp_ms,
                              expire_timestamp=-1 if expire_timestamp_ms is None else expire_timestamp_ms)
    value_bytes = value.to_versioned_bytes(version)
    if version == OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRE:
        value.leader_epoch = -1  # v1 has no leader epoch: what replay will see
    return CoordinatorRecord(key_bytes, value_bytes, OFFSET_COMMIT, key, value)


def offset_commit_tombstone(group: str, topic: str, partition: int) -> CoordinatorRecord:
    key = OffsetCommitKey(group=group, topic=topic, partition=partition)
    return CoordinatorRecord(key.to_versioned_bytes(OFFSET_COMMIT), None, OFFSET_COMMIT, key, None)


def group_metadata_record(group_id: str, value: GroupMetadataValue) -> CoordinatorRecord:
    key = GroupMetadataKey(group=group_id)
    return CoordinatorRecord(key.to_versioned_bytes(GROUP_METADATA),
                             value.to_versioned_bytes(GROUP_METADATA_VALUE_VERSION),
                             GROUP_METADATA, key, value)


def group_metadata_tombstone(group_id: str) -> CoordinatorRecord:
    key = GroupMetadataKey(group=group_id)
    return CoordinatorRecord(key.to_versioned_bytes(GROUP_METADATA), None, GROUP_METADATA, key, None)


def read_version(buf, what: str) -> int:
    """The int16 a key (its record type) or a value (its version) starts with."""
    if buf is None or len(buf) < 2:
        raise RecordDecodeError(f"Could not read version from {what}'s buffer.")
    return _H.unpack_from(buf, 0)[0]


def decode_record(key: bytes, value: bytes | None) -> CoordinatorRecord:
    """Decode a ``__consumer_offsets`` record. Raises UnknownRecordType for a type we do not
    know (skip it) and RecordDecodeError for bytes that do not decode (fail the load).
    Trailing bytes are tolerated, as Kafka's readers do."""
    record_type = read_version(key, "key")
    if record_type not in CLASSIC_RECORD_TYPES:
        raise UnknownRecordType(record_type)
    return decode_structs(record_type, key, value)


def decode_structs(record_type: int, key, value) -> CoordinatorRecord:
    """A record of a type in ``offsets_records.RECORD_SCHEMAS``: its key struct (at the record
    type's version) and, unless a tombstone, its value struct at the version the value starts with."""
    key_cls, value_cls = RECORD_SCHEMAS[record_type]
    try:
        key_struct, _ = key_cls.decode(memoryview(key), record_type, 2)
    except DecodeError as e:
        raise RecordDecodeError(f"Could not read record with version {record_type} from key's "
                                f"buffer due to: {e}.") from None
    if value is None:
        return CoordinatorRecord(bytes(key), None, record_type, key_struct, None)
    version = read_version(value, "value")
    if record_type == LEGACY_OFFSET_COMMIT and version != 0:
        raise RecordDecodeError(f"Could not read record with version {version} from value's "
                                f"buffer due to: legacy offset commit values only have version 0.")
    try:
        value_struct, _ = value_cls.decode(memoryview(value), version, 2)
    except DecodeError as e:        # e.g. "<Value class> has no version N"
        raise RecordDecodeError(f"Could not read record with version {version} from value's "
                                f"buffer due to: {e}.") from None
    return CoordinatorRecord(bytes(key), bytes(value), record_type, key_struct, value_struct)
