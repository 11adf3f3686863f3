"""``kgroup dump-log`` (kgroup/dump_log.py, like kafka-dump-log.sh): batch lines, record lines,
the ``__consumer_offsets`` decoder checked against the independent decoder built from Kafka's
JSON record schemas (tests/broker/test_groups.py), torn tails, CRC damage, unknown records."""
from __future__ import annotations

import io
import json
import re
import struct
import subprocess
import sys

from kgroup.coordinator import group_partition
from kgroup.dump_log import main
from kgroup.protocol.consumer_protocol import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kgroup.protocol.messages.join_group import JoinGroupRequest
from kgroup.protocol.messages.leave_group import LeaveGroupRequest
from kgroup.protocol.messages.sync_group import SyncGroupRequest
from kgroup.protocol.records import Record, build_batch
from tests.broker.test_groups import (commit_request, create_topic, spec_decode_offsets_record,
                                      spec_iter_records)
from tests.conftest import ROOT
from tests.harness import BrokerProcess, RawClient

BATCH_LINE = re.compile(
    r"^baseOffset: (-?\d+) lastOffset: (-?\d+) count: (\d+) baseSequence: (-?\d+) lastSequence: (-?\d+) "
    r"producerId: (-?\d+) producerEpoch: (-?\d+) partitionLeaderEpoch: (-?\d+) isTransactional: (true|false) "
    r"isControl: (true|false) deleteHorizonMs: (OptionalLong\.empty|OptionalLong\[\d+\]) position: (\d+) "
    r"(CreateTime|LogAppendTime): (-?\d+) size: (\d+) magic: 2 compresscodec: (\w+) crc: (\d+) isvalid: (true|false)$")
RECORD_LINE = re.compile(
    r"^\| offset: (\d+) (CreateTime|LogAppendTime): (-?\d+) keySize: (-?\d+) valueSize: (-?\d+) sequence: (-?\d+) "
    r"headerKeys: \[([^\]]*)\](?: key: (.*?))?(?: payload: (.*))?$")


def run(*argv) -> str:
    out = io.StringIO()
    real, sys.stdout = sys.stdout, out
    try:
        assert main(list(argv)) == 0
    finally:
        sys.stdout = real
    return out.getvalue()


def consumer_group_log(tmp_path):
    """A real broker's __consumer_offsets segment holding commits and a consumer group's life."""
    b = BrokerProcess(tmp_path / "data", ["group.initial.rebalance.delay.ms=0"]).start()
    group = "dumped"
    try:
        c = RawClient(b.port)
        create_topic(c, "dt", 2)
        c.request(commit_request(group, "dt", {0: 5, 1: 6}, metadata="m"), 8)
        sub = (1).to_bytes(2, "big") + ConsumerProtocolSubscription(
            topics=["dt"], owned_partitions=[]).to_bytes(1)
        P = JoinGroupRequest.JoinGroupRequestProtocol
        join = JoinGroupRequest(group_id="cg", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                                protocol_type="consumer", protocols=[P(name="range", metadata=sub)])
        mid = c.request(join, 9).member_id
        join.member_id = mid
        j = c.request(join, 9)
        A = ConsumerProtocolAssignment
        asg = (0).to_bytes(2, "big") + A(assigned_partitions=[A.TopicPartition(topic="dt", partitions=[0, 1])]).to_bytes(0)
        SA = SyncGroupRequest.SyncGroupRequestAssignment
        c.request(SyncGroupRequest(group_id="cg", generation_id=j.generation_id, member_id=mid,
                                   assignments=[SA(member_id=mid, assignment=asg)]), 3)
        c.request(LeaveGroupRequest(group_id="cg", members=[LeaveGroupRequest.MemberIdentity(member_id=mid)]), 4)
    finally:
        b.stop()
    paths = {}
    for g in (group, "cg"):
        d = tmp_path / "data" / f"__consumer_offsets-{group_partition(g, 50)}"
        paths[g] = str(d / "00000000000000000000.log")
    return paths, mid, sub, asg


def test_dump_log_batches_and_offsets_decoder_match_an_independent_reading(tmp_path):
    paths, mid, sub, asg = consumer_group_log(tmp_path)
    for path in set(paths.values()):
        data = open(path, "rb").read()
        independent = [(o,) + spec_decode_offsets_record(k, v) for o, k, v in spec_iter_records(data)]
        text = run(path, "--offsets-decoder")
        lines = text.splitlines()
        assert lines[0] == f"Dumping {path}" and lines[1] == "Log starting offset: 0"
        batches = [BATCH_LINE.match(x) for x in lines if x.startswith("baseOffset")]
        records = [RECORD_LINE.match(x) for x in lines if x.startswith("|")]
        assert all(batches) and all(records) and len(lines) == 2 + len(batches) + len(records)
        pos = 0
        for m in batches:        # positions tile the file; sizes and CRCs as stored
            assert int(m.group(12)) == pos and m.group(18) == "true" and m.group(16) == "none"
            size = int(m.group(15))
            crc, = struct.unpack_from(">I", data, pos + 17)
            assert int(m.group(17)) == crc and m.group(13) == "CreateTime"
            assert int(m.group(3)) == int(m.group(2)) - int(m.group(1)) + 1
            pos += size
        assert pos == len(data)
        assert len(records) == len(independent)
        for m, (offset, kind, key, value) in zip(records, independent):
            assert int(m.group(1)) == offset
            k = json.loads(m.group(8))
            assert k["type"] == ("1" if kind == "offset_commit" else "2") and k["data"] == key
            if value is None:
                assert m.group(9) == "<DELETE>"
                continue
            v = json.loads(m.group(9))
            assert v["version"] == str(value.pop("_version"))
            absent = set(value) - set(v["data"]) - {"members"}
            assert all(value[x] in (-1, None) for x in absent), absent    # fields not in this version
            for x in absent:
                del value[x]
            if kind == "offset_commit":
                assert v["data"] == value
            else:
                members = value.pop("members")
                assert {x: y for x, y in v["data"].items() if x != "members"} == value
                for got, want in zip(v["data"]["members"], members):
                    assert {x: y for x, y in got.items() if x not in ("subscription", "assignment")} == \
                        {x: y for x, y in want.items() if x not in ("subscription", "assignment")}
    cg = run(paths["cg"], "--offsets-decoder")
    (stable,) = [json.loads(x.split(" payload: ")[1]) for x in cg.splitlines()
                 if '"generation":1' in x and " payload: " in x]
    (member,) = stable["data"]["members"]
    assert member["memberId"] == mid
    assert member["subscription"] == {"topics": ["dt"], "userData": None, "ownedPartitions": []}
    assert member["assignment"] == {"assignedPartitions": [{"topic": "dt", "partitions": [0, 1]}], "userData": None}


