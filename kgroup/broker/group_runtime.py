"""The coordinator runtime: drives the pure GroupCoordinatorShards (one per ``__consumer_offsets``
partition) from the event loop — loading, writing their records, timers, answering.

Flow of one operation (one asyncio task owns every shard, so the core needs no locks):
    token = future; result = shard.handle_xxx(req, version, now_ms, token)   (or poll_timers)
    records -> one RecordBatch appended to the shard's partition log (synchronously)
    -> shard.commit(result) (or shard.abort on a failed append) -> [(token, response)]
    -> responses that follow a write wait for the group-commit fsync, then resolve their tokens.
A token is the future the server awaits for that request; a parked JoinGroup/SyncGroup token is
resolved by whichever later operation completes it. Cancelled tokens (closed connections) are
skipped.

Loading: at start-up every partition of ``__consumer_offsets`` is replayed through
``shard.replay`` in chunks, yielding to the loop between chunks; until a shard is loaded its
groups' requests get COORDINATOR_LOAD_IN_PROGRESS (from the shard itself).
"""
from __future__ import annotations

import asyncio
import logging
import time

from ..coordinator import CoordinatorLoadError, GroupCoordinatorConfig, GroupCoordinatorShard, group_partition
from ..protocol.errors import ErrorCode
from ..protocol.records import Record, build_batch, decode_records
from ..storage.errors import LogError
from ..protocol.records import RecordBatchError
from .metadata import OFFSETS_TOPIC

log = logging.getLogger("kgroup.coordinator")
LOAD_CHUNK_BATCHES = 200


def now_ms() -> int:
    return int(time.time() * 1000)


