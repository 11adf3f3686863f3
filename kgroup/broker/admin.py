"""Admin operations on topics and configs: CreatePartitions, AlterConfigs/IncrementalAlterConfigs
(topics and dynamic broker configs) and DeleteRecords, validated as Kafka's controller does
(ReplicationControlManager, ConfigurationControlManager) and applied to the topic registry and
the logs. Synchronous; each raises KafkaError with Kafka's code and message.
"""
from __future__ import annotations

import contextlib
import logging

from ..protocol.errors import ErrorCode, KafkaError
from . import client_metrics, group_configs
from .config_entities import BROKERS, CLIENT_METRICS, GROUPS
from .config import CONFIG_DEFS, ConfigError, _parse
from .topic_configs import TOPIC_CONFIG_DEFS, TOPIC_CONFIGS, validate as validate_topic_configs

log = logging.getLogger("kgroup.broker")

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

# Broker configs Kafka updates without a restart (DynamicBrokerConfig): every broker synonym of a
# topic config (DynamicLogConfig: the topics' defaults), the cleaner's and the thread pools'.
DYNAMIC_BROKER_CONFIGS = frozenset(
    {syn for syn, _ in TOPIC_CONFIGS.values() if syn is not None and syn in CONFIG_DEFS}
    | {"log.cleaner.backoff.ms", "num.io.threads", "num.network.threads"})


# -- CreatePartitions -----------------------------------------------------------------------------
def create_partitions(broker, name: str, count: int, assignments, validate_only: bool) -> None:
    topic = broker.metadata.get(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    current = topic.num_partitions
    if count == current:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
    if count < current:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"The topic {name} currently has {current} partition(s); "
                                                       f"{count} would not be an increase.")
    additional = count - current
    if assignments is not None:
        if len(assignments) != additional:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Attempted to add {additional} additional partition(s), but only "
                             f"{len(assignments)} assignment(s) were specified.")
        for a in assignments:
            _check_manual_assignment(broker, list(a.broker_ids), replication_factor=1)
    if validate_only:
        return
    broker.metadata.set_partition_count(name, count)
    broker.data_path.create_partitions(name, count, topic.configs)
    broker.group_coordinator.on_topics_changed()    # consumer groups subscribed to it rebalance
    log.info("topic %s: %d -> %d partition(s)", name, current, count)


def _check_manual_assignment(broker, replicas: list[int], replication_factor: int) -> None:
    """ReplicationControlManager.validateManualPartitionAssignment, with this node the only
    registered broker."""
    if not replicas:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "The manual partition assignment includes an empty replica list.")
    prev = None
    for b in sorted(replicas):
        if b != broker.config.node_id:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes "
                                                                   f"broker {b}, but no such broker is registered.")
        if b == prev:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes the broker {prev} more than once.")
        prev = b
    if len(replicas) != replication_factor:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"The manual partition assignment includes a partition with {len(replicas)} replica(s), "
                         f"but this is not consistent with previous partitions, which have "
                         f"{replication_factor} replica(s).")


def after_writes(broker, resp, failed=None):
    """``resp`` once the writes its request made are durable where the cluster keeps them
    (ZooKeeper, when the broker is in a cluster: a PendingResponse), else at once. A write that
    failed: ``failed([(owner, exception), ...])`` puts Kafka's errors in ``resp`` (owners as given to
    ``writes_for``, None for the whole request)."""
    return resp if broker.cluster is None else broker.cluster.after_writes(resp, failed)


def writes_for(broker, owner):
    """The cluster writes made inside are for ``owner`` (a resource's result in the response)."""
    return contextlib.nullcontext() if broker.cluster is None else broker.cluster.writes_for(owner)


def unknown_server_error(results) -> None:
    """What a ZooKeeper write's exception becomes through Kafka's ApiError.fromThrowable: each of
    ``results`` that had succeeded gets UNKNOWN_SERVER_ERROR, without a message (fromThrowable
    gives none for it)."""
    for r in results:
        if r.error_code == 0:
            r.error_code, r.error_message = int(ErrorCode.UNKNOWN_SERVER_ERROR), None


