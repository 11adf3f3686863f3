"""The group coordinator service (``broker.group_coordinator``; Kafka's GroupCoordinatorService):
routes group requests to the ``__consumer_offsets`` partition that owns each group and runs them
on the generic coordinator runtime (``coordinator_runtime.py``), which hosts one
``GroupCoordinatorShard`` per partition. What is group-specific lives here: the group id ->
partition mapping (Java's String.hashCode), the topic metadata image consumer groups read, the
groups' config overrides, offset commits that may be batched, TxnOffsetCommit's transactional
batches and the transaction markers written into ``__consumer_offsets``.

Loading: at start-up every partition of an existing ``__consumer_offsets`` is loaded (replayed in
the background; its groups' requests get COORDINATOR_LOAD_IN_PROGRESS until then); the topic is
created on first use with every partition active at once. ``load_partition`` /
``unload_partition`` move a partition in or out at run time (leadership changes).
"""
from __future__ import annotations


from ..coordinator import GroupCoordinatorConfig, GroupCoordinatorShard, group_partition
from ..coordinator.topic_metadata import TopicMetadata
from ..coordinator.result import gate
from . import group_configs
from .coordinator_runtime import CoordinatorRuntime, split_by_partition
from .metadata import OFFSETS_TOPIC
from .pending import PendingResponse


