"""``kgroup dump-log --offsets-decoder`` prints KIP-848's consumer group records (types 3-8, 16) as
Kafka's DumpLogSegments does: key ``{"type":"N","data":{...}}``, value ``{"version":"0","data":{...}}``
with camelCase names, topic ids as Kafka's Uuid.toString (URL-safe base64, no padding), a tagged
field only when it is not its default, tombstones as ``<DELETE>``. Checked against the independent
decoder built from Kafka 4.0's facts table."""
from __future__ import annotations

import base64
import json
import uuid

from kgroup.protocol import offsets_records as R
from kgroup.protocol.records import Record, build_batch
from tests.broker.test_dump_log import RECORD_LINE, _segment, run
from tests.kafka_spec import load_spec, spec_decode_offsets_record, spec_iter_records

T1 = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0").bytes
T2 = uuid.UUID("00000000-0000-0000-0000-0000000000aa").bytes


def _records():
    V = R.ConsumerGroupMemberMetadataValue
    P = R.ConsumerGroupPartitionMetadataValue
    C = R.ConsumerGroupCurrentMemberAssignmentValue
    TA = R.ConsumerGroupTargetAssignmentMemberValue
    out = [
        (5, R.ConsumerGroupMemberMetadataKey(group_id="g", member_id="m1"),
         V(instance_id="i1", rack_id=None, client_id="rdkafka", client_host="/127.0.0.1",
           subscribed_topic_names=["orders", "users"], subscribed_topic_regex=None,
           rebalance_timeout_ms=300000, server_assignor="uniform", classic_member_metadata=None)),
        (5, R.ConsumerGroupMemberMetadataKey(group_id="g", member_id="m2"),
         V(client_id="java", client_host="/127.0.0.2", subscribed_topic_regex="ord.*",
           classic_member_metadata=V.ClassicMemberMetadata(session_timeout_ms=45000, supported_protocols=[
               V.ClassicMemberMetadata.ClassicProtocol(name="range", metadata=b"\x00\x01")]))),
        (4, R.ConsumerGroupPartitionMetadataKey(group_id="g"),
         P(topics=[P.TopicMetadata(topic_id=T1, topic_name="orders", num_partitions=2, partition_metadata=[
             P.TopicMetadata.PartitionMetadata(partition=0, racks=["r1"])])])),
        (3, R.ConsumerGroupMetadataKey(group_id="g"), R.ConsumerGroupMetadataValue(epoch=4)),
        (7, R.ConsumerGroupTargetAssignmentMemberKey(group_id="g", member_id="m1"),
         TA(topic_partitions=[TA.TopicPartition(topic_id=T1, partitions=[0, 1]),
                              TA.TopicPartition(topic_id=T2, partitions=[5])])),
        (6, R.ConsumerGroupTargetAssignmentMetadataKey(group_id="g"),
         R.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=4)),
        (8, R.ConsumerGroupCurrentMemberAssignmentKey(group_id="g", member_id="m1"),
         C(member_epoch=4, previous_member_epoch=3, state=2,
           assigned_partitions=[C.TopicPartitions(topic_id=T1, partitions=[0])],
           partitions_pending_revocation=[C.TopicPartitions(topic_id=T2, partitions=[5])])),
        (8, R.ConsumerGroupCurrentMemberAssignmentKey(group_id="g", member_id="m2"), None),
        (16, R.ConsumerGroupRegularExpressionKey(group_id="g", regular_expression="ord.*"),
         R.ConsumerGroupRegularExpressionValue(topics=["orders", "ordx"], version=42, timestamp=1795000000000)),
        (16, R.ConsumerGroupRegularExpressionKey(group_id="g", regular_expression="old-.*"), None),
    ]
    return [Record(key=k.to_versioned_bytes(t), value=None if v is None else v.to_versioned_bytes(0),
                   timestamp=2000 + i) for i, (t, k, v) in enumerate(out)]