# -- configs ------------------------------------------------------------------------------------
def config_resource_denied(broker, ctx, operation: int, resource_type: int, name: str):
    """The error for a config resource ``operation`` (DESCRIBE_CONFIGS / ALTER_CONFIGS) is denied
    on, as KafkaApis/ConfigHelper map it (a broker is the CLUSTER resource); None if allowed."""
    from .authorization import RT_CLUSTER, RT_GROUP, RT_TOPIC, allowed
    from ..security.acl import CLUSTER_NAME
    if broker.authorizer is None:
        return None
    if resource_type == TOPIC:
        return None if allowed(broker, ctx, operation, RT_TOPIC, name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if resource_type == 32:     # GROUP
        return None if allowed(broker, ctx, operation, RT_GROUP, name) else ErrorCode.GROUP_AUTHORIZATION_FAILED
    return None if allowed(broker, ctx, operation, RT_CLUSTER, CLUSTER_NAME) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def alter_resources(broker, req, result_type, new_configs, ctx=None) -> list:
    """AlterConfigs and IncrementalAlterConfigs: each resource is checked and applied on its own
    (all of its changes or none); a resource named twice, or a key named twice in one resource, is
    INVALID_REQUEST, as Kafka's ConfigAdminManager. ``new_configs(resource)`` gives the resource's
    whole new override set."""
    results = []
    keys = [(r.resource_type, r.resource_name) for r in req.resources]
    for r in req.resources:
        result = result_type(error_code=0, error_message=None, resource_type=r.resource_type,
                             resource_name=r.resource_name)
        try:
            if keys.count((r.resource_type, r.resource_name)) > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate resource.")
            if ctx is not None and broker.authorizer is not None:
                from ..security.acl import ALTER_CONFIGS
                denied = config_resource_denied(broker, ctx, ALTER_CONFIGS, r.resource_type, r.resource_name)
                if denied is not None:
                    results.append(result_type(error_code=denied, error_message=None, resource_type=r.resource_type,
                                               resource_name=r.resource_name))
                    continue
            names = [c.name for c in r.configs]
            if len(set(names)) != len(names):
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            with writes_for(broker, result):
                apply_configs(broker, r.resource_type, r.resource_name, new_configs(r), req.validate_only)
        except KafkaError as e:
            result.error_code, result.error_message = e.code, str(e)
        results.append(result)
    return results


def current_configs(broker, resource_type: int, name: str) -> dict[str, str]:
    """The resource's explicitly set configs (a topic's overrides, or the dynamic broker ones)."""
    if resource_type == TOPIC:
        topic = broker.metadata.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        return dict(topic.configs)
    if resource_type == BROKER:
        _check_broker_name(broker, name)
        return dict(broker.metadata.broker_configs.get(name, {}))
    if resource_type == group_configs.GROUP:
        group_configs.check_name(name)
        return dict(broker.metadata.group_configs.get(name, {}))
    if resource_type == client_metrics.CLIENT_METRICS:
        return broker.metadata.client_metrics.configs(name)
    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")


def _check_broker_name(broker, name: str) -> None:
    if name == "":
        return
    try:
        node = int(name)
    except ValueError:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "Illegal non-integral BROKER resource type name: "
                                                    f"{name}") from None
    if node != broker.config.node_id:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {broker.config.node_id} "
                                                    f"but received {name}")


def incremental(broker, resource_type: int, name: str, ops) -> dict[str, str]:
    """ConfigurationControlManager.incrementalAlterConfigResource: the new full config set after
    SET / DELETE / APPEND / SUBTRACT (the last two only on LIST configs)."""
    configs = current_configs(broker, resource_type, name)
    for key, op, value in ops:
        if op == SET:
            configs[key] = value
        elif op == DELETE:
            configs.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            if _config_type(resource_type, key) != "list":
                raise KafkaError(ErrorCode.INVALID_CONFIG,
                                 f"Can't {_OP_NAMES[op]} to key {key} because its type is not LIST.")
            parts = _parts(configs.get(key, _default(broker, resource_type, key)))
            for v in (value or "").split(","):
                if op == APPEND and v not in parts:
                    parts.append(v)
                elif op == SUBTRACT and v in parts:
                    parts.remove(v)
            configs[key] = ",".join(parts)
        else:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown operation type {op}")
    return configs


def _config_type(resource_type: int, key: str) -> str | None:
    if resource_type == client_metrics.CLIENT_METRICS:
        return {client_metrics.METRICS: "list", client_metrics.MATCH: "list",
                client_metrics.INTERVAL_MS: "int"}.get(key)
    if resource_type == group_configs.GROUP:
        d = group_configs.GROUP_CONFIG_DEFS.get(key)
        return d.type if d else None
    if resource_type == TOPIC:
        d = TOPIC_CONFIG_DEFS.get(key)
    else:
        d = CONFIG_DEFS.get(key)
    return d.type if d else None


def _default(broker, resource_type, key):
    if resource_type == TOPIC:
        from .topic_configs import broker_default
        return broker_default(broker.config, key) if key in TOPIC_CONFIG_DEFS else None
    v = broker.config.values.get(key)
    return None if v is None else str(v)


