"""The streaming reader's offset logic with fake driver-side clients (no JVM): discovery of new
partitions, data loss, rate limits, Trigger.AvailableNow and coordinated take-overs."""
from __future__ import annotations

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from kgroup.client.assignors import TopicPartition as TP
from kgroup.spark.fetch import DataLossError
from kgroup.spark.options import parse_options
from kgroup.spark.source import KgroupStreamReader, kafka_schema


class FakeDriver:
    def __init__(self, earliest, latest):
        self.e, self.l, self.commits = dict(earliest), dict(latest), []

    def partitions(self, missing_ok):
        return set(self.l)

    def earliest(self, tps):
        return {tp: self.e[tp] for tp in tps}

    def latest(self, tps):
        return {tp: self.l[tp] for tp in tps}

    def commit(self, group, offsets):
        self.commits.append(dict(offsets))
        return True


class FakeMember:
    def __init__(self, assignment, committed=None):
        self.assignment, self.committed, self.acquired = set(assignment), dict(committed or {}), set(assignment)
        self.processed, self.commits = {}, []

    def sync(self, timeout_ms):
        return self.assignment

    def take_acquired(self):
        out, self.acquired = self.acquired, set()
        return out

    def committed_offsets(self, tps):
        return {tp: self.committed[tp] for tp in tps if tp in self.committed}

    def commit(self, offsets):
        self.processed.update(offsets)
        self.commits.append({tp: o for tp, o in offsets.items() if tp in self.assignment})


def make(driver, member=None, **options):
    opts = parse_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t", **options})
    opts.check_stream()
    r = KgroupStreamReader(opts, kafka_schema())
    r._driver, r._member, r._group_id = driver, member, "g"
    return r


A, B, C = TP("t", 0), TP("t", 1), TP("t", 2)


def test_standalone_offsets_discovery_and_commits():
    d = FakeDriver({A: 0, B: 5}, {A: 10, B: 20})
    r = make(d, startingOffsets="earliest")
    start = r.initialOffset()
    assert start == {"t": {"0": 0, "1": 5}}
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 10, "1": 20}}
    assert [(p.range.partition, p.range.from_offset, p.range.until_offset) for p in r.partitions(start, end)] == \
        [(0, 0, 10), (1, 5, 20)]
    d.e[C], d.l[C] = 3, 8  # a partition appears: it starts at its earliest offset
    end2 = r.latestOffset(end, ReadAllAvailable())
    assert end2 == {"t": {"0": 10, "1": 20, "2": 8}, "$from": {"t": {"2": 3}}}
    assert [tuple(p.range)[1:] for p in r.partitions(end, end2)] == [(2, 3, 8)]
    assert r.latestOffset(end2, ReadAllAvailable()) == end2  # nothing new: the same dict, no batch
    r.commit(end2)
    assert d.commits == [{A: 0, B: 5}, {A: 10, B: 20}, {C: 8}]  # processed offsets mirrored to the group


def test_limits_and_available_now():
    d = FakeDriver({A: 0, B: 0}, {A: 100, B: 300})
    r = make(d, startingOffsets="earliest", maxOffsetsPerTrigger="40")
    start = r.initialOffset()
    assert r.getDefaultReadLimit() == ReadMaxRows(40)
    assert r.latestOffset(start, ReadMaxRows(40)) == {"t": {"0": 10, "1": 30}}
    assert r.latestOffset(start, ReadMinRows(1000)) == start
    r.prepareForTriggerAvailableNow()
    d.l = {A: 500, B: 500}  # arrives after the trigger started: not read
    assert r.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 100, "1": 300}}


def test_data_loss_is_an_error_unless_failondataloss_false():
    d = FakeDriver({A: 0}, {A: 10})
    start = {"t": {"0": 50}}  # the checkpoint is past the log end: the topic was recreated
    with pytest.raises(DataLossError, match="went back"):
        make(d).latestOffset(start, ReadAllAvailable())
    assert make(d, failOnDataLoss="false").latestOffset(start, ReadAllAvailable()) == \
        {"t": {"0": 10}, "$from": {"t": {"0": 0}}}
    d2 = FakeDriver({}, {})
    with pytest.raises(DataLossError, match="are gone"):
        make(d2).latestOffset(start, ReadAllAvailable())


def test_coordinated_plans_its_assignment_and_takes_over_from_committed_offsets():
    d = FakeDriver({A: 0, B: 0, C: 0}, {A: 50, B: 60, C: 70})
    m = FakeMember({A}, committed={})
    r = make(d, m, startingOffsets="earliest", groupMode="coordinated", **{"kafka.group.id": "g"})
    start = r.initialOffset()
    assert start == {"t": {"0": 0}}
    end = r.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 50}}
    # a rebalance: A stays, B is taken over from another member's commit (40), C was never committed
    m.assignment, m.acquired, m.committed = {A, B, C}, {B, C}, {B: 40}
    end2 = r.latestOffset(end, ReadAllAvailable())
    assert end2 == {"t": {"0": 50, "1": 60, "2": 70}, "$from": {"t": {"1": 40, "2": 0}}}
    assert [tuple(p.range)[1:] for p in r.partitions(end, end2)] == [(1, 40, 60), (2, 0, 70)]
    # A is revoked: the next plan only has B and C; the checkpoint's A is never planned again
    m.assignment = {B, C}
    end3 = r.latestOffset(end2, ReadAllAvailable())
    assert end3 == {"t": {"1": 60, "2": 70}}
    assert m.commits[-1] == {B: 60, C: 70}
