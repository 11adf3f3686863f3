"""Matrix, cross-cutting: a broker restart whose __consumer_offsets takes seconds to load.
Every client rides through COORDINATOR_LOAD_IN_PROGRESS without resetting its position or
losing a commit.

Set-up: __consumer_offsets is filled with 600k offset commits of filler groups (every partition
but 49; each commit a key of its own, since loading replays only the last record of each key), and
each client's group maps to partition 49, which loads last (the runtime loads the
partitions in order). One member per client consumes 3 x 10 records and commits them; the broker
is SIGKILLed and restarted on the same port. While it loads (its log says how long), 30 records
arrive per topic: the clients fetch them (the data path does not wait for the coordinator) and
commit, and their OffsetCommits (and JoinGroups, if any) get COORDINATOR_LOAD_IN_PROGRESS; after
the load 30 more arrive. Each client must read all 60 once more-or-less (at-least-once: a commit
refused while loading may repeat what followed it) but nothing below its pre-restart commits
(no reset to earliest), miss nothing (no reset to latest), keep its member alive, and its
commits must reach the log end; the commits made before the restart are there after the load.
"""
import re
import time

import pytest

from kgroup.coordinator import group_partition
from kgroup.protocol.api import parse_response
from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
from tests.harness import BrokerProcess, RawClient
from tests.interop.test_matrix_harness import (
    BROKER_OVERRIDES, CONSUMER_PROTOCOL_CLIENTS, GROUP_CLIENTS, Members, _Admin, check_result, create_topics, end_offsets, free_port, produce_reference, run_per_client, tag, wait_committed, wait_until)

pytestmark = [pytest.mark.interop, pytest.mark.matrix]

PARTITIONS = 3
FILLER_RECORDS = 600_000
FILLER_GROUPS = 6_000     # x 100 partitions: every filler commit is a distinct key
LAST = 49  # __consumer_offsets partition loaded last
# the consumer-protocol clients' ConsumerGroupHeartbeats meet COORDINATOR_LOAD_IN_PROGRESS too
CLIENTS = GROUP_CLIENTS + CONSUMER_PROTOCOL_CLIENTS


def group_on_last_partition(prefix: str) -> str:
    n = 0
    while group_partition(f"{prefix}-{n}") != LAST:
        n += 1
    return f"{prefix}-{n}"


GROUPS = {c: group_on_last_partition(f"load-{c}") for c in CLIENTS}


def fill_offsets_topic(port: int, records: int) -> None:
    """``records`` offset commits (simple commits, generation -1) of filler groups that live on
    every __consumer_offsets partition but the last, pipelined 50 requests deep; each group
    commits its 100 partitions once (while records <= FILLER_GROUPS x 100), so no commit
    overwrites another and the load must replay them all."""
    T, P = OffsetCommitRequest.OffsetCommitRequestTopic, OffsetCommitRequest.OffsetCommitRequestPartition
    groups = [g for g in (f"filler-{i}" for i in range(2 * FILLER_GROUPS))
              if group_partition(g) != LAST][:FILLER_GROUPS]
    c = RawClient(port)
    try:
        in_flight, written, i = 0, 0, 0
        while written < records:
            g = groups[i % len(groups)]
            i += 1
            c.send(OffsetCommitRequest(group_id=g, generation_id_or_member_epoch=-1, member_id="", topics=[
                T(name="filler", partitions=[P(partition_index=p, committed_offset=i, committed_metadata="")
                                             for p in range(100)])]), 8)
            written += 100
            in_flight += 1
            if in_flight == 50 or written >= records:
                for _ in range(in_flight):
                    _, resp = parse_response(8, 8, c.recv_frame())
                    assert all(p.error_code == 0 for t in resp.topics for p in t.partitions)
                in_flight = 0
    finally:
        c.close()


def _batch(client, label, per_partition):
    return [(f"k{i}", f"{client}-{label}-{p}-{i}", p) for p in range(PARTITIONS) for i in range(per_partition)]