def _parts(value: str | None) -> list[str]:
    return [p for p in (value or "").split(",") if p]


def apply_configs(broker, resource_type: int, name: str, configs: dict[str, str | None],
                  validate_only: bool) -> None:
    """Validate a resource's complete new config set and, unless validate_only, install it."""
    if resource_type == TOPIC:
        old = current_configs(broker, TOPIC, name)
        validate_topic_configs(configs, broker.config, existing=old)
        if validate_only:
            return
        topic = broker.metadata.set_topic_configs(name, configs)
        broker.data_path.logs.update_topic_config(name, topic.configs)
        if broker.cluster is not None:      # /config/topics/<name>: every broker applies it
            broker.cluster.publish_topic_config(name, topic.configs)
        log.info("topic %s configs: %s", name, topic.configs)
    elif resource_type == BROKER:
        _check_broker_name(broker, name)
        _validate_broker_configs(broker, name, configs)
        if validate_only:
            return
        broker.config_entities.write(BROKERS, name, configs)
        log.info("dynamic broker configs (%s): %s", name or "cluster default", configs)
    elif resource_type == group_configs.GROUP:
        group_configs.check_name(name)
        group_configs.validate(broker, configs)
        if validate_only:
            return
        broker.config_entities.write(GROUPS, name, {k: v.strip() for k, v in configs.items()})
        log.info("group %s configs: %s", name, configs)
    elif resource_type == client_metrics.CLIENT_METRICS:
        client_metrics.validate(name, configs)
        if validate_only:
            return
        broker.config_entities.write(CLIENT_METRICS, name, configs)
        log.info("client metrics subscription %s: %s", name, configs)
    else:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")


def _validate_broker_configs(broker, name: str, configs: dict[str, str | None]) -> None:
    resource = f"ConfigResource(type=BROKER, name='{name}')"
    static = sorted(k for k in configs if k not in DYNAMIC_BROKER_CONFIGS)
    if static:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid config value for resource {resource}: Cannot update "
                                                    f"these configs dynamically: Set({', '.join(static)})")
    for key, value in configs.items():
        if value is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {key}")
        try:
            parsed = _parse(CONFIG_DEFS[key], value)
        except (ConfigError, ValueError) as e:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None
        # the topic config it is a synonym of has the validator (ranges, allowed strings)
        for tname, (syn, _) in TOPIC_CONFIGS.items():
            check = TOPIC_CONFIG_DEFS[tname].validator
            if syn == key and check is not None:
                from .topic_configs import InvalidConfig
                try:
                    check(key, parsed if CONFIG_DEFS[key].type != "list" else _parts(value))
                except InvalidConfig as e:
                    raise KafkaError(ErrorCode.INVALID_CONFIG, str(e)) from None


def apply_dynamic_broker_configs(broker) -> None:
    """Install the persisted dynamic broker configs: the broker config, then every log's config
    rebuilt on the new defaults (Kafka's DynamicLogConfig.reconfigure)."""
    md = broker.metadata
    broker.config.set_dynamic(md.broker_configs.get(str(broker.config.node_id), {}),
                              md.broker_configs.get("", {}))
    from .data_path import log_config_from_broker
    dp = broker.data_path
    dp.default_log_config = log_config_from_broker(broker.config)
    dp.logs.default_config = dp.default_log_config
    for topic in md.topics.values():
        dp.logs.update_topic_config(topic.name, topic.configs)


# -- DeleteRecords ------------------------------------------------------------------------------
def delete_records(broker, name: str, partition: int, offset: int) -> int:
    """Advance a partition's log start offset; returns the new low watermark."""
    from ..storage.errors import OffsetOutOfRangeError
    topic = broker.metadata.get(name)
    plog = broker.data_path.log(name, partition) if topic is not None else None
    if plog is None or partition >= topic.num_partitions:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if topic.is_internal:
        # ReplicaManager.deleteRecordsOnLocalLog refuses internal topics before the policy check
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot delete records of internal topic {name}")
    if broker.replica_manager.enabled:      # in a cluster only the leader deletes; followers follow its log start
        _, error = broker.replica_manager.leader_partition(name, partition)
        if error is not None:
            raise KafkaError(error, f"this broker does not lead {name}-{partition}")
    if not plog.config.delete:
        # Partition.deleteRecordsOnLeader: compacted-only topics keep their records
        raise KafkaError(ErrorCode.POLICY_VIOLATION, f"Records of partition {name}-{partition} can not be deleted "
                                                     "due to the configured policy")
    try:
        return plog.delete_records_before(offset)
    except OffsetOutOfRangeError as e:
        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE, str(e)) from None
