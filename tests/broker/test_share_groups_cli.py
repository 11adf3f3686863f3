"""``kgroup share-groups`` (Kafka 4.3's kafka-share-groups.sh / ShareGroupCommand): its output
layouts (columns, headers, messages) for --list, --describe (offsets, --state, --members, each with
--verbose), --reset-offsets, --delete-offsets and --delete, its argument checks; and the same groups
on /metrics and the console, read from the share coordinator's state (no share-partition is in
memory: nothing fetched them). The groups are made over the wire: an empty one by
AlterShareGroupOffsets (which creates it), a live one by a member's ShareGroupHeartbeat."""
from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

from kgroup.client.admin import Admin
from kgroup.client.assignors import TopicPartition as TP
from kgroup.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from kgroup.testing.broker import KafkaBroker
from tests.broker.test_cli import kgroup
from tests.harness import RawClient


@pytest.fixture(scope="module")
def b(tmp_path_factory):
    # the member heartbeats once: its session must outlast the module
    with KafkaBroker(tmp_path_factory.mktemp("sgcli") / "d", {"group.share.max.session.timeout.ms": 3_600_000,
                                                             "group.share.session.timeout.ms": 3_600_000},
                     metrics=True) as broker:
        broker.create_topic("t", partitions=2)
        broker.create_topic("other-topic-name", partitions=1)
        broker.produce("t", [b"v%d" % i for i in range(10)], partition=0)

        async def alter():
            async with Admin(bootstrap_servers=broker.bootstrap_servers) as a:
                assert set((await a.alter_share_group_offsets("sg", {TP("t", 0): 4, TP("t", 1): 0})).values()) == {None}
                assert set((await a.alter_share_group_offsets("gone", {TP("t", 0): 0})).values()) == {None}
        asyncio.run(alter())
        raw = RawClient(broker.port, client_id="cli-member")
        r = raw.request(ShareGroupHeartbeatRequest(group_id="live", member_id="member-1", member_epoch=0,
                                                   subscribed_topic_names=["t"]), 1)
        r = raw.request(ShareGroupHeartbeatRequest(group_id="live", member_id="member-1", member_epoch=r.member_epoch), 1)
        assert r.error_code == 0 and r.member_epoch == 2
        broker.raw = raw
        yield broker


def sg(b, *args):
    return kgroup("share-groups", "--bootstrap-server", b.bootstrap_servers, *args)


def out(r) -> list[str]:
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout.splitlines()


def test_list(b):
    assert out(sg(b, "--list")) == ["gone", "live", "sg"]
    assert out(sg(b, "--list", "--state")) == ["GROUP           STATE", "gone            Empty",
                                               "live            Stable", "sg              Empty"]
    assert out(sg(b, "--list", "--state", "stable")) == ["GROUP           STATE", "live            Stable"]
    # kafka-consumer-groups.sh leaves share groups out (ListGroupsOptions.forConsumerGroups)
    r = kgroup("groups", "--bootstrap-server", b.bootstrap_servers, "--list")
    assert r.returncode == 0 and r.stdout == ""
    r = sg(b, "--list", "--state", "Bogus")
    assert r.returncode == 1 and r.stderr.startswith(
        "Invalid state list 'Bogus'. Valid states are: Empty, Stable, Dead\n")


