"""The ``__share_group_state`` records (Kafka's ShareCoordinatorRecordHelpers): a share-partition's
snapshot (type 0), an update (type 1), and the snapshot tombstone that deletes its state. Values
are version 0."""
from __future__ import annotations

from typing import NamedTuple

from ..coordinator.coordinator_records import CoordinatorRecord, RecordDecodeError, UnknownRecordType, read_version
from ..protocol import offsets_records as R
from ..protocol.primitives import DecodeError

SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1


class ShareGroupOffset(NamedTuple):
    """A share-partition's state (Kafka's ShareGroupOffset)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    state_batches: tuple           # (StateBatch, ...)
    create_timestamp: int
    write_timestamp: int


def _key(cls, record_type: int, group_id: str, topic_id: bytes, partition: int):
    k = cls(group_id=group_id, topic_id=topic_id, partition=partition)
    return k, k.to_versioned_bytes(record_type)


def snapshot_record(group_id: str, topic_id: bytes, partition: int, o: ShareGroupOffset) -> CoordinatorRecord:
    V = R.ShareSnapshotValue
    key, key_bytes = _key(R.ShareSnapshotKey, SHARE_SNAPSHOT, group_id, topic_id, partition)
    value = V(snapshot_epoch=o.snapshot_epoch, state_epoch=o.state_epoch, leader_epoch=o.leader_epoch,
              start_offset=o.start_offset, delivery_complete_count=o.delivery_complete_count,
              create_timestamp=o.create_timestamp, write_timestamp=o.write_timestamp,
              state_batches=[V.StateBatch(first_offset=b[0], last_offset=b[1], delivery_state=b[2],
                                          delivery_count=b[3]) for b in o.state_batches])
    return CoordinatorRecord(key_bytes, value.to_versioned_bytes(0), SHARE_SNAPSHOT, key, value)


def update_record(group_id: str, topic_id: bytes, partition: int, o: ShareGroupOffset) -> CoordinatorRecord:
    V = R.ShareUpdateValue
    key, key_bytes = _key(R.ShareUpdateKey, SHARE_UPDATE, group_id, topic_id, partition)
    value = V(snapshot_epoch=o.snapshot_epoch, leader_epoch=o.leader_epoch, start_offset=o.start_offset,
              delivery_complete_count=o.delivery_complete_count,
              state_batches=[V.StateBatch(first_offset=b[0], last_offset=b[1], delivery_state=b[2],
                                          delivery_count=b[3]) for b in o.state_batches])
    return CoordinatorRecord(key_bytes, value.to_versioned_bytes(0), SHARE_UPDATE, key, value)


def tombstone(group_id: str, topic_id: bytes, partition: int) -> CoordinatorRecord:
    key, key_bytes = _key(R.ShareSnapshotKey, SHARE_SNAPSHOT, group_id, topic_id, partition)
    return CoordinatorRecord(key_bytes, None, SHARE_SNAPSHOT, key, None)


def decode_record(key, value) -> CoordinatorRecord:
    """A ``__share_group_state`` record (its own table of record types, SHARE_STATE_RECORDS);
    UnknownRecordType for another type, RecordDecodeError for bytes that do not decode."""
    record_type = read_version(key, "key")
    schemas = R.SHARE_STATE_RECORDS.get(record_type)
    if schemas is None:
        raise UnknownRecordType(record_type)
    key_cls, value_cls = schemas
    try:
        key_struct, _ = key_cls.decode(memoryview(key), record_type, 2)
        if value is None:
            return CoordinatorRecord(bytes(key), None, record_type, key_struct, None)
        value_struct, _ = value_cls.decode(memoryview(value), read_version(value, "value"), 2)
    except DecodeError as e:
        raise RecordDecodeError(f"Could not read record of type {record_type} due to: {e}.") from None
    return CoordinatorRecord(bytes(key), bytes(value), record_type, key_struct, value_struct)
