"""Kafka's specifications as facts the project holds, and an independent decoder built from them.

``kafka-4.3.json`` is written by ``scripts/kafka_spec_facts.py`` from Apache Kafka 4.3.1's JSON message
and record specs: names, types, version ranges, nullable and tagged versions, defaults, no prose.
The conformance tests check kgroup's declarative definitions against it, and the decoder below
reads ``__consumer_offsets`` bytes straight from it, independently of kgroup's codec. Tests only:
kgroup never reads it.
"""
from __future__ import annotations

import functools
import json
import pathlib
import struct

import crcmod.predefined

FACTS = pathlib.Path(__file__).resolve().parent / "kafka-4.3.json"


@functools.cache
def _table() -> dict:
    return json.loads(FACTS.read_text())


def load_spec(name: str, folder: str = "messages") -> dict:
    """The facts of one spec: ``folder`` is ``messages`` (requests, responses, headers, the
    embedded consumer protocol) or ``records`` (``__consumer_offsets`` and ``__transaction_state``)."""
    return _table()[folder][name]


def _spec(name):
    return load_spec(name, "records")


def _in(versions: str | None, v: int) -> bool:
    if versions is None or versions == "none":
        return False
    if versions.endswith("+"):
        return v >= int(versions[:-1])
    if "-" in versions:
        lo, hi = versions.split("-")
        return int(lo) <= v <= int(hi)
    return v == int(versions)


class _Reader:
    def __init__(self, buf):
        self.buf, self.pos = bytes(buf), 0

    def take(self, n):
        if self.pos + n > len(self.buf):
            raise ValueError("buffer underflow")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def fixed(self, fmt):
        return struct.unpack(">" + fmt, self.take(struct.calcsize(fmt)))[0]

    def uvarint(self):
        shift = value = 0
        while True:
            b = self.take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def varint(self):
        z = self.uvarint()
        return (z >> 1) ^ -(z & 1)


_FIXED = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "bool": "?", "uuid": "16s"}


def spec_decode(schema: dict, version: int, buf) -> dict:
    """Decode ``buf`` (after the version prefix) with a Kafka JSON data schema at ``version``;
    field names are the schema's; trailing bytes are an error."""
    r = _Reader(buf)
    structs = {s["name"]: s for s in schema.get("commonStructs", [])}
    flexible = _in(schema.get("flexibleVersions"), version)

    def value(typ, nullable, fields, in_tag=False):
        if typ in _FIXED:
            return r.fixed(_FIXED[typ])
        if typ in ("string", "bytes"):
            n = r.uvarint() - 1 if flexible else r.fixed("h" if typ == "string" else "i")
            if n < 0:
                assert nullable, "null in a non-nullable field"
                return None
            raw = r.take(n)
            return raw.decode("utf-8") if typ == "string" else raw
        if typ.startswith("[]"):
            n = r.uvarint() - 1 if flexible else r.fixed("i")
            if n < 0:
                assert nullable
                return None
            inner = typ[2:]
            return [value(inner, False, fields or structs.get(inner, {}).get("fields")) for _ in range(n)]
        if nullable:    # a nullable struct's marker: int8 -1 / 1 (an unsigned varint 0 / 1 if tagged)
            if (r.uvarint() == 0) if in_tag else (r.fixed("b") < 0):
                return None
        return struct_(fields or structs[typ]["fields"])

    def struct_(fields):
        out = {}
        by_tag = {}
        for f in fields:
            if not _in(f["versions"], version) or ("tag" in f and flexible):
                out[f["name"]] = f.get("default")
                if "tag" in f and flexible and _in(f["versions"], version):
                    by_tag[f["tag"]] = f
                continue
            out[f["name"]] = value(f["type"], _in(f.get("nullableVersions"), version), f.get("fields"))
        if flexible:
            for _ in range(r.uvarint()):
                tag, size = r.uvarint(), r.uvarint()
                f = by_tag.get(tag)
                if f is None:
                    r.take(size)
                    continue
                end = r.pos + size
                out[f["name"]] = value(f["type"], _in(f.get("nullableVersions"), version), f.get("fields"),
                                       in_tag=True)
                assert r.pos == end, "tagged field size mismatch"
        return out

    result = struct_(schema["fields"])
    assert r.pos == len(r.buf), "trailing bytes"
    return result


_CONSUMER_GROUP_RECORDS = {3: "ConsumerGroupMetadata", 4: "ConsumerGroupPartitionMetadata",
                           5: "ConsumerGroupMemberMetadata", 6: "ConsumerGroupTargetAssignmentMetadata",
                           7: "ConsumerGroupTargetAssignmentMember", 8: "ConsumerGroupCurrentMemberAssignment",
                           16: "ConsumerGroupRegularExpression"}


def spec_decode_offsets_record(key: bytes, value: bytes | None):
    """(kind, key dict, value dict | None) for a ``__consumer_offsets`` record, kinds named as
    kafka-dump-log's offsets decoder names them (offset_commit, group_metadata; a KIP-848 record by
    its schema's name without Key/Value, e.g. ConsumerGroupMemberMetadata)."""
    record_type = struct.unpack_from(">h", key)[0]
    if record_type in (0, 1):
        kind, key_schema, value_schema = "offset_commit", ("LegacyOffsetCommitKey", "OffsetCommitKey")[record_type], "OffsetCommitValue"
    elif record_type == 2:
        kind, key_schema, value_schema = "group_metadata", "GroupMetadataKey", "GroupMetadataValue"
    elif record_type in _CONSUMER_GROUP_RECORDS:    # KIP-848
        kind = _CONSUMER_GROUP_RECORDS[record_type]
        key_schema, value_schema = kind + "Key", kind + "Value"
    else:
        raise ValueError(f"unknown record type {record_type}")
    assert _spec(key_schema)["apiKey"] == record_type
    # Kafka 4's coordinator keys: the record type in front, then the key's fields at version 0.
    k = spec_decode(_spec(key_schema), 0, key[2:])
    if value is None:
        return kind, k, None
    v_version = struct.unpack_from(">h", value)[0]
    return kind, k, dict(spec_decode(_spec(value_schema), v_version, value[2:]), _version=v_version)


_crc32c = crcmod.predefined.mkCrcFun("crc-32c")


def spec_iter_records(data: bytes):
    """An independent RecordBatch v2 reader (uncompressed): yields (offset, key, value) and
    checks each batch's CRC-32C."""
    pos = 0
    while pos + 12 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, pos)
        if pos + 12 + length > len(data):
            return
        batch = data[pos:pos + 12 + length]
        magic, crc, attributes = struct.unpack_from(">bIh", batch, 16)
        assert magic == 2 and attributes & 0x07 == 0
        assert crc == _crc32c(batch[21:]), "bad batch CRC"
        count, = struct.unpack_from(">i", batch, 57)
        r = _Reader(batch[61:])
        for _ in range(count):
            end = r.varint() + r.pos
            r.take(1)
            r.varint()
            offset_delta = r.varint()
            klen = r.varint()
            key = r.take(klen) if klen >= 0 else None
            vlen = r.varint()
            val = r.take(vlen) if vlen >= 0 else None
            for _ in range(r.varint()):
                r.take(r.varint())
                hv = r.varint()
                if hv >= 0:
                    r.take(hv)
            assert r.pos == end
            yield base_offset + offset_delta, key, val
        pos += 12 + length