def test_describe_offsets_state_and_members(b):
    assert out(sg(b, "--describe", "--group", "sg")) == [
        "", "GROUP           TOPIC           PARTITION  START-OFFSET  LAG",
        "sg              t               0          4             6",
        "sg              t               1          0             0"]
    assert out(sg(b, "--describe", "--group", "sg", "--offsets", "--verbose")) == [
        "", "GROUP           TOPIC           PARTITION  LEADER-EPOCH  START-OFFSET  LAG",
        "sg              t               0          -             4             6",
        "sg              t               1          -             0             0"]
    c = f"127.0.0.1:{b.port}  (1)"
    r = sg(b, "--describe", "--group", "sg", "--state")
    assert out(r) == ["", "GROUP           COORDINATOR (ID)          STATE           #MEMBERS",
                      f"sg              {c:<25} Empty           0"]
    assert r.stderr == "\nShare group 'sg' has no active members.\n"
    assert out(sg(b, "--describe", "--group", "live", "--state", "--verbose")) == [
        "", "GROUP           COORDINATOR (ID)          STATE           GROUP-EPOCH  ASSIGNMENT-EPOCH  #MEMBERS",
        f"live            {c:<25} Stable          2            2                 1"]
    assert out(sg(b, "--describe", "--group", "live", "--members")) == [
        "", "GROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS  ASSIGNMENT",
        "live            member-1        /127.0.0.1      cli-member      2            t:0,1"]
    assert out(sg(b, "--describe", "--group", "live", "--members", "--verbose")) == [
        "", "GROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS  MEMBER-EPOCH  ASSIGNMENT",
        "live            member-1        /127.0.0.1      cli-member      2            2             t:0,1"]
    r = sg(b, "--describe", "--group", "sg", "--members")
    assert (out(r), r.stderr) == ([], "\nShare group 'sg' has no active members.\n")
    lines = out(sg(b, "--describe", "--all-groups", "--state"))
    assert [x.split()[0] for x in lines if x and not x.startswith("GROUP")] == ["gone", "live", "sg"]
    r = sg(b, "--describe", "--group", "nope")
    assert r.returncode == 1 and r.stdout.splitlines() == [
        "", "Error: Executing share group command failed due to "
            "org.apache.kafka.common.errors.GroupIdNotFoundException: Group nope not found."]


def test_reset_offsets(b):
    assert out(sg(b, "--reset-offsets", "--group", "gone", "--all-topics", "--to-latest", "--dry-run")) == [
        "", "GROUP           TOPIC           PARTITION  NEW-OFFSET", "gone            t               0          10"]
    assert out(sg(b, "--reset-offsets", "--group", "gone", "--topic", "t:0", "--to-datetime",
                  "2000-01-01T00:00:00.000", "--execute"))[1:] == [
        "GROUP           TOPIC           PARTITION  NEW-OFFSET", "gone            t               0          0"]
    assert out(sg(b, "--reset-offsets", "--group", "gone", "--topic", "t", "--to-offset", "99", "--execute"))[2:] == [
        "gone            t               0          10", "gone            t               1          0"]
    assert out(sg(b, "--describe", "--group", "gone"))[2:] == [
        "gone            t               0          10            0",
        "gone            t               1          0             0"]
    r = sg(b, "--reset-offsets", "--group", "live", "--all-topics", "--to-earliest", "--execute")
    assert (r.returncode, r.stderr) == (1, "Share group 'live' is not empty.\n")
    r = sg(b, "--reset-offsets", "--group", "gone", "--all-topics", "--to-earliest")
    assert r.returncode == 1 and r.stderr.startswith("Option [reset-offsets] takes the option: [execute] or [dry-run]")
    r = sg(b, "--reset-offsets", "--group", "gone", "--all-topics", "--execute")
    assert r.returncode == 1 and r.stderr.startswith(
        "Option [reset-offsets] takes one of these options: [by-duration], [to-datetime], [to-earliest], "
        "[to-latest], [to-offset]")
    r = sg(b, "--reset-offsets", "--group", "gone", "--topic", "t:9", "--to-earliest", "--execute")
    assert "The partitions \"t-9\" do not exist" in r.stdout


