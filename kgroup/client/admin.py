"""The asyncio admin client: topics, cluster, configs, consumer groups and their offsets,
through the protocol only (what Java's AdminClient does for kafka-topics.sh and
kafka-consumer-groups.sh).

Topic creation/deletion go to the controller (or any broker, which forwards under KRaft); group
requests go to the group's coordinator (FindCoordinator first); ListGroups asks every broker;
ListOffsets goes to each partition's leader.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Iterable, Mapping, NamedTuple

from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.messages.alter_configs import AlterConfigsRequest
from kgroup.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from kgroup.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from kgroup.protocol.messages.api_versions import ApiVersionsRequest
from kgroup.protocol.messages.create_partitions import CreatePartitionsRequest
from kgroup.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.delete_records import DeleteRecordsRequest
from kgroup.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kgroup.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from kgroup.protocol.messages.delete_groups import DeleteGroupsRequest
from kgroup.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest
from kgroup.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from kgroup.protocol.messages.delete_topics import DeleteTopicsRequest
from kgroup.protocol.messages.describe_cluster import DescribeClusterRequest
from kgroup.protocol.messages.describe_configs import DescribeConfigsRequest
from kgroup.protocol.messages.describe_groups import DescribeGroupsRequest
from kgroup.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from kgroup.protocol.messages.describe_producers import DescribeProducersRequest
from kgroup.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kgroup.protocol.messages.find_coordinator import FindCoordinatorRequest
from kgroup.protocol.messages.list_groups import ListGroupsRequest
from kgroup.protocol.messages.list_offsets import ListOffsetsRequest
from kgroup.protocol.messages.list_transactions import ListTransactionsRequest
from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from kgroup.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from kgroup.protocol.messages.update_features import UpdateFeaturesRequest
from kgroup.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from kgroup.protocol.schema import ZERO_UUID

from .assignors import TopicPartition
from .config import AdminConfig
from .connection import KafkaClient, now_ms
from .consumer_protocol import decode_assignment
from .consumer_coordinator import parse_offset_fetch
from .errors import KafkaConnectionError, KafkaTimeoutError
from .types import NAMES_MAX_VERSIONS, NodeInfo, OffsetAndMetadata, TopicInfo

log = logging.getLogger("kgroup.client.admin")

EARLIEST = -2
LATEST = -1
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
# IncrementalAlterConfigs operations (KIP-339)
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


class NewTopic(NamedTuple):
    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1  # -1: the broker's default.replication.factor
    configs: Mapping[str, str] = {}
    replica_assignments: Mapping[int, list[int]] | None = None


@dataclass
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition] = field(default_factory=list)


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    coordinator: NodeInfo | None
    error: ErrorCode = ErrorCode.NONE


@dataclass
class ConsumerGroupMemberDescription:
    """A member of a consumer-protocol group (KIP-848), as ConsumerGroupDescribe reports it."""
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    member_epoch: int
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: list[TopicPartition]
    target_assignment: list[TopicPartition]
    rack_id: str | None = None


@dataclass
class ConsumerGroupDescription:
    """A consumer-protocol group (KIP-848): ``error`` is GROUP_ID_NOT_FOUND for a missing group
    and for a classic one (Kafka's admin then falls back to DescribeGroups)."""
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[ConsumerGroupMemberDescription]
    coordinator: NodeInfo | None
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


@dataclass
class ShareMemberDescription:
    """A member of a share group (KIP-932), as ShareGroupDescribe reports it (Java's
    ShareMemberDescription)."""
    member_id: str
    rack_id: str | None
    client_id: str
    host: str
    member_epoch: int
    subscribed_topic_names: list[str]
    assignment: list[TopicPartition]


@dataclass
class ShareGroupDescription:
    """A share group (Java's ShareGroupDescription): ``error`` is GROUP_ID_NOT_FOUND for a missing
    group or one of another type (Java's admin raises GroupIdNotFoundException)."""
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[ShareMemberDescription]
    coordinator: NodeInfo | None
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


class SharePartitionOffsetInfo(NamedTuple):
    """A share-partition's start offset, with its leader epoch and lag when known (Java's
    SharePartitionOffsetInfo; None for each unknown)."""
    start_offset: int
    leader_epoch: int | None
    lag: int | None


def _partitions(assignment) -> list[TopicPartition]:
    return sorted(TopicPartition(tp.topic_name, p) for tp in assignment.topic_partitions for p in tp.partitions)


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str
    state: str | None


def _check(code: int, what: str, message: str | None = None) -> KafkaError | None:
    if code:
        return KafkaError(ErrorCode(code), message or f"{what}: {ErrorCode(code).message}")
    return None


class ReplicaInfo(NamedTuple):
    """A partition's log in a log directory (Java's ReplicaInfo)."""
    size: int
    offset_lag: int
    is_future: bool


class LogDirDescription(NamedTuple):
    """A broker's log directory (Java's LogDirDescription); total/usable bytes None when unknown."""
    error: KafkaError | None
    replica_infos: dict[TopicPartition, ReplicaInfo]
    total_bytes: int | None
    usable_bytes: int | None


class FeatureMetadata(NamedTuple):
    """Java's FeatureMetadata: {feature: (min, max)} supported, {feature: level} finalized (levels
    above 0), and the finalized features' epoch."""
    supported: dict[str, tuple[int, int]]
    finalized: dict[str, int]
    epoch: int | None


class TransactionListing(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str


class TransactionDescription(NamedTuple):
    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None
    topic_partitions: list


class ProducerState(NamedTuple):
    """One active producer of a partition (DescribeProducers)."""
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None
    current_transaction_start_offset: int | None


class Admin:
    """An asyncio admin client (Java's Admin)."""

    def __init__(self, config: Mapping | None = None, **configs):
        self.config = AdminConfig(config, **configs)
        self._client = KafkaClient(self.config)
        self._timeout = self.config["default.api.timeout.ms"]

    async def __aenter__(self) -> "Admin":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self._client.close()

    async def _controller(self) -> int:
        if not self._client.nodes:
            await self._client.refresh_metadata([])
        ctrl = self._client.controller_id
        return ctrl if ctrl in self._client.nodes else self._client.least_loaded_node()

    # --- topics ------------------------------------------------------------------------------

    async def create_topics(self, topics: Iterable[NewTopic], validate_only: bool = False,
                            timeout_ms: int | None = None) -> dict[str, KafkaError | None]:
        """{topic: None or the error}."""
        topics = [t if isinstance(t, NewTopic) else NewTopic(*t) for t in topics]
        req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=t.name, num_partitions=-1 if t.replica_assignments else t.num_partitions,
            replication_factor=-1 if t.replica_assignments else t.replication_factor,
            assignments=[CreateTopicsRequest.CreatableReplicaAssignment(partition_index=p, broker_ids=list(b))
                         for p, b in (t.replica_assignments or {}).items()],
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in t.configs.items()])
            for t in topics], timeout_ms=timeout_ms or self._timeout, validate_only=validate_only)
        resp = await self._client.send(await self._controller(), req)
        return {r.name: _check(r.error_code, f"Topic {r.name}", r.error_message) for r in resp.topics}

    async def delete_topics(self, names: Iterable[str], timeout_ms: int | None = None) -> dict[str, KafkaError | None]:
        names = list(names)
        req = DeleteTopicsRequest(topic_names=names, topics=[DeleteTopicsRequest.DeleteTopicState(name=n, topic_id=ZERO_UUID)
                                                             for n in names],
                                  timeout_ms=timeout_ms or self._timeout)
        resp = await self._client.send(await self._controller(), req)
        return {r.name: _check(r.error_code, f"Topic '{r.name}'", r.error_message) for r in resp.responses}

    async def list_topics(self, include_internal: bool = False) -> list[str]:
        await self._client.refresh_metadata(None)
        return sorted(t for t, info in self._client.topics.items() if include_internal or not info.is_internal)

    async def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicInfo | KafkaError]:
        names = None if names is None else list(names)
        resp = await self._client.refresh_metadata(names)
        out: dict = {}
        for t in resp.topics:
            if t.error_code and not t.partitions:
                out[t.name] = KafkaError(ErrorCode(t.error_code), f"Topic '{t.name}' does not exist"
                                         if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else None)
            elif t.name in self._client.topics:
                out[t.name] = self._client.topics[t.name]
        return out

    # --- partition reassignments (KIP-455) -----------------------------------------------------

    async def _to_controller(self, req, top_level_error):
        """Send ``req`` to the controller, again after a metadata refresh while the answer is
        NOT_CONTROLLER (the controller moved)."""
        for _attempt in range(5):
            resp = await self._client.send(await self._controller(), req)
            if top_level_error(resp) != ErrorCode.NOT_CONTROLLER:
                return resp
            await asyncio.sleep(0.1)
            await self._client.refresh_metadata([])
        return resp

    async def alter_partition_reassignments(self, reassignments: Mapping[TopicPartition, list[int] | None],
                                            allow_replication_factor_change: bool = True,
                                            timeout_ms: int | None = None) -> dict[TopicPartition, KafkaError | None]:
        """Java's alterPartitionReassignments: {tp: target replicas, or None to cancel} ->
        {tp: None or the error}; a top-level error is raised."""
        by_topic: dict[str, list] = {}
        for tp, replicas in reassignments.items():
            by_topic.setdefault(tp.topic, []).append(AlterPartitionReassignmentsRequest.ReassignableTopic.
                                                      ReassignablePartition(partition_index=tp.partition,
                                                                            replicas=None if replicas is None
                                                                            else list(replicas)))
        req = AlterPartitionReassignmentsRequest(
            timeout_ms=timeout_ms or self._timeout, allow_replication_factor_change=allow_replication_factor_change,
            topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()])
        resp = await self._to_controller(req, lambda r: r.error_code)
        if resp.error_code:
            raise KafkaError(ErrorCode(resp.error_code), resp.error_message)
        return {TopicPartition(t.name, p.partition_index): _check(p.error_code, f"{t.name}-{p.partition_index}",
                                                                   p.error_message)
                for t in resp.responses for p in t.partitions}

    async def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None = None,
                                           timeout_ms: int | None = None) -> dict[TopicPartition, dict]:
        """Java's listPartitionReassignments: {tp: {"replicas", "adding_replicas",
        "removing_replicas"}} of the partitions being reassigned (of ``partitions``, or all)."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
                      for t, ps in by_topic.items()]
        req = ListPartitionReassignmentsRequest(timeout_ms=timeout_ms or self._timeout, topics=topics)
        resp = await self._to_controller(req, lambda r: r.error_code)
        if resp.error_code:
            raise KafkaError(ErrorCode(resp.error_code), resp.error_message)
        return {TopicPartition(t.name, p.partition_index): {"replicas": list(p.replicas),
                                                             "adding_replicas": list(p.adding_replicas),
                                                             "removing_replicas": list(p.removing_replicas)}
                for t in resp.topics for p in t.partitions}

    async def describe_cluster(self) -> dict:
        await self._client.refresh_metadata([])
        node = self._client.least_loaded_node()
        conn = await self._client.connection(node)
        if conn.supports(DescribeClusterRequest.API_KEY):
            resp = await conn.send(DescribeClusterRequest())
            if not resp.error_code:
                return {"cluster_id": resp.cluster_id, "controller_id": resp.controller_id,
                        "brokers": [NodeInfo(b.broker_id, b.host, b.port, b.rack) for b in resp.brokers]}
        return {"cluster_id": self._client.cluster_id, "controller_id": self._client.controller_id,
                "brokers": list(self._client.nodes.values())}

    async def describe_log_dirs(self, broker_ids: Iterable[int] | None = None,
                                partitions: Iterable[TopicPartition] | None = None
                                ) -> dict[int, dict[str, LogDirDescription]]:
        """DescribeLogDirs on each broker (every broker of the cluster by default), for the
        partitions given (None: all): {broker id: {log dir: LogDirDescription}} (Java's
        Admin.describeLogDirs); a broker's request-level error is raised."""
        if broker_ids is None:
            broker_ids = [b.node_id for b in (await self.describe_cluster())["brokers"]]
        else:
            await self._client.refresh_metadata([])
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])
            topics = [DescribeLogDirsRequest.DescribableLogDirTopic(topic=t, partitions=ps) for t, ps in by_topic.items()]

        async def one(node_id):
            resp = await self._client.send(node_id, DescribeLogDirsRequest(topics=topics))
            error = _check(resp.error_code, f"DescribeLogDirs on broker {node_id}")
            if error:
                raise error
            return node_id, {r.log_dir: LogDirDescription(
                _check(r.error_code, f"log dir {r.log_dir}"),
                {TopicPartition(t.name, p.partition_index): ReplicaInfo(p.partition_size, p.offset_lag, p.is_future_key)
                 for t in r.topics for p in t.partitions},
                r.total_bytes if r.total_bytes >= 0 else None, r.usable_bytes if r.usable_bytes >= 0 else None)
                for r in resp.results}
        return dict(await asyncio.gather(*(one(n) for n in broker_ids)))

    async def describe_features(self) -> FeatureMetadata:
        """Supported and finalized feature levels (Java's Admin.describeFeatures): ApiVersions v3+
        of the least loaded node."""
        await self._client.refresh_metadata([])
        conn = await self._client.connection(self._client.least_loaded_node())
        resp = await conn.send(ApiVersionsRequest(client_software_name="kgroup-python", client_software_version="0.1.0"),
                               min_version=3)
        error = _check(resp.error_code, "ApiVersions")
        if error:
            raise error
        return FeatureMetadata({f.name: (f.min_version, f.max_version) for f in resp.supported_features},
                               {f.name: f.max_version_level for f in resp.finalized_features},
                               resp.finalized_features_epoch if resp.finalized_features_epoch >= 0 else None)

    async def update_features(self, updates: Mapping[str, tuple[int, int]], validate_only: bool = False) -> None:
        """UpdateFeatures: {feature: (level, upgrade type 1 upgrade / 2 safe / 3 unsafe downgrade)},
        all or nothing; raises the KafkaError of a refused update with the controller's message."""
        U = UpdateFeaturesRequest.FeatureUpdateKey
        req = UpdateFeaturesRequest(feature_updates=[U(feature=n, max_version_level=level, upgrade_type=kind,
                                                       allow_downgrade=kind != 1)
                                                     for n, (level, kind) in updates.items()],
                                    validate_only=validate_only, timeout_ms=self._timeout)
        resp = await self._client.send(await self._controller(), req)
        error = _check(resp.error_code, "UpdateFeatures", resp.error_message)
        if error:
            raise error

    async def describe_configs(self, resource_type: int, name: str, keys: list[str] | None = None) -> dict[str, dict]:
        """{config name: {value, read_only, source, is_sensitive, is_default}} for a topic (2) or broker (4)."""
        req = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=resource_type, resource_name=name, configuration_keys=keys)], include_synonyms=True)
        node = await self._controller()    # (refreshes metadata when no node is known yet)
        if resource_type == BROKER_RESOURCE and name:
            node = int(name)
        resp = await self._client.send(node, req)
        result = resp.results[0]
        error = _check(result.error_code, f"DescribeConfigs {name}", result.error_message)
        if error:
            raise error
        return {c.name: {"value": c.value, "read_only": c.read_only, "source": c.config_source,
                         "is_sensitive": c.is_sensitive, "is_default": c.config_source == 5,
                         "synonyms": [(s.name, s.value, s.source) for s in c.synonyms]}
                for c in result.configs}

    async def create_partitions(self, counts: Mapping[str, int], validate_only: bool = False,
                                timeout_ms: int | None = None) -> dict[str, KafkaError | None]:
        """Raise each topic's partition count to the given total: {topic: None or the error}."""
        req = CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name=t, count=n, assignments=None) for t, n in counts.items()],
            timeout_ms=timeout_ms or self._timeout, validate_only=validate_only)
        resp = await self._client.send(await self._controller(), req)
        return {r.name: _check(r.error_code, f"Topic {r.name}", r.error_message) for r in resp.results}

    async def incremental_alter_configs(self, resource_type: int, name: str,
                                        ops: Iterable[tuple[str, int, str | None]],
                                        validate_only: bool = False) -> None:
        """(config, SET|DELETE|APPEND|SUBTRACT, value) changes to a topic (2) or broker (4; name ""
        for the cluster default); raises the resource's error."""
        R = IncrementalAlterConfigsRequest.AlterConfigsResource
        req = IncrementalAlterConfigsRequest(resources=[R(resource_type=resource_type, resource_name=name, configs=[
            R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])],
            validate_only=validate_only)
        node = await self._controller()    # (refreshes metadata when no node is known yet)
        if resource_type == BROKER_RESOURCE and name:
            node = int(name)
        r = (await self._client.send(node, req)).responses[0]
        error = _check(r.error_code, f"IncrementalAlterConfigs {name}", r.error_message)
        if error:
            raise error

    async def alter_configs(self, resource_type: int, name: str, configs: Mapping[str, str],
                            validate_only: bool = False) -> None:
        """Legacy AlterConfigs: the resource's complete config set (what is left out is reset)."""
        R = AlterConfigsRequest.AlterConfigsResource
        req = AlterConfigsRequest(resources=[R(resource_type=resource_type, resource_name=name, configs=[
            R.AlterableConfig(name=k, value=v) for k, v in configs.items()])], validate_only=validate_only)
        node = await self._controller()    # (refreshes metadata when no node is known yet)
        if resource_type == BROKER_RESOURCE and name:
            node = int(name)
        r = (await self._client.send(node, req)).responses[0]
        error = _check(r.error_code, f"AlterConfigs {name}", r.error_message)
        if error:
            raise error

    async def delete_records(self, offsets: Mapping[TopicPartition, int], timeout_ms: int | None = None
                             ) -> dict[TopicPartition, int | KafkaError]:
        """Delete records before each offset (-1: the high watermark), at each partition's leader:
        {tp: the new low watermark or the error}."""
        offsets = {TopicPartition(*tp): o for tp, o in offsets.items()}
        await self._client.refresh_metadata({tp.topic for tp in offsets})
        by_node: dict[int, dict] = {}
        out: dict = {}
        for tp, o in offsets.items():
            leader = self._client.leader_for(tp.topic, tp.partition)
            if leader < 0:
                out[tp] = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no leader for {tp}")
            else:
                by_node.setdefault(leader, {})[tp] = o

        async def one(node_id, parts):
            T = DeleteRecordsRequest.DeleteRecordsTopic
            by_topic: dict[str, list] = {}
            for tp, o in parts.items():
                by_topic.setdefault(tp.topic, []).append(T.DeleteRecordsPartition(partition_index=tp.partition,
                                                                                 offset=o))
            resp = await self._client.send(node_id, DeleteRecordsRequest(
                topics=[T(name=t, partitions=p) for t, p in by_topic.items()], timeout_ms=timeout_ms or self._timeout))
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = (KafkaError(ErrorCode(p.error_code), f"DeleteRecords {tp}") if p.error_code
                               else p.low_watermark)

        await asyncio.gather(*(one(n, parts) for n, parts in by_node.items()))
        return out

    # --- groups ------------------------------------------------------------------------------

    async def find_coordinator(self, group_id: str, timeout_ms: int | None = None) -> NodeInfo:
        deadline = now_ms() + (timeout_ms or self._timeout)
        while True:
            resp = await self._client.send_any(FindCoordinatorRequest(key=group_id, key_type=0,
                                                                      coordinator_keys=[group_id]))
            c = resp.coordinators[0] if resp.coordinators else resp
            if not c.error_code:
                return NodeInfo(c.node_id, c.host, c.port)
            err = ErrorCode(c.error_code)
            if not err.retriable or now_ms() >= deadline:
                raise KafkaError(err, f"FindCoordinator for group {group_id} failed")
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)

    # --- transactions (Java's Admin.listTransactions, describeTransactions, describeProducers,
    # abortTransaction; kafka-transactions.sh) ------------------------------------------------------

    async def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                                duration_ms: int = -1, transactional_id_pattern: str | None = None
                                ) -> dict[int, list[TransactionListing]]:
        """ListTransactions on every broker: {broker id: its transactions}."""
        await self._client.refresh_metadata([])
        req = ListTransactionsRequest(state_filters=list(states), producer_id_filters=list(producer_ids),
                                      duration_filter=duration_ms, transactional_id_pattern=transactional_id_pattern)

        async def one(node_id):
            version = None if transactional_id_pattern is None else 2
            resp = await self._client.send(node_id, req, **({} if version is None else {"min_version": version}))
            error = _check(resp.error_code, f"ListTransactions on node {node_id}")
            if error:
                raise error
            return node_id, [TransactionListing(s.transactional_id, s.producer_id, s.transaction_state)
                             for s in resp.transaction_states]
        return dict(await asyncio.gather(*(one(n) for n in self._client.nodes)))

    async def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, TransactionDescription]:
        """DescribeTransactions at each id's transaction coordinator; an id's failure is raised."""
        out = {}
        for tid in transactional_ids:
            node = await self._find_coordinator(tid, 1)
            resp = await self._client.send(node.node_id, DescribeTransactionsRequest(transactional_ids=[tid]),
                                           group="coordinator", node=node)
            st = resp.transaction_states[0]
            error = _check(st.error_code, f"DescribeTransactions {tid}")
            if error:
                raise error
            out[tid] = TransactionDescription(
                node.node_id, st.transactional_id, st.producer_id, st.producer_epoch, st.transaction_state,
                st.transaction_timeout_ms, st.transaction_start_time_ms if st.transaction_start_time_ms >= 0 else None,
                sorted(TopicPartition(t.topic, p) for t in st.topics for p in t.partitions))
        return out

    async def describe_producers(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, list]:
        """DescribeProducers at each partition's leader: {partition: [ProducerState]}; a
        partition's error is raised."""
        partitions = list(partitions)
        await self._client.refresh_metadata(sorted({tp.topic for tp in partitions}))
        by_leader: dict[int, dict[str, list[int]]] = {}
        for tp in partitions:
            leader = self._client.leader_for(tp.topic, tp.partition)
            if leader < 0:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"DescribeProducers {tp.topic}-{tp.partition}")
            by_leader.setdefault(leader, {}).setdefault(tp.topic, []).append(tp.partition)
        out: dict = {}
        for leader, topics in by_leader.items():
            resp = await self._client.send(leader, DescribeProducersRequest(topics=[
                DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps) for t, ps in topics.items()]))
            for t in resp.topics:
                for p in t.partitions:
                    error = _check(p.error_code, f"DescribeProducers {t.name}-{p.partition_index}", p.error_message)
                    if error:
                        raise error
                    out[TopicPartition(t.name, p.partition_index)] = [ProducerState(
                        s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                        s.coordinator_epoch if s.coordinator_epoch >= 0 else None,
                        s.current_txn_start_offset if s.current_txn_start_offset >= 0 else None)
                        for s in p.active_producers]
        return out

    async def abort_transaction(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                                coordinator_epoch: int) -> None:
        """Java's Admin.abortTransaction: an ABORT marker written by WriteTxnMarkers at the
        partition's leader, for a transaction its coordinator has lost (a hanging one)."""
        await self._client.refresh_metadata([tp.topic])
        leader = self._client.leader_for(tp.topic, tp.partition)
        if leader < 0:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"abort on {tp.topic}-{tp.partition}")
        M = WriteTxnMarkersRequest.WritableTxnMarker
        resp = await self._client.send(leader, WriteTxnMarkersRequest(markers=[M(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
            coordinator_epoch=coordinator_epoch,
            topics=[M.WritableTxnMarkerTopic(name=tp.topic, partition_indexes=[tp.partition])])]))
        code = resp.markers[0].topics[0].partitions[0].error_code
        error = _check(code, f"WriteTxnMarkers {tp.topic}-{tp.partition}")
        if error:
            raise error

    async def _find_coordinator(self, key: str, key_type: int) -> NodeInfo:
        deadline = now_ms() + self._timeout
        while True:
            resp = await self._client.send_any(FindCoordinatorRequest(key=key, key_type=key_type,
                                                                      coordinator_keys=[key]))
            c = resp.coordinators[0] if resp.coordinators else resp
            if not c.error_code:
                return NodeInfo(c.node_id, c.host, c.port)
            err = ErrorCode(c.error_code)
            if not err.retriable or now_ms() >= deadline:
                raise KafkaError(err, f"FindCoordinator for {key} failed")
            await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)

    async def _group_request(self, group_id: str, build, check, timeout_ms: int | None = None,
                             max_version: int | None = None):
        """Send to the coordinator, retrying NOT_COORDINATOR / loading / disconnects."""
        deadline = now_ms() + (timeout_ms or self._timeout)
        while True:
            try:
                node = await self.find_coordinator(group_id, max(1, deadline - now_ms()))
                resp = await self._client.send(node.node_id, build(), group="coordinator", node=node,
                                               max_version=max_version)
                code = check(resp)
                if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
                    raise KafkaError(code)
                return node, resp
            except (KafkaConnectionError, KafkaTimeoutError, KafkaError) as e:
                if isinstance(e, KafkaError) and not e.code.retriable:
                    raise
                if now_ms() >= deadline:
                    raise
                await asyncio.sleep(self.config["retry.backoff.ms"] / 1000)

    async def list_groups(self, states: Iterable[str] | None = None) -> list[GroupListing]:
        await self._client.refresh_metadata([])
        req = ListGroupsRequest(states_filter=list(states or []), types_filter=[])

        async def one(node_id):
            resp = await self._client.send(node_id, req)
            if resp.error_code:
                raise KafkaError(ErrorCode(resp.error_code), f"ListGroups on node {node_id} failed")
            return resp.groups

        results = await asyncio.gather(*(one(n) for n in self._client.nodes))
        out = {g.group_id: GroupListing(g.group_id, g.protocol_type, g.group_state or None)
               for groups in results for g in groups}
        return [out[k] for k in sorted(out)]

    async def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        out = {}
        for gid in group_ids:
            node, resp = await self._group_request(gid, lambda g=gid: DescribeGroupsRequest(groups=[g]),
                                                   lambda r: ErrorCode(r.groups[0].error_code) if r.groups else ErrorCode.NONE)
            g = resp.groups[0]
            members = []
            for m in g.members:
                assignment = []
                if g.protocol_type == "consumer" and len(m.member_assignment) >= 2:
                    try:
                        assignment = decode_assignment(m.member_assignment).partitions
                    except Exception:
                        log.warning("cannot decode assignment of member %s", m.member_id)
                members.append(MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host, assignment))
            # DescribeGroups v6+ (KIP-1043) answers a missing group GROUP_ID_NOT_FOUND; older
            # versions answer it Dead without an error: one shape for callers, Dead
            error = ErrorCode(g.error_code)
            if error == ErrorCode.GROUP_ID_NOT_FOUND:
                error = ErrorCode.NONE
            out[gid] = GroupDescription(gid, g.group_state, g.protocol_type, g.protocol_data, members, node, error)
        return out

    async def describe_consumer_groups(self, group_ids: Iterable[str]) -> dict[str, ConsumerGroupDescription]:
        """ConsumerGroupDescribe (KIP-848) per group; UnsupportedVersionError from a broker
        without it."""
        out = {}
        for gid in group_ids:
            node, resp = await self._group_request(
                gid, lambda g=gid: ConsumerGroupDescribeRequest(group_ids=[g]),
                lambda r: ErrorCode(r.groups[0].error_code) if r.groups else ErrorCode.NONE)
            g = resp.groups[0]
            members = [ConsumerGroupMemberDescription(
                m.member_id, m.instance_id, m.client_id, m.client_host, m.member_epoch,
                list(m.subscribed_topic_names), m.subscribed_topic_regex, _partitions(m.assignment),
                _partitions(m.target_assignment), m.rack_id) for m in g.members]
            out[gid] = ConsumerGroupDescription(gid, g.group_state, g.group_epoch, g.assignment_epoch,
                                                g.assignor_name, members, node, ErrorCode(g.error_code),
                                                g.error_message)
        return out

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, KafkaError | None]:
        out = {}
        for gid in group_ids:
            _, resp = await self._group_request(gid, lambda g=gid: DeleteGroupsRequest(groups_names=[g]),
                                                lambda r: ErrorCode(r.results[0].error_code))
            out[gid] = _check(resp.results[0].error_code, f"Group '{gid}'")
        return out

    # --- share groups (KIP-932): what Java's Admin does for kafka-share-groups.sh -----------------

    async def list_share_groups(self, states: Iterable[str] | None = None) -> list[GroupListing]:
        """The share groups of every broker (ListGroups v5 with the type filter "share"), in
        the given states when ``states`` is set (Empty, Stable)."""
        await self._client.refresh_metadata([])
        req = ListGroupsRequest(states_filter=list(states or []), types_filter=["share"])

        async def one(node_id):
            resp = await self._client.send(node_id, req, min_version=5)
            if resp.error_code:
                raise KafkaError(ErrorCode(resp.error_code), f"ListGroups on node {node_id} failed")
            return resp.groups

        results = await asyncio.gather(*(one(n) for n in self._client.nodes))
        out = {g.group_id: GroupListing(g.group_id, g.protocol_type, g.group_state or None)
               for groups in results for g in groups}
        return [out[k] for k in sorted(out)]

    async def describe_share_groups(self, group_ids: Iterable[str]) -> dict[str, ShareGroupDescription]:
        """ShareGroupDescribe per group; a missing group (or one of another type) comes back with
        ``error`` GROUP_ID_NOT_FOUND and its message."""
        out = {}
        for gid in group_ids:
            node, resp = await self._group_request(
                gid, lambda g=gid: ShareGroupDescribeRequest(group_ids=[g]),
                lambda r: ErrorCode(r.groups[0].error_code) if r.groups else ErrorCode.NONE)
            g = resp.groups[0]
            members = [ShareMemberDescription(m.member_id, m.rack_id, m.client_id, m.client_host, m.member_epoch,
                                              list(m.subscribed_topic_names), _partitions(m.assignment))
                       for m in g.members]
            out[gid] = ShareGroupDescription(gid, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name,
                                             members, node, ErrorCode(g.error_code), g.error_message)
        return out

    async def list_share_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None
                                       ) -> dict[TopicPartition, SharePartitionOffsetInfo | None]:
        """DescribeShareGroupOffsets: the start offset (leader epoch, lag) of each share-partition
        of the group, every one with state when ``partitions`` is None; None for a partition
        without a start offset; a partition answered with an error is left out (as Java's
        ListShareGroupOffsetsHandler). KafkaError for a group-level error."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])
            R = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
            topics = [R.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps) for t, ps in by_topic.items()]

        def build():
            R = DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
            return DescribeShareGroupOffsetsRequest(groups=[R(group_id=group_id, topics=topics)])

        def check(resp):
            return ErrorCode(resp.groups[0].error_code) if resp.groups else ErrorCode.NONE

        _, resp = await self._group_request(group_id, build, check)
        g = resp.groups[0]
        if g.error_code:
            raise KafkaError(ErrorCode(g.error_code), g.error_message)
        out: dict = {}
        for t in g.topics:
            for p in t.partitions:
                if p.error_code:
                    log.warning("skipping the offset of %s-%d: %s", t.topic_name, p.partition_index,
                                p.error_message or ErrorCode(p.error_code).message)
                    continue
                tp = TopicPartition(t.topic_name, p.partition_index)
                out[tp] = None if p.start_offset < 0 else SharePartitionOffsetInfo(
                    p.start_offset, p.leader_epoch if p.leader_epoch >= 0 else None, p.lag if p.lag >= 0 else None)
        return out

    async def alter_share_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]
                                        ) -> dict[TopicPartition, KafkaError | None]:
        """AlterShareGroupOffsets: new start offsets for an empty share group's share-partitions
        (the group is created when missing). A group-level error is every partition's error."""
        by_topic: dict[str, list] = {}
        for tp, o in offsets.items():
            by_topic.setdefault(tp[0], []).append(AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
                                                  .AlterShareGroupOffsetsRequestPartition(partition_index=tp[1],
                                                                                          start_offset=int(o)))

        def build():
            T = AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic
            return AlterShareGroupOffsetsRequest(group_id=group_id, topics=[T(topic_name=t, partitions=ps)
                                                                            for t, ps in by_topic.items()])

        _, resp = await self._group_request(group_id, build, lambda r: ErrorCode(r.error_code))
        if resp.error_code:
            error = KafkaError(ErrorCode(resp.error_code), resp.error_message)
            return {TopicPartition(*tp): error for tp in offsets}
        return {TopicPartition(t.topic_name, p.partition_index):
                _check(p.error_code, f"{t.topic_name}-{p.partition_index}", p.error_message)
                for t in resp.responses for p in t.partitions}

    async def delete_share_group_offsets(self, group_id: str, topics: Iterable[str]) -> dict[str, KafkaError | None]:
        """DeleteShareGroupOffsets: an empty share group's state for whole topics; {topic: None or
        its error}. KafkaError for a group-level error."""
        names = list(dict.fromkeys(topics))

        def build():
            T = DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic
            return DeleteShareGroupOffsetsRequest(group_id=group_id, topics=[T(topic_name=n) for n in names])

        _, resp = await self._group_request(group_id, build, lambda r: ErrorCode(r.error_code))
        if resp.error_code:
            raise KafkaError(ErrorCode(resp.error_code), resp.error_message)
        return {t.topic_name: _check(t.error_code, f"Topic '{t.topic_name}'", t.error_message) for t in resp.responses}

    async def delete_share_groups(self, group_ids: Iterable[str]) -> dict[str, KafkaError | None]:
        """DeleteGroups for share groups (their share-partitions' state goes first, broker side)."""
        return await self.delete_groups(group_ids)

    async def list_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None = None
                                 ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of a group (all partitions when ``partitions`` is None)."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp[0], []).append(tp[1])
            topics = by_topic

        def build():
            return OffsetFetchRequest(
                group_id=group_id,
                topics=None if topics is None else [OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=p)
                                                    for t, p in topics.items()],
                groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id=group_id, topics=None if topics is None else [
                        OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=p) for t, p in topics.items()])],
                require_stable=False)

        def check(resp):
            err, _ = parse_offset_fetch(resp, group_id)
            return err.code if err else ErrorCode.NONE

        # by name, as Java's admin (ListConsumerGroupOffsetsHandler: forTopicNames)
        _, resp = await self._group_request(group_id, build, check,
                                            max_version=NAMES_MAX_VERSIONS[OffsetFetchRequest.API_KEY])
        err, offsets = parse_offset_fetch(resp, group_id)
        if err:
            raise err
        return offsets

    async def alter_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
                                  ) -> dict[TopicPartition, KafkaError | None]:
        """OffsetCommit as an admin (generation -1, no member): only for inactive groups."""
        by_topic: dict[str, list] = {}
        for tp, o in offsets.items():
            om = o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o))
            by_topic.setdefault(tp[0], []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=tp[1], committed_offset=om.offset,
                committed_leader_epoch=-1 if om.leader_epoch is None else om.leader_epoch,
                committed_metadata=om.metadata))

        def build():
            return OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
                                       topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=p)
                                               for t, p in by_topic.items()])

        def check(resp):
            codes = {ErrorCode(p.error_code) for t in resp.topics for p in t.partitions}
            for c in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
                if c in codes:
                    return c
            return ErrorCode.NONE

        # by name, as Java's admin (AlterConsumerGroupOffsetsHandler: forTopicNames)
        _, resp = await self._group_request(group_id, build, check,
                                            max_version=NAMES_MAX_VERSIONS[OffsetCommitRequest.API_KEY])
        return {TopicPartition(t.name, p.partition_index): _check(p.error_code, f"{t.name}-{p.partition_index}")
                for t in resp.topics for p in t.partitions}

    # --- offsets -----------------------------------------------------------------------------

    async def list_offsets(self, specs: Mapping[TopicPartition, int], timeout_ms: int | None = None,
                           isolation_level: str = "read_uncommitted"
                           ) -> dict[TopicPartition, tuple[int, int] | KafkaError]:
        """{tp: (offset, timestamp)} for each spec: EARLIEST (-2), LATEST (-1) or a timestamp.
        ``isolation_level="read_committed"`` (Java's ListOffsetsOptions) makes LATEST the last
        stable offset: the end of what a read_committed consumer can read."""
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"isolation_level must be read_uncommitted or read_committed, not {isolation_level!r}")
        specs = {TopicPartition(*tp): ts for tp, ts in specs.items()}
        await self._client.refresh_metadata({tp.topic for tp in specs})
        by_node: dict[int, dict] = {}
        out: dict = {}
        for tp, ts in specs.items():
            leader = self._client.leader_for(tp.topic, tp.partition)
            if leader < 0:
                out[tp] = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no leader for {tp}")
                continue
            by_node.setdefault(leader, {})[tp] = ts

        async def one(node_id, parts):
            by_topic: dict[str, list] = {}
            for tp, ts in parts.items():
                by_topic.setdefault(tp.topic, []).append(ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=tp.partition, timestamp=ts))
            req = ListOffsetsRequest(replica_id=-1, isolation_level=1 if isolation_level == "read_committed" else 0,
                                     timeout_ms=timeout_ms or self._timeout,
                                     topics=[ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=p)
                                             for t, p in by_topic.items()])
            conn = await self._client.connection(node_id)
            version = conn.api_version(req.API_KEY)
            resp = await conn.send(req, version=version)
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code:
                        out[tp] = KafkaError(ErrorCode(p.error_code), f"ListOffsets {tp}")
                    else:
                        out[tp] = (p.offset, p.timestamp)

        await asyncio.gather(*(one(n, parts) for n, parts in by_node.items()))
        return out

    # --- security: SCRAM credentials and ACLs ------------------------------------------------
    async def describe_user_scram_credentials(self, users: Iterable[str] | None = None) -> dict:
        """{user: [(mechanism name, iterations)] or KafkaError}."""
        from kgroup.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest as R
        from kgroup.security.scram import BY_TYPE
        req = R(users=None if users is None else [R.UserName(name=u) for u in users])
        resp = await self._client.send(await self._controller(), req)
        if resp.error_code:
            raise KafkaError(ErrorCode(resp.error_code), resp.error_message or "DescribeUserScramCredentials failed")
        return {r.user: (_check(r.error_code, r.user, r.error_message) or
                         [(BY_TYPE[c.mechanism].mechanism_name if c.mechanism in BY_TYPE else str(c.mechanism), c.iterations)
                          for c in r.credential_infos]) for r in resp.results}


    async def alter_user_scram_credentials(self, upsertions=(), deletions=()) -> dict:
        """``upsertions``: [(user, mechanism name, iterations, password)], salted here with a random
        salt as Java's Admin does (the password never leaves the client); ``deletions``: [(user,
        mechanism name)]. Returns {user: None or KafkaError}."""
        import os as _os

        from kgroup.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest as R
        from kgroup.security import scram
        ups = []
        for user, mech_name, iterations, password in upsertions:
            mech = scram.MECHANISMS[mech_name]
            salt = _os.urandom(scram.mech_salt_len(mech))
            ups.append(R.ScramCredentialUpsertion(name=user, mechanism=mech.type_code, iterations=iterations, salt=salt,
                                                  salted_password=scram.salted_password(mech, password, salt, iterations)))
        dels = [R.ScramCredentialDeletion(name=u, mechanism=scram.MECHANISMS[m].type_code) for u, m in deletions]
        resp = await self._client.send(await self._controller(), R(deletions=dels, upsertions=ups))
        return {r.user: _check(r.error_code, r.user, r.error_message) for r in resp.results}


    async def create_acls(self, bindings) -> list:
        """``bindings``: security.acl.AclBinding tuples; [None or KafkaError] in order."""
        from kgroup.protocol.messages.create_acls import CreateAclsRequest as R
        req = R(creations=[R.AclCreation(resource_type=b.resource_type, resource_name=b.resource_name,
                                         resource_pattern_type=b.pattern_type, principal=b.principal, host=b.host,
                                         operation=b.operation, permission_type=b.permission_type) for b in bindings])
        resp = await self._client.send(await self._controller(), req)
        return [_check(r.error_code, "CreateAcls", r.error_message) for r in resp.results]


    async def describe_acls(self, f) -> list:
        """``f``: security.acl.AclBindingFilter; the matching AclBindings."""
        from kgroup.protocol.messages.describe_acls import DescribeAclsRequest as R
        from kgroup.security.acl import AclBinding
        req = R(resource_type_filter=f.resource_type, resource_name_filter=f.resource_name, pattern_type_filter=f.pattern_type,
                principal_filter=f.principal, host_filter=f.host, operation=f.operation, permission_type=f.permission_type)
        resp = await self._client.send(await self._controller(), req)
        if resp.error_code:
            raise KafkaError(ErrorCode(resp.error_code), resp.error_message or "DescribeAcls failed")
        return [AclBinding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                           a.permission_type) for r in resp.resources for a in r.acls]


    async def delete_acls(self, filters) -> list:
        """Per filter: the AclBindings deleted, or a KafkaError."""
        from kgroup.protocol.messages.delete_acls import DeleteAclsRequest as R
        from kgroup.security.acl import AclBinding
        req = R(filters=[R.DeleteAclsFilter(resource_type_filter=f.resource_type, resource_name_filter=f.resource_name,
                                            pattern_type_filter=f.pattern_type, principal_filter=f.principal,
                                            host_filter=f.host, operation=f.operation, permission_type=f.permission_type)
                         for f in filters])
        resp = await self._client.send(await self._controller(), req)
        return [_check(r.error_code, "DeleteAcls", r.error_message) or
                [AclBinding(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
                            m.permission_type) for m in r.matching_acls] for r in resp.filter_results]
