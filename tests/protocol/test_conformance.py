"""Every declared message matches Kafka's JSON spec field by field: names, types, version ranges,
nullability, tags and defaults, recursively, plus the message's own valid/flexible versions."""
import pytest

from kgroup.protocol import consumer_protocol, header_defs, offsets_records
from kgroup.protocol.api import API_BY_KEY
from kgroup.protocol.schema import INF, parse_versions, snake
from tests.kafka_spec import load_spec

MESSAGES = []
for api in API_BY_KEY.values():
    MESSAGES.append((api.request, "messages"))
    MESSAGES.append((api.response, "messages"))
MESSAGES += [(header_defs.RequestHeader, "messages"), (header_defs.ResponseHeader, "messages"),
             (consumer_protocol.ConsumerProtocolSubscription, "messages"),
             (consumer_protocol.ConsumerProtocolAssignment, "messages")]
MESSAGES += [(getattr(offsets_records, n), "records") for n in
             ("OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue",
              "TransactionLogKey", "TransactionLogValue")]
MESSAGES += [(cls, "records") for t in sorted(offsets_records.CONSUMER_GROUP_RECORD_TYPES)
             for cls in offsets_records.RECORD_SCHEMAS[t]]
# KIP-932: the share group records (10-15) and __share_group_state's (ShareSnapshot 0, ShareUpdate 1)
MESSAGES += [(cls, "records") for t in sorted(offsets_records.SHARE_GROUP_RECORD_TYPES)
             for cls in offsets_records.RECORD_SCHEMAS[t]]
MESSAGES += [(cls, "records") for pair in offsets_records.SHARE_STATE_RECORDS.values() for cls in pair]


def _default(spec_field):
    d = spec_field.get("default")
    if d is None:
        # JSON null: a nullable array's default is null (Kafka's generator); kgroup declares it so
        return "null" if "default" in spec_field and spec_field["type"].startswith("[]") else None
    d = str(d)
    if d == "null":
        return "null"
    t = spec_field["type"]
    if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return int(d, 0)
    if t == "bool":
        return d == "true"
    if t == "float64":
        return float(d)
    return d


def _compare_fields(ours, spec_fields, common, path):
    assert [f.name for f in ours] == [snake(s["name"]) for s in spec_fields], path
    for f, s in zip(ours, spec_fields):
        where = f"{path}.{s['name']}"
        assert f.type == s["type"], where
        assert f.versions == parse_versions(s.get("versions", s.get("taggedVersions"))), where
        assert f.nullable == parse_versions(s.get("nullableVersions")), where
        assert f.tag == s.get("tag"), where
        assert f.tagged == parse_versions(s.get("taggedVersions")), where
        assert f.default == _default(s), where
        assert f.flexible == s.get("flexibleVersions"), where
        if f.is_struct:
            sub = s.get("fields") or common[f.element]
            _compare_fields(f.struct.FIELDS, sub, common, where)


def _as_key_versions(spec: dict, lo: int, hi: int) -> dict:
    """A coordinator-key spec (Kafka 4: fields at version 0, the record type written in front) in
    the terms of kgroup's key definitions, whose version is the record type: same bytes."""
    rng = str(lo) if lo == hi else f"{lo}-{hi}"
    assert spec["validVersions"] == "0" and spec["flexibleVersions"] == "none"
    fields = []
    for f in spec["fields"]:
        assert f["versions"] == "0" and "nullableVersions" not in f and "fields" not in f
        fields.append(dict(f, versions=rng))
    return dict(spec, validVersions=rng, fields=fields)


@pytest.mark.parametrize("cls,folder", MESSAGES, ids=[c.__name__ for c, _ in MESSAGES])
def test_message_matches_spec(cls, folder):
    spec = load_spec(cls.__name__, folder)
    assert cls.API_KEY == spec.get("apiKey")
    if spec.get("type") == "coordinator-key":
        if cls.__name__ == "OffsetCommitKey":    # types 0 and 1: Kafka's Legacy key has the same fields
            legacy = load_spec("LegacyOffsetCommitKey", folder)
            assert legacy["apiKey"] == 0 and legacy["fields"] == spec["fields"]
            spec = _as_key_versions(spec, 0, 1)
        else:
            spec = _as_key_versions(spec, spec["apiKey"], spec["apiKey"])
    assert cls.VERSIONS == parse_versions(spec["validVersions"])
    assert cls.FLEXIBLE == parse_versions(spec["flexibleVersions"])
    common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
    _compare_fields(cls.FIELDS, spec["fields"], common, cls.__name__)


def test_version_ranges_are_kafka_43s():
    """Every registered API declares Kafka 4.3's whole valid range (the facts table's), KIP-896's
    removals included; what the broker advertises is its handler table (tests/broker)."""
    got = {a.request.__name__[:-len("Request")]: a.request.VERSIONS for a in API_BY_KEY.values()}
    want = {name: parse_versions(load_spec(name + "Request")["validVersions"]) for name in got}
    assert got == want
    assert got["Produce"] == (3, 13) and got["OffsetCommit"] == (2, 10) and got["Fetch"] == (4, 18)
    assert consumer_protocol.ConsumerProtocolSubscription.VERSIONS == (0, 3)
    assert consumer_protocol.ConsumerProtocolAssignment.VERSIONS[1] >= 3
    assert INF > 1000
