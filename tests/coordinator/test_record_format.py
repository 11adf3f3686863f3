"""The bytes our records produce, decoded by a tiny decoder built straight from the facts of Kafka's
record specs (tests/kafka_spec/, independent of kgroup's codec)."""
from __future__ import annotations

import struct

from tests.coordinator.support import Ctx, assignment, subscription
from tests.kafka_spec import load_spec as load_record_spec


def load_spec(name):
    return load_record_spec(name, "records")


def in_versions(spec: str, v: int) -> bool:
    if spec in (None, "none"):
        return False
    if spec.endswith("+"):
        return v >= int(spec[:-1])
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo) <= v <= int(hi)
    return v == int(spec)


class Reader:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, fmt):
        (x,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return x

    def blob(self, n):
        b = self.buf[self.pos:self.pos + n]
        assert len(b) == n, "runs past the end"
        self.pos += n
        return b


def decode_struct(r: Reader, fields, version, commons):
    out = {}
    for f in fields:
        if not in_versions(f["versions"], version):
            continue
        out[f["name"]] = decode_value(r, f, f["type"], version, commons)
    return out


def decode_value(r: Reader, f, typ, version, commons):
    nullable = in_versions(f.get("nullableVersions"), version)
    if typ.startswith("[]"):
        n = r.take(">i")
        if n < 0:
            assert nullable
            return None
        return [decode_value(r, {**f, "nullableVersions": None}, typ[2:], version, commons) for _ in range(n)]
    if typ in ("int8", "int16", "int32", "int64"):
        return r.take({"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q"}[typ])
    if typ == "string":
        n = r.take(">h")
        if n < 0:
            assert nullable, f"null {f['name']}"
            return None
        return r.blob(n).decode()
    if typ == "bytes":
        n = r.take(">i")
        if n < 0:
            assert nullable
            return None
        return bytes(r.blob(n))
    return decode_struct(r, commons[typ], version, commons)


def decode(name, buf, *, expect_flexible=False):
    spec = load_spec(name)
    commons = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
    r = Reader(buf)
    version = r.take(">h")
    assert in_versions(spec["validVersions"], version) or name.endswith("Key")
    assert in_versions(spec.get("flexibleVersions"), version) == expect_flexible
    out = decode_struct(r, spec["fields"], version if not name.endswith("Key") else
                        (2 if name == "GroupMetadataKey" else 1), commons)
    assert r.pos == len(buf), "trailing bytes"
    return version, out


def test_offset_commit_records_decode_with_the_json_specs():
    c = Ctx()
    c.now = 1234
    c.commit("grp", {("topic", 3): 77}, metadata="meta", leader_epoch=5)
    key, value = c.log[-1]
    assert decode("OffsetCommitKey", key) == (1, {"group": "grp", "topic": "topic", "partition": 3})
    assert decode("OffsetCommitValue", value) == (3, {"offset": 77, "leaderEpoch": 5, "metadata": "meta",
                                                      "commitTimestamp": 1234})
    c.commit("grp", {("topic", 4): 78}, version=2, retention=1000)
    key, value = c.log[-1]
    assert decode("OffsetCommitValue", value) == (1, {"offset": 78, "metadata": "", "commitTimestamp": 1234,
                                                      "expireTimestamp": 2234})
    c.delete_offsets("grp", {"topic": [3]})
    key, value = c.log[-1]
    assert value is None and decode("OffsetCommitKey", key)[1]["partition"] == 3


def test_group_metadata_records_decode_with_the_json_specs():
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2)
    key, value = c.log[-1]
    assert decode("GroupMetadataKey", key) == (2, {"group": "g"})
    version, v = decode("GroupMetadataValue", value)
    assert version == 3
    assert (v["protocolType"], v["generation"], v["protocol"], v["leader"]) == ("consumer", gen, "range", leader)
    assert v["currentStateTimestamp"] == 6000        # entered CompletingRebalance at 6000
    members = {m["memberId"]: m for m in v["members"]}
    assert set(members) == {a, b}
    m = members[a]
    assert (m["groupInstanceId"], m["clientId"], m["clientHost"], m["rebalanceTimeout"], m["sessionTimeout"]) == \
        (None, "client", "/127.0.0.1", 30000, 10000)
    assert m["subscription"] == subscription("t")
    assert {mm["assignment"] for mm in v["members"]} == {assignment(t=[0]), assignment(t=[1])}
    # the first record of the group: the "empty group" written by the first JoinGroup
    version, first = decode("GroupMetadataValue", c.log[0][1])
    assert first == {"protocolType": "", "generation": 0, "protocol": None, "leader": None,
                     "currentStateTimestamp": 0, "members": []}


def test_group_tombstone_and_empty_generation_decode():
    c = Ctx()
    gen, (a,), leader = c.stable_group("g", 1)
    c.leave("g", a)
    version, v = decode("GroupMetadataValue", c.log[-1][1])
    assert (v["generation"], v["protocol"], v["leader"], v["members"]) == (gen + 1, None, None, [])
    assert v["protocolType"] == "consumer"
    c.delete_groups("g")
    key, value = c.log[-1]
    assert value is None and decode("GroupMetadataKey", key) == (2, {"group": "g"})
