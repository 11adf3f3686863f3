"""Every declared message matches Kafka's JSON spec field by field: names, types, version ranges,
nullability, tags and defaults, recursively, plus the message's own valid/flexible versions."""
import pytest

from kgroup.protocol import consumer_protocol, header_defs, offsets_records
from kgroup.protocol.api import API_BY_KEY
from kgroup.protocol.schema import INF, parse_versions, snake
from tests.kafka_spec import load_spec

# KIP-932's messages are Kafka 4.3's (ShareGroupHeartbeat v1, ShareFetch v1-2, ...), which the
# Kafka 4.0 facts table predates (v0, since removed): their ranges are checked below against 4.3's
# api-versions, their fields with the 4.3 facts table.
SHARE_APIS = {"ShareGroupHeartbeat": (1, 1), "ShareGroupDescribe": (1, 1), "ShareFetch": (1, 2),
              "ShareAcknowledge": (1, 2), "InitializeShareGroupState": (0, 0), "ReadShareGroupState": (0, 0),
              "WriteShareGroupState": (0, 1), "DeleteShareGroupState": (0, 0), "ReadShareGroupStateSummary": (0, 1)}
MESSAGES = []
for api in API_BY_KEY.values():
    if api.request.__name__[:-len("Request")] in SHARE_APIS:
        continue
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


def _default(spec_field):
    d = spec_field.get("default")
    if d is None:
        return None
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


@pytest.mark.parametrize("cls,folder", MESSAGES, ids=[c.__name__ for c, _ in MESSAGES])
def test_message_matches_spec(cls, folder):
    spec = load_spec(cls.__name__, folder)
    assert cls.API_KEY == spec.get("apiKey")
    assert cls.VERSIONS == parse_versions(spec["validVersions"])
    assert cls.FLEXIBLE == parse_versions(spec["flexibleVersions"])
    common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
    _compare_fields(cls.FIELDS, spec["fields"], common, cls.__name__)


def test_share_api_version_ranges():
    got = {a.request.__name__[:-len("Request")]: a.request.VERSIONS
           for a in API_BY_KEY.values() if a.request.__name__[:-len("Request")] in SHARE_APIS}
    assert got == SHARE_APIS


def test_version_ranges():
    """The version ranges we register (Kafka 4.0's full ranges)."""
    want = {"ApiVersions": 4, "Metadata": 12, "CreateTopics": 7, "DeleteTopics": 6, "Produce": 11,
            "Fetch": 17, "ListOffsets": 10, "FindCoordinator": 6, "JoinGroup": 9, "SyncGroup": 5,
            "Heartbeat": 4, "LeaveGroup": 5, "OffsetCommit": 9, "OffsetFetch": 9,
            "DescribeGroups": 5, "ListGroups": 5, "DeleteGroups": 2, "OffsetDelete": 0,
            "InitProducerId": 5, "DescribeConfigs": 4, "DescribeCluster": 1,
            # Transactions: registered for conformance and round-trips; the broker's
            # handler table decides when they are advertised.
            "AddPartitionsToTxn": 5, "AddOffsetsToTxn": 4, "EndTxn": 5, "WriteTxnMarkers": 1,
            "TxnOffsetCommit": 4, "DescribeTransactions": 0, "ListTransactions": 1,
            # KIP-848 (registered, not advertised yet); the facts table has ConsumerGroupDescribe v0 only
            "ConsumerGroupHeartbeat": 1, "ConsumerGroupDescribe": 0}
    want.update({"CreatePartitions": 3, "AlterConfigs": 2, "IncrementalAlterConfigs": 1, "DeleteRecords": 2})
    want.update({"SaslHandshake": 1, "SaslAuthenticate": 2, "DescribeAcls": 3, "CreateAcls": 3, "DeleteAcls": 3,
                 "DescribeUserScramCredentials": 0, "AlterUserScramCredentials": 0})
    got = {a.request.__name__[:-len("Request")]: a.request.VERSIONS for a in API_BY_KEY.values()
           if a.request.__name__[:-len("Request")] not in SHARE_APIS}
    assert got == {k: (0, v) for k, v in want.items()}
    assert consumer_protocol.ConsumerProtocolSubscription.VERSIONS == (0, 3)
    assert consumer_protocol.ConsumerProtocolAssignment.VERSIONS[1] >= 3
    assert INF > 1000
