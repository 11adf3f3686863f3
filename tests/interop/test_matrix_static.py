"""Matrix: static membership (KIP-345), per client that has it (kafka-python, aiokafka,
confluent-kafka; and with the consumer group protocol, KIP-848, confluent-kafka and kgroup, whose
restart is a close and a start: the group epoch instead of the generation must not move). Three
static members (group.instance.id) of one client share a 6-partition topic; the first is
SIGKILLed and started again with the same instance id well inside its session timeout. It must get its old partitions back under a new member id, the two others see
no rebalance (no revoke/assign callback), the group's generation in __consumer_offsets does not
move, and past the old session timeout nothing expires. It then resumes from its commits.

All clients run at once against one broker."""
import time

import pytest

from tests.harness import BrokerProcess
from tests.interop.test_matrix_harness import (
    BROKER_OVERRIDES, CONSUMER_PROTOCOL_CLIENTS, SESSION_MS, Members, check_result, create_topics, describe,
    end_offsets, group_epoch, group_generations, messages, produce_reference, run_per_client, tag, topic_partitions, wait_committed, wait_stable, wait_until)

pytestmark = [pytest.mark.interop, pytest.mark.matrix]

CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka") + CONSUMER_PROTOCOL_CLIENTS
PARTITIONS = 6


def _by_instance(bootstrap, group):
    _, _, by_member = describe(bootstrap, group)
    return {inst: parts for _, inst, parts in by_member.values()}, {inst: mid for mid, (_, inst, _) in by_member.items()}


def _scenario(client, broker, tmp_path):
    topic = group = f"static-{client}"
    everything = topic_partitions(topic, PARTITIONS)
    members = Members()
    try:
        for i in range(3):
            members.start(client, broker.bootstrap, group, [topic], instance_id=f"{client}-inst-{i}",
                          log_dir=str(tmp_path), client_id=f"{client}-{i}", assignors=["range"])
            if i == 0:
                wait_stable(broker.bootstrap, group, 1, everything, members=members)
        wait_stable(broker.bootstrap, group, 3, everything, members=members)
        first = messages(f"{client}-1", 60, PARTITIONS)
        produce_reference(broker.bootstrap, topic, first)
        wait_until(lambda: {r[3] for m in members for r in m.records()} >= {v for _, v, _ in first}, 30,
                   lambda: f"the first 60 records: {members.describe()}")
        before = wait_committed(broker.bootstrap, group, end_offsets(broker.bootstrap, topic, PARTITIONS))
        time.sleep(1.0)  # late callbacks of the last generation land
        owned_before, ids_before = _by_instance(broker.bootstrap, group)
        kip848 = client.endswith(".consumer")
        gen_before = (group_epoch(broker.bootstrap, group) if kip848
                      else group_generations(broker.data_dir, group)[-1][0])
        events_before = [len(m.events) for m in members]

        victim = members[0]
        if kip848:
            # KIP-848 refuses a static member's instance id while its previous member has not left
            # (UNRELEASED_INSTANCE_ID, as Kafka): a restart is a close (the -2 leave, which keeps
            # its partitions for the instance id until the session ends) then a new start
            victim.stop()
        else:
            victim.kill()
        killed_at = time.time()
        back = members.start(client, broker.bootstrap, group, [topic], instance_id=f"{client}-inst-0",
                             log_dir=str(tmp_path), client_id=f"{client}-0", assignors=["range"])
        got = back.wait_assigned(timeout=SESSION_MS / 1000 - 1)
        assert time.time() - killed_at < SESSION_MS / 1000, "the restarted member came back too late"
        assert got == owned_before[f"{client}-inst-0"], f"got {got}, had {owned_before[f'{client}-inst-0']}"
        time.sleep(SESSION_MS / 1000 + 1.5)  # past the old session: nothing expires, nothing rebalances
        wait_stable(broker.bootstrap, group, 3, everything, members=Members([back, *members[1:3]]), timeout=5)
        owned_after, ids_after = _by_instance(broker.bootstrap, group)
        assert owned_after == owned_before
        assert ids_after[f"{client}-inst-0"] != ids_before[f"{client}-inst-0"], "the member id was not replaced"
        for i in (1, 2):
            assert ids_after[f"{client}-inst-{i}"] == ids_before[f"{client}-inst-{i}"]
            moved = [e for e in members[i].events[events_before[i]:] if e["ev"] in ("assigned", "revoked", "lost")]
            assert moved == [], f"member {i} saw a rebalance: {moved}"
        if kip848:
            assert group_epoch(broker.bootstrap, group) == gen_before, "the group epoch moved"
        else:
            generations = group_generations(broker.data_dir, group)
            assert generations[-1][0] == gen_before, f"generation moved: {[g[:2] for g in generations[-3:]]}"
            assert ids_after[f"{client}-inst-0"] in generations[-1][2], "the new member id is not in the group record"

        # the restarted member resumes from the commits of its previous incarnation
        second = [(k, v, p) for k, v, p in messages(f"{client}-2", 60, PARTITIONS) if (topic, p) in got]
        produce_reference(broker.bootstrap, topic, second)
        wait_until(lambda: {r[3] for r in back.records()} >= {v for _, v, _ in second}, 30,
                   lambda: f"records after the restart: {back.describe()}")
        for tp in got:
            offsets = [o for t, p, o, _ in back.records() if (t, p) == tp]
            assert offsets and min(offsets) == before[tp], f"{tp}: resumed at {min(offsets)}, committed {before[tp]}"
        return {"generation": gen_before, "owned": {k: sorted(v) for k, v in owned_after.items()}}
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- members ---\n{members.describe()}") from e
    finally:
        members.close()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("matrix-static")
    broker = BrokerProcess(tmp / "data", BROKER_OVERRIDES).start()
    try:
        create_topics(broker.bootstrap, {f"static-{c}": PARTITIONS for c in CLIENTS})
        yield run_per_client(_scenario, CLIENTS, broker, tmp)
    finally:
        broker.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_static_member_restart_keeps_assignment_and_generation(results, client, record_property):
    tag(record_property, client, "static-membership")
    check_result(results, client)