def _start(client, broker, tmp_path, members_by_client):
    topic, group = f"load-{client}", GROUPS[client]
    members = members_by_client[client] = Members()
    m = members.start(client, broker.bootstrap, group, [topic], log_dir=str(tmp_path))
    first = _batch(client, "a", 10)
    produce_reference(broker.bootstrap, topic, first)
    wait_until(lambda: {r[3] for r in m.records()} >= {v for _, v, _ in first}, 40,
               lambda: f"the first 30 records: {m.describe()}")
    return wait_committed(broker.bootstrap, group, {(topic, p): 10 for p in range(PARTITIONS)})


def _ride_through(client, broker, restarted_at, loaded_at, before, members_by_client):
    topic, group = f"load-{client}", GROUPS[client]
    (m,) = members_by_client[client]
    try:
        want = {f"{client}-{label}-{p}-{i}" for label in "bc" for p in range(PARTITIONS) for i in range(10)}
        wait_until(lambda: {r[3] for r in m.records(restarted_at)} >= want, 60,
                   lambda: f"the 60 records produced around the load: {m.describe()}")
        after = m.records(restarted_at)
        reread = [r for r in after if r[2] < before[(r[0], r[1])]]
        assert not reread, f"position reset: re-read {reread[:5]} below the commits {before}"
        wait_committed(broker.bootstrap, group, end_offsets(broker.bootstrap, topic, PARTITIONS), timeout=40)
        assert m.alive, "the consumer died"
        fatal = [e for e in m.errors() if e.get("where") in ("fatal",)]
        assert not fatal, fatal
        during = sum(1 for e in m.of("records") if restarted_at <= e["t"] < loaded_at for _ in e["recs"])
        assert during > 0, "the client read nothing while the coordinator loaded: it never met LOAD_IN_PROGRESS"
        return {"read_while_loading": during, "duplicates": len(after) - len({r[3] for r in after}),
                "errors": sorted({f"{e.get('where')}:{e.get('type')}:{str(e.get('msg'))[:90]}" for e in m.errors()})}
    except AssertionError as e:
        raise AssertionError(f"{e}\n--- member ---\n{m.describe()}") from e


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("matrix-load")
    port = free_port()
    overrides = BROKER_OVERRIDES + [f"listeners=PLAINTEXT://127.0.0.1:{port}"]
    broker = BrokerProcess(tmp / "data", overrides).start()
    members_by_client: dict = {}
    try:
        create_topics(broker.bootstrap, {"filler": 100, **{f"load-{c}": PARTITIONS for c in CLIENTS}})
        fill_offsets_topic(broker.port, FILLER_RECORDS)
        first = run_per_client(_start, CLIENTS, broker, tmp, members_by_client)
        before = {c: v for c, (ok, v) in first.items() if ok}
        broker.kill()
        restarted_at = time.time()
        broker = BrokerProcess(tmp / "data", overrides).start()
        since = len(broker.log_text())
        for c in before:
            produce_reference(broker.bootstrap, f"load-{c}", _batch(c, "b", 10))
        line = wait_until(lambda: re.search(r"loaded \d+ partition\(s\) of __consumer_offsets in ([\d.]+) s",
                                            broker.log_text()[since:]), 120, "the load to finish")
        loaded_at = time.time()
        load_s = float(line.group(1))
        assert load_s >= 1.5, f"__consumer_offsets loaded in {load_s} s: not enough filler to test anything"
        for c in before:
            produce_reference(broker.bootstrap, f"load-{c}", _batch(c, "c", 10))
        second = run_per_client(lambda c: _ride_through(c, broker, restarted_at, loaded_at, before[c],
                                                       members_by_client), list(before))
        yield {c: first[c] if not first[c][0] else second[c] for c in CLIENTS}, load_s
    finally:
        for ms in members_by_client.values():
            ms.close()
        _Admin.drop(broker.bootstrap)
        broker.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_rides_through_coordinator_load_in_progress(results, client, record_property):
    tag(record_property, client, "coordinator-load-in-progress")
    by_client, load_s = results
    record_property("load_seconds", load_s)
    value = check_result(by_client, client)
    record_property("ride_through", str(value))
