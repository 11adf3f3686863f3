"""``kgroup dump-log --offsets-decoder`` prints KIP-932's share group records (types 10-15) as
Kafka's DumpLogSegments does: key ``{"type":"N","data":{...}}``, value ``{"version":"0","data":{...}}``,
topic ids as Kafka's Uuid.toString, the default assignment timestamp (a tagged field) left out."""
from __future__ import annotations

import json
import uuid

from kgroup.coordinator.share_group import share_group_records as srec
from kgroup.coordinator.share_group.group import InitMapValue
from kgroup.coordinator.share_group.member import ShareGroupMember
from kgroup.protocol.records import Record, build_batch
from tests.broker.test_dump_log import RECORD_LINE, _segment, run

T1 = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0").bytes
T1_STRING = "Dx4tPEtaaXiHlqW0w9Lh8A"


def test_dump_log_prints_share_group_records(tmp_path):
    m = ShareGroupMember("m1", member_epoch=3, previous_member_epoch=2, client_id="c", client_host="/h",
                         subscribed_topic_names=frozenset({"orders"}), assigned_partitions={T1: frozenset({0, 1})})
    built = [srec.member_subscription_record("g", m), srec.group_epoch_record("g", 3, -7),
             srec.target_assignment_record("g", "m1", m.assigned_partitions),
             srec.target_assignment_epoch_record("g", 3, 0), srec.current_assignment_record("g", m),
             srec.state_partition_metadata_record("g", {}, {T1: InitMapValue("orders", frozenset({1, 0}), 5)}, {}),
             srec.member_subscription_tombstone("g", "m2")]
    records = [Record(key=r.key, value=r.value, timestamp=1000 + i) for i, r in enumerate(built)]
    path = _segment(tmp_path, [build_batch(records, base_offset=0)], "00000000000000000000.log")
    lines = [RECORD_LINE.match(x) for x in run(path, "--offsets-decoder").splitlines() if x.startswith("|")]
    assert all(lines) and len(lines) == len(records)
    keys = [json.loads(m.group(8)) for m in lines]
    assert [k["type"] for k in keys] == ["10", "11", "13", "12", "14", "15", "10"]
    assert keys[0]["data"] == {"groupId": "g", "memberId": "m1"}
    values = [m.group(9) for m in lines]
    assert json.loads(values[0]) == {"version": "0", "data": {"rackId": None, "clientId": "c", "clientHost": "/h",
                                                              "subscribedTopicNames": ["orders"]}}
    assert json.loads(values[1])["data"] == {"epoch": 3, "metadataHash": -7}
    assert json.loads(values[2])["data"] == {"topicPartitions": [{"topicId": T1_STRING, "partitions": [0, 1]}]}
    assert json.loads(values[3])["data"] == {"assignmentEpoch": 3}
    assert json.loads(values[4])["data"] == {"memberEpoch": 3, "previousMemberEpoch": 2, "state": 0,
                                             "assignedPartitions": [{"topicId": T1_STRING, "partitions": [0, 1]}]}
    assert json.loads(values[5])["data"] == {
        "initializingTopics": [], "deletingTopics": [],
        "initializedTopics": [{"topicId": T1_STRING, "topicName": "orders", "partitions": [0, 1]}]}
    assert values[6] == "<DELETE>"


def test_dump_log_share_group_state_decoder(tmp_path):
    """``--share-group-state-decoder`` decodes ``__share_group_state`` records as Kafka's
    ShareGroupStateMessageParser: ShareSnapshot (0), ShareUpdate (1), the snapshot tombstone."""
    from kgroup.share_coordinator import share_state_records as ss
    from kgroup.share_coordinator.state_batches import StateBatch
    snap = ss.ShareGroupOffset(2, 3, 1, 10, 2, (StateBatch(10, 11, 0, 1), StateBatch(12, 13, 2, 1)), 500, 600)
    upd = ss.ShareGroupOffset(2, -1, -1, 12, 1, (StateBatch(12, 12, 4, 3),), 0, 0)
    built = [ss.snapshot_record("g", T1, 0, snap), ss.update_record("g", T1, 0, upd), ss.tombstone("g", T1, 0)]
    records = [Record(key=r.key, value=r.value, timestamp=1000 + i) for i, r in enumerate(built)]
    records.append(Record(key=b"\x00\x07\x00", value=b"\x00\x00", timestamp=2000))     # a type it does not know
    path = _segment(tmp_path, [build_batch(records, base_offset=0)], "00000000000000000000.log")
    lines = [RECORD_LINE.match(x) for x in run(path, "--share-group-state-decoder").splitlines() if x.startswith("|")]
    assert all(lines) and len(lines) == 4
    keys = [m.group(8) for m in lines]
    assert json.loads(keys[0]) == {"type": "0", "data": {"groupId": "g", "topicId": T1_STRING, "partition": 0}}
    assert json.loads(keys[1]) == {"type": "1", "data": {"groupId": "g", "topicId": T1_STRING, "partition": 0}}
    assert keys[3] == "Unknown record type 7 at offset 3, skipping."
    v0 = json.loads(lines[0].group(9))
    assert v0["version"] == "0" and v0["data"]["startOffset"] == 10 and v0["data"]["stateEpoch"] == 3
    assert v0["data"]["deliveryCompleteCount"] == 2 and v0["data"]["createTimestamp"] == 500
    assert v0["data"]["stateBatches"] == [
        {"firstOffset": 10, "lastOffset": 11, "deliveryState": 0, "deliveryCount": 1},
        {"firstOffset": 12, "lastOffset": 13, "deliveryState": 2, "deliveryCount": 1}]
    v1 = json.loads(lines[1].group(9))
    assert v1["data"]["stateBatches"] == [{"firstOffset": 12, "lastOffset": 12, "deliveryState": 4, "deliveryCount": 3}]
    assert lines[2].group(9) == "<DELETE>"
    # read as __consumer_offsets records, type 0 is an offset commit key: these bytes are not one
    lines = [x for x in run(path, "--offsets-decoder").splitlines() if x.startswith("|")]
    assert " key: Error at offset 0, skipping. " in lines[0]
