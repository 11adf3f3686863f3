"""Harness for the transaction coordinator core: a fake clock, an in-memory log, a producer id
allocator, and the replay check after every operation (live durable state == a fresh shard
loaded from every record written so far)."""
from __future__ import annotations

import itertools

from kgroup.coordinator import TimerQueue
from kgroup.coordinator.result import gate
from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kgroup.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kgroup.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kgroup.protocol.messages.end_txn import EndTxnRequest
from kgroup.protocol.messages.init_producer_id import InitProducerIdRequest
from kgroup.protocol.messages.list_transactions import ListTransactionsRequest
from kgroup.transaction_coordinator import TransactionCoordinatorConfig, TransactionCoordinatorShard

E = ErrorCode


def fresh_shard(shard: TransactionCoordinatorShard, log) -> TransactionCoordinatorShard:
    other = TransactionCoordinatorShard(shard.partition, shard.config, TimerQueue(), lambda: 10**9)
    for offset, (key, value) in enumerate(log):
        other.replay(key, value, offset)
    return other


def assert_replay_consistent(shard, log) -> None:
    assert fresh_shard(shard, log).durable_state() == shard.durable_state(), \
        "replaying the log does not rebuild the live durable state"


class Ctx:
    """One shard under test. ``fail_writes`` makes the next appends fail with that error."""

    def __init__(self, load=True, **props):
        self.config = TransactionCoordinatorConfig.from_props(props)
        self.now = 1_000_000
        self.scheduler = TimerQueue()
        self._pids = itertools.count(1000)
        self.allocated = []
        self.shard = TransactionCoordinatorShard(3, self.config, self.scheduler, self._allocate)
        self.log: list = []
        self.sent: list = []
        self.markers: list = []
        self.fail_writes = None
        self._tokens = itertools.count(1)
        if load:
            self.run(self.shard.on_loaded(self.now))

    def _allocate(self) -> int:
        pid = next(self._pids)
        self.allocated.append(pid)
        return pid

    def run(self, result):
        if result.records and self.fail_writes is not None:
            out = self.shard.abort(result, self.fail_writes)
        else:
            self.log.extend((r.key, r.value) for r in result.records)
            out = self.shard.commit(result)
        self.sent.extend(out)
        self.markers.extend(self.shard.drain_markers())
        assert_replay_consistent(self.shard, self.log)
        return out

    def call(self, handler, req, version, **kw):
        """What the runtime does: the gate (the request checks, then the partition's state), then
        the shard's (bound) handler, written and replayed."""
        token = f"t{next(self._tokens)}"
        n = len(self.log)
        refused = gate(handler, req, version, self.shard.config,
                       None if self.shard.is_loaded else E.COORDINATOR_LOAD_IN_PROGRESS)
        if refused is not None:
            self.last_records = []
            return refused
        self.run(handler(req, version, self.now, token, **kw))
        found = [r for t, r in self.sent if t == token]
        assert len(found) == 1, found
        self.last_records = self.log[n:]
        return found[0]

    def advance(self, ms: int):
        self.now += ms
        n = len(self.log)
        for result in self.shard.poll_timers(self.now):
            self.run(result)
        return self.log[n:]

    def txn(self, tid):
        return self.shard.transactions.get(tid)

    # -- requests ------------------------------------------------------------------------------
    def init(self, tid, timeout=60000, *, version=5, producer_id=-1, producer_epoch=-1):
        req = InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout,
                                    producer_id=producer_id, producer_epoch=producer_epoch)
        return self.call(self.shard.handle_init_producer_id, req, version)

    def add_partitions(self, tid, pid, epoch, partitions, *, version=3, exists=None):
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        by_topic: dict = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        req = AddPartitionsToTxnRequest(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                                        v3_and_below_producer_epoch=epoch,
                                        v3_and_below_topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])
        resp = self.call(self.shard.handle_add_partitions_to_txn, req, version, partition_exists=exists)
        return {(t.name, p.partition_index): p.partition_error_code
                for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}

    def add_offsets(self, tid, pid, epoch, group, *, version=3):
        req = AddOffsetsToTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group)
        return self.call(self.shard.handle_add_offsets_to_txn, req, version).error_code

    def end(self, tid, pid, epoch, committed, *, version=4):
        req = EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=committed)
        return self.call(self.shard.handle_end_txn, req, version).error_code

    def complete(self, markers):
        n = len(self.log)
        self.run(self.shard.complete_transaction(markers, self.now))
        return self.log[n:]

    def complete_all(self):
        markers, self.markers = self.markers, []
        for m in markers:
            self.complete(m)
        return markers

    def describe(self, *tids):
        req = DescribeTransactionsRequest(transactional_ids=list(tids))
        return self.call(self.shard.handle_describe_transactions, req, 0).transaction_states

    def list(self, states=(), pids=(), duration=-1, version=1):
        req = ListTransactionsRequest(state_filters=list(states), producer_id_filters=list(pids),
                                      duration_filter=duration)
        return self.call(self.shard.handle_list_transactions, req, version)

    # -- composite ------------------------------------------------------------------------------
    def ongoing(self, tid, partitions=(("t", 0), ("t", 1)), timeout=60000):
        r = self.init(tid, timeout)
        assert r.error_code == E.NONE, r
        assert set(self.add_partitions(tid, r.producer_id, r.producer_epoch, partitions).values()) == {E.NONE}
        return r.producer_id, r.producer_epoch
