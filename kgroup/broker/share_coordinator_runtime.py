"""The share coordinator service (``broker.share_coordinator``; Kafka's ShareCoordinatorService) on the
generic coordinator runtime (``coordinator_runtime.py``), which hosts one ``ShareCoordinatorShard``
per ``__share_group_state`` partition (share.coordinator.state.topic.num.partitions, compacted).

A request naming several share-partitions is split by share-partition, each part run on the
partition that owns its key (group:topicId:partition) and the answers concatenated, as Kafka's
service does. The same calls serve the broker itself (Kafka's DefaultStatePersister): the group
coordinator initializes share-partitions through ``initialize``, share-partition leaders ``read``
and ``write`` their state, deleting a share group ``delete``s it. On this single node they are
in-process calls, answered when the records are durable.

Loading: an existing ``__share_group_state`` is loaded at start-up; the topic is created on first use.
"""
from __future__ import annotations

import copy

from ..protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest, DeleteShareGroupStateResponse
from ..protocol.messages.initialize_share_group_state import (InitializeShareGroupStateRequest,
                                                              InitializeShareGroupStateResponse)
from ..protocol.messages.read_share_group_state import ReadShareGroupStateRequest, ReadShareGroupStateResponse
from ..protocol.messages.read_share_group_state_summary import (ReadShareGroupStateSummaryRequest,
                                                                ReadShareGroupStateSummaryResponse)
from ..protocol.messages.write_share_group_state import WriteShareGroupStateRequest, WriteShareGroupStateResponse
from ..share_coordinator import ShareCoordinatorConfig, ShareCoordinatorShard, share_state_partition
from ..share_coordinator.config import SHARE_GROUP_STATE_TOPIC
from .coordinator_runtime import CoordinatorRuntime
from .pending import PendingResponse

S = ShareCoordinatorShard
# API -> (shard handler, request class, response class, topics field of the request)
_APIS = {
    "initialize": (S.handle_initialize_share_group_state, InitializeShareGroupStateRequest,
                   InitializeShareGroupStateResponse),
    "read": (S.handle_read_share_group_state, ReadShareGroupStateRequest, ReadShareGroupStateResponse),
    "write": (S.handle_write_share_group_state, WriteShareGroupStateRequest, WriteShareGroupStateResponse),
    "delete": (S.handle_delete_share_group_state, DeleteShareGroupStateRequest, DeleteShareGroupStateResponse),
    "summary": (S.handle_read_share_group_state_summary, ReadShareGroupStateSummaryRequest,
                ReadShareGroupStateSummaryResponse),
}


def _merge(response_cls):
    """The answers of the parts, one topic entry per topic id, in request order."""
    def merge(responses):
        out = response_cls(results=[])
        by_topic = {}
        for r in responses:
            for res in r.results:
                entry = by_topic.get(res.topic_id)
                if entry is None:
                    entry = by_topic[res.topic_id] = copy.copy(res)
                    entry.partitions = []
                    out.results.append(entry)
                entry.partitions.extend(res.partitions)
        return out
    return merge


