"""Matrix, cross-cutting: a consumer killed with SIGKILL. Per client, a group of three members of
that client shares a 6-partition topic; everything produced so far is consumed and committed;
the first member (the group's first joiner, normally its leader) is SIGKILLed, so no LeaveGroup
is sent; 30 records are then produced to its partitions only. The two others must take its
partitions over no sooner than the session timeout (6 s) after its last heartbeat, and continue from its last
committed offsets: the first record each reads there is at the committed offset (not the
partition's start: no reset to earliest; nothing skipped: no reset to latest), all 30 arrive
once, and commits reach the new log end.

The consumer-protocol clients (KIP-848) too: there the broker's session timeout (the matrix sets
group.consumer.session.timeout.ms to the same 6 s) expires the member. All clients run at once
against one broker (the session timeout is waited once)."""
import time

import pytest

from tests.harness import BrokerProcess
from tests.interop.test_matrix_harness import (
    BROKER_OVERRIDES, CONSUMER_PROTOCOL_CLIENTS, GROUP_CLIENTS, HEARTBEAT_MS, SESSION_MS, Members, check_result, committed,
    create_topics, end_offsets, messages, produce_reference, run_per_client, tag, topic_partitions, wait_committed,
    wait_stable, wait_until)

pytestmark = [pytest.mark.interop, pytest.mark.matrix]

PARTITIONS = 6
CLIENTS = GROUP_CLIENTS + CONSUMER_PROTOCOL_CLIENTS


def _scenario(client, broker, tmp_path):
    topic = group = f"kill-{client}"
    everything = topic_partitions(topic, PARTITIONS)
    members = Members()
    try:
        for i in range(3):
            members.start(client, broker.bootstrap, group, [topic], log_dir=str(tmp_path), client_id=f"{client}-{i}")
            if i == 0:  # the first joiner leads the group
                wait_stable(broker.bootstrap, group, 1, everything, members=members)
        wait_stable(broker.bootstrap, group, 3, everything, members=members)
        first = messages(f"{client}-1", 60, PARTITIONS)
        produce_reference(broker.bootstrap, topic, first)
        wait_until(lambda: {r[3] for m in members for r in m.records()} >= {v for _, v, _ in first}, 30,
                   lambda: f"the first 60 records: {members.describe()}")
        before = wait_committed(broker.bootstrap, group, end_offsets(broker.bootstrap, topic, PARTITIONS))

        victim, survivors = members[0], Members(members[1:])
        lost = victim.owned()
        assert lost, victim.describe()
        victim.kill()
        killed_at = time.time()
        second = [(k, v, p) for k, v, p in messages(f"{client}-2", 30 * PARTITIONS, PARTITIONS)
                  if (topic, p) in lost][:30]
        produce_reference(broker.bootstrap, topic, second)

        state, _, by_member = wait_stable(broker.bootstrap, group, 2, everything, members=survivors,
                                          timeout=SESSION_MS / 1000 + 30)
        took_over = min(e["t"] for m in survivors for e in m.of("assigned")
                        if e["t"] > killed_at and {tuple(tp) for tp in e["added"]} & lost)
        # The session timer restarts at each heartbeat: the victim's last one may have come up to one
        # heartbeat interval before the kill.
        assert took_over - killed_at >= (SESSION_MS - HEARTBEAT_MS) / 1000 - 0.2, \
            f"the killed member's partitions moved after {took_over - killed_at:.1f} s, before its session timeout"
        want = {v for _, v, _ in second}
        wait_until(lambda: {r[3] for m in survivors for r in m.records(killed_at)} >= want, 30,
                   lambda: f"the 30 records produced after the kill: {survivors.describe()}")
        after = [r for m in survivors for r in m.records(killed_at)]
        on_lost = [r for r in after if (r[0], r[1]) in lost]
        for tp in lost:
            offsets = [o for t, p, o, _ in on_lost if (t, p) == tp]
            if offsets:
                assert min(offsets) == before[tp], \
                    f"{tp}: the survivor started at {min(offsets)}, the last commit was {before[tp]}"
        assert sorted(r[3] for r in on_lost) == sorted(want), "records lost or read twice after the takeover"
        wait_committed(broker.bootstrap, group, end_offsets(broker.bootstrap, topic, PARTITIONS))
        return {"takeover_s": round(took_over - killed_at, 2), "committed": committed(broker.bootstrap, group)}
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- members ---\n{members.describe()}") from e
    finally:
        members.close()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("matrix-kill")
    broker = BrokerProcess(tmp / "data", BROKER_OVERRIDES).start()
    try:
        create_topics(broker.bootstrap, {f"kill-{c}": PARTITIONS for c in CLIENTS})
        yield run_per_client(_scenario, CLIENTS, broker, tmp)
    finally:
        broker.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_sigkilled_member_partitions_taken_over_from_last_commit(results, client, record_property):
    tag(record_property, client, "sigkill-takeover")
    check_result(results, client)
