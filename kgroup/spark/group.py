"""Driver side: topic/offset look-ups, committing processed offsets to the consumer group, and
the coordinated group member.

* :class:`DriverClient` -- a blocking kgroup Admin: which partitions a subscription covers
  (``subscribe``, ``subscribePattern`` matched in full like Java's ``Pattern.matches``, ``assign``),
  their earliest/latest offsets, and the "standalone" commit: OffsetCommit with generation -1 and
  no member id (what ``kafka-consumer-groups.sh --reset-offsets`` does), so ``kgroup groups
  --describe`` shows the query's position and lag while the group itself has no members.
* :class:`CoordinatedMember` -- ``groupMode=coordinated``: a kgroup ``KafkaConsumer`` subscribed
  with the chosen assignor (or, with ``kafka.group.protocol=consumer``, a KIP-848 member that the
  broker assigns; revocations then happen in the same ``sync`` polls and commit with the member epoch), polled by the streaming driver but never fetching (every assigned
  partition is paused as soon as it is assigned). It owns the assignment the driver plans with.
  Rebalances only happen inside :meth:`CoordinatedMember.sync`, which the driver calls while it
  builds the next micro-batch -- when everything planned before has been processed -- so a revoked
  partition's processed offset is committed (with the member's generation) before the group hands
  it to another application, which continues from exactly there.
"""
from __future__ import annotations

import logging
import re
import time
import uuid

from kgroup.client.admin import EARLIEST, LATEST
from kgroup.client.assignors import TopicPartition
from kgroup.client.config import ADMIN
from kgroup.client.sync import KafkaAdmin, KafkaConsumer
from kgroup.client.types import ConsumerRebalanceListener

from .options import SourceOptions

log = logging.getLogger("kgroup.spark")

# the query's kafka.* settings an admin client takes too (connection, TLS, SASL, timeouts)
_ADMIN_KEYS = frozenset(ADMIN) - {"bootstrap.servers"}


class TopicNotFoundError(RuntimeError):
    """A topic named by the options does not exist."""


def group_id_for(opts: SourceOptions) -> str:
    """``kafka.group.id``, else a fresh ``<groupIdPrefix>-<uuid>`` (Spark's naming)."""
    return opts.group_id or f"{opts.group_id_prefix}-{uuid.uuid4()}"


class DriverClient:
    """Metadata, offsets and standalone commits for the driver (planning) side."""

    def __init__(self, opts: SourceOptions, client_id: str = "kgroup-spark-driver"):
        self.opts = opts
        cfg = {k: v for k, v in opts.kafka_params.items() if k in _ADMIN_KEYS}
        cfg.setdefault("client.id", client_id)
        self.admin = KafkaAdmin(config={"bootstrap.servers": opts.bootstrap_servers, **cfg})
        # as Spark's KafkaOffsetReaderAdmin: the latest offsets planned are those a consumer with
        # the query's kafka.isolation.level can reach (the LSO under read_committed), so an
        # executor never waits for records an open transaction holds back
        self.isolation_level = opts.kafka_params.get("isolation.level", "read_uncommitted")
        self._commit_warned = False

    def close(self) -> None:
        self.admin.close()

    def partitions(self, missing_ok: bool) -> set[TopicPartition]:
        """The topic-partitions the subscription covers now."""
        opts = self.opts
        if opts.assign is not None:
            return {TopicPartition(t, p) for t, ps in opts.assign.items() for p in ps}
        if opts.subscribe is not None:
            topics = list(opts.subscribe)
        else:
            pattern = re.compile(opts.subscribe_pattern)
            topics = [t for t in self.admin.list_topics(include_internal=False) if pattern.fullmatch(t)]
        if not topics:
            return set()
        described = self.admin.describe_topics(topics)
        out = set()
        for t in topics:
            info = described.get(t)
            if info is None or isinstance(info, Exception):
                if missing_ok:
                    continue
                raise TopicNotFoundError(f"Topic '{t}' does not exist ({info})")
            out |= {TopicPartition(t, p) for p in info.partitions}
        return out

    def offsets(self, tps, spec: int) -> dict[TopicPartition, int]:
        """Earliest (-2) or latest (-1) offset of each partition."""
        tps = list(tps)
        if not tps:
            return {}
        found = self.admin.list_offsets({tp: spec for tp in tps}, isolation_level=self.isolation_level)
        out = {}
        for tp in tps:
            value = found.get(tp)
            if isinstance(value, BaseException) or value is None:
                raise value or TopicNotFoundError(f"no offset for {tp}")
            out[tp] = value[0]
        return out

    def offsets_for_times(self, timestamps: dict) -> dict[TopicPartition, int]:
        """ListOffsets by timestamp: {tp: first offset with a timestamp >= ts, or -1}."""
        if not timestamps:
            return {}
        found = self.admin.list_offsets(dict(timestamps), isolation_level=self.isolation_level)
        out = {}
        for tp in timestamps:
            value = found.get(tp)
            if isinstance(value, BaseException) or value is None:
                raise value or TopicNotFoundError(f"no offset for {tp}")
            out[tp] = value[0]
        return out

    def earliest(self, tps) -> dict[TopicPartition, int]:
        return self.offsets(tps, EARLIEST)

    def latest(self, tps) -> dict[TopicPartition, int]:
        return self.offsets(tps, LATEST)

    def commit(self, group_id: str, offsets: dict[TopicPartition, int]) -> bool:
        """OffsetCommit with generation -1 (only accepted while the group has no members)."""
        if not offsets:
            return True
        try:
            result = self.admin.alter_group_offsets(group_id, offsets)
        except Exception as e:  # commits only mirror the checkpoint: never fail the query for them
            log.warning("committing %s to group %s failed: %r", offsets, group_id, e)
            return False
        failed = {tp: e for tp, e in result.items() if e is not None}
        if failed and not self._commit_warned:
            self._commit_warned = True
            log.warning("group %s refused the offsets of %s (is another consumer active in it? use "
                        "groupMode=coordinated to share a group): %s", group_id, sorted(failed),
                        next(iter(failed.values())))
        return not failed


