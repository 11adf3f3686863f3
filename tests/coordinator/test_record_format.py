"""The bytes our records produce, decoded by the independent decoder built straight from the facts
of Kafka's record specs (tests/kafka_spec/, independent of kgroup's codec): a field absent from the
written version reads as its spec default, as Kafka's generated readers give it."""
from __future__ import annotations

from tests.coordinator.support import Ctx, assignment, subscription
from tests.kafka_spec import spec_decode_offsets_record


def decode(key, value):
    """(kind, key fields, value version, value fields); the version and fields are None for a
    tombstone."""
    kind, k, v = spec_decode_offsets_record(key, value)
    if v is None:
        return kind, k, None, None
    version = v.pop("_version")
    return kind, k, version, v


def test_offset_commit_records_decode_with_the_json_specs():
    c = Ctx()
    c.now = 1234
    c.commit("grp", {("topic", 3): 77}, metadata="meta", leader_epoch=5)
    key, value = c.log[-1]
    assert key[:2] == b"\x00\x01"                     # record type 1: an offset commit
    assert decode(key, value) == ("offset_commit", {"group": "grp", "topic": "topic", "partition": 3}, 3,
                                  {"offset": 77, "leaderEpoch": 5, "metadata": "meta", "commitTimestamp": 1234,
                                   "expireTimestamp": -1, "topicId": None})    # topicId: tagged, v4+
    c.commit("grp", {("topic", 4): 78}, version=2, retention=1000)
    # v1, the only version holding an expire timestamp (OffsetCommit v2's retention time)
    assert decode(*c.log[-1])[2:] == (1, {"offset": 78, "leaderEpoch": -1, "metadata": "", "commitTimestamp": 1234,
                                          "expireTimestamp": 2234, "topicId": None})
    c.delete_offsets("grp", {"topic": [3]})
    kind, k, version, v = decode(*c.log[-1])
    assert c.log[-1][1] is None and kind == "offset_commit" and k["partition"] == 3 and v is None


def test_group_metadata_records_decode_with_the_json_specs():
    c = Ctx()
    gen, (a, b), leader = c.stable_group("g", 2)
    key, value = c.log[-1]
    assert key[:2] == b"\x00\x02"                     # record type 2: group metadata
    kind, k, version, v = decode(key, value)
    assert (kind, k, version) == ("group_metadata", {"group": "g"}, 3)
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
    assert decode(*c.log[0])[2:] == (3, {"protocolType": "", "generation": 0, "protocol": None, "leader": None,
                                         "currentStateTimestamp": 0, "members": []})


def test_group_tombstone_and_empty_generation_decode():
    c = Ctx()
    gen, (a,), leader = c.stable_group("g", 1)
    c.leave("g", a)
    _, _, _, v = decode(*c.log[-1])
    assert (v["generation"], v["protocol"], v["leader"], v["members"]) == (gen + 1, None, None, [])
    assert v["protocolType"] == "consumer"
    c.delete_groups("g")
    key, value = c.log[-1]
    assert value is None and decode(key, value) == ("group_metadata", {"group": "g"}, None, None)
