"""`kgroup groups --describe` on a consumer-protocol group (KIP-848) with real librdkafka members
(confluent-kafka 2.16.1, ``group.protocol=consumer``): --state [--verbose] shows the assignor, state,
group epoch and target assignment epoch; --members --verbose shows per member its epoch, current
assignment next to its target, its reconciliation state and its subscription, including while a
member holds a revocation in a slow on_revoke (target != current); the default view shows offsets
with the owning members. None of this may skip."""
from __future__ import annotations

import time

import pytest

from tests.broker.test_cli import kgroup
from tests.harness import BrokerProcess
from tests.interop.test_consumer_protocol import (OVERRIDES, MemberProcess, create_topic, describe, produce,
                                                  wait_for)
from tests.interop.test_matrix_harness import tag

pytestmark = pytest.mark.interop

# One member; its on_revoke sleeps ``revoke_delay`` seconds (librdkafka acknowledges the revocation
# in its next heartbeat only once the callback returned), so the coordinator's target and current
# assignments differ meanwhile.
MEMBER = r'''
import json, sys, time
from confluent_kafka import Consumer
bootstrap, group, topics, client_id, revoke_delay = sys.argv[1:6]
def emit(**kw):
    print(json.dumps(kw), flush=True)
def on_revoke(_c, ps):
    emit(ev="revoking", parts=[[p.topic, p.partition] for p in ps])
    time.sleep(float(revoke_delay))
    emit(ev="revoked")
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
              "client.id": client_id, "auto.offset.reset": "earliest"})
c.subscribe([topics] if topics.startswith("^") else topics.split(","), on_revoke=on_revoke,
            on_assign=lambda _c, ps: emit(ev="assign", parts=[[p.topic, p.partition] for p in ps]))
try:
    while True:
        m = c.poll(0.1)
        if m is not None and not m.error():
            c.commit(message=m, asynchronous=False)
except KeyboardInterrupt:
    pass
finally:
    c.close()
'''


class SlowRevoker(MemberProcess):
    def __init__(self, bootstrap, group, topics, client_id, revoke_delay):
        super().__init__(MEMBER, bootstrap, group, topics, client_id, str(revoke_delay))