def test_delete_offsets_and_delete(b):
    r = sg(b, "--delete-offsets", "--group", "gone", "--topic", "t", "--topic", "nope")
    assert r.returncode == 1 and r.stdout.splitlines() == [
        "", "TOPIC           STATUS", "nope            Error: This server does not host this topic-partition.",
        "t               Successful"]
    r = sg(b, "--delete-offsets", "--group", "live", "--topic", "t")
    assert r.stdout.splitlines() == ["", "Error: The group is not empty.", "", "TOPIC           STATUS",
                                     "t               Error: The group is not empty."]
    r = sg(b, "--delete", "--group", "gone", "--group", "live", "--group", "nope")
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        "", "Error: Deletion of some share groups failed:",
        "* Group 'live' could not be deleted due to: org.apache.kafka.common.errors.GroupNotEmptyException: "
        "Share group 'live' is not EMPTY.",
        "* Group 'nope' could not be deleted due to: java.lang.IllegalArgumentException: Group 'nope' is not a "
        "share group.",
        "", "These share groups were deleted successfully: 'gone'"]
    assert "gone" not in out(sg(b, "--list"))


def test_argument_checks(b):
    for args, message in ((["--list", "--delete", "--all-groups"], "Command must include exactly one action: --list, --describe, "
                                                     "--delete, --reset-offsets, --delete-offsets."),
                          ([], "Command must include exactly one action"),
                          (["--describe"], "Option [describe] takes one of these options: [all-groups], [group]"),
                          (["--describe", "--group", "g", "--members", "--state"],
                           "Option [describe] takes at most one of these options: [members], [offsets], [state]"),
                          (["--delete", "--group", "g", "--all-groups"],
                           "Option [delete] takes either [group] or [all-groups], not both."),
                          (["--delete-offsets", "--group", "g"],
                           "Option [delete-offsets] takes the following options: [group], [topic]"),
                          (["--list", "--members"],
                           "Option(s) [members] are unavailable given other options on the command line")):
        r = sg(b, *args)
        assert r.returncode == 1 and r.stderr.startswith(message), (args, r.stderr)
    r = kgroup("share-groups", "--list")
    assert r.returncode == 1 and r.stderr.startswith('Missing required argument "[bootstrap-server]"')


def test_metrics_and_console_from_the_stored_state(b):
    text = urllib.request.urlopen(b.http_url + "/metrics").read().decode()
    assert 'kafka_server_group_coordinator_metrics_group_count{protocol="share"} ' in text
    assert 'kgroup_share_group_members{group="live",state="Stable"} 1' in text
    assert 'kgroup_share_group_epoch{group="live"} 2' in text
    assert 'kgroup_share_partition_start_offset{group="sg",topic="t",partition="0"} 4' in text
    assert 'kgroup_share_partition_lag{group="sg",topic="t",partition="0"} 6' in text
    assert 'kafka_server_share_partition_metrics_in_flight_message_count{group="sg",topic="t",partition="0"} 0' in text
    shown = json.loads(urllib.request.urlopen(b.http_url + "/api/share-groups").read())
    assert {g["group"]: (g["state"], g["members"]) for g in shown}["live"] == ("Stable", 1)
    one = json.loads(urllib.request.urlopen(b.http_url + "/api/share-groups/sg").read())
    assert [(p["topic"], p["partition"], p["start_offset"], p["lag"], p["loaded"]) for p in one["partitions"]] == [
        ("t", 0, 4, 6, False), ("t", 1, 0, 0, False)]
    page = urllib.request.urlopen(b.http_url + "/share-groups").read().decode()
    assert "<table id='share-groups'>" in page and "href='/share-groups/live'" in page
    page = urllib.request.urlopen(b.http_url + "/share-groups/live").read().decode()
    assert "<code>member-1</code>" in page and "<td>t [0, 1]</td>" in page
    page = urllib.request.urlopen(b.http_url + "/share-groups/sg").read().decode()
    assert "<table id='share-partitions'>" in page and "No members." in page
    try:
        urllib.request.urlopen(b.http_url + "/share-groups/nope")
        raise AssertionError("a missing share group is a 404")
    except urllib.error.HTTPError as e:
        assert e.code == 404
