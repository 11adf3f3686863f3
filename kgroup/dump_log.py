"""``kgroup dump-log``: print what a partition's files hold, like Kafka's ``kafka-dump-log.sh``.

    kgroup dump-log [--files] PATH... [--print-data-log] [--deep-iteration]
                    [--offsets-decoder | --share-group-state-decoder] [--skip-record-metadata]

For a segment (``.log``) one line per batch, in Kafka's wording::

    baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1
    producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false
    deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 size: 120 magic: 2
    compresscodec: none crc: 123456789 isvalid: true

(one line in the output). ``--deep-iteration`` adds a ``| offset: ...`` line per record;
``--print-data-log`` adds its key and payload as UTF-8 text; ``--offsets-decoder`` (implies
both) decodes ``__consumer_offsets`` records as Kafka's OffsetsMessageParser does: the key as
``{"type":"<record type>","data":{...}}``, the value as ``{"version":"<v>","data":{...}}`` with
Kafka's camelCase field names, a consumer group's member subscriptions and assignments
decoded, a tombstone as ``<DELETE>``, an unknown record type as ``Unknown record type N at
offset O, skipping.``; KIP-848's consumer group records (types 3-8, 16) and KIP-932's share
group records (types 10-15) print the same way. ``--share-group-state-decoder`` decodes
``__share_group_state`` records (ShareSnapshot 0, ShareUpdate 1) the same way, as Kafka's
ShareGroupStateMessageParser.
Bytes that do not form a batch at the end of the file are reported as ``Found N invalid bytes
at the end of FILE``. Offset (``.index``) and time (``.timeindex``) indexes print their entries,
aborted transaction indexes (``.txnindex``) their aborted transactions. Only reads: safe to run
against a live broker's files.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import struct
import sys

from .protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from .protocol.offsets_records import RECORD_SCHEMAS, SHARE_STATE_RECORDS, GroupMetadataValue
from .protocol.records import (CONTROL_ABORT, CONTROL_COMMIT, Compression,
                               RecordBatchError, TimestampType, decode_records, increment_sequence,
                               iter_batches, read_end_transaction_marker, validate_batch)
from .storage.txn_index import ENTRY as TXN_ENTRY

_H = struct.Struct(">h")
_TIMESTAMP_TYPE = {TimestampType.CREATE_TIME: "CreateTime", TimestampType.LOG_APPEND_TIME: "LogAppendTime"}


# -- JSON as Kafka's generated JsonConverters write it ---------------------------------------------

def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _in(rng, v: int) -> bool:
    return rng is not None and rng[0] <= v <= rng[1]


def to_json(obj, version: int) -> dict:
    """The fields of ``obj`` present at ``version``, camelCase, bytes as base64 (Jackson's
    BinaryNode), nested structs and arrays recursively. A tagged field appears only when it is not
    its default, as in Kafka's generated JsonConverters."""
    out = {}
    for f in type(obj).FIELDS:
        if not _in(f.versions, version):
            continue
        value = getattr(obj, f.name)
        if _in(f.tagged, version) and value == (f.struct() if f.is_struct and not f.is_array
                                                 and f.default != "null" else f.default_value()):
            continue
        out[_camel(f.name)] = _json_value(f, value, version)
    return out


def _json_value(f, value, version):
    if value is None:
        return None
    if f.is_array:
        if f.is_struct:
            return [to_json(v, version) for v in value]
        return [_scalar(f.element, v) for v in value]
    if f.is_struct:
        return to_json(value, version)
    return _scalar(f.type, value)


def _scalar(type_: str, value):
    if type_ in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode("ascii")
    if type_ == "uuid":
        return base64.urlsafe_b64encode(bytes(value)).decode("ascii").rstrip("=")
    return value


def _dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _embedded(raw: bytes, cls):
    """A consumer-protocol blob (int16 version + struct) as JSON, or None to keep the bytes."""
    try:
        obj, version = cls.from_versioned_bytes(raw)
        return to_json(obj, version)
    except Exception:   # Kafka swallows and keeps the original bytes
        return None


