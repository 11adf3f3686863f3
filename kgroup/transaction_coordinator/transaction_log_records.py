"""``__transaction_state`` records (Kafka's TransactionLog): the key is int16 version 0 plus
TransactionLogKey; the value is int16 version plus TransactionLogValue; a null value is the
tombstone written when a transactional id expires.

We write value version 1 (Kafka with ``transaction.version`` >= 1): its tagged fields keep the
previous/next producer ids that KIP-360 retries and epoch-overflow rotation look at.
"""
from __future__ import annotations

import struct

from ..protocol.errors import ErrorCode, FixedCodeError
from ..protocol.offsets_records import TransactionLogKey, TransactionLogValue
from ..protocol.primitives import DecodeError, write_uvarint
from .metadata import TransactionMetadata, TransactionState

KEY_VERSION = 0
VALUE_VERSION = 1
_H = struct.Struct(">h")


class TransactionLogDecodeError(FixedCodeError):
    """A record that cannot be decoded; loading must fail rather than drop a transaction."""
    code = ErrorCode.CORRUPT_MESSAGE


def key_bytes(transactional_id: str) -> bytes:
    key = _KEYS.get(transactional_id)
    if key is None:
        if len(_KEYS) >= _KEYS_CACHED:
            _KEYS.clear()
        key = _KEYS[transactional_id] = TransactionLogKey(
            transactional_id=transactional_id).to_versioned_bytes(KEY_VERSION)
    return key


# Each transaction writes 3-4 records under one key: the keys of the ids in use are kept.
_KEYS: dict[str, bytes] = {}
_KEYS_CACHED = 4096


def value_bytes(m: TransactionMetadata) -> bytes:
    """TransactionLogValue version 1 of ``m``, byte for byte what the message definition encodes
    (``generic_value_bytes``), packed directly: one is written per step of every transaction.
    The flexible layout: producer id, epoch, timeout, status, the compact nullable array of
    partitions (null when Empty), the two timestamps, then the tagged fields whose value is
    not the default (0 previous and 1 next producer id, default -1; 2 client transaction
    version, default 0)."""
    if m.state is TransactionState.EMPTY:
        partitions = b"\x00"      # Kafka writes null for Empty
    else:
        partitions = _partitions_bytes(m.partitions)
    tags = []
    if m.previous_producer_id != -1:
        tags.append(_TAG_INT64.pack(0, 8, m.previous_producer_id))
    if m.next_producer_id != -1:
        tags.append(_TAG_INT64.pack(1, 8, m.next_producer_id))
    if m.client_transaction_version != 0:
        tags.append(_TAG_INT16.pack(2, 2, m.client_transaction_version))
    return b"".join((_VALUE_HEAD.pack(VALUE_VERSION, m.producer_id, m.producer_epoch, m.txn_timeout_ms, int(m.state)),
                     partitions,
                     _VALUE_TIMES.pack(m.txn_last_update_timestamp, m.txn_start_timestamp, len(tags)),
                     *tags))


_VALUE_HEAD = struct.Struct(">hqhib")
_VALUE_TIMES = struct.Struct(">qqB")     # + the number of tagged fields (at most 3: one byte)
_TAG_INT64 = struct.Struct(">BBq")
_TAG_INT16 = struct.Struct(">BBh")
_INT32S = [struct.Struct(f">{n}i") for n in range(64)]
# A transaction's Ongoing, Prepare and Complete records share one partition set (one frozenset
# object, hashed once): its encoding is kept for the sets in use.
_PARTITIONS: dict[frozenset, bytes] = {}
_PARTITIONS_CACHED = 4096


def _partitions_bytes(partitions: frozenset) -> bytes:
    out = _PARTITIONS.get(partitions)
    if out is None:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            by_topic.setdefault(topic, []).append(partition)
        parts = [write_uvarint(len(by_topic) + 1)]
        for topic, ids in by_topic.items():
            name = topic.encode("utf-8")
            parts += (write_uvarint(len(name) + 1), name, write_uvarint(len(ids) + 1),
                      (_INT32S[len(ids)] if len(ids) < 64 else struct.Struct(f">{len(ids)}i")).pack(*ids),
                      b"\x00")     # the PartitionsSchema's (empty) tagged fields
        out = b"".join(parts)
        if len(_PARTITIONS) >= _PARTITIONS_CACHED:
            _PARTITIONS.clear()
        _PARTITIONS[partitions] = out
    return out


def generic_value_bytes(m: TransactionMetadata) -> bytes:
    """``value_bytes`` through the message definition (the reference its packing is tested
    against)."""
    P = TransactionLogValue.PartitionsSchema
    if m.state is TransactionState.EMPTY:
        partitions = None
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(m.partitions):
            by_topic.setdefault(topic, []).append(partition)
        partitions = [P(topic=t, partition_ids=ps) for t, ps in by_topic.items()]
    return TransactionLogValue(
        producer_id=m.producer_id, previous_producer_id=m.previous_producer_id,
        next_producer_id=m.next_producer_id, producer_epoch=m.producer_epoch,
        transaction_timeout_ms=m.txn_timeout_ms, transaction_status=int(m.state),
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=m.txn_last_update_timestamp,
        transaction_start_timestamp_ms=m.txn_start_timestamp,
        client_transaction_version=m.client_transaction_version,
    ).to_versioned_bytes(VALUE_VERSION)


def decode_key(key) -> str | None:
    """The transactional id, or None for a key version we do not know (Kafka's UnknownKey:
    skipped by the loader)."""
    if key is None or len(key) < 2:
        raise TransactionLogDecodeError("transaction log key too short for its version")
    version = _H.unpack_from(key, 0)[0]
    if version != KEY_VERSION:
        return None
    try:
        return TransactionLogKey.decode(memoryview(key), version, 2)[0].transactional_id
    except DecodeError as e:
        raise TransactionLogDecodeError(f"cannot read transaction log key: {e}") from None


def decode_value(transactional_id: str, value) -> TransactionMetadata | None:
    """Kafka's readTxnRecordValue: None for a tombstone; partitions only when not Empty."""
    if value is None:
        return None
    if len(value) < 2:
        raise TransactionLogDecodeError("transaction log value too short for its version")
    version = _H.unpack_from(value, 0)[0]
    if not TransactionLogValue.VERSIONS[0] <= version <= TransactionLogValue.VERSIONS[1]:
        raise TransactionLogDecodeError(f"unknown transaction log value version {version}")
    try:
        v = TransactionLogValue.decode(memoryview(value), version, 2)[0]
        state = TransactionState(v.transaction_status)
    except (DecodeError, ValueError) as e:
        raise TransactionLogDecodeError(f"cannot read transaction log value: {e}") from None
    partitions: frozenset[tuple[str, int]] = frozenset()
    if state is not TransactionState.EMPTY and v.transaction_partitions:
        partitions = frozenset((p.topic, i) for p in v.transaction_partitions for i in p.partition_ids)
    return TransactionMetadata(
        transactional_id=transactional_id, producer_id=v.producer_id,
        previous_producer_id=v.previous_producer_id, next_producer_id=v.next_producer_id,
        producer_epoch=v.producer_epoch, txn_timeout_ms=v.transaction_timeout_ms, state=state,
        partitions=partitions, txn_start_timestamp=v.transaction_start_timestamp_ms,
        txn_last_update_timestamp=v.transaction_last_update_timestamp_ms,
        client_transaction_version=v.client_transaction_version)