def _kafka_json(value):
    """The independent decoder's value as Kafka's JsonConverter writes it."""
    if isinstance(value, dict):
        return {k[:1].lower() + k[1:]: _kafka_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_kafka_json(v) for v in value]
    if isinstance(value, bytes):
        if len(value) == 16:  # every 16-byte value in these records is a topic id
            return base64.urlsafe_b64encode(value).decode().rstrip("=")
        return base64.b64encode(value).decode()
    return value


def _without_default_tagged_fields(schema: str, value: dict) -> dict:
    """Kafka's JsonConverter leaves out a tagged field at its default: a number at its default,
    and, inside nested structs, a null (a top-level tagged struct written as null is printed, as
    the checks below expect)."""
    def strip(fields, v, top):
        if not isinstance(v, dict):
            return v
        out = {}
        for f in fields:
            if f["name"] not in v:
                continue
            x = v[f["name"]]
            if "taggedVersions" in f:
                if f["type"].startswith("int") and x == f.get("default", 0):
                    continue
                if x is None and not top:
                    continue
            inner = f.get("fields") or common.get(f["type"].removeprefix("[]"))
            if inner:
                x = [strip(inner, e, False) for e in x] if isinstance(x, list) else strip(inner, x, False)
            out[f["name"]] = x
        return out
    spec = load_spec(schema, "records")
    common = {c["name"]: c["fields"] for c in spec.get("commonStructs", ())}
    return strip(spec["fields"], value, True)


def test_dump_log_prints_consumer_group_records(tmp_path):
    records = _records()
    path = _segment(tmp_path, [build_batch(records, base_offset=0)], "00000000000000000000.log")
    data = open(path, "rb").read()
    independent = [(o,) + spec_decode_offsets_record(k, v) for o, k, v in spec_iter_records(data)]
    lines = [RECORD_LINE.match(x) for x in run(path, "--offsets-decoder").splitlines() if x.startswith("|")]
    assert all(lines) and len(lines) == len(independent) == len(records)
    for m, (offset, kind, key, value), rec in zip(lines, independent, records):
        assert int(m.group(1)) == offset
        k = json.loads(m.group(8))
        assert k == {"type": str(int.from_bytes(rec.key[:2], "big")), "data": _kafka_json(key)}
        if value is None:
            assert m.group(9) == "<DELETE>"
            continue
        v = json.loads(m.group(9))
        assert v["version"] == str(value.pop("_version")) == "0"
        want = _kafka_json(_without_default_tagged_fields(kind + "Value", value))
        if kind == "ConsumerGroupMemberMetadata" and want.get("classicMemberMetadata") is None:
            assert v["data"]["classicMemberMetadata"] is None     # written (null), so printed
        assert v["data"] == want, kind
    texts = [m.group(9) for m in lines]
    assert '"classicMemberMetadata":{"sessionTimeoutMs":45000,"supportedProtocols":[{"name":"range",' \
           '"metadata":"AAE="}]}' in texts[1]
    assert '{"topicId":"Dx4tPEtaaXiHlqW0w9Lh8A","partitions":[0,1]}' in texts[4]


def test_dump_log_omits_a_default_tagged_field(tmp_path):
    """An absent ClassicMemberMetadata tag is the empty struct, Kafka's default: not printed."""
    V = R.ConsumerGroupMemberMetadataValue
    rec = Record(key=R.ConsumerGroupMemberMetadataKey(group_id="g", member_id="m").to_versioned_bytes(5),
                 value=V(client_id="c", client_host="h").to_versioned_bytes(0), timestamp=1)
    assert rec.value.endswith(b"\x00")       # no tagged fields written
    path = _segment(tmp_path, [build_batch([rec])], "00000000000000000000.log")
    (line,) = [x for x in run(path, "--offsets-decoder").splitlines() if x.startswith("|")]
    payload = json.loads(RECORD_LINE.match(line).group(9))
    assert "classicMemberMetadata" not in payload["data"]
    # nullable strings without a declared default default to "" (as in Kafka's generated classes)
    assert payload == {"version": "0", "data": {
        "instanceId": "", "rackId": "", "clientId": "c", "clientHost": "h", "subscribedTopicNames": [],
        "subscribedTopicRegex": "", "rebalanceTimeoutMs": -1, "serverAssignor": ""}}
