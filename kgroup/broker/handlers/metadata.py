"""Metadata (3) v0-13 (v13: a top-level error code, 0 here): this node as the only broker and controller, topics with partitions led
by this node, topic ids (v10+), auto-creation (``auto.create.topics.enable`` and, v4+, the
request's ``allow_auto_topic_creation``).

In a cluster (kgroup/cluster/), Kafka's ZkMetadataCache answer: every live broker with its
endpoint on the request's listener and rack, the controller, and per partition the leader
(-1 and LEADER_NOT_AVAILABLE when it is not live), leader epoch, replicas, ISR and offline
replicas; a topic whose partitions have no state yet is LEADER_NOT_AVAILABLE, and so is one
being auto-created (written to ZooKeeper, the client asks again).

v0: an empty topic list means all topics; v1+: null means all, empty means none. Internal topics
are never auto-created here (``__consumer_offsets`` is created by the coordinator on first use).
"""
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.metadata import MetadataResponse
from ..authorized_operations import CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from ..authorization import CLUSTER_NAME, CREATE, DESCRIBE, RT_CLUSTER, RT_TOPIC
from ..metadata import INTERNAL_TOPICS

Broker = MetadataResponse.MetadataResponseBroker
Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition


def handle(broker, ctx, req, version):
    md = broker.metadata
    node = broker.config.node_id
    cluster = broker.cluster
    if cluster is None:
        host, port = broker.advertised_listener(ctx.listener_name)
        resp = MetadataResponse(
            brokers=[Broker(node_id=node, host=host, port=port, rack=None)],
            cluster_id=md.cluster_id, controller_id=node, topics=[])
    else:
        cache = cluster.cache
        resp = MetadataResponse(
            brokers=[Broker(node_id=b, host=h, port=p, rack=r) for b, h, p, r in cache.alive_brokers(ctx.listener_name)],
            cluster_id=md.cluster_id, controller_id=cache.controller_id if cache.controller_id is not None else -1,
            topics=[])
        md = _ClusterTopics(cluster)
    if req.topics is None or (version == 0 and not req.topics):
        wanted = [t for t in md.topics]
        by_id = ()
    else:
        wanted = [t.name for t in req.topics if t.name is not None]
        by_id = [t.topic_id for t in req.topics if t.name is None]
    allow_create = broker.config["auto.create.topics.enable"] and (version < 4 or req.allow_auto_topic_creation)
    authorizer = broker.authorizer
    if authorizer is not None:     # KafkaApis.handleTopicMetadataRequest: DESCRIBE, CREATE to auto-create
        if req.topics is None or (version == 0 and not req.topics):
            wanted = [n for n in wanted if authorizer.authorize(ctx, DESCRIBE, RT_TOPIC, n)]   # others hidden
        can_create = allow_create and authorizer.authorize(ctx, CREATE, RT_CLUSTER, CLUSTER_NAME)
    for name in wanted:
        if authorizer is not None:
            if not authorizer.authorize(ctx, DESCRIBE, RT_TOPIC, name) or (
                    md.get(name) is None and allow_create and name not in INTERNAL_TOPICS and not can_create
                    and not authorizer.authorize(ctx, CREATE, RT_TOPIC, name)):
                resp.topics.append(Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, partitions=[],
                                         is_internal=name in INTERNAL_TOPICS))
                continue
        topic = md.get(name)
        if topic is None and name in md.creating:
            # its partitions are being created (CreateTopics): as Kafka answers for a topic
            # whose partitions have no leader yet
            resp.topics.append(Topic(error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=name, partitions=[]))
            continue
        if topic is None and allow_create and name not in INTERNAL_TOPICS and cluster is not None:
            try:
                md.create(broker, name)
                resp.topics.append(Topic(error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=name, partitions=[]))
            except KafkaError as e:
                resp.topics.append(Topic(error_code=e.code, name=name, partitions=[]))
            continue
        if topic is None and allow_create and name not in INTERNAL_TOPICS:
            try:
                topic = broker.create_topic(name, -1, -1, {})
            except KafkaError as e:
                resp.topics.append(Topic(error_code=e.code, name=name, partitions=[]))
                continue
        if topic is None:
            resp.topics.append(Topic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name,
                                     partitions=[]))
            continue
        resp.topics.append(_topic(topic, node) if cluster is None else md.describe(name))
    for tid in by_id:
        topic = md.by_id(tid)
        if topic is not None and authorizer is not None and not authorizer.authorize(ctx, DESCRIBE, RT_TOPIC, topic.name):
            resp.topics.append(Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=None, topic_id=tid,
                                     partitions=[]))
            continue
        if topic is None:
            resp.topics.append(Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=tid,
                                     partitions=[]))
        else:
            resp.topics.append(_topic(topic, node) if cluster is None else md.describe(topic.name))
    if version >= 8:   # without an authorizer every supported operation, when asked (KafkaApis)
        if req.include_topic_authorized_operations:
            for t in resp.topics:       # every topic but those refused (KafkaApis' topicMetadata)
                if authorizer is None:
                    t.topic_authorized_operations = TOPIC_OPERATIONS
                elif t.error_code != ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                    t.topic_authorized_operations = authorizer.authorized_operations(ctx, RT_TOPIC, t.name)
        if version <= 10 and req.include_cluster_authorized_operations:
            if authorizer is None:
                resp.cluster_authorized_operations = CLUSTER_OPERATIONS
            elif authorizer.authorize(ctx, DESCRIBE, RT_CLUSTER, CLUSTER_NAME):
                resp.cluster_authorized_operations = authorizer.authorized_operations(ctx, RT_CLUSTER, CLUSTER_NAME)
            else:
                resp.cluster_authorized_operations = 0
    return resp


def _topic(topic, node):
    return Topic(
        error_code=0, name=topic.name, topic_id=topic.topic_id, is_internal=topic.is_internal,
        partitions=[Partition(error_code=0, partition_index=p, leader_id=node, leader_epoch=0,
                              replica_nodes=[node], isr_nodes=[node], offline_replicas=[])
                    for p in range(topic.num_partitions)])


class _ClusterTopics:
    """The cluster's topics as Metadata reads them (the metadata cache), in the registry's shape."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.cache = cluster.cache
        self.topics = cluster.cache.topics
        self.creating = ()

    def get(self, name):
        return self.cluster.broker.metadata.get(name) if name in self.cache.topics else None

    def by_id(self, topic_id):
        name = self.cache.topic_name(topic_id)
        return self.get(name) if name is not None else None

    def create(self, broker, name):
        num_partitions, rf = broker.metadata.check_create(name, -1, -1, {})
        self.cluster.create_topic_in_background(name, num_partitions, rf, {})

    def describe(self, name):
        cache = self.cache
        topic_id = cache.topic_id(name) or bytes(16)
        if not cache.is_ready(name):
            return Topic(error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=name, topic_id=topic_id,
                         is_internal=name in INTERNAL_TOPICS, partitions=[])
        return Topic(error_code=0, name=name, topic_id=topic_id, is_internal=name in INTERNAL_TOPICS, partitions=[
            Partition(error_code=ErrorCode.LEADER_NOT_AVAILABLE if p.leader < 0 else 0, partition_index=p.partition,
                      leader_id=p.leader, leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas),
                      isr_nodes=list(p.isr), offline_replicas=list(p.offline_replicas))
            for p in cache.partitions(name)])
