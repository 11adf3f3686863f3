"""CreateTopics (19) v2-7 (v0-1 removed by KIP-896): replication factor 1 only (one broker), Kafka's name rules, manual
replica assignments onto this node, topic configs, ``validate_only``; v5+ returns the resolved
partition count, replication factor and configs; v7+ the topic id. The partition logs are
created in time slices (Broker.run_in_slices): a request of up to 10,000 partitions is answered
once every topic is created and saved, while other connections are served meanwhile.

In a cluster (kgroup/cluster/): any replication factor up to the live brokers, replicas placed
as Kafka's AdminUtils places them (racks included) or as assigned, written to ZooKeeper by this
broker (AdminZkClient) and answered once every partition has a leader in its metadata cache
(DelayedCreatePartitions; REQUEST_TIMED_OUT past the request's timeout)."""
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.create_topics import CreateTopicsResponse
from .controller_limits import check_create_topics_records
from ..authorization import CLUSTER_NAME, CREATE, RT_CLUSTER, RT_TOPIC, allowed

Result = CreateTopicsResponse.CreatableTopicResult
ResultConfig = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs

# ConfigSource values (DescribeConfigsResponse)
TOPIC_CONFIG, DEFAULT_CONFIG = 1, 5


def handle(broker, ctx, req, version):
    resp = CreateTopicsResponse(throttle_time_ms=0, topics=[])
    try:
        check_create_topics_records(broker, req.topics)     # the controller's cap, before anything
    except KafkaError as e:
        resp.topics = [Result(name=t.name, error_code=e.code, error_message=str(e), configs=None) for t in req.topics]
        return resp
    names = [t.name for t in req.topics]
    creations = []          # (index in resp.topics, name, partitions, replication factor, configs)
    for t in req.topics:
        if names.count(t.name) > 1:
            resp.topics.append(Result(name=t.name, error_code=ErrorCode.INVALID_REQUEST,
                                      error_message="Duplicate topic name."))
            continue
        if broker.authorizer is not None and not allowed(broker, ctx, CREATE, RT_CLUSTER, CLUSTER_NAME) \
                and not allowed(broker, ctx, CREATE, RT_TOPIC, t.name):     # CREATE on the cluster or the topic
            resp.topics.append(Result(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                      error_message="Authorization failed.", configs=None))
            continue
        try:
            configs = {c.name: c.value for c in t.configs}
            num_partitions, rf = t.num_partitions, t.replication_factor
            if t.assignments:
                if num_partitions != -1 or rf != -1:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor "
                                     "and replicasAssignments were set. Both cannot be used at the same time.")
                num_partitions, rf = _from_assignments(broker, t.assignments)
            num_partitions, rf = broker.metadata.check_create(t.name, num_partitions, rf, configs)
            if req.validate_only:
                resp.topics.append(_created(broker, version, t.name, bytes(16), num_partitions, rf, configs))
            else:
                creations.append((len(resp.topics), t.name, num_partitions, rf, configs))
                resp.topics.append(None)        # answered once created
        except KafkaError as e:
            resp.topics.append(Result(name=t.name, error_code=e.code, error_message=str(e), configs=None))
    if not creations:
        return resp
    if broker.cluster is not None:
        return broker.cluster.answer_later(_create_in_cluster(broker, req, version, resp, creations))

    def create_all():
        for i, name, num_partitions, rf, configs in creations:
            try:
                topic = yield from broker.create_topic_steps(name, num_partitions, rf, configs)
                resp.topics[i] = _created(broker, version, name, topic.topic_id, num_partitions, rf, configs)
            except KafkaError as e:
                resp.topics[i] = Result(name=name, error_code=e.code, error_message=str(e), configs=None)
        return resp
    return broker.run_in_slices(create_all())


def _created(broker, version, name, topic_id, num_partitions, rf, configs):
    result = Result(name=name, topic_id=topic_id, error_code=0, error_message=None,
                    num_partitions=num_partitions, replication_factor=rf)
    if version >= 5:
        effective = {k: (v, True) for k, v in configs.items()}
        for key, (value, explicit) in _all_configs(broker, configs).items():
            effective.setdefault(key, (value, explicit))
        result.configs = [ResultConfig(name=k, value=v, read_only=False,
                                       config_source=TOPIC_CONFIG if explicit else _default_source(broker, k),
                                       is_sensitive=False)
                          for k, (v, explicit) in sorted(effective.items())]
    return result


def _default_source(broker, key):
    """As DescribeConfigs reports it: the broker synonym's source when one is set, else default."""
    from ..config import CONFIG_DEFS
    from ..topic_configs import broker_synonym_source
    synonym = broker_synonym_source(broker.config, key)
    return broker.config.source(synonym) if synonym in CONFIG_DEFS else DEFAULT_CONFIG


def _all_configs(broker, configs):
    from ..metadata import TOPIC_CONFIGS, broker_default_for
    return {k: (configs[k], True) if k in configs else (broker_default_for(broker.config, k), False)
            for k in TOPIC_CONFIGS}


async def _create_in_cluster(broker, req, version, resp, creations):
    cluster = broker.cluster
    timeout_s = max(req.timeout_ms, 0) / 1000.0
    by_name = {t.name: t for t in req.topics}
    for i, name, num_partitions, rf, configs in creations:
        try:
            t = by_name[name]
            if t.assignments:
                assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            else:
                assignment = cluster.place(num_partitions, rf)
            topic_id = await cluster.create_topic(name, assignment, configs, timeout_s)
            resp.topics[i] = _created(broker, version, name, topic_id, num_partitions, rf, configs)
        except KafkaError as e:
            resp.topics[i] = Result(name=name, error_code=e.code, error_message=str(e), configs=None)
    return resp


def _from_assignments(broker, assignments):
    node = broker.config.node_id
    indexes = sorted(a.partition_index for a in assignments)
    if indexes != list(range(len(indexes))):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "Partitions should be a consecutive 0-based integer sequence")
    if broker.cluster is not None:
        broker.cluster.check_manual_assignment({a.partition_index: list(a.broker_ids) for a in assignments})
        if len({len(a.broker_ids) for a in assignments}) != 1:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All partitions should have the same number of replicas")
        return len(assignments), len(assignments[0].broker_ids)
    for a in assignments:
        if not a.broker_ids or len(set(a.broker_ids)) != len(a.broker_ids):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Invalid replica assignment for partition {a.partition_index}")
        if any(b != node for b in a.broker_ids):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"The manual partition assignment includes broker(s) that are not registered: "
                             f"{sorted(set(b for b in a.broker_ids if b != node))}")
    return len(assignments), len(assignments[0].broker_ids)