def offsets_key_and_payload(key: bytes | None, value: bytes | None, offset: int,
                            schemas=RECORD_SCHEMAS) -> tuple[str, str | None]:
    """What ``--offsets-decoder`` prints for one ``__consumer_offsets`` record (with
    ``schemas=SHARE_STATE_RECORDS``, what ``--share-group-state-decoder`` prints for one
    ``__share_group_state`` record: Kafka's CoordinatorRecordMessageParser for either)."""
    if key is None:
        return f"Error at offset {offset}, skipping. Failed to decode message using offset topic decoder " \
               f"(message had a missing key)", None
    try:
        record_type = _H.unpack_from(key, 0)[0]
        if record_type not in schemas:
            return f"Unknown record type {record_type} at offset {offset}, skipping.", None
        key_cls, value_cls = schemas[record_type]
        key_obj, _ = key_cls.decode(memoryview(key), record_type, 2)     # the key's version is its type
        key_json = _dumps({"type": str(record_type), "data": to_json(key_obj, record_type)})
        if value is None:
            return key_json, "<DELETE>"
        value_obj, value_version = value_cls.from_versioned_bytes(value)
        data = to_json(value_obj, value_version)
        if value_cls is GroupMetadataValue and value_obj.protocol_type == "consumer":
            for member_json, member in zip(data["members"], value_obj.members):
                for field, cls in (("subscription", ConsumerProtocolSubscription),
                                   ("assignment", ConsumerProtocolAssignment)):
                    decoded = _embedded(bytes(getattr(member, field)), cls)
                    if decoded is not None:
                        member_json[field] = decoded
        return key_json, _dumps({"version": str(value_version), "data": data})
    except Exception as e:
        return f"Error at offset {offset}, skipping. {e}", None


def _text(b: bytes | None) -> str | None:
    return None if b is None else bytes(b).decode("utf-8", errors="replace")


# -- files ------------------------------------------------------------------------------------

def _bool(b: bool) -> str:
    return "true" if b else "false"


def dump_log(path: str, out, *, deep: bool, print_data: bool, offsets_decoder: bool,
             skip_metadata: bool = False, schemas=RECORD_SCHEMAS) -> None:
    name = os.path.basename(path)
    with open(path, "rb") as f:
        data = f.read()
    start = name.split(".")[0]
    if start.isdigit():      # segments are named after their base offset
        out.write(f"Log starting offset: {int(start)}\n")
    valid = 0
    try:
        for pos, h, batch in iter_batches(memoryview(data)):
            try:
                validate_batch(h, batch)
                is_valid = True
            except RecordBatchError:
                is_valid = False
            horizon = f"OptionalLong[{h.base_timestamp}]" if h.has_delete_horizon else "OptionalLong.empty"
            codec = Compression(h.compression).name.lower() if h.compression in Compression._value2member_map_ \
                else f"unknown({h.compression})"
            ts_type = _TIMESTAMP_TYPE[h.timestamp_type]
            out.write(f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
                      f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
                      f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
                      f"partitionLeaderEpoch: {h.partition_leader_epoch} isTransactional: {_bool(h.is_transactional)} "
                      f"isControl: {_bool(h.is_control)} deleteHorizonMs: {horizon} position: {pos} "
                      f"{ts_type}: {h.max_timestamp} size: {h.size} magic: {h.magic} compresscodec: {codec} "
                      f"crc: {h.crc} isvalid: {_bool(is_valid)}\n")
            valid = pos + h.size
            if deep:
                _dump_records(h, batch, ts_type, out, print_data, offsets_decoder, skip_metadata, schemas)
    except RecordBatchError:
        pass   # what follows the last whole batch is reported as invalid bytes
    trailing = len(data) - valid
    if trailing > 0:
        out.write(f"Found {trailing} invalid bytes at the end of {name}\n")


def _dump_records(h, batch, ts_type, out, print_data, offsets_decoder, skip_metadata, schemas=RECORD_SCHEMAS) -> None:
    try:
        records = decode_records(batch, h)
    except RecordBatchError as e:
        out.write(f"| cannot decode the records of this batch: {e}\n")
        return
    for r in records:
        line = "|"
        if not skip_metadata:
            sequence = increment_sequence(h.base_sequence, r.offset - h.base_offset) if h.base_sequence >= 0 else -1
            line += (f" offset: {r.offset} {ts_type}: {r.timestamp} "
                     f"keySize: {-1 if r.key is None else len(r.key)} "
                     f"valueSize: {-1 if r.value is None else len(r.value)} sequence: {sequence} "
                     f"headerKeys: [{','.join(k for k, _ in r.headers)}]")
            if h.is_control:
                line += _control(r)
        if print_data and not h.is_control:
            if offsets_decoder:
                key, payload = offsets_key_and_payload(r.key, r.value, r.offset, schemas)
            else:
                key, payload = _text(r.key), _text(r.value)
            if key is not None:
                line += f" key: {key}"
            if payload is not None:
                line += f" payload: {payload}"
        out.write(line + "\n")