class GroupRuntime:
    topic = OFFSETS_TOPIC

    def __init__(self, broker):
        self.broker = broker
        self.config = GroupCoordinatorConfig.from_props(broker.config.values)
        self.num_partitions = broker.config["offsets.topic.num.partitions"]
        self.runtime = CoordinatorRuntime(
            broker, topic=self.topic, config=self.config, new_shard=self._new_shard,
            load_buffer_size=broker.config["offsets.load.buffer.size"])
        self._partition_of: dict[str, int] = {}    # group id -> partition (Java hash), a cache
        self._topic_image: dict | None = None       # name -> TopicMetadata, for consumer groups
        self._topics_version = -1
        # group id -> its GROUP config overrides, read by the shards' consumer groups (Kafka's
        # GroupConfigManager); one dict shared by every shard, updated in place
        self.group_configs: dict[str, dict[str, int]] = group_configs.overrides(broker)

    @property
    def shards(self) -> dict:
        return self.runtime.shards

    @property
    def partition_load_ms(self) -> dict:
        return self.runtime.partition_load_ms

    @property
    def write_observer(self):
        return self.runtime.write_observer

    @write_observer.setter
    def write_observer(self, fn) -> None:
        self.runtime.write_observer = fn

    # -- topic and partitions -----------------------------------------------------------------------
    def start(self) -> None:
        """Start loading an existing ``__consumer_offsets`` in the background."""
        topic = self.broker.metadata.get(self.topic)
        if topic is not None:
            self._set_partitions(topic.num_partitions)
            if self.broker.replica_manager.enabled:
                return      # in a cluster: loaded by the partitions this broker leads (replica_manager)
            for p in range(topic.num_partitions):
                self.runtime.load(p)

    def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` on first use (compacted, as Kafka creates it)."""
        if self.broker.metadata.get(self.topic) is not None:
            return
        if self.broker.cluster is not None:     # created in ZooKeeper; loaded where it is led
            self.broker.cluster.create_internal_topic(self.topic, self.num_partitions, {
                "cleanup.policy": "compact", "segment.bytes": str(self.broker.config["offsets.topic.segment.bytes"])}, "offsets.topic.replication.factor")
            return
        self.broker.create_topic(self.topic, self.num_partitions, 1, {
            "cleanup.policy": "compact", "segment.bytes": str(self.broker.config["offsets.topic.segment.bytes"])})
        for p in range(self.num_partitions):
            self.runtime.load_empty(p)

    def load_partition(self, p: int, epoch: int = 0) -> None:
        """This broker became the leader of ``__consumer_offsets``-``p`` (at ``epoch``)."""
        self.runtime.load(p, epoch)

    def unload_partition(self, p: int, epoch: int | None = None) -> None:
        """This broker is no longer the leader of ``__consumer_offsets``-``p``."""
        self.runtime.unload(p, epoch)

    def high_watermark_moved(self, p: int) -> None:
        """The high watermark of ``__consumer_offsets``-``p`` moved: its shard reads at it."""
        self.runtime.high_watermark_moved(p)

    def _set_partitions(self, n: int) -> None:
        self.num_partitions = n
        self._partition_of.clear()

    def _new_shard(self, p: int, epoch: int) -> GroupCoordinatorShard:
        return GroupCoordinatorShard(p, self.config, topics=self.topic_image, topics_version=self.topics_version,
                                     group_configs=self.group_configs)

    def shard_for(self, group_id: str) -> int:
        p = self._partition_of.get(group_id)
        if p is None:
            if len(self._partition_of) >= 100_000:
                self._partition_of.clear()
            p = self._partition_of[group_id] = group_partition(group_id, self.num_partitions)
        return p

    def on_group_configs_changed(self, group_id: str) -> None:
        """AlterConfigs changed a group's configs: its consumer group answers the new heartbeat
        interval and restarts sessions with the new timeout from each member's next heartbeat on
        (Kafka's GroupConfigManager.updateGroupConfig; a running session keeps its deadline)."""
        values = group_configs.group_overrides(self.broker, group_id)
        if values:
            self.group_configs[group_id] = values
        else:
            self.group_configs.pop(group_id, None)

    # -- topic metadata, as consumer-protocol groups see it (KIP-848) --------------------------------
    def topic_image(self) -> dict:
        """The metadata image the shards' consumer groups read: every non-internal topic as a
        TopicMetadata (a cache, rebuilt after a topic change)."""
        image = self._topic_image
        if image is None:
            image = self._topic_image = {
                t.name: TopicMetadata(t.topic_id, t.name, t.num_partitions)
                for t in self.broker.metadata.topics.values() if not t.is_internal}
        return image

    def topics_version(self) -> int:
        """The version of the topic image that last changed the topics (-1: none since start), as
        Kafka's lastMetadataImageWithNewTopics: a regex resolved against an older image is resolved
        again. Wall-clock ms, so versions persisted in regex records (16) stay comparable across
        restarts."""
        return self._topics_version

    def on_topics_changed(self) -> None:
        """The broker created or deleted a topic: consumer groups subscribed to it (by name or
        regex) get a new group epoch (Kafka's onNewMetadataImage)."""
        self._topic_image = None
        self._topics_version = max(self._topics_version + 1, self.runtime.now_ms())
        rt = self.runtime
        for shard in rt.active_shards():
            if shard.consumer_group_manager.consumer_groups():
                rt.write_held(shard.partition)
                rt.run(shard, shard.handle_topics_changed(self.runtime.now_ms()))
        if rt.state_observer is not None:   # test waits on topics (test_control.py)
            rt.state_observer(None)

    def on_partitions_deleted(self, topic_partitions: list) -> None:
        """GroupCoordinatorService.onPartitionsDeleted: every shard tombstones the offsets of
        the deleted partitions (written and flushed; nobody waits for an answer)."""
        rt = self.runtime
        for shard in rt.active_shards():
            rt.write_held(shard.partition)
            rt.run(shard, shard.handle_partitions_deleted(topic_partitions, self.runtime.now_ms(), PendingResponse()))

    # -- operations ---------------------------------------------------------------------------------
    def execute(self, group_id: str, handle, req, version: int, *extra, offset_commit: bool = False):
        """Run the shard handler ``handle`` (unbound) on the group's partition. Returns the
        response when the operation answered at once, else a PendingResponse. ``offset_commit``:
        an OffsetCommit, whose records may wait to be written with its neighbours' (unless it
        creates the group: a commit that creates a group is never held behind)."""
        if self.topic not in self.broker.metadata.topics:
            self.ensure_offsets_topic()
        p = self._partition_of.get(group_id)
        if p is None:
            p = self.shard_for(group_id)
        may_hold = False
        if offset_commit:
            shard = self.runtime.shards.get(p)
            may_hold = shard is not None and group_id in shard.groups
        return self.runtime.execute(p, handle, req, version, *extra, may_hold=may_hold)

    def execute_split(self, req, field: str | None, handle, version: int, merge, group_id_of=None, extra=()):
        """A multi-group request, the one way they are split by partition: the items of
        ``req.<field>`` (group ids, or entries whose ``group_id_of(item)`` is one) go to their
        owning partitions, in request order; each runs ``handle`` on a copy of ``req`` holding its
        items, and ``merge(responses)`` combines the answers, grouped by partition as Kafka combines
        them. With ``field`` None (ListGroups) every hosted partition runs ``req`` itself.
        ``extra``: more arguments for ``handle``."""
        self.ensure_offsets_topic()
        if field is None:
            parts = [(p, req) for p in self.runtime.shards]
        else:
            parts = split_by_partition(req, field, self.shard_for, group_id_of)
        return self.runtime.execute_parts(parts, handle, version, merge, *extra)

    # -- transactions: TxnOffsetCommit and markers ------------------------------------------------
    def execute_txn_offset_commit(self, req, version: int):
        """TxnOffsetCommit on the group's partition: its records are written as a transactional
        batch of the request's producer (as Kafka's coordinator runtime writes them), which the
        shard replays as pending offsets until the producer's marker."""
        self.ensure_offsets_topic()
        p = self.shard_for(req.group_id)
        rt = self.runtime
        handle = GroupCoordinatorShard.handle_txn_offset_commit
        refused = gate(handle, req, version, self.config, rt.state_error(p))
        if refused is not None:
            return refused
        token = PendingResponse()
        result = handle(rt.shards[p], req, version, self.runtime.now_ms(), token)
        rt.write_transactional(p, result, req.producer_id, req.producer_epoch)
        return token.response if token.answered else token

    def write_txn_markers(self, p: int, markers: list, transaction_version: int = 0):
        """Transactions' COMMIT/ABORT markers on ``__consumer_offsets``-``p`` (the transaction
        coordinator's marker path): the producers' pending offsets settle. Returns the log to
        fsync; raises CoordinatorAppendError."""
        self.ensure_offsets_topic()
        return self.runtime.write_markers(p, markers, transaction_version)

    def fire_due_timers(self, rearm: bool = True) -> int | None:
        return self.runtime.fire_due_timers(rearm)

    def close(self) -> None:
        self.runtime.close()