def members_table(stdout: str) -> dict[str, dict[str, str]]:
    """--members --verbose rows by CLIENT-ID. Assignments hold ", " so columns are cut at the
    header's column starts (every column is padded to its header's width or more)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    head = lines[0]
    names = head.split()
    starts = [head.index(n if i == 0 else " " + n) + (0 if i == 0 else 1) for i, n in enumerate(names)]
    out = {}
    for line in lines[1:]:
        cells = [line[s:e].strip() for s, e in zip(starts, starts[1:] + [None])]
        row = dict(zip(names, cells))
        out[row["CLIENT-ID"]] = row
    return out


@pytest.mark.matrix
def test_describe_shows_epochs_and_target_next_to_current(tmp_path, record_property):
    """Also the compatibility matrix's Admin cell of our client with group.protocol=consumer (its
    Admin.describe_consumer_groups, list_groups, list_group_offsets and delete_groups, through
    the tool)."""
    tag(record_property, "kgroup.consumer", "admin")
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    members = []
    bs = broker.bootstrap
    try:
        create_topic(bs, "dc", 4)
        produce(bs, "dc", 4, 5)
        first = SlowRevoker(bs, "dcg", "dc", "slow-one", 6)
        members.append(first)
        wait_for(lambda: len(describe(broker.port, "dcg").members) == 1 and
                 describe(broker.port, "dcg").group_state == "Stable", what="a stable one-member group")

        r = kgroup("groups", "--bootstrap-server", bs, "--describe", "--group", "dcg", "--state", "--verbose")
        assert r.returncode == 0, r.stderr
        head, row = [line.split() for line in r.stdout.strip().splitlines()]
        assert head == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                        "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
        g = describe(broker.port, "dcg")
        assert row[0] == "dcg" and row[3:] == ["uniform", "Stable", str(g.group_epoch), str(g.assignment_epoch), "1"]

        r = kgroup("groups", "--bootstrap-server", bs, "--describe", "--group", "dcg", "--members", "--verbose")
        rows = members_table(r.stdout)
        one = rows["slow-one"]
        assert one["CURRENT-ASSIGNMENT"] == one["TARGET-ASSIGNMENT"] == "dc(0,1,2,3)", r.stdout
        assert (one["#PARTITIONS"], one["MEMBER-STATE"], one["SUBSCRIPTION"]) == ("4", "STABLE", "dc")
        assert one["CURRENT-EPOCH"] == one["TARGET-EPOCH"] == str(g.assignment_epoch)

        # a second member joins: the first must give up two partitions, and holds them 6 s in on_revoke
        second = SlowRevoker(bs, "dcg", "dc", "joiner", 0)
        members.append(second)
        wait_for(lambda: first.saw("revoking"), what="the first member's revocation to start")
        r = kgroup("groups", "--bootstrap-server", bs, "--describe", "--group", "dcg", "--members", "--verbose")
        assert first.saw("revoking") and not first.saw("revoked"), "the revocation ended before the describe"
        rows = members_table(r.stdout)
        one, two = rows["slow-one"], rows["joiner"]
        g = describe(broker.port, "dcg")
        # the revoking member stays at its old epoch; its current assignment is what it keeps (Kafka
        # describes the partitions pending revocation in neither assignment)
        assert int(one["CURRENT-EPOCH"]) < g.assignment_epoch and one["MEMBER-STATE"] == "RECONCILING", r.stdout
        assert one["CURRENT-ASSIGNMENT"] == one["TARGET-ASSIGNMENT"] and one["#PARTITIONS"] == "2"
        # the joiner is at the new epoch with its target but none of it yet: target != current
        assert two["CURRENT-EPOCH"] == two["TARGET-EPOCH"] == one["TARGET-EPOCH"] == str(g.assignment_epoch)
        assert two["CURRENT-ASSIGNMENT"] == "-" and two["#PARTITIONS"] == "0"
        assert two["MEMBER-STATE"] == "UNRELEASED_PARTITIONS"
        kept, waited = one["TARGET-ASSIGNMENT"], two["TARGET-ASSIGNMENT"]
        assert kept != waited and len(kept.split(",")) == len(waited.split(",")) == 2, (kept, waited)
        r = kgroup("groups", "--bootstrap-server", bs, "--describe", "--group", "dcg", "--state", "--verbose")
        assert r.stdout.strip().splitlines()[1].split()[4] == "Reconciling", r.stdout
        assert "is rebalancing" in r.stderr

        # once the revocation is acknowledged every member owns its target at the assignment epoch
        def settled():
            rows = members_table(kgroup("groups", "--bootstrap-server", bs, "--describe", "--group", "dcg",
                                        "--members", "--verbose").stdout)
            return len(rows) == 2 and all(
                r["MEMBER-STATE"] == "STABLE" and r["CURRENT-ASSIGNMENT"] == r["TARGET-ASSIGNMENT"]
                and r["#PARTITIONS"] == "2" for r in rows.values())
        wait_for(settled, timeout=30, what="both members stable on two partitions")

        # the default view: committed offsets with the member owning each partition
        wait_for(lambda: all(" 5 " in line for line in kgroup("groups", "--bootstrap-server", bs, "--describe", "--group",
                                                           "dcg").stdout.strip().splitlines()[1:]),
                 what="every partition committed at 5")
        r = kgroup("groups", "--bootstrap-server", bs, "--describe", "--group", "dcg")
        lines = r.stdout.strip().splitlines()
        assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                    "CONSUMER-ID", "HOST", "CLIENT-ID"]
        cells = sorted(line.split() for line in lines[1:])
        assert [c[:6] for c in cells] == [["dcg", "dc", str(p), "5", "5", "0"] for p in range(4)]
        assert sorted(c[8] for c in cells) == ["joiner", "joiner", "slow-one", "slow-one"]

        assert "dcg" in kgroup("groups", "--bootstrap-server", bs, "--list").stdout.split()
        r = kgroup("groups", "--bootstrap-server", bs, "--delete", "--group", "dcg")
        assert r.returncode == 1 and "The group is not empty" in r.stdout, r.stdout
        for m in members:
            m.close()
        r = kgroup("groups", "--bootstrap-server", bs, "--describe", "--group", "dcg", "--state", "--verbose")
        state, group_epoch, _, n = r.stdout.strip().splitlines()[1].split()[4:]
        assert (state, group_epoch, n) == ("Empty", str(g.group_epoch + 2), "0"), r.stdout  # each leave bumps it
        r = kgroup("groups", "--bootstrap-server", bs, "--delete", "--group", "dcg")
        assert r.returncode == 0 and "Deletion of requested consumer groups ('dcg') was successful." in r.stdout
        assert "dcg" not in kgroup("groups", "--bootstrap-server", bs, "--list").stdout.split()
    finally:
        for m in members:
            m.close()
        broker.stop()


def test_describe_classic_group_unchanged_and_missing_group(tmp_path):
    """A classic group still goes through DescribeGroups (ConsumerGroupDescribe answers
    GROUP_ID_NOT_FOUND for it), and a group that does not exist is reported as Kafka's tool does."""
    from confluent_kafka import Consumer
    broker = BrokerProcess(tmp_path / "data", OVERRIDES).start()
    bs = broker.bootstrap
    c = None
    try:
        create_topic(bs, "cl", 2)
        c = Consumer({"bootstrap.servers": bs, "group.id": "clg", "client.id": "classic-one",
                      "session.timeout.ms": 6000})
        c.subscribe(["cl"])
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        assert c.assignment()
        r = kgroup("groups", "--bootstrap-server", bs, "--describe", "--group", "clg", "--state")
        head, row = [line.split() for line in r.stdout.strip().splitlines()]
        assert head[-2:] == ["STATE", "#MEMBERS"] and row[-3:] == ["range", "Stable", "1"], r.stdout
        r = kgroup("groups", "--bootstrap-server", bs, "--describe", "--group", "nope", "--members")
        assert "Consumer group 'nope' does not exist." in r.stdout
    finally:
        if c is not None:
            c.close()
        broker.stop()