def test_dump_log_without_decoder_prints_batches_only(tmp_path):
    paths, *_ = consumer_group_log(tmp_path)
    lines = run("--files", paths["dumped"]).splitlines()
    assert lines[1] == "Log starting offset: 0"
    assert lines[2:] and all(BATCH_LINE.match(x) for x in lines[2:])


def _segment(tmp_path, batches, name="00000000000000000007.log"):
    d = tmp_path / "seg"
    d.mkdir(exist_ok=True)
    path = d / name
    with open(path, "wb") as f:
        for b in batches:
            f.write(b)
    return str(path)


def test_dump_log_tombstones_unknown_types_text_and_producer_fields(tmp_path):
    from kgroup.coordinator.coordinator_records import group_metadata_tombstone, offset_commit_record
    oc = offset_commit_record("g", "t", 3, 42, -1, "", 1000, None)
    tomb = group_metadata_tombstone("g")
    unknown = (99).to_bytes(2, "big") + b"whatever"
    first = build_batch([Record(key=oc.key, value=oc.value, timestamp=1000),
                         Record(key=tomb.key, value=None, timestamp=1001),
                         Record(key=unknown, value=b"\x00\x00", timestamp=1002)], base_offset=7)
    second = build_batch([Record(key=b"k1", value=b"v\xc3\xa9", headers=[("h", b"x")], timestamp=1003)],
                         base_offset=10, producer_id=17, producer_epoch=2, base_sequence=40)
    path = _segment(tmp_path, [first, second])
    lines = run(path, "--offsets-decoder").splitlines()
    assert lines[1] == "Log starting offset: 7"
    assert lines[2].startswith("baseOffset: 7 lastOffset: 9 count: 3 baseSequence: -1 lastSequence: -1 "
                               "producerId: -1 producerEpoch: -1")
    assert lines[3].endswith('key: {"type":"1","data":{"group":"g","topic":"t","partition":3}} payload: '
                             '{"version":"3","data":{"offset":42,"leaderEpoch":-1,"metadata":"","commitTimestamp":1000}}')
    assert lines[4].endswith('key: {"type":"2","data":{"group":"g"}} payload: <DELETE>')
    assert "keySize: 10 valueSize: 2" in lines[5]
    assert lines[5].endswith("key: Unknown record type 99 at offset 9, skipping.")
    assert re.match(r"baseOffset: 10 lastOffset: 10 count: 1 baseSequence: 40 lastSequence: 40 producerId: 17 "
                    r"producerEpoch: 2 .* position: %d CreateTime: 1003 " % len(first), lines[6])
    plain = run(path, "--print-data-log").splitlines()
    assert plain[-1] == "| offset: 10 CreateTime: 1003 keySize: 2 valueSize: 3 sequence: 40 headerKeys: [h] " \
                        "key: k1 payload: vé"


def test_dump_log_reports_a_torn_tail_and_a_bad_crc(tmp_path):
    good = build_batch([Record(key=b"a", value=b"b", timestamp=5)])
    damaged = bytearray(build_batch([Record(key=b"c", value=b"d", timestamp=6)], base_offset=1))
    damaged[-1] ^= 0xFF                                   # inside the CRC'd part
    path = _segment(tmp_path, [good, bytes(damaged), good[:30]], "00000000000000000000.log")
    lines = run(path).splitlines()
    assert lines[2].endswith("isvalid: true") and lines[3].endswith("isvalid: false")
    assert lines[4] == "Found 30 invalid bytes at the end of 00000000000000000000.log"


def test_dump_log_indexes_and_cli_module(tmp_path):
    d = tmp_path / "idx"
    d.mkdir()
    (d / "00000000000000000100.index").write_bytes(struct.pack(">iiii", 0, 0, 5, 4096))
    (d / "00000000000000000100.timeindex").write_bytes(struct.pack(">qi", 1700, 5))
    text = run(str(d / "00000000000000000100.index"), str(d / "00000000000000000100.timeindex"))
    assert "offset: 100 position: 0\noffset: 105 position: 4096\n" in text
    assert "timestamp: 1700 offset: 105\n" in text
    seg = _segment(tmp_path, [build_batch([Record(key=b"a", value=b"b", timestamp=5)])])
    out = subprocess.run([sys.executable, "-m", "kgroup.dump_log", seg, "--deep-iteration"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.splitlines()[-1].startswith("| offset: 0 CreateTime: 5 keySize: 1")
    missing = subprocess.run([sys.executable, "-m", "kgroup.dump_log", str(d / "nope.log")], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "nope.log" in missing.stderr