def _control(r) -> str:
    try:
        marker = read_end_transaction_marker(r)
    except Exception:
        kind = _H.unpack_from(r.key, 2)[0] if r.key is not None and len(r.key) >= 4 else -1
        return f" controlType: UNKNOWN({kind})"
    name = {CONTROL_ABORT: "ABORT", CONTROL_COMMIT: "COMMIT"}.get(marker.control_type, str(marker.control_type))
    return f" endTxnMarker: {name} coordinatorEpoch: {marker.coordinator_epoch}"


def dump_index(path: str, out, entry: struct.Struct, line) -> None:
    with open(path, "rb") as f:
        data = f.read()
    start = os.path.basename(path).split(".")[0]
    base = int(start) if start.isdigit() else 0
    n = len(data) // entry.size
    if n == 0:
        out.write(f"{path} is empty.\n")
        return
    for i in range(n):
        a, b = entry.unpack_from(data, i * entry.size)
        out.write(line(base, a, b) + "\n")


def dump_txn_index(path: str, out) -> None:
    """The aborted transactions of a ``.txnindex`` file, as DumpLogSegments.dumpTxnIndex prints them."""
    with open(path, "rb") as f:
        data = f.read()
    for pos in range(0, len(data) - TXN_ENTRY.size + 1, TXN_ENTRY.size):
        version, pid, first, last, lso = TXN_ENTRY.unpack_from(data, pos)
        out.write(f"version: {version} producerId: {pid} firstOffset: {first} lastOffset: {last} "
                  f"lastStableOffset: {lso}\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kgroup dump-log",
                                description="Print the batches and records of log segments and indexes "
                                            "(like kafka-dump-log.sh).")
    p.add_argument("paths", nargs="*", metavar="PATH", help="segment (.log), .index, .timeindex or .txnindex files")
    p.add_argument("--files", nargs="+", default=[], metavar="PATH", help="the same, Kafka's spelling")
    p.add_argument("--print-data-log", action="store_true", help="print each record's key and payload")
    p.add_argument("--deep-iteration", action="store_true", help="print each record's metadata")
    p.add_argument("--offsets-decoder", action="store_true",
                   help="decode __consumer_offsets records (implies --print-data-log)")
    p.add_argument("--share-group-state-decoder", action="store_true",
                   help="decode __share_group_state records (implies --print-data-log)")
    p.add_argument("--skip-record-metadata", action="store_true", help="omit each record's metadata")
    args = p.parse_args(argv)
    paths = list(args.paths) + list(args.files)
    if not paths:
        p.error("no files to dump (give PATH or --files PATH)")
    decoder = args.offsets_decoder or args.share_group_state_decoder
    print_data = args.print_data_log or decoder
    deep = args.deep_iteration or print_data
    out = sys.stdout
    status = 0
    for path in paths:
        out.write(f"Dumping {path}\n")
        try:
            if path.endswith(".log"):
                dump_log(path, out, deep=deep, print_data=print_data, offsets_decoder=decoder,
                         skip_metadata=args.skip_record_metadata,
                         schemas=SHARE_STATE_RECORDS if args.share_group_state_decoder else RECORD_SCHEMAS)
            elif path.endswith(".index"):
                dump_index(path, out, struct.Struct(">ii"), lambda base, rel, position:
                           f"offset: {base + rel} position: {position}")
            elif path.endswith(".timeindex"):
                dump_index(path, out, struct.Struct(">qi"), lambda base, ts, rel:
                           f"timestamp: {ts} offset: {base + rel}")
            elif path.endswith(".txnindex"):
                dump_txn_index(path, out)
            else:
                print(f"Ignoring unknown file {path}", file=sys.stderr)
        except OSError as e:
            print(f"kgroup dump-log: {path}: {e.strerror or e}", file=sys.stderr)
            status = 1
    out.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())