class ShareCoordinatorRuntime:
    topic = SHARE_GROUP_STATE_TOPIC

    def __init__(self, broker):
        self.broker = broker
        self.config = ShareCoordinatorConfig.from_props(broker.config.values)
        self.num_partitions = self.config.num_partitions
        self.runtime = CoordinatorRuntime(broker, topic=self.topic, config=self.config, new_shard=self._new_shard,
                                          load_buffer_size=self.config.load_buffer_size)
        self._image = None
        self._persister = None      # the cluster's (share_persister.py), on first use

    @property
    def shards(self) -> dict:
        return self.runtime.shards

    def _new_shard(self, p: int, epoch: int) -> ShareCoordinatorShard:
        return ShareCoordinatorShard(p, self.config, topics=self.topic_partitions)

    def topic_partitions(self) -> dict:
        """The metadata image the shards check requests against: topic id -> partitions."""
        image = self._image
        if image is None:
            image = self._image = {t.topic_id: t.num_partitions for t in self.broker.metadata.topics.values()}
        return image

    def on_topics_changed(self, deleted_topic_ids=()) -> None:
        self._image = None
        if deleted_topic_ids:
            rt = self.runtime
            for shard in rt.active_shards():
                rt.run(shard, shard.handle_topics_deleted(set(deleted_topic_ids), self.runtime.now_ms(), PendingResponse()))

    # -- topic and partitions -----------------------------------------------------------------------
    def start(self) -> None:
        topic = self.broker.metadata.get(self.topic)
        if topic is not None:
            self.num_partitions = topic.num_partitions
            if self.broker.replica_manager.enabled:
                return      # in a cluster: loaded by the partitions this broker leads (replica_manager)
            for p in range(topic.num_partitions):
                self.runtime.load(p)

    def ensure_topic(self) -> None:
        """Create ``__share_group_state`` on first use (compacted, as Kafka creates it)."""
        if self.broker.metadata.get(self.topic) is not None:
            return
        if self.broker.cluster is not None:     # created in ZooKeeper; loaded where it is led
            self.broker.cluster.create_internal_topic(self.topic, self.num_partitions, {
                "cleanup.policy": "compact", "segment.bytes": str(self.config.segment_bytes)},
                "share.coordinator.state.topic.replication.factor")
            return
        self.broker.create_topic(self.topic, self.num_partitions, 1, {
            "cleanup.policy": "compact", "segment.bytes": str(self.config.segment_bytes)})
        self._image = None
        for p in range(self.num_partitions):
            self.runtime.load_empty(p)

    def load_partition(self, p: int, epoch: int = 0) -> None:
        self.runtime.load(p, epoch)

    def unload_partition(self, p: int, epoch: int | None = None) -> None:
        self.runtime.unload(p, epoch)

    def partition_for(self, group_id: str, topic_id: bytes, partition: int) -> int:
        return share_state_partition(group_id, topic_id, partition, self.num_partitions)

    def split(self, req) -> list:
        """[(owning partition, sub-request)]: one part per share-partition of ``req``, each in a
        copy of ``req`` naming that share-partition alone."""
        parts = []
        for topic in req.topics:
            for pd in topic.partitions:
                sub = copy.copy(req)
                t = copy.copy(topic)
                t.partitions = [pd]
                sub.topics = [t]
                parts.append((self.partition_for(req.group_id, topic.topic_id, pd.partition), sub))
        return parts

    # -- requests (from the wire, or the broker's own persister calls) ------------------------------
    def execute(self, api: str, req, version: int):
        """Run a request of ``api`` ("initialize", "read", "write", "delete", "summary"): one part
        per share-partition on its owning partition; the merged answer (or a PendingResponse)."""
        self.ensure_topic()
        handle, _req_cls, resp_cls = _APIS[api]
        parts = self.split(req)
        if not parts:
            return resp_cls(results=[])
        return self.runtime.execute_parts(parts, handle, version, _merge(resp_cls))

    def merge(self, api: str, answers):
        """One answer from the answers of ``api``'s parts."""
        return _merge(_APIS[api][2])(answers)

    def call(self, api: str, req, version: int = 1) -> PendingResponse:
        """``execute`` as a PendingResponse whatever happened (the persister's calls); in a
        cluster each part at the leader of the partition that owns it (share_persister.py)."""
        if self.broker.cluster is not None:
            if self._persister is None:
                from .share_persister import SharePersister
                self._persister = SharePersister(self.broker, self)
            return self._persister.call(api, req, version)
        answer = self.execute(api, req, version)
        if type(answer) is PendingResponse:
            return answer
        token = PendingResponse()
        token.answer(answer)
        return token

    # -- the persister (Kafka's DefaultStatePersister), one share-partition per call ------------------
    def initialize(self, group_id: str, topics: dict, state_epoch: int, start_offset: int = -1) -> PendingResponse:
        R = InitializeShareGroupStateRequest.InitializeStateData
        return self.call("initialize", InitializeShareGroupStateRequest(group_id=group_id, topics=[
            R(topic_id=t, partitions=[R.PartitionData(partition=p, state_epoch=state_epoch, start_offset=start_offset)
                                      for p in sorted(parts)]) for t, parts in topics.items()]), 0)

    def read(self, group_id: str, topic_id: bytes, partition: int, leader_epoch: int = 0) -> PendingResponse:
        R = ReadShareGroupStateRequest.ReadStateData
        return self.call("read", ReadShareGroupStateRequest(group_id=group_id, topics=[
            R(topic_id=topic_id, partitions=[R.PartitionData(partition=partition, leader_epoch=leader_epoch)])]), 0)

    def write(self, group_id: str, topic_id: bytes, partition: int, state_epoch: int, leader_epoch: int,
              start_offset: int, batches, delivery_complete_count: int = -1, hold: bool = False) -> PendingResponse:
        """``hold``: the caller has no other write of this share-partition in flight, so the update
        may wait to be appended with the other writes of this event-loop iteration on its
        ``__share_group_state`` partition, as one batch (the runtime's held writes)."""
        R = WriteShareGroupStateRequest.WriteStateData
        P = R.PartitionData
        req = WriteShareGroupStateRequest(group_id=group_id, topics=[R(topic_id=topic_id, partitions=[
            P(partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
              delivery_complete_count=delivery_complete_count,
              state_batches=[P.StateBatch(first_offset=a, last_offset=b, delivery_state=s, delivery_count=c)
                             for a, b, s, c in batches])])])
        if not hold or self.broker.cluster is not None:    # in a cluster: at the state partition's leader
            return self.call("write", req, 1)
        self.ensure_topic()
        answer = self.runtime.execute(self.partition_for(group_id, topic_id, partition),
                                      S.handle_write_share_group_state, req, 1, may_hold=True)
        if type(answer) is PendingResponse:
            return answer
        token = PendingResponse()
        token.answer(answer)
        return token

    def delete(self, group_id: str, topics: dict) -> PendingResponse:
        R = DeleteShareGroupStateRequest.DeleteStateData
        return self.call("delete", DeleteShareGroupStateRequest(group_id=group_id, topics=[
            R(topic_id=t, partitions=[R.PartitionData(partition=p) for p in sorted(parts)])
            for t, parts in topics.items()]), 0)

    def fire_due_timers(self, rearm: bool = True) -> int | None:
        return self.runtime.fire_due_timers(rearm)

    def close(self) -> None:
        if self._persister is not None:
            self._persister.close()
        self.runtime.close()