class _Listener(ConsumerRebalanceListener):
    """Runs inside ``KafkaConsumer.poll`` on the driver thread (see kgroup.client.sync)."""

    def __init__(self, member: "CoordinatedMember"):
        self.member = member

    def on_partitions_revoked(self, revoked):
        m = self.member
        offsets = {tp: m.processed[tp] for tp in revoked if tp in m.processed}
        if offsets:
            try:
                m.consumer.commit(offsets)
                m.committed.update(offsets)
                log.info("group %s: committed %s before giving up the partitions", m.group_id, offsets)
            except Exception as e:
                log.warning("group %s: commit of revoked partitions %s failed: %r", m.group_id, offsets, e)
        m.acquired -= set(revoked)

    def on_partitions_assigned(self, assigned):
        m = self.member
        if assigned:
            m.consumer.pause(*assigned)
        m.acquired |= set(assigned)
        for tp in assigned:  # what we processed before owning it again is stale
            m.processed.pop(tp, None)
            m.committed.pop(tp, None)
        log.info("group %s: assigned %s", m.group_id, sorted(assigned))

    def on_partitions_lost(self, lost):
        self.member.acquired -= set(lost)


class CoordinatedMember:
    """A group member that owns partitions for the streaming driver and never fetches records."""

    def __init__(self, opts: SourceOptions, client_id: str | None = None):
        self.opts = opts
        self.group_id = opts.group_id
        self.processed: dict[TopicPartition, int] = {}  # offsets whose records are in the sink
        self.committed: dict[TopicPartition, int] = {}  # what this member last committed
        self.acquired: set[TopicPartition] = set()  # assigned since the driver last planned
        cfg = {k: v for k, v in opts.kafka_params.items()}
        cfg.setdefault("client.id", client_id or f"kgroup-spark-{opts.group_id}")
        cfg.update({"bootstrap.servers": opts.bootstrap_servers, "group.id": opts.group_id,
                    "enable.auto.commit": False, "auto.offset.reset": "latest"})
        if opts.group_protocol == "consumer":  # KIP-848: the broker assigns, with its assignor
            if opts.assignor is not None:
                cfg["group.remote.assignor"] = opts.assignor
        else:
            cfg["partition.assignment.strategy"] = opts.assignor
        self.consumer = KafkaConsumer(config=cfg)
        listener = _Listener(self)
        if opts.subscribe is not None:
            self.consumer.subscribe(opts.subscribe, listener=listener)
        else:
            self.consumer.subscribe(pattern=opts.subscribe_pattern, listener=listener)

    def _stable(self) -> bool:
        return self.consumer.group_stable()

    def sync(self, timeout_ms: int) -> set[TopicPartition] | None:
        """Poll the group (joining or finishing a rebalance); the assignment once the member is
        stable, None if it is still rebalancing after ``timeout_ms``."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            self.consumer.poll(0)
            if self._stable():
                return self.consumer.assignment()
            if time.monotonic() >= deadline:
                return None
            self.consumer.poll(50)

    def take_acquired(self) -> set[TopicPartition]:
        acquired, self.acquired = self.acquired, set()
        return acquired

    def committed_offsets(self, tps) -> dict[TopicPartition, int]:
        """The group's committed offsets of these partitions (absent when none)."""
        tps = list(tps)
        if not tps:
            return {}
        found = self.consumer.committed(tps)
        return {tp: om.offset for tp, om in found.items() if om is not None}

    def commit(self, offsets: dict[TopicPartition, int]) -> bool:
        """Commit processed offsets of partitions this member still owns (best effort: a member in
        the middle of a rebalance commits on revocation instead)."""
        self.processed.update(offsets)
        owned = self.consumer.assignment()
        todo = {tp: o for tp, o in offsets.items() if tp in owned and self.committed.get(tp) != o}
        if not todo:
            return True
        try:
            self.consumer.commit(todo)
        except Exception as e:
            log.info("group %s: commit of %s deferred: %r", self.group_id, todo, e)
            return False
        self.committed.update(todo)
        return True

    def close(self) -> None:
        """Revoke (committing what was processed) and leave the group."""
        self.consumer.close(timeout_ms=10000)