class GroupRuntime:
    def __init__(self, broker):
        self.broker = broker
        self.config = GroupCoordinatorConfig.from_props(broker.config.values)
        self.num_partitions = broker.config["offsets.topic.num.partitions"]
        self.shards: dict[int, GroupCoordinatorShard] = {}
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._load_task: asyncio.Task | None = None

    # -- topic and shards -----------------------------------------------------------------------
    def start(self) -> None:
        """Start loading an existing ``__consumer_offsets`` in the background."""
        topic = self.broker.metadata.get(OFFSETS_TOPIC)
        if topic is not None:
            self.num_partitions = topic.num_partitions
            for p in range(topic.num_partitions):
                self.shards[p] = GroupCoordinatorShard(p, self.config)
            self._load_task = asyncio.get_running_loop().create_task(self._load_all())

    def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` on first use (compacted, as Kafka creates it)."""
        if self.broker.metadata.get(OFFSETS_TOPIC) is not None:
            return
        cfg = self.broker.config
        self.broker.create_topic(OFFSETS_TOPIC, self.num_partitions, 1, {
            "cleanup.policy": "compact", "segment.bytes": str(cfg["offsets.topic.segment.bytes"])})
        now = now_ms()
        for p in range(self.num_partitions):
            shard = self.shards[p] = GroupCoordinatorShard(p, self.config)
            self._run(shard, shard.on_loaded(now))

    def shard_for(self, group_id: str) -> int:
        return group_partition(group_id, self.num_partitions)

    async def _load_all(self) -> None:
        started = time.monotonic()
        for p, shard in sorted(self.shards.items()):
            plog = self.broker.data_path.log(OFFSETS_TOPIC, p)
            n = 0
            try:
                for header, batch in plog.iter_batches():
                    if header.is_control:
                        continue
                    for r in decode_records(batch):
                        if r.key is not None:
                            shard.replay(r.key, r.value, r.offset)
                    n += 1
                    if n % LOAD_CHUNK_BATCHES == 0:
                        await asyncio.sleep(0)
            except CoordinatorLoadError as e:
                log.error("cannot load %s: %s", f"{OFFSETS_TOPIC}-{p}", e)
                raise
            self._run(shard, shard.on_loaded(now_ms()))
        log.info("loaded %d partition(s) of %s in %.2f s", len(self.shards), OFFSETS_TOPIC,
                 time.monotonic() - started)

    # -- operations -----------------------------------------------------------------------------
    def execute(self, group_id: str, op) -> asyncio.Future:
        """Run ``op(shard, now_ms, token) -> Result`` on the group's shard; the returned future is
        the request's answer."""
        self.ensure_offsets_topic()
        loop = asyncio.get_running_loop()
        token = loop.create_future()
        p = self.shard_for(group_id)
        shard = self.shards[p]
        self._run(shard, op(shard, now_ms(), token))
        return token

    def execute_many(self, group_ids, items, build, op, merge) -> asyncio.Future:
        """A multi-group request: ``items`` (one per group id) are split by owning shard,
        ``build(items)`` makes each shard's sub-request, ``op(shard, sub, now_ms, token)`` runs it,
        and ``merge(responses)`` combines the answers, grouped by shard as Kafka combines them."""
        self.ensure_offsets_topic()
        loop = asyncio.get_running_loop()
        by_partition: dict[int, list] = {}
        for gid, item in zip(group_ids, items):
            by_partition.setdefault(self.shard_for(gid), []).append(item)
        futures = []
        for p, part in by_partition.items():
            token = loop.create_future()
            shard = self.shards[p]
            self._run(shard, op(shard, build(part), now_ms(), token))
            futures.append(token)
        return self._gather(futures, merge)

    def execute_all(self, op, merge) -> asyncio.Future:
        """Run ``op(shard, now_ms, token)`` on every shard (ListGroups) and merge the answers."""
        self.ensure_offsets_topic()
        loop = asyncio.get_running_loop()
        futures = []
        for shard in self.shards.values():
            token = loop.create_future()
            self._run(shard, op(shard, now_ms(), token))
            futures.append(token)
        return self._gather(futures, merge)

    @staticmethod
    async def _gather(futures, merge):
        return merge(list(await asyncio.gather(*futures)))

    def _run(self, shard: GroupCoordinatorShard, result) -> None:
        if result._records:
            plog = self.broker.data_path.log(OFFSETS_TOPIC, shard.partition)
            try:
                now = now_ms()
                batch = build_batch([Record(key=k, value=v, timestamp=now) for k, v in result.records])
                plog.append(batch)
            except (LogError, RecordBatchError) as e:
                log.warning("write to %s-%d failed: %s", OFFSETS_TOPIC, shard.partition, e)
                self._answer(shard.abort(result, ErrorCode(e.error_code)), None)
            else:
                out = shard.commit(result)
                self._answer(out, self.broker.data_path.wait_flushed({plog}))
        else:
            self._answer(shard.commit(result), None)
        self._reschedule(shard)

    def _answer(self, out, flushed) -> None:
        if not out:
            return
        if flushed is None:
            for token, response in out:
                if not token.done():
                    token.set_result(response)
            return

        def deliver(f):
            failed = f.exception() if not f.cancelled() else None
            for token, response in out:
                if token.done():
                    continue
                if failed is not None:
                    token.set_exception(failed)  # the server closes that connection
                else:
                    token.set_result(response)
        flushed.add_done_callback(deliver)

    # -- timers ---------------------------------------------------------------------------------
    def _reschedule(self, shard: GroupCoordinatorShard) -> None:
        deadline = shard.next_deadline()
        old = self._timers.pop(shard.partition, None)
        if old is not None:
            old.cancel()
        if deadline is None:
            return
        loop = asyncio.get_running_loop()
        # +1 ms: a timer must not fire before its millisecond deadline, or it would spin
        delay = max(0.0, (deadline - now_ms() + 1) / 1000.0)
        self._timers[shard.partition] = loop.call_later(delay, self._fire, shard)

    def _fire(self, shard: GroupCoordinatorShard) -> None:
        self._timers.pop(shard.partition, None)
        self._run(shard, shard.poll_timers(now_ms()))

    def close(self) -> None:
        for h in self._timers.values():
            h.cancel()
        self._timers.clear()
        if self._load_task is not None:
            self._load_task.cancel()
